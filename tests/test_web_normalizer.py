"""Web raw observations → canonical observations and actions."""

from __future__ import annotations

import base64

from normalizers.web import WebNormalizer


def raw_observation(**changes: object) -> dict:
    raw = {
        "url": "http://127.0.0.1:8000/",
        "title": "Home",
        "tabs": [{"url": "http://127.0.0.1:8000/", "title": "Home"}],
        "active_tab": 0,
        "focused_bid": "12",
        "axtree": {
            "nodes": [
                {"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "Home"},
                 "childIds": ["2"]},
                {"nodeId": "2", "role": {"value": "button"}, "name": {"value": "Save"},
                 "childIds": [], "browsergym_id": "12"},
            ]
        },
        "screenshot_png": base64.b64encode(b"\x89PNG fake").decode(),
        "tree_nodes": 2,
        "tree_truncated": False,
        "settled": True,
        "unchanged": True,
        "events": {"blocked": [{"url": "http://x.org/", "reason": "off-site request"}]},
        "timing": {"action_s": 0.1, "settle_s": 0.2, "extract_s": 0.03, "screenshot_s": 0.05},
    }  # fmt: skip
    return raw | changes


def test_observation_is_the_tree_text_with_the_screenshot_and_page_facts() -> None:
    observation = WebNormalizer().observation(raw_observation())
    assert observation.format == "axtree"
    assert observation.text == "RootWebArea 'Home'\n\t[12] button 'Save'"
    assert observation.screenshot == b"\x89PNG fake"
    assert observation.meta["noop"] is True
    assert observation.meta["crashed"] is False
    assert observation.meta["focused_bid"] == "12"
    assert observation.meta["events"]["blocked"][0]["url"] == "http://x.org/"
    assert observation.meta["timing"]["settle_s"] == 0.2


def test_a_crash_observation_has_empty_text_and_no_screenshot() -> None:
    raw = raw_observation(axtree={"nodes": []}, screenshot_png=None, crashed=True, unchanged=False)
    observation = WebNormalizer().observation(raw)
    assert observation.text == ""
    assert observation.screenshot is None
    assert observation.meta["crashed"] is True and observation.meta["noop"] is False


def test_action_text_is_rendered_again_from_the_arguments() -> None:
    action = WebNormalizer().action(
        {"name": "click", "arguments": {"bid": "7", "button": "left"}, "text": "click( '7' )"}
    )
    assert action.text == "click('7')"
