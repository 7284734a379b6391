"""The accessibility tree as text, in BrowserGym's format (pure functions, no browser).

A raw web observation keeps the merged Chrome DevTools accessibility tree (``nodes`` as
``Accessibility.getFullAXTree`` returns them, each node that belongs to a marked element
carrying its ``browsergym_id``). :func:`flatten_axtree` renders it the way BrowserGym's
``flatten_axtree_to_str`` does with its defaults, one tab-indented line per node::

    RootWebArea 'New Ticket - Trac', focused
        [23] link 'View Tickets'
        [41] textbox 'Summary:' value='Crash on save', required

(one tab per level), so a world model trained on this corpus sees the same text as agents
built on BrowserGym.
Nodes that carry no information are left out (no name, generic containers without
properties, static text repeating its parent's name, line breaks and, unless asked for,
inline text boxes); their children move up one level.

With the elements' visibility (recorded since web text version 2), an element at least half
inside the viewport is marked ``visible``, as ``flatten_axtree_to_str(..., with_visible=True)``
does (AgentLab's observation setting), so the text says what the viewport shows and a scroll
changes it::

    [23] link 'View Tickets', visible
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

BID_PATTERN = re.compile(r"^browsergym_id_([a-zA-Z0-9]+)\s?(.*)$", re.DOTALL)
"""How a bid travels through an ARIA attribute: ``browsergym_id_<bid> <original value>``."""

IGNORED_ROLES = frozenset({"LineBreak", "InlineTextBox"})
"""Roles not printed by default. BrowserGym ignores LineBreak; Chromium 156 adds InlineTextBox
nodes (one per rendered line of text, repeating it) that BrowserGym's rows from its own pinned
Chromium lack; ``inline_text_boxes=True`` prints them as BrowserGym does on this Chromium."""

VISIBLE_RATIO = 0.5
"""An element at least this share inside the viewport is ``visible`` (BrowserGym's threshold)."""

IGNORED_PROPERTIES = frozenset(
    {"editable", "readonly", "level", "settable", "multiline", "invalid", "focusable"}
)
"""Properties too noisy or too implied by the role to be worth a token."""

FLAG_PROPERTIES = frozenset({"required", "focused", "atomic"})
"""Boolean properties printed as a bare word when true and left out when false."""


def take_bid(node: dict[str, Any]) -> None:
    """Move the bid out of a CDP node's ARIA fields into ``node['browsergym_id']``, in place.

    The marking script prefixes both ``aria-roledescription`` (a node property) and
    ``aria-description`` (the node's ``description``) with the bid; the page's own values are
    restored here so the tree reads as if the page had never been marked.
    """
    bid = None
    properties = node.get("properties") or []
    for index, prop in enumerate(properties):
        if prop.get("name") != "roledescription":
            continue
        value = (prop.get("value") or {}).get("value")
        match = BID_PATTERN.match(value) if isinstance(value, str) else None
        if match:
            bid, original = match.groups()
            if original:
                prop["value"]["value"] = original
            else:
                del properties[index]
        break
    description = node.get("description")
    if isinstance(description, dict) and isinstance(description.get("value"), str):
        match = BID_PATTERN.match(description["value"])
        if match:
            bid = bid or match.group(1)
            if match.group(2):
                description["value"] = match.group(2)
            else:
                del node["description"]
    if bid is not None:
        node["browsergym_id"] = bid


def node_line(
    node: dict[str, Any],
    visibility: Mapping[str, float] | None = None,
    ignored_roles: frozenset[str] = IGNORED_ROLES,
) -> str | None:
    """Return the text of one node without indentation, or None if the node is not shown.

    With ``visibility`` (bid → share inside the viewport), an element whose share is at least
    :data:`VISIBLE_RATIO` is marked ``visible`` before its other attributes.
    """
    role = (node.get("role") or {}).get("value", "")
    if role in ignored_roles or "name" not in node:
        return None
    name = str(node["name"].get("value", ""))
    attributes = _attributes(node)
    if role == "generic" and not attributes:
        return None
    bid = node.get("browsergym_id")
    if visibility is not None and role != "StaticText" and bid is not None:
        ratio = visibility.get(bid)
        if ratio is not None and ratio >= VISIBLE_RATIO:
            attributes.insert(0, "visible")
    line = role if role == "generic" and not name else f"{role} {name.strip()!r}"
    if bid is not None:
        line = f"[{bid}] {line}"
    value = node.get("value")
    if isinstance(value, dict) and "value" in value:
        line += f" value={value['value']!r}"
    if attributes:
        line += ", " + ", ".join(attributes)
    return line


def _attributes(node: dict[str, Any]) -> list[str]:
    shown: list[str] = []
    for prop in node.get("properties") or []:
        name = prop.get("name")
        value = prop.get("value")
        if not isinstance(value, dict) or "value" not in value or name in IGNORED_PROPERTIES:
            continue
        if name in FLAG_PROPERTIES:
            if value["value"]:
                shown.append(name)
        else:
            shown.append(f"{name}={value['value']!r}")
    return shown


def flatten_axtree(
    tree: dict[str, Any],
    visibility: Mapping[str, float] | None = None,
    inline_text_boxes: bool = False,
) -> str:
    """Render a merged accessibility tree as BrowserGym's one-line-per-node text.

    ``visibility`` (bid → share inside the viewport, as recorded with the tree) adds the
    ``visible`` marks; None (runs recorded before visibility was) prints none.
    ``inline_text_boxes`` prints Chromium's InlineTextBox nodes as BrowserGym does on this
    Chromium; by default they are left out.
    """
    ignored = IGNORED_ROLES - {"InlineTextBox"} if inline_text_boxes else IGNORED_ROLES
    nodes = tree.get("nodes") or []
    if not nodes:
        return ""
    by_id = {node["nodeId"]: node for node in nodes}
    lines: list[str] = []
    # An explicit stack instead of recursion: real pages nest deeper than Python's limit.
    stack: list[tuple[dict[str, Any], int, str]] = [(nodes[0], 0, "")]
    visited: set[str] = set()
    while stack:
        node, depth, parent_name = stack.pop()
        if node["nodeId"] in visited:  # a malformed tree must not loop forever
            continue
        visited.add(node["nodeId"])
        line = node_line(node, visibility, ignored)
        role = (node.get("role") or {}).get("value", "")
        name = "" if role in ignored else str((node.get("name") or {}).get("value", ""))
        if line is not None and role == "StaticText" and name in parent_name:
            line = None  # the parent already says it
        if line is not None:
            lines.append("\t" * depth + line)
        child_depth = depth if line is None else depth + 1
        children = [by_id[c] for c in node.get("childIds") or () if c in by_id]
        # Children compare their static text with this node's name even when this node is
        # not shown, as BrowserGym does.
        for child in reversed(children):
            stack.append((child, child_depth, name))
    return "\n".join(lines)


def node_role(node: dict[str, Any]) -> str:
    """The node's role ('' if it has none)."""
    return str((node.get("role") or {}).get("value", ""))


def node_name(node: dict[str, Any]) -> str:
    """The node's accessible name ('' if it has none), stripped."""
    return str((node.get("name") or {}).get("value", "")).strip()


def node_property(node: dict[str, Any], name: str) -> Any:
    """The value of one of the node's properties (``url``, ``disabled``…), or None."""
    for prop in node.get("properties") or []:
        if prop.get("name") == name:
            return (prop.get("value") or {}).get("value")
    return None


def tree_order(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes reachable from the root, depth first, in the order the tree text prints them."""
    nodes = tree.get("nodes") or []
    if not nodes:
        return []
    by_id = {node["nodeId"]: node for node in nodes}
    ordered: list[dict[str, Any]] = []
    seen: set[str] = set()
    stack = [nodes[0]]
    while stack:
        node = stack.pop()
        if node["nodeId"] in seen:
            continue
        seen.add(node["nodeId"])
        ordered.append(node)
        stack.extend(by_id[c] for c in reversed(node.get("childIds") or ()) if c in by_id)
    return ordered


def find_bids(tree: dict[str, Any], role: str, name: str) -> list[str]:
    """Bids of the nodes with ``role`` and exactly ``name``, in printed order.

    If no name is exact, the nodes whose name starts with ``name`` instead.
    """
    exact: list[str] = []
    prefixed: list[str] = []
    for node in tree_order(tree):
        bid = node.get("browsergym_id")
        if bid is None or node.get("ignored") or node_role(node) != role:
            continue
        label = node_name(node)
        if label == name:
            exact.append(bid)
        elif label.startswith(name):
            prefixed.append(bid)
    return exact or prefixed
