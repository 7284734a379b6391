"""The typed difference between two states of a search episode's memory.

The only state a search action can change is the episode's key-value memory (the corpus, the
index and the site are read-only). The driver returns the whole memory ({key: value}) after
every request; :func:`memory_diff` names every key added, removed or modified, so a curator can
tell a state-changing call (a ``dict_memory`` add, update or remove that succeeded) from a
read-only one without comparing memories themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def memory_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> dict[str, Any]:
    """What changed in the memory from ``before`` to ``after`` (``before`` None: the start).

    Returns ``{"kind": "memory", "changed", "added": {key: value}, "removed": {key: value},
    "modified": {key: [old, new]}}``, keys in sorted order.
    """
    old = dict(before or {})
    new = dict(after)
    added = {key: new[key] for key in sorted(new) if key not in old}
    removed = {key: old[key] for key in sorted(old) if key not in new}
    modified = {
        key: [old[key], new[key]] for key in sorted(new) if key in old and old[key] != new[key]
    }
    return {
        "kind": "memory",
        "changed": bool(added or removed or modified),
        "added": added,
        "removed": removed,
        "modified": modified,
    }


__all__ = ["memory_diff"]
