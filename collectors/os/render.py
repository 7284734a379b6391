r"""Desktop raw records → canonical observations: what a person sees, and OSWorld's rows.

The raw observation is the desktop driver's whole reply (``collectors/os/image/
desktop_driver.py``): the full AT-SPI tree as JSON with every role, state, attribute, extent,
caret and selection, the screenshot, the window list in stacking order with each window's share
in view, and the focus, plus what the environment adds (the action's calls, the row cap, the
table the rows follow). The text (format :data:`FORMAT`, ``a11y-linear``) has two parts.

First what the table cannot say, one line each:

- the windows, topmost first: ``[window 1] <app> "<title>" (x, y) (w, h) <how much is in
  view>[, active]``, where the share is ``in view``, ``N% in view`` or ``hidden`` (behind other
  windows, minimized or unmapped: a hidden window is never called visible);
- the open popups (menus, drop-down lists, tooltips: windows the window manager does not
  manage), topmost first, with the menu entries and tooltips inside them:
  ``[popup 1] <app> (x, y) (w, h): "Undo" (disabled), "Paste", …`` (a GTK 2 menu's items never
  say they are showing, so OSWorld's rows do not show them);
- the focused widget of the active window:
  ``[focus] <tag> "<name>" in <app>[: caret at line L, column C][; selection "<text>" …]``
  (``[focus] none`` when no widget has it), then the highlighted entries of open menus
  (``; menu menu "Edit" > menu-item "Paste" highlighted``), so moving the caret, selecting or
  walking a menu changes the text.

Then OSWorld's table (:data:`TABLE`, the ``linearize_accessibility_tree`` of OSWorld's
``mm_agents/agent.py`` in the ``desktop-env`` 1.0.2 package, over the tree its server extracts
with AT-SPI): the header::

    tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)

then one tab-separated row per kept node in depth-first order: its tag (the AT-SPI role with
spaces as dashes: ``push-button``, ``table-cell``, ``menu-item``), its name as is, its text
(the Text interface's content without U+FFFC and U+FFFD, as OSWorld's server reads it; ``""``
when empty; written raw, line breaks and tabs included, and quoted with inner quotes doubled
only when it holds a quote), the class and description columns (empty: that release reads
them from the Windows attribute namespace, which an AT-SPI tree never carries), its position
``(x, y)`` and its size ``(w, h)``. A text longer than the driver reads (100,000 characters)
ends with ``[… text cut: N of M characters]`` inside its cell.

A node is kept (OSWorld's ``judge_node`` for Ubuntu) when its tag starts with ``document`` or
ends with ``item``, ``button``, ``heading``, ``label``, ``scrollbar``, ``searchbox``,
``textbox``, ``link``, ``tabelement``, ``textfield``, ``textarea`` or ``menu``, or is one of
:data:`KEPT_TAGS`; it has the states ``showing`` and ``visible``; it is ``enabled``,
``editable``, ``expandable`` or ``checkable``; it has a name or a text; and it lies on the
screen (x, y ≥ 0, width and height > 0).

At most ``max_rows`` rows are written (the raw record's ``max_rows``, default
:data:`DEFAULT_MAX_ROWS`); then the line ``[… N more rows not shown: M of T rows]``. A tree the
driver cut at its node cap ends with ``[… accessibility tree cut at N nodes]``; applications
the driver skipped (too slow, not answering) with ``[accessibility tree incomplete: <why>]``;
no tree at all reads ``[no accessibility tree: <why>]`` under the header. ``meta`` holds the
focused window and application, the window list, the screen size, the tree's size and state,
the rows, the step's timings and whether the tree changed (``noop``).

Raw records written before the table was named (no ``table`` field: environment identity
``os/desktop`` without ``observation: 2``) render as they were recorded then (:data:`LEGACY`):
no window and focus lines, the five-column header, no enabled-state requirement, texts escaped
onto one line.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping
from typing import Any

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.os.actions import ActionSyntaxError, code_text
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.raw import RawObservation

FORMAT = "a11y-linear"
TABLE = "osworld-desktop-env-1.0.2"
"""The table the rows follow: OSWorld's ``desktop-env`` 1.0.2 (raw records name it)."""
LEGACY = "legacy-5-column"
"""The rows of raw records that name no table (recorded before :data:`TABLE`)."""
HEADER = "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)"
LEGACY_HEADER = "tag\tname\ttext\tposition (top-left x&y)\tsize (w&h)"
DEFAULT_MAX_ROWS = 1000
"""Rows an observation shows when the raw record does not say (the raw tree keeps them all)."""
SELECTION_SHOWN = 200
"""Characters of a selection the focus line quotes (the rest is counted)."""

KEPT_SUFFIXES = (
    "item",
    "button",
    "heading",
    "label",
    "scrollbar",
    "searchbox",
    "textbox",
    "link",
    "tabelement",
    "textfield",
    "textarea",
    "menu",
)
KEPT_TAGS = frozenset(
    {
        "alert",
        "canvas",
        "check-box",
        "combo-box",
        "entry",
        "icon",
        "image",
        "paragraph",
        "scroll-bar",
        "section",
        "slider",
        "static",
        "table-cell",
        "terminal",
        "text",
        "netuiribbontab",
        "start",
        "trayclockwclass",
        "traydummysearchcontrol",
        "uiimage",
        "uiproperty",
        "uiribboncommandbar",
    }
)
"""OSWorld's tags kept whatever their suffix (its list, Windows names included)."""
USABLE_STATES = ("enabled", "editable", "expandable", "checkable")
"""OSWorld keeps a node only with one of these states (a disabled menu item is left out)."""
MENU_ROLES = frozenset(
    {"menu", "menu item", "check menu item", "radio menu item", "tearoff menu item"}
)
"""Roles whose highlighted (``selected``) entry the focus line names."""
DROPPED_CHARACTERS = str.maketrans("", "", "\ufffc\ufffd")
"""Object replacement characters OSWorld's server removes from every text."""

META_FIELDS = (
    "focused",
    "windows",
    "popups",
    "exited",
    "screen",
    "nodes",
    "truncated",
    "tree_error",
    "timing",
)


def tag_of(node: Mapping[str, Any]) -> str:
    """The OSWorld tag of a node: its AT-SPI role with spaces as dashes."""
    return str(node.get("role") or "unknown").replace(" ", "-")


def node_text(node: Mapping[str, Any]) -> str:
    """A node's text as OSWorld's server reads it (object replacement characters removed)."""
    return str(node.get("text") or "").translate(DROPPED_CHARACTERS)


def is_kept(node: Mapping[str, Any], table: str = TABLE) -> bool:
    """Whether OSWorld's filter keeps ``node`` (see the module docstring)."""
    tag = tag_of(node)
    if not (tag.startswith("document") or tag.endswith(KEPT_SUFFIXES) or tag in KEPT_TAGS):
        return False
    states = node.get("states") or ()
    if "showing" not in states or "visible" not in states:
        return False
    if table == LEGACY:
        if not (node.get("name") or node.get("text")):
            return False
    else:
        if not any(state in states for state in USABLE_STATES):
            return False
        if not (node.get("name") or node_text(node)):
            return False
    box = _box(node)
    if box is None:
        return False
    x, y, width, height = box
    return x >= 0 and y >= 0 and width > 0 and height > 0


def _box(node: Mapping[str, Any]) -> tuple[float, float, float, float] | None:
    """The node's ``x``, ``y``, ``width`` and ``height``, or None unless all are numbers."""
    x, y, width, height = (node.get(key) for key in ("x", "y", "width", "height"))
    if (
        isinstance(x, int | float)
        and isinstance(y, int | float)
        and isinstance(width, int | float)
        and isinstance(height, int | float)
    ):
        return x, y, width, height
    return None


def walk(root: Mapping[str, Any] | None) -> Iterator[Mapping[str, Any]]:
    """Every node of a tree, depth first (iteratively: trees can be deep)."""
    if root is None:
        return
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.get("children") or ()))


def kept_nodes(root: Mapping[str, Any] | None, table: str = TABLE) -> Iterator[Mapping[str, Any]]:
    """The kept nodes of a tree, depth first."""
    return (node for node in walk(root) if is_kept(node, table))


def osworld_cell(value: str) -> str:
    """A text cell as OSWorld writes it: raw, quoted (inner quotes doubled) when it has one."""
    if not value:
        return '""'
    if '"' in value:
        return '"' + value.replace('"', '""') + '"'
    return value


def cut_marker(shown: int, total: int) -> str:
    """What ends a text the driver did not read whole."""
    return f"[… text cut: {shown:,} of {total:,} characters]"


def node_row(node: Mapping[str, Any]) -> str:
    """One row of OSWorld's table."""
    text = node_text(node)
    read, total = len(str(node.get("text") or "")), node.get("text_length")
    if isinstance(total, int) and total > read:
        text += cut_marker(read, total)
    return "\t".join(
        (
            tag_of(node),
            str(node.get("name") or ""),
            osworld_cell(text),
            "",  # class: see the module docstring
            "",  # description
            f"({int(node['x'])}, {int(node['y'])})",
            f"({int(node['width'])}, {int(node['height'])})",
        )
    )


def legacy_cell_text(value: str) -> str:
    """A text cell of the legacy table, kept on one line."""
    if not value:
        return '""'
    if '"' in value or "\t" in value or "\n" in value or "\r" in value:
        escaped = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r")
        return '"' + escaped.replace("\n", "\\n").replace('"', '""') + '"'
    return value


def _one_line(value: str) -> str:
    return value.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def legacy_node_row(node: Mapping[str, Any]) -> str:
    """One row of the legacy five-column table."""
    return "\t".join(
        (
            tag_of(node),
            _one_line(str(node.get("name") or "")),
            legacy_cell_text(str(node.get("text") or "")),
            f"({int(node['x'])}, {int(node['y'])})",
            f"({int(node['width'])}, {int(node['height'])})",
        )
    )


def rows_cut_marker(shown: int, total: int) -> str:
    """The line after the rows when only ``shown`` of ``total`` are written."""
    return f"[… {total - shown:,} more rows not shown: {shown:,} of {total:,} rows]"


def linearize(
    tree: Mapping[str, Any] | None,
    max_rows: int = DEFAULT_MAX_ROWS,
    truncated_at: int | None = None,
    tree_error: str | None = None,
    table: str = TABLE,
) -> tuple[str, int]:
    """The table of a tree (header, rows, markers) and the number of kept rows (shown or not)."""
    legacy = table == LEGACY
    lines = [LEGACY_HEADER if legacy else HEADER]
    if tree is None:
        lines.append(f"[no accessibility tree: {tree_error or 'unknown reason'}]")
        return "\n".join(lines), 0
    row = legacy_node_row if legacy else node_row
    rows = [row(node) for node in kept_nodes(tree, table)]
    lines.extend(rows[:max_rows])
    if len(rows) > max_rows:
        lines.append(rows_cut_marker(max_rows, len(rows)))
    if truncated_at is not None:
        lines.append(f"[… accessibility tree cut at {truncated_at:,} nodes]")
    if tree_error:
        lines.append(f"[accessibility tree incomplete: {_one_line(tree_error)}]")
    return "\n".join(lines), len(rows)


def _quoted(value: Any) -> str:
    # JSON's quoting keeps a title or a selection on one line, whatever it holds.
    return json.dumps(str(value or ""), ensure_ascii=False)


def window_lines(windows: list[Mapping[str, Any]] | None) -> list[str]:
    """One line per window, topmost first, saying how much of it is in view."""
    ordered = sorted(
        enumerate(windows or ()), key=lambda item: (item[1].get("stack", item[0]), item[0])
    )
    lines = []
    for place, (_, window) in enumerate(ordered, start=1):
        shown = window.get("shown")
        if not isinstance(shown, (int, float)):
            view = "in view (unknown)"
        elif shown >= 1:
            view = "in view"
        elif shown <= 0:
            view = "hidden"
        else:
            view = f"{int(shown * 100)}% in view"
        active = ", active" if window.get("active") else ""
        lines.append(
            f"[window {place}] {window.get('app') or '?'} {_quoted(window.get('title'))}"
            f" ({window.get('x')}, {window.get('y')}) ({window.get('width')},"
            f" {window.get('height')}) {view}{active}"
        )
    return lines


POPUP_ROLES = MENU_ROLES | {"tool tip"}
"""Roles of the entries a popup line names."""


def popup_lines(
    tree: Mapping[str, Any] | None, popups: list[Mapping[str, Any]] | None
) -> list[str]:
    """One line per open popup (menu, drop-down, tooltip), topmost first, with its entries.

    The entries are the named menu entries and tooltips of the tree that lie in the popup
    (their centre inside it; ``visible``, whether or not they say ``showing``: a GTK 2 menu's
    items never do), ``(disabled)`` when not enabled.
    """
    lines = []
    for place, popup in enumerate(popups or (), start=1):
        left, top = popup.get("x") or 0, popup.get("y") or 0
        right, bottom = left + (popup.get("width") or 0), top + (popup.get("height") or 0)
        entries = []
        for node in walk(tree):
            if node.get("role") not in POPUP_ROLES or not node.get("name"):
                continue
            if popup.get("app") and node.get("app") != popup.get("app"):
                continue
            states = node.get("states") or ()
            box = _box(node)
            if "visible" not in states or box is None:
                continue
            x, y, width, height = box
            centre_x, centre_y = x + width / 2, y + height / 2
            if left <= centre_x < right and top <= centre_y < bottom:
                disabled = "" if "enabled" in states else " (disabled)"
                entries.append(_quoted(node.get("name")) + disabled)
        head = (
            f"[popup {place}] {popup.get('app') or '?'} ({left}, {top})"
            f" ({popup.get('width')}, {popup.get('height')})"
        )
        lines.append(head + (": " + ", ".join(entries) if entries else ""))
    return lines


def focused_node(tree: Mapping[str, Any] | None, app: str | None) -> Mapping[str, Any] | None:
    """The widget with the keyboard focus in the active window's application.

    The last in tree order, should several say so.
    """
    found = None
    for node in walk(tree):
        if node.get("app") == app and "focused" in (node.get("states") or ()):
            found = node
    return found


def _line_column(text: str, offset: int) -> str:
    before = text[: max(offset, 0)]
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return f"line {line}, column {column}"


def highlighted_menus(tree: Mapping[str, Any] | None, app: str | None) -> list[str]:
    """The open menus' highlighted entries of ``app``, outermost first (``menu "Edit"`` …).

    A menu walked with the keyboard or the pointer highlights an entry without moving the
    keyboard focus (GTK marks it ``selected``); a person sees which one.
    """
    return [
        f"{tag_of(node)} {_quoted(node.get('name'))}"
        for node in walk(tree)
        if node.get("app") == app
        and node.get("role") in MENU_ROLES
        and {"selected", "showing"} <= set(node.get("states") or ())
    ]


def focus_line(tree: Mapping[str, Any] | None, focused: Mapping[str, Any] | None) -> str:
    """Which widget has the focus, where its caret is and what it has selected."""
    app = (focused or {}).get("app")
    node = focused_node(tree, app) if app else None
    menus = highlighted_menus(tree, app) if app else []
    if node is None:
        line = "[focus] none"
        return line + (f"; menu {' > '.join(menus)} highlighted" if menus else "")
    line = f"[focus] {tag_of(node)} {_quoted(node.get('name'))} in {app}"
    text = str(node.get("text") or "")
    caret = node.get("caret")
    if isinstance(caret, int) and caret >= 0:
        line += f": caret at {_line_column(text, caret)}"
    for start, end in node.get("selections") or ():
        chosen = text[start:end]
        shown = chosen[:SELECTION_SHOWN]
        more = f" (+{len(chosen) - len(shown):,} characters)" if len(chosen) > len(shown) else ""
        line += (
            f"; selection {_quoted(shown)}{more} from {_line_column(text, start)}"
            f" to {_line_column(text, end)}"
        )
    if menus:
        line += f"; menu {' > '.join(menus)} highlighted"
    return line


def desktop_text(raw: RawObservation, max_rows: int) -> tuple[str, int]:
    """The whole observation text of a raw record and its number of kept rows."""
    table = str(raw.get("table") or LEGACY)
    text, rows = linearize(
        raw.get("tree"),
        max_rows=max_rows,
        truncated_at=raw.get("nodes") if raw.get("truncated") else None,
        tree_error=raw.get("tree_error"),
        table=table,
    )
    if table == LEGACY:
        return text, rows
    lines = window_lines(raw.get("windows"))
    lines.extend(popup_lines(raw.get("tree"), raw.get("popups")))
    lines.append(focus_line(raw.get("tree"), raw.get("focused")))
    return "\n".join([*lines, text]), rows


class OsRenderer(Renderer):
    """The desktop's windows and focus, OSWorld's rows, the screenshot, facts in meta."""

    def observation(self, raw: RawObservation) -> Observation:
        """Render the text, decode the screenshot, and copy the desktop's facts into meta."""
        max_rows = int(raw.get("max_rows") or DEFAULT_MAX_ROWS)
        text, rows = desktop_text(raw, max_rows)
        meta = {key: raw.get(key) for key in META_FIELDS}
        meta["rows"] = rows
        meta["rows_shown"] = min(rows, max_rows)
        meta["table"] = str(raw.get("table") or LEGACY)
        meta["noop"] = bool(raw.get("unchanged", False))
        meta["sandbox_lost"] = bool(raw.get("sandbox_lost", False))
        if raw.get("error"):
            meta["error"] = raw.get("error")
        png = raw.get("screenshot_png")
        return Observation(
            format=FORMAT,
            text=text,
            screenshot=base64.b64decode(png) if png else None,
            meta=meta,
        )

    def action(self, action: Action) -> Action:
        """Re-render the canonical code from the calls (as recorded when they cannot be read)."""
        calls = action.arguments.get("calls")
        if not isinstance(calls, list) or not calls:
            return action
        try:
            text = code_text(calls)
        except (ActionSyntaxError, KeyError, TypeError):
            return action
        return action.model_copy(update={"text": text})


__all__ = [
    "FORMAT",
    "HEADER",
    "LEGACY",
    "TABLE",
    "OsRenderer",
    "desktop_text",
    "is_kept",
    "legacy_node_row",
    "linearize",
    "node_row",
    "walk",
]
