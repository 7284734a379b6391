r"""Desktop raw records → canonical observations: OSWorld's linearized accessibility tree.

The raw observation is the desktop driver's whole reply (``collectors/os/image/
desktop_driver.py``): the full AT-SPI tree as JSON with every role, state, attribute and
extent, the screenshot, the window list and the focus, plus what the environment adds (the
action's calls, the row cap). The text (format :data:`FORMAT`, ``a11y-linear``) is rendered
from the tree the way OSWorld linearizes its Ubuntu tree for its agents
(``mm_agents/accessibility_tree_wrap/heuristic_retrieve.py``'s node filter and the
``linearize_accessibility_tree`` table of OSWorld's first release): the header line::

    tag\tname\ttext\tposition (top-left x&y)\tsize (w&h)

then one tab-separated row per kept node in depth-first order: its tag (the AT-SPI role with
spaces as dashes, as OSWorld's XML tags are: ``push-button``, ``table-cell``, ``menu-item``),
its name, its text (the Text interface's content; ``""`` when it has none; quoted with inner
quotes doubled when it holds a quote, as OSWorld does, and also — our addition, so a row stays
one line — when it holds a tab or a line break, which are then written as ``\t`` and
``\n``), its position ``(x, y)`` and its size ``(w, h)``. OSWorld's current release adds
``class`` and ``description`` columns; this is the five-column table of the domain's contract.

A node is kept (OSWorld's ``judge_node`` for Ubuntu) when its tag starts with ``document`` or
ends with ``item``, ``button``, ``heading``, ``label``, ``scrollbar``, ``searchbox``,
``textbox``, ``link``, ``tabelement``, ``textfield``, ``textarea`` or ``menu``, or is one of
:data:`KEPT_TAGS`; it has the states ``showing`` and ``visible``; it has a name or a text; and
it lies on the screen (x, y ≥ 0, width and height > 0).

At most ``max_rows`` rows are written (the raw record's ``max_rows``, default
:data:`DEFAULT_MAX_ROWS`); then the line ``[… N more rows not shown: M of T rows]``. A tree the
driver cut at its node cap ends with ``[… accessibility tree cut at N nodes]``; applications
the driver skipped (too slow, not answering) with ``[accessibility tree incomplete: <why>]``;
no tree at all reads ``[no accessibility tree: <why>]`` under the header. ``meta`` holds the
focused window and application, the window list, the screen size, the tree's size and state,
the rows, the step's timings and whether the tree changed (``noop``).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping
from typing import Any

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.os.actions import ActionSyntaxError, code_text
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.raw import RawObservation

FORMAT = "a11y-linear"
HEADER = "tag\tname\ttext\tposition (top-left x&y)\tsize (w&h)"
DEFAULT_MAX_ROWS = 1000
"""Rows an observation shows when the raw record does not say (the raw tree keeps them all)."""

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

META_FIELDS = (
    "focused",
    "windows",
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


def is_kept(node: Mapping[str, Any]) -> bool:
    """Whether OSWorld's filter keeps ``node`` (see the module docstring)."""
    tag = tag_of(node)
    if not (tag.startswith("document") or tag.endswith(KEPT_SUFFIXES) or tag in KEPT_TAGS):
        return False
    states = node.get("states") or ()
    if "showing" not in states or "visible" not in states:
        return False
    if not (node.get("name") or node.get("text")):
        return False
    x, y, width, height = (node.get(key) for key in ("x", "y", "width", "height"))
    if not all(isinstance(value, (int, float)) for value in (x, y, width, height)):
        return False
    return x >= 0 and y >= 0 and width > 0 and height > 0  # type: ignore[operator]


def kept_nodes(root: Mapping[str, Any] | None) -> Iterator[Mapping[str, Any]]:
    """The kept nodes of a tree, depth first (iteratively: trees can be deep)."""
    if root is None:
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if is_kept(node):
            yield node
        stack.extend(reversed(node.get("children") or ()))


def cell_text(value: str) -> str:
    """A text cell as OSWorld writes it, kept on one line (see the module docstring)."""
    if not value:
        return '""'
    if '"' in value or "\t" in value or "\n" in value or "\r" in value:
        escaped = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r")
        return '"' + escaped.replace("\n", "\\n").replace('"', '""') + '"'
    return value


def _one_line(value: str) -> str:
    # A name is written as is in OSWorld; a tab or line break in one would break the row.
    return value.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def node_row(node: Mapping[str, Any]) -> str:
    """One row of the table."""
    return "\t".join(
        (
            tag_of(node),
            _one_line(str(node.get("name") or "")),
            cell_text(str(node.get("text") or "")),
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
) -> tuple[str, int]:
    """The ``a11y-linear`` text of a tree and the number of kept rows (shown or not)."""
    lines = [HEADER]
    if tree is None:
        lines.append(f"[no accessibility tree: {tree_error or 'unknown reason'}]")
        return "\n".join(lines), 0
    rows = [node_row(node) for node in kept_nodes(tree)]
    lines.extend(rows[:max_rows])
    if len(rows) > max_rows:
        lines.append(rows_cut_marker(max_rows, len(rows)))
    if truncated_at is not None:
        lines.append(f"[… accessibility tree cut at {truncated_at:,} nodes]")
    if tree_error:
        lines.append(f"[accessibility tree incomplete: {_one_line(tree_error)}]")
    return "\n".join(lines), len(rows)


class OsRenderer(Renderer):
    """The desktop as OSWorld's linearized tree, the screenshot, windows and focus in meta."""

    def observation(self, raw: RawObservation) -> Observation:
        """Render the tree, decode the screenshot, and copy the desktop's facts into meta."""
        max_rows = int(raw.get("max_rows") or DEFAULT_MAX_ROWS)
        text, rows = linearize(
            raw.get("tree"),
            max_rows=max_rows,
            truncated_at=raw.get("nodes") if raw.get("truncated") else None,
            tree_error=raw.get("tree_error"),
        )
        meta = {key: raw.get(key) for key in META_FIELDS}
        meta["rows"] = rows
        meta["rows_shown"] = min(rows, max_rows)
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


__all__ = ["FORMAT", "HEADER", "OsRenderer", "is_kept", "linearize", "node_row"]
