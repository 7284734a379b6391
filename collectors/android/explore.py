"""The Android exploring policy: taps, types into and scrolls what the screen has, seeded.

:class:`AndroidExplorePolicy` works without a task, as a person finds their way around a new
phone. Each step it reads the current element list and picks one of :data:`KINDS` by weight,
among those the screen allows:

- ``tap``: a clickable element, preferring one not tapped before on a screen like this one
  (same app, activity and element), so the walk reaches new screens instead of toggling one
  switch back and forth; now and then a long press or a double tap instead;
- ``type``: text into an editable element (a word of ``words``), or Enter when the keyboard
  shows;
- ``scroll``: a scrollable element (or the screen) in a random direction;
- ``back``: ``navigate_back``; ``home``: ``navigate_home``; ``open_app``: one of ``apps``.

**Reproducibility.** Every choice comes from a ``random.Random(seed)`` over the observation's
elements in their order; what was tried is kept in an insertion-ordered dict. The same seed
and the same screens give the same actions, in any process.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from pydantic import Field, field_validator

from worldtrace.collectors.android.actions import DIRECTIONS, make_action
from worldtrace.collectors.android.elements import Element, HierarchyError, parse_hierarchy
from worldtrace.collectors.base import (
    HistoryItem,
    Policy,
    PolicyParams,
    Share,
    Weight,
    merged_weights,
)
from worldtrace.schemas import Action
from worldtrace.schemas.raw import RawObservation

KINDS = ("tap", "type", "scroll", "back", "home", "open_app")
DEFAULT_WEIGHTS = {
    "tap": 6.0,
    "type": 2.0,
    "scroll": 1.0,
    "back": 1.0,
    "home": 0.3,
    "open_app": 0.7,
}
WORDS = ("Ada", "Lovelace", "hello", "555-0100", "Grace Hopper", "test", "café", "42")
"""What the policy types (names, numbers, a word with an accent)."""


class AndroidExploreParams(PolicyParams):
    """The parameters of :class:`AndroidExplorePolicy` (a config's ``policy.params``)."""

    policy = "android explore policy"

    weights: dict[str, Weight] = Field(
        default_factory=dict, description=f"relative weights of {', '.join(KINDS)}"
    )
    words: list[str] = Field(default_factory=lambda: list(WORDS), description="what it types")
    apps: list[str] = Field(
        default_factory=lambda: ["Settings", "Contacts"],
        description="the app names `open_app` opens (names the environment knows)",
    )
    press_share: Share = Field(
        default=0.1, description="the chance that a tap is a long press or a double tap"
    )

    @field_validator("weights")
    @classmethod
    def _weights(cls, weights: dict[str, float]) -> dict[str, float]:
        return merged_weights(weights, DEFAULT_WEIGHTS, "weights", "action kinds in weights")

    @field_validator("words", "apps")
    @classmethod
    def _non_empty(cls, values: list[str]) -> list[str]:
        if not values or not all(value.strip() for value in values):
            raise ValueError("must be a non-empty list of non-empty texts")
        return values


class AndroidExplorePolicy(Policy[Any]):
    """Seeded taps, text, scrolls and navigation over the screen's own elements."""

    kind = "explore"
    name = "android-explore"
    version = "1"

    def __init__(self, params: AndroidExploreParams | None = None, /, **keywords: Any) -> None:
        self.params = AndroidExploreParams.given(params, keywords)
        self.weights = self.params.weights or dict(DEFAULT_WEIGHTS)
        self.reset(0, None)

    def reset(self, seed: int, task: Any | None) -> None:
        """Forget the last episode; seed the choices."""
        self._rng = random.Random(seed)
        self._tried: dict[tuple[str, ...], None] = {}

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """The next action on the screen ``observation`` shows."""
        try:
            elements = parse_hierarchy(str(observation.get("hierarchy") or ""))
        except HierarchyError:
            elements = []
        screen = (str(observation.get("package")), str(observation.get("activity")))
        choices = self._choices(elements, bool(observation.get("keyboard_shown")))
        kind = self._rng.choices(list(choices), weights=[self.weights[k] for k in choices])[0]
        return choices[kind](elements, screen)

    def _choices(self, elements: list[Element], keyboard: bool) -> dict[str, Any]:
        kinds: dict[str, Any] = {}
        if any(element.is_clickable and element.is_enabled for element in elements):
            kinds["tap"] = self._tap
        if keyboard or any(element.is_editable for element in elements):
            kinds["type"] = self._type
        kinds.update(scroll=self._scroll, back=self._back, home=self._home, open_app=self._open)
        return {kind: function for kind, function in kinds.items() if self.weights[kind] > 0} or {
            "back": self._back
        }

    def _tap(self, elements: list[Element], screen: tuple[str, str]) -> Action:
        clickable = [e for e in elements if e.is_clickable and e.is_enabled]
        fresh = [e for e in clickable if _key(screen, e) not in self._tried]
        element = self._rng.choice(fresh or clickable)
        self._tried[_key(screen, element)] = None
        if self._rng.random() < self.params.press_share:
            return make_action(self._rng.choice(("long_press", "double_tap")), index=element.index)
        return make_action("click", index=element.index)

    def _type(self, elements: list[Element], screen: tuple[str, str]) -> Action:
        editable = [e for e in elements if e.is_editable and e.is_enabled]
        if not editable or self._rng.random() < 0.2:
            return make_action("keyboard_enter")
        element = self._rng.choice(editable)
        return make_action(
            "input_text", text=self._rng.choice(self.params.words), index=element.index
        )

    def _scroll(self, elements: list[Element], screen: tuple[str, str]) -> Action:
        scrollable = [e for e in elements if e.is_scrollable]
        direction = self._rng.choice(DIRECTIONS)
        if scrollable and self._rng.random() < 0.8:
            return make_action(
                "scroll", direction=direction, index=self._rng.choice(scrollable).index
            )
        return make_action("scroll", direction=direction)

    def _back(self, elements: list[Element], screen: tuple[str, str]) -> Action:
        return make_action("navigate_back")

    def _home(self, elements: list[Element], screen: tuple[str, str]) -> Action:
        return make_action("navigate_home")

    def _open(self, elements: list[Element], screen: tuple[str, str]) -> Action:
        return make_action("open_app", app_name=self._rng.choice(self.params.apps))


def _key(screen: tuple[str, str], element: Element) -> tuple[str, ...]:
    """What makes a tap the same one: the screen and what the element shows."""
    return (
        *screen,
        element.class_name,
        element.text,
        element.content_description,
        element.resource_name,
    )
