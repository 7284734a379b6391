"""BrowserGym's tree text from DevTools accessibility nodes (pure, no browser)."""

from __future__ import annotations

import pytest

from tests.web.web_test_pages import find_bid
from worldtrace.collectors.web.axtree import flatten_axtree, take_bid


def node(node_id: str, role: str, name: str | None = None, children=(), **extra):
    made = {"nodeId": node_id, "role": {"value": role}, "childIds": list(children), **extra}
    if name is not None:
        made["name"] = {"value": name}
    return made


def prop(name: str, value: object) -> dict:
    return {"name": name, "value": {"value": value}}


def tree() -> dict:
    return {
        "nodes": [
            node("1", "RootWebArea", "Shop", ["2", "3"], properties=[prop("focused", True)]),
            node("2", "generic", "", ["4", "5"]),  # a bare container: left out, children move up
            node("3", "LineBreak", "\n"),
            node("4", "link", "Home", ["6"], browsergym_id="12", properties=[prop("url", "/")]),
            node(
                "5",
                "textbox",
                "Search",
                ["7"],
                browsergym_id="a3",
                value={"value": "shoes"},
                properties=[
                    prop("focusable", True),
                    prop("required", True),
                    prop("focused", False),
                ],
            ),
            node("6", "StaticText", "Home", ["8"]),  # repeats its parent's name: left out
            node("7", "StaticText", "shoes"),
            node("8", "InlineTextBox", "Home"),
        ]
    }


def test_flatten_matches_browsergym_text_format() -> None:
    assert flatten_axtree(tree()) == (
        "RootWebArea 'Shop', focused\n"
        "\t[12] link 'Home', url='/'\n"
        "\t[a3] textbox 'Search' value='shoes', required\n"
        "\t\tStaticText 'shoes'"
    )


def test_visibility_marks_elements_at_least_half_in_view_as_browsergym_does() -> None:
    # BrowserGym's flatten_axtree_to_str(..., with_visible=True): "visible" before the other
    # attributes, on elements whose visibility ratio is at least 0.5.
    assert flatten_axtree(tree(), visibility={"12": 0.5, "a3": 0.49}) == (
        "RootWebArea 'Shop', focused\n"
        "\t[12] link 'Home', visible, url='/'\n"
        "\t[a3] textbox 'Search' value='shoes', required\n"
        "\t\tStaticText 'shoes'"
    )
    # Without recorded visibility (runs from before it was recorded): no marks at all.
    assert "visible" not in flatten_axtree(tree(), visibility=None)


def test_a_bare_generic_stays_hidden_even_when_visible() -> None:
    nodes = {"nodes": [node("1", "RootWebArea", "R", ["2"]), node("2", "generic", "", ["3"])]}
    nodes["nodes"][1]["browsergym_id"] = "7"
    nodes["nodes"].append(node("3", "button", "OK", browsergym_id="8"))
    assert flatten_axtree(nodes, visibility={"7": 1.0, "8": 1.0}) == (
        "RootWebArea 'R'\n\t[8] button 'OK', visible"
    )


def test_inline_text_boxes_are_printed_only_when_asked_for() -> None:
    assert "InlineTextBox" not in flatten_axtree(tree())
    assert "\t\tInlineTextBox 'Home'" in flatten_axtree(tree(), inline_text_boxes=True)


def test_nodes_without_a_name_are_left_out_but_their_children_are_kept() -> None:
    nodes = {"nodes": [node("1", "RootWebArea", "R", ["2"]), node("2", "none", None, ["3"])]}
    nodes["nodes"].append(node("3", "button", "OK", browsergym_id="4"))
    assert flatten_axtree(nodes) == "RootWebArea 'R'\n\t[4] button 'OK'"


def test_a_cyclic_or_dangling_tree_does_not_hang() -> None:
    looped = {"nodes": [node("1", "RootWebArea", "R", ["2", "9"]), node("2", "button", "B", ["1"])]}
    assert flatten_axtree(looped) == "RootWebArea 'R'\n\tbutton 'B'"
    assert flatten_axtree({"nodes": []}) == ""


def test_take_bid_restores_the_pages_own_aria_values() -> None:
    marked = node(
        "1",
        "button",
        "Save",
        properties=[prop("roledescription", "browsergym_id_a12 toggle")],
        description={"value": "browsergym_id_a12 saves the draft"},
    )
    take_bid(marked)
    assert marked["browsergym_id"] == "a12"
    assert marked["properties"] == [prop("roledescription", "toggle")]
    assert marked["description"] == {"value": "saves the draft"}
    generic = node("2", "generic", "", description={"value": "browsergym_id_7 "})
    take_bid(generic)
    assert generic["browsergym_id"] == "7"
    assert "description" not in generic


def test_find_bid_prefers_an_exact_name_then_a_prefix() -> None:
    nodes = tree()
    nodes["nodes"].append(node("9", "link", "Home page", browsergym_id="40"))
    nodes["nodes"][0]["childIds"].append("9")
    assert find_bid(nodes, "link", "Home") == "12"
    assert find_bid(nodes, "link", "Home p") == "40"
    assert find_bid(nodes, "button", "Home") is None


def test_find_bid_follows_the_printed_order_not_the_devtools_list_order() -> None:
    # DevTools lists the later sibling first; the text prints child "2" first.
    nodes = {
        "nodes": [
            node("1", "RootWebArea", "R", ["2", "3"]),
            node("3", "textbox", "value", browsergym_id="30"),
            node("2", "textbox", "value", browsergym_id="20"),
        ]
    }
    assert flatten_axtree(nodes).splitlines()[1] == "\t[20] textbox 'value'"
    assert find_bid(nodes, "textbox", "value") == "20"


def test_step_templates_resolve_elements_by_role_name_and_position() -> None:
    from worldtrace.collectors.web.tasks import ElementMissing, resolve_step

    page = {
        "url": "http://127.0.0.1:9/x",
        "axtree": {
            "nodes": [
                node("1", "RootWebArea", "R", ["2", "3", "4"]),
                node("2", "textbox", "field value", browsergym_id="5"),
                node("3", "textbox", "field value", browsergym_id="6"),
                node("4", "button", "It's done", browsergym_id="7"),
            ]
        },
    }
    site = "http://127.0.0.1:9"
    assert resolve_step("fill({textbox 'field value'}, 'a')", page, site).text == "fill('5', 'a')"
    assert (
        resolve_step("fill({textbox 'field value' #2}, 'a')", page, site).text == "fill('6', 'a')"
    )
    assert resolve_step("click({textbox 'field value' #-1})", page, site).text == "click('6')"
    assert resolve_step('click({button "It\'s done"})', page, site).text == "click('7')"
    assert resolve_step("goto('{site}/new')", page, site).arguments == {"url": site + "/new"}
    with pytest.raises(ElementMissing, match="#3"):
        resolve_step("click({textbox 'field value' #3})", page, site)
    with pytest.raises(ElementMissing, match="link 'Nowhere'"):
        resolve_step("click({link 'Nowhere'})", page, site)
