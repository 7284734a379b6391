"""The typed difference between two snapshots of an MCP server's world.

A snapshot (made by the in-container driver after every step) is a JSON object whose ``kind``
says what it holds: ``files`` (path → content hash, or ``dir``), ``git`` (HEAD, branch,
branches, tags, status lines), ``memory`` (entity, relation and observation counts, entity
names), ``postgres`` (row counts per table) or ``none``. The difference names every entry
added, removed or modified, addressed as ``<field>`` for a top-level value and
``<field>:<key>`` for an entry of a top-level mapping (``files:src/app.py``,
``tables:public.orders``, ``branches:feature``), so a curator can tell a state-changing call
from a read-only one, and see what it changed, without comparing snapshots themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _entries(snapshot: Mapping[str, Any]) -> dict[str, Any]:
    """A snapshot as flat entries: top-level values, and the items of top-level mappings."""
    entries: dict[str, Any] = {}
    for field, value in snapshot.items():
        if field == "kind":
            continue
        if isinstance(value, Mapping):
            for key, item in value.items():
                entries[f"{field}:{key}"] = item
        else:
            entries[field] = value
    return entries


def state_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """What changed from ``before`` to ``after`` (``before`` None: the episode's start).

    Returns ``{"kind", "changed", "added": {entry: value}, "removed": {entry: value},
    "modified": {entry: [old, new]}}``.
    """
    old = _entries(before or {})
    new = _entries(after)
    added = {key: new[key] for key in new if key not in old}
    removed = {key: old[key] for key in old if key not in new}
    modified = {key: [old[key], new[key]] for key in new if key in old and old[key] != new[key]}
    return {
        "kind": after.get("kind"),
        "changed": bool(added or removed or modified),
        "added": added,
        "removed": removed,
        "modified": modified,
    }


__all__ = ["state_diff"]
