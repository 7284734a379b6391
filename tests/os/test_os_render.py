"""The desktop renderer: OSWorld's linearized tree from a recorded tree and from small ones."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from worldtrace.collectors.os.render import FORMAT, HEADER, OsRenderer, is_kept, linearize

DATA = Path(__file__).parent / "data"
RENDER = OsRenderer()


def recorded() -> dict[str, Any]:
    """A real observation: gnumeric on budget.csv, as the desktop driver gave it at start."""
    with gzip.open(DATA / "gnumeric_budget.json.gz", "rt", encoding="utf-8") as file:
        return json.load(file)


def node(role: str, name: str = "", text: str | None = None, **extra: Any) -> dict[str, Any]:
    """A showing, visible node at (10, 20) of size 30x40 unless told otherwise."""
    return {
        "role": role,
        "name": name,
        "text": text,
        "description": "",
        "states": ["enabled", "showing", "visible"],
        "attributes": {},
        "x": 10,
        "y": 20,
        "width": 30,
        "height": 40,
        "app": "app",
        "children": [],
        **extra,
    }


def desktop(*children: dict[str, Any]) -> dict[str, Any]:
    """A desktop root with ``children``."""
    return node("desktop frame", "main", children=list(children), x=0, y=0, width=1280, height=800)


def test_a_recorded_gnumeric_tree_renders_as_osworld_rows() -> None:
    raw = recorded()
    observation = RENDER.observation(raw)
    lines = observation.text.splitlines()
    assert observation.format == FORMAT == "a11y-linear"
    assert lines[0] == HEADER == "tag\tname\ttext\tposition (top-left x&y)\tsize (w&h)"
    assert all(line.count("\t") == 4 for line in lines)
    # Menus, toolbar buttons, the cell reference and the launcher dock, in tree order.
    assert lines[1] == 'menu\tFile\t""\t(140, 19)\t(39, 25)'
    assert 'push-button\tSave\t""\t(218, 45)\t(37, 35)' in lines
    assert "text\t\tA1\t(144, 154)\t(169, 35)" in lines
    assert lines[-5:] == [
        f'push-button\t{name}\t""\t(6, {y})\t(128, 34)'
        for name, y in (
            ("Text Editor", 6),
            ("Spreadsheet", 46),
            ("File Manager", 86),
            ("Calculator", 126),
            ("Terminal", 166),
        )
    ]
    # The hidden menu items (off-screen, not showing) are not rows.
    assert not any(line.startswith("menu-item\t") for line in lines)
    assert observation.meta["rows"] == observation.meta["rows_shown"] == len(lines) - 1
    assert observation.meta["focused"] == {"app": "gnumeric", "window": "budget.csv - Gnumeric"}
    assert observation.meta["screen"] == {"width": 1280, "height": 800}
    assert [w["app"] for w in observation.meta["windows"]] == ["launcher", "gnumeric"]
    assert observation.meta["nodes"] == raw["nodes"] and observation.meta["truncated"] is False
    assert observation.screenshot is None


def test_osworlds_filter_keeps_named_visible_widgets_on_screen() -> None:
    assert is_kept(node("push button", "OK"))
    assert is_kept(node("table cell", "", "12"))
    assert is_kept(node("document frame", "doc"))
    assert is_kept(node("menu item", "Save"))
    assert not is_kept(node("filler", "box"))  # not an OSWorld tag
    assert not is_kept(node("push button", ""))  # nothing to say
    assert not is_kept(node("push button", "OK", states=["enabled", "visible"]))
    assert not is_kept(node("push button", "OK", states=["enabled", "showing"]))
    assert not is_kept(node("push button", "OK", x=-5))
    assert not is_kept(node("push button", "OK", width=0))
    assert not is_kept(node("push button", "OK", x=None))


def test_text_cells_are_quoted_and_kept_on_one_line() -> None:
    tree = desktop(
        node("text", "", 'say "hi"'),
        node("text", "", "two\nlines\tand tab"),
        node("label", "a\tb", "plain"),
    )
    text, rows = linearize(tree)
    assert rows == 3
    assert text.splitlines()[1:] == [
        'text\t\t"say ""hi"""\t(10, 20)\t(30, 40)',
        'text\t\t"two\\nlines\\tand tab"\t(10, 20)\t(30, 40)',
        "label\ta b\tplain\t(10, 20)\t(30, 40)",
    ]


def test_rows_are_capped_with_a_marker_and_problems_are_said() -> None:
    tree = desktop(*(node("push button", f"b{i}", y=i) for i in range(25)))
    raw = {"tree": tree, "max_rows": 10, "nodes": 26, "truncated": True, "tree_error": "x: slow"}
    observation = RENDER.observation(raw)
    lines = observation.text.splitlines()
    assert len(lines) == 1 + 10 + 3
    assert lines[10] == 'push-button\tb9\t""\t(10, 9)\t(30, 40)'
    assert lines[11:] == [
        "[… 15 more rows not shown: 10 of 25 rows]",
        "[… accessibility tree cut at 26 nodes]",
        "[accessibility tree incomplete: x: slow]",
    ]
    assert observation.meta["rows"] == 25 and observation.meta["rows_shown"] == 10
    missing = RENDER.observation({"tree": None, "tree_error": "no desktop session"})
    assert missing.text == HEADER + "\n[no accessibility tree: no desktop session]"


def test_the_screenshot_and_the_step_facts_reach_the_observation() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
    raw = {
        "tree": desktop(),
        "screenshot_png": base64.b64encode(png).decode(),
        "unchanged": True,
        "error": "key 'foo' cannot be pressed",
    }
    observation = RENDER.observation(raw)
    assert observation.screenshot == png
    assert observation.meta["noop"] is True
    assert observation.meta["error"] == "key 'foo' cannot be pressed"
    assert observation.text == HEADER
