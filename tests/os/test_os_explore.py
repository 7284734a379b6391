"""The desktop's exploring policy on recorded trees: what it may touch, and its reproducibility."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.os.actions import action_calls, parse_action
from worldtrace.collectors.os.explore import OsExplorePolicy, candidates

DATA = Path(__file__).parent / "data"


def recorded() -> dict[str, Any]:
    """Gnumeric on budget.csv and the launcher dock, as the desktop driver gave them."""
    with gzip.open(DATA / "gnumeric_budget.json.gz", "rt", encoding="utf-8") as file:
        return json.load(file)


def launcher_only(observation: dict[str, Any]) -> dict[str, Any]:
    """The same desktop with only the launcher dock running."""
    bare = copy.deepcopy(observation)
    bare["tree"]["children"] = [a for a in bare["tree"]["children"] if a["name"] == "launcher"]
    return bare


def walk(seed: int, observation: dict[str, Any], steps: int = 30) -> list[str]:
    """The actions of ``steps`` steps on an unchanging observation."""
    policy = OsExplorePolicy()
    policy.reset(seed, None)
    history: list[HistoryItem] = []
    for _ in range(steps):
        action = policy.act(observation, history)
        assert action is not None
        history.append(HistoryItem(action=action, observation=observation))
    return [item.action.text for item in history]


def test_candidates_are_the_usable_widgets_on_screen() -> None:
    found = candidates(recorded())
    roles = {node["role"] for node in found}
    assert roles <= {"push button", "toggle button", "menu", "text", "icon"}
    names = {str(node["name"]) for node in found}
    assert {"File", "Save", "Bold", "Text Editor", "Calculator"} <= names
    # The text fields kept are editable ones (the cell entry), never a status label.
    assert all("editable" in n["states"] for n in found if n["role"] == "text")
    assert not any(node["role"] == "label" for node in found)


def test_the_same_seed_gives_the_same_walk_and_untried_widgets_come_first() -> None:
    observation = recorded()
    first, again, other = walk(3, observation), walk(3, observation), walk(4, observation)
    assert first == again
    assert first != other
    for code in first:
        assert action_calls(parse_action(code))  # every action is allowed code
    clicks = [code for code in first if code.startswith("pyautogui.click(")]
    # Until every widget was tried, no click repeats a widget already clicked.
    n = len(candidates(observation))
    head = [c for c in first[: min(n, len(first))] if c.startswith("pyautogui.click(")]
    assert len(set(head)) == len(head) and clicks


def test_with_only_the_launcher_it_opens_an_application() -> None:
    bare = launcher_only(recorded())
    actions = walk(1, bare, steps=5)
    launcher = {
        f"pyautogui.click({n['x'] + n['width'] // 2}, {n['y'] + n['height'] // 2})"
        for n in candidates(bare)
    }
    assert len(launcher) == 5
    assert set(actions) <= launcher and len(set(actions)) == 5


def test_a_bad_key_share_is_refused_and_max_steps_ends_the_walk() -> None:
    with pytest.raises(ValueError, match="key_share"):
        OsExplorePolicy(key_share=1.5)
    policy = OsExplorePolicy(max_steps=1)
    policy.reset(0, None)
    observation = recorded()
    action = policy.act(observation, [])
    assert action is not None
    assert policy.act(observation, [HistoryItem(action=action, observation=observation)]) is None
