"""The exploring walk never leaves its site for a blank page, and recovers if it lands on one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.web.actions import parse_action
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.explore import ExplorePolicy

pytestmark = pytest.mark.docker


@pytest.fixture
def trac(site_images: None) -> Iterator[WebEnvironment]:
    """Trac in its sandbox, without screenshots (the walk does not need them)."""
    env = WebEnvironment(WebConfig(site="trac", screenshot=False))
    yield env
    env.close()


def test_a_walk_that_often_goes_back_never_lands_on_a_blank_page(
    trac: WebEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    # History moves weigh as much as clicking: before the fix the first go_back() from the
    # start page went to about:blank, and the walk stayed there.
    policy = ExplorePolicy(moves={"go_back": 1.0, "go_forward": 0.3, "tabs": 0.0})
    observation = trac.reset(seed=5, task=None)
    policy.reset(5, None)
    # The move the walk drew at each step (its first draw of the step), read off its own
    # seeded stream, so the test knows it met the case it is about.
    rolled: list[str] = []
    draw = policy._random.choices

    def recording(population: Any, *args: Any, **kwargs: Any) -> list[Any]:
        chosen = draw(population, *args, **kwargs)
        if list(population) == list(policy.moves):
            rolled.append(chosen[0])
        return chosen

    monkeypatch.setattr(policy._random, "choices", recording)
    history: list[HistoryItem] = []
    backs = 0
    # Four steps of seed 5 hold every case (asserted below): a go_back drawn on the start
    # page, with only about:blank behind it, where the walk does something else; then
    # go_back() over pages of the site, twice, and go_forward(). (The 20 steps it walked
    # before added more of the same, at a Trac page load each.)
    for _ in range(4):
        action = policy.act(observation, history)
        outcome = trac.step(action, timeout_s=60)
        observation = outcome.observation
        history.append(HistoryItem(action, observation, outcome.error))
        backs += action.name == "go_back"
        assert observation["url"].startswith("http://trac.test/"), (action.text, observation["url"])
    assert rolled[0] == "go_back" and history[0].action.name != "go_back", (rolled, history[0])
    assert backs >= 2  # it did go back, over pages of the site
    assert "go_forward" in [item.action.name for item in history]


def test_a_walk_that_lands_on_a_blank_page_returns_to_its_start_page(trac: WebEnvironment) -> None:
    policy = ExplorePolicy()
    start = trac.reset(seed=0, task=None)
    policy.reset(0, None)
    # The walk's first move: somewhere on the site.
    first = policy.act(start, [])
    moved = trac.step(first, timeout_s=60)
    history = [HistoryItem(first, moved.observation, moved.error)]
    # Then the page leaves the site (as go_back() from a tab's first page does).
    blank = trac.step(parse_action("goto('about:blank')"), timeout_s=60)
    assert blank.observation["url"] == "about:blank"
    history.append(HistoryItem(parse_action("goto('about:blank')"), blank.observation, None))
    action = policy.act(blank.observation, history)
    assert action.text == "goto('http://trac.test/')"
    back_on_site = trac.step(action, timeout_s=60)
    assert back_on_site.observation["url"] == "http://trac.test/"


def test_unknown_moves_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown moves"):
        ExplorePolicy(moves={"teleport": 1.0})
