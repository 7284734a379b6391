"""AndroidWorld's JSON actions: what an agent does on the phone, one JSON object per step.

``{"action_type": "click", "index": 3}`` taps the centre of element 3 of the current element
list; ``{"action_type": "click", "x": 540, "y": 1200}`` taps a point. The types and their
fields (AndroidWorld's ``JSONAction``):

- ``click``, ``double_tap``, ``long_press``: ``index``, or ``x`` and ``y``;
- ``input_text``: ``text``, typed into the element ``index`` (tapped first) or, without one,
  into the field that has the focus; ``keyboard_enter``: the keyboard's Enter;
- ``scroll``: ``direction`` (``up``, ``down``, ``left``, ``right``: where the view moves, so
  ``down`` shows what is below), inside element ``index`` or the whole screen; ``swipe``:
  ``direction`` of the finger, from element ``index``, a point or the screen's centre;
- ``navigate_back``, ``navigate_home``, ``wait``;
- ``open_app``: ``app_name`` (a name the environment knows, or a package name);
- ``answer``: ``text`` (the agent's answer to a question; nothing on the device changes);
- ``status``: ``goal_status`` ``complete`` or ``infeasible`` (the episode ends).

An action's :class:`~worldtrace.schemas.Action` has the type as ``name``, the other fields as
``arguments`` and the canonical JSON as ``text``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from worldtrace.schemas import Action

TARGETED = frozenset({"click", "double_tap", "long_press"})
DIRECTIONS = ("up", "down", "left", "right")
GOAL_STATUSES = ("complete", "infeasible")

FIELDS: dict[str, tuple[str, ...]] = {
    "click": ("index", "x", "y"),
    "double_tap": ("index", "x", "y"),
    "long_press": ("index", "x", "y"),
    "input_text": ("text", "index", "x", "y"),
    "keyboard_enter": (),
    "scroll": ("direction", "index"),
    "swipe": ("direction", "index", "x", "y"),
    "navigate_back": (),
    "navigate_home": (),
    "open_app": ("app_name",),
    "wait": (),
    "answer": ("text",),
    "status": ("goal_status",),
}
"""Each action type and the fields it takes, in the order the canonical text writes them."""

READ_ONLY = frozenset({"wait", "answer"})
"""Types that never change the device."""


class ActionError(ValueError):
    """Not an AndroidWorld action; the message says why."""


def parse_action(action: str | Mapping[str, Any]) -> Action:
    """The action of a JSON text or object (:class:`ActionError` if it is none)."""
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except ValueError as error:
            raise ActionError(f"an action is one JSON object: {error}") from None
    if not isinstance(action, Mapping):
        raise ActionError("an action is one JSON object with an action_type")
    fields = dict(action)
    kind = fields.pop("action_type", None)
    if kind not in FIELDS:
        raise ActionError(f"unknown action_type {kind!r} (expected one of {', '.join(FIELDS)})")
    unknown = sorted(set(fields) - set(FIELDS[kind]))
    if unknown:
        raise ActionError(f"{kind} takes {', '.join(FIELDS[kind]) or 'no fields'}, not {unknown}")
    _check(kind, fields)
    return make_action(kind, **fields)


def make_action(kind: str, **fields: Any) -> Action:
    """The action of ``kind`` with ``fields``, with its canonical text."""
    ordered = {name: fields[name] for name in FIELDS[kind] if name in fields}
    text = json.dumps({"action_type": kind, **ordered}, ensure_ascii=False)
    return Action(name=kind, arguments=ordered, text=text)


def _check(kind: str, fields: Mapping[str, Any]) -> None:
    has_index = "index" in fields
    has_point = "x" in fields or "y" in fields
    for name in ("index", "x", "y"):
        value = fields.get(name)
        if name in fields and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise ActionError(f"{kind}: {name} must be a whole number, 0 or more, got {value!r}")
    if has_point and not ("x" in fields and "y" in fields):
        raise ActionError(f"{kind}: a point needs both x and y")
    if has_index and has_point:
        raise ActionError(f"{kind}: give index or x and y, not both")
    if kind in TARGETED and not (has_index or has_point):
        raise ActionError(f"{kind} needs an index or x and y")
    if kind in {"input_text", "answer"} and not isinstance(fields.get("text"), str):
        raise ActionError(f"{kind} needs a text")
    if kind in {"scroll", "swipe"} and fields.get("direction") not in DIRECTIONS:
        raise ActionError(f"{kind} needs a direction: {', '.join(DIRECTIONS)}")
    if kind == "open_app" and not (isinstance(fields.get("app_name"), str) and fields["app_name"]):
        raise ActionError("open_app needs an app_name")
    if kind == "status" and fields.get("goal_status") not in GOAL_STATUSES:
        raise ActionError(f"status needs a goal_status: {', '.join(GOAL_STATUSES)}")
