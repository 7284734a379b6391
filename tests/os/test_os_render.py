"""The desktop renderer: windows, focus and OSWorld's rows; old raw records as they were."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path
from typing import Any

from worldtrace.collectors.os.render import (
    FORMAT,
    HEADER,
    LEGACY,
    LEGACY_HEADER,
    TABLE,
    OsRenderer,
    is_kept,
    linearize,
)

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


def test_an_old_raw_record_renders_as_it_was_recorded() -> None:
    # Recorded before the table was named: the legacy five-column rows, no window lines.
    raw = recorded()
    assert "table" not in raw
    observation = RENDER.observation(raw)
    lines = observation.text.splitlines()
    assert observation.format == FORMAT == "a11y-linear"
    assert observation.meta["table"] == LEGACY
    assert lines[0] == LEGACY_HEADER == "tag\tname\ttext\tposition (top-left x&y)\tsize (w&h)"
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


def test_the_same_record_with_osworlds_table_gets_windows_focus_and_seven_columns() -> None:
    raw = {**recorded(), "table": TABLE}
    lines = RENDER.observation(raw).text.splitlines()
    # Windows topmost first (the record predates "stack"/"shown": list order, unknown share).
    assert lines[0].startswith('[window 1] launcher "')
    assert lines[1].startswith('[window 2] gnumeric "budget.csv - Gnumeric" (')
    assert lines[1].endswith("in view (unknown), active")
    assert lines[2].startswith("[focus] ")
    assert lines[3] == HEADER
    assert HEADER == "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)"
    assert all(line.count("\t") == 6 for line in lines[3:])
    assert 'push-button\tSave\t""\t\t\t(218, 45)\t(37, 35)' in lines


def test_windows_say_what_is_in_view_and_the_focus_says_caret_and_selection() -> None:
    editor = node(
        "text",
        "",
        "first line\nsecond line",
        states=["editable", "enabled", "focused", "showing", "visible"],
        caret=14,
        selections=[[11, 17]],
        app="mousepad",
    )
    raw = {
        "table": TABLE,
        "tree": desktop(node("push button", "OK", app="galculator"), editor),
        "focused": {"app": "mousepad", "window": "notes.txt - Mousepad"},
        "windows": [
            {"app": "galculator", "title": "galculator", "x": 0, "y": 0, "width": 300,
             "height": 400, "active": False, "stack": 1, "shown": 0.0},
            {"app": "mousepad", "title": "notes.txt - Mousepad", "x": 0, "y": 0, "width": 800,
             "height": 600, "active": True, "stack": 0, "shown": 1.0},
            {"app": "launcher", "title": "Launcher", "x": 1200, "y": 0, "width": 80,
             "height": 800, "active": False, "stack": 2, "shown": 0.5},
        ],
    }  # fmt: skip
    lines = RENDER.observation(raw).text.splitlines()
    assert lines[:4] == [
        '[window 1] mousepad "notes.txt - Mousepad" (0, 0) (800, 600) in view, active',
        '[window 2] galculator "galculator" (0, 0) (300, 400) hidden',
        '[window 3] launcher "Launcher" (1200, 0) (80, 800) 50% in view',
        '[focus] text "" in mousepad: caret at line 2, column 4; selection "second" from'
        " line 2, column 1 to line 2, column 7",
    ]
    # The editor's text is written raw, its line break included, as OSWorld does.
    assert lines[4:] == [
        HEADER,
        'push-button\tOK\t""\t\t\t(10, 20)\t(30, 40)',
        "text\t\tfirst line",
        "second line\t\t\t(10, 20)\t(30, 40)",
    ]
    # Moving the caret alone changes the text.
    moved = {**raw, "tree": desktop(node("push button", "OK"), {**editor, "caret": 3})}
    assert RENDER.observation(moved).text != RENDER.observation(raw).text
    no_focus = {**raw, "focused": {"app": None, "window": None}}
    assert "[focus] none" in RENDER.observation(no_focus).text.splitlines()


def test_a_cut_text_is_marked_and_replacement_characters_dropped() -> None:
    long = node("text", "", "x" * 5, text_length=12)
    odd = node("label", "", "a\ufffcb\ufffd")
    text, _ = linearize(desktop(long, odd))
    assert text.splitlines()[1:] == [
        "text\t\txxxxx[… text cut: 5 of 12 characters]\t\t\t(10, 20)\t(30, 40)",
        "label\t\tab\t\t\t(10, 20)\t(30, 40)",
    ]


def test_osworlds_filter_wants_a_usable_widget() -> None:
    # OSWorld keeps only enabled, editable, expandable or checkable nodes; the legacy rows
    # kept disabled ones (a greyed-out menu item).
    disabled = node("menu item", "Revert", states=["showing", "visible"])
    assert not is_kept(disabled)
    assert is_kept(disabled, LEGACY)
    for state in ("enabled", "editable", "expandable", "checkable"):
        assert is_kept(node("menu item", "Revert", states=[state, "showing", "visible"]))
    # A text of replacement characters only is no text.
    assert not is_kept(node("label", "", "\ufffc"))


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


def test_legacy_text_cells_are_quoted_and_kept_on_one_line() -> None:
    tree = desktop(
        node("text", "", 'say "hi"'),
        node("text", "", "two\nlines\tand tab"),
        node("label", "a\tb", "plain"),
    )
    text, rows = linearize(tree, table=LEGACY)
    assert rows == 3
    assert text.splitlines()[1:] == [
        'text\t\t"say ""hi"""\t(10, 20)\t(30, 40)',
        'text\t\t"two\\nlines\\tand tab"\t(10, 20)\t(30, 40)',
        "label\ta b\tplain\t(10, 20)\t(30, 40)",
    ]


def test_rows_are_capped_with_a_marker_and_problems_are_said() -> None:
    tree = desktop(*(node("push button", f"b{i}", y=i) for i in range(25)))
    raw = {"tree": tree, "max_rows": 10, "nodes": 26, "truncated": True, "tree_error": "x: slow"}
    observation = RENDER.observation(raw)  # a legacy record: the table has no lines above it
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
    assert missing.text == LEGACY_HEADER + "\n[no accessibility tree: no desktop session]"
    gone = RENDER.observation({"tree": None, "tree_error": "lost", "table": TABLE})
    assert gone.text.splitlines()[-2:] == [HEADER, "[no accessibility tree: lost]"]


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
    assert observation.text == LEGACY_HEADER


def test_the_focus_line_names_the_highlighted_menu_entries() -> None:
    shown = ["enabled", "selected", "showing", "visible"]
    menu = node("menu", "Edit", states=shown, app="mousepad")
    item = node("menu item", "Paste", states=shown, app="mousepad")
    other = node("menu item", "Copy", app="mousepad")  # not highlighted
    raw = {
        "table": TABLE,
        "tree": desktop({**menu, "children": [other, item]}),
        "focused": {"app": "mousepad", "window": "notes"},
        "windows": [],
    }
    lines = RENDER.observation(raw).text.splitlines()
    assert lines[0] == '[focus] none; menu menu "Edit" > menu-item "Paste" highlighted'


def test_an_open_popup_is_a_line_with_its_entries() -> None:
    # A GTK 2 menu: its items are visible but never "showing", so OSWorld's rows omit them.
    hidden_states = ["enabled", "visible"]
    items = [
        node("menu item", "Previous Folder", states=["visible"], x=360, y=50, width=200, height=20),
        node("menu item", "Home Folder", states=hidden_states, x=360, y=70, width=200, height=20),
        node("menu item", "Elsewhere", states=hidden_states, x=900, y=70, width=200, height=20),
    ]
    raw = {
        "table": TABLE,
        "tree": desktop(*(dict(item, app="pcmanfm") for item in items)),
        "popups": [{"app": "pcmanfm", "x": 353, "y": 44, "width": 282, "height": 261}],
        "windows": [],
    }
    lines = RENDER.observation(raw).text.splitlines()
    assert lines[0] == (
        '[popup 1] pcmanfm (353, 44) (282, 261): "Previous Folder" (disabled), "Home Folder"'
    )
    assert lines[2] == HEADER and len(lines) == 3  # none of them is an OSWorld row
