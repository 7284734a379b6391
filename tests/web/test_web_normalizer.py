"""Web raw observations → canonical observations and actions."""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import quote

from tests.records import make_end, make_start, make_step
from worldtrace.collectors.recorder import RunRecorder
from worldtrace.collectors.web.render import WebRenderer
from worldtrace.normalizers.base import episode_records
from worldtrace.schemas import Action, EnvironmentRef, PolicyRef
from worldtrace.schemas.raw import read_raw_episode


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
    observation = WebRenderer().observation(raw_observation())
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
    observation = WebRenderer().observation(raw)
    assert observation.text == ""
    assert observation.screenshot is None
    assert observation.meta["crashed"] is True and observation.meta["noop"] is False


def test_action_text_is_rendered_again_from_the_arguments() -> None:
    action = WebRenderer().action(
        Action(name="click", arguments={"bid": "7", "button": "left"}, text="click( '7' )")
    )
    assert action.text == "click('7')"


def record_web_episode(tmp_path: Path, site: str, origin: str) -> Path:
    """A raw web episode as the collector wrote it, its site reached at ``origin``."""
    recorder = RunRecorder(tmp_path, {"domain": "web", "run_name": "old"})
    writer = recorder.begin("old-s000000")
    page = raw_observation(
        url=f"{origin}/newticket",
        tabs=[{"url": f"{origin}/newticket", "title": "New Ticket"}],
        axtree={
            "nodes": [
                {"nodeId": "1", "role": {"value": "RootWebArea"}, "name": {"value": "New"},
                 "childIds": ["2", "3"], "properties": [{"name": "url", "value": {
                     "type": "string", "value": f"{origin}/newticket"}}]},
                {"nodeId": "2", "role": {"value": "link"}, "name": {"value": "Login"},
                 "childIds": [], "browsergym_id": "7", "properties": [{"name": "url", "value": {
                     "type": "string",
                     "value": f"{origin}/login?referer={quote(origin + '/newticket', safe='')}",
                 }}]},
                {"nodeId": "3", "role": {"value": "StaticText"},
                 "name": {"value": "Seen at 127.0.0.1:9 and 127.0.0.1:583251"}, "childIds": []},
            ]
        },
        events={"blocked": [{"url": "http://127.0.0.1:9/x", "reason": "off-site request"}]},
    )  # fmt: skip
    env = EnvironmentRef(
        name=f"web/{site}", version="1", components={"site": site}, config_hash="c"
    )
    policy = PolicyRef(kind="explore", name="web-explore", version="1")
    writer.write_start(make_start("old-s000000", page, env=env, policy=policy, task=None))
    goto = Action(name="goto", arguments={"url": f"{origin}/newticket"}, text="x")
    error = f"navigation to 'http://x.org/' is blocked: only {origin} is open"
    writer.write_step(make_step(0, page, action=goto, error=error))
    return writer.seal(make_end(1, errors=1, reward=None))


def normalize(path: Path):
    return episode_records(read_raw_episode(path), "web", WebRenderer(), "old", "CC-BY-4.0")


def test_an_episode_recorded_on_a_loopback_port_normalizes_to_the_stable_origin(tmp_path) -> None:
    path = record_web_episode(tmp_path, "trac", "http://127.0.0.1:58325")
    raw_before = path.read_bytes()
    _, [transition] = normalize(path)
    for observation in (transition.observation, transition.next_observation):
        assert observation.meta["url"] == "http://trac.test/newticket"
        assert observation.meta["tabs"] == [
            {"url": "http://trac.test/newticket", "title": "New Ticket"}
        ]
        assert observation.text == (
            "RootWebArea 'New', url='http://trac.test/newticket'\n"
            "\t[7] link 'Login', url='http://trac.test/login?referer=http%3A%2F%2Ftrac.test%2Fnewticket'\n"
            "\tStaticText 'Seen at 127.0.0.1:9 and 127.0.0.1:583251'"
        )  # fmt: skip
        # Other ports are other places: kept as they were.
        assert observation.meta["events"]["blocked"][0]["url"] == "http://127.0.0.1:9/x"
        assert observation.screenshot == b"\x89PNG fake"
    assert transition.action.text == "goto('http://trac.test/newticket')"
    assert transition.action.arguments == {"url": "http://trac.test/newticket"}
    assert transition.action_error == (
        "navigation to 'http://x.org/' is blocked: only http://trac.test is open"
    )
    assert path.read_bytes() == raw_before  # the raw record keeps what was recorded


def test_episodes_on_stable_origins_or_unregistered_sites_are_left_as_recorded(tmp_path) -> None:
    for site, origin in [("trac", "http://trac.test"), ("test-pages", "http://127.0.0.1:41234")]:
        path = record_web_episode(tmp_path / site, site, origin)
        _, [transition] = normalize(path)
        assert transition.observation.meta["url"] == f"{origin}/newticket"
        assert transition.action.arguments == {"url": f"{origin}/newticket"}


def test_the_web_renderer_declares_datasette_s_timings_and_ages_as_volatile() -> None:
    renderer = WebRenderer()
    text = (
        "StaticText 'Queries took 16.214ms · Data license: CC0'\n"
        'StaticText \'{"rows": [], "query_ms": 8.805507999568363, "license": "CC0"}\'\n'
        "StaticText 'Opened 0 seconds ago'\n"
        "StaticText 'Last modified 3 years ago, 16.2 ms of reading'"
    )
    spans = [text[span.start : span.end] for span in renderer.volatile_spans(text)]
    assert spans == ["16.214ms", "8.805507999568363", "0 seconds ago"]
