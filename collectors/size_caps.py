"""Size caps on what an episode records: no value an agent or a page produces fills the disk.

An action's argument, a tool's result, a page's text or a stored state can be as large as
the agent makes it (a 10 MB value stored in search's memory came back in every later
observation; an mcp ``echo`` of 20 MB). The episode loop passes every observation, action
and error through :func:`cap_event_values` before it is recorded, per kind of value:

- text (any string): at most :data:`TEXT_CAP_CHARS` characters; a longer one keeps its head
  and its tail with a marker between them saying how many characters were cut, the form
  swe's renderer uses for long tool output;
- images (a base64 PNG under a key ending in ``_png``, the screenshots): at most
  :data:`IMAGE_CAP_CHARS`; a cut image could not be decoded, so a larger one is dropped
  (the key holds ``None``).

Every cut is listed in the event's ``cut`` field (:class:`~worldtrace.schemas.raw.Cut`:
where, how long the value was, how much was kept), and normalization copies an
observation's cuts into its ``meta["cut"]``, so a row says what it does not show.
"""

from __future__ import annotations

from typing import Any

from worldtrace.schemas.raw import Cut, RawObservation
from worldtrace.schemas.records import Action

TEXT_CAP_CHARS = 262_144
"""Longest text value recorded: a terminal screen is ~20 K, a long page's text ~100 K."""

IMAGE_CAP_CHARS = 16 * 1024 * 1024
"""Longest base64 image recorded (a 1280x800 screenshot is well under 2 MB)."""


def cut_mark(cut_chars: int) -> str:
    """The marker left where ``cut_chars`` characters of a text were cut."""
    return f"\n[... {cut_chars} characters truncated ...]\n"


def cap_text(text: str, limit: int = TEXT_CAP_CHARS) -> str:
    """Return ``text`` itself, or its head and tail around a marker, at most about ``limit``."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    return f"{text[:head]}{cut_mark(len(text) - limit)}{text[len(text) - tail :]}"


def _is_image(key: str) -> bool:
    return key.endswith("_png")


def cap_value(value: Any, where: str, cuts: list[Cut]) -> Any:
    """Return ``value`` (JSON) with every string capped by kind; appends each cut to ``cuts``."""
    if isinstance(value, str):
        if len(value) <= TEXT_CAP_CHARS:
            return value
        kept = cap_text(value)
        cuts.append(Cut(where=where, chars=len(value), kept=TEXT_CAP_CHARS))
        return kept
    if isinstance(value, dict):
        capped: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(item, str) and _is_image(str(key)):
                if len(item) > IMAGE_CAP_CHARS:
                    cuts.append(Cut(where=f"{where}.{key}", chars=len(item), kept=0))
                    item = None
                capped[key] = item
            else:
                capped[key] = cap_value(item, f"{where}.{key}", cuts)
        return capped
    if isinstance(value, list):
        return [cap_value(item, f"{where}[{index}]", cuts) for index, item in enumerate(value)]
    return value


def cap_observation(observation: RawObservation) -> tuple[RawObservation, tuple[Cut, ...]]:
    """Return the observation as it is recorded, and what was cut from it."""
    cuts: list[Cut] = []
    capped = cap_value(observation, "observation", cuts)
    return capped, tuple(cuts)


def cap_step(
    action: Action, observation: RawObservation, error: str | None
) -> tuple[Action, RawObservation, str | None, tuple[Cut, ...]]:
    """Return a step's action, observation and error as they are recorded, and the cuts."""
    cuts: list[Cut] = []
    text = cap_value(action.text, "action.text", cuts)
    arguments = cap_value(action.arguments, "action.arguments", cuts)
    if cuts:
        action = Action(name=action.name, arguments=arguments, text=text)
    observation = cap_value(observation, "observation", cuts)
    error = cap_value(error, "error", cuts)
    return action, observation, error, tuple(cuts)


__all__ = [
    "IMAGE_CAP_CHARS",
    "TEXT_CAP_CHARS",
    "cap_observation",
    "cap_step",
    "cap_text",
    "cap_value",
    "cut_mark",
]
