"""The exploring walk never leaves its site for a blank page, and recovers if it lands on one."""

from __future__ import annotations

from collections.abc import Iterator

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


def test_a_walk_that_often_goes_back_never_lands_on_a_blank_page(trac: WebEnvironment) -> None:
    # History moves weigh as much as clicking: before the fix the first go_back() from the
    # start page went to about:blank, and the walk stayed there.
    policy = ExplorePolicy(moves={"go_back": 1.0, "go_forward": 0.3, "tabs": 0.0})
    observation = trac.reset(seed=5, task=None)
    policy.reset(5, None)
    history: list[HistoryItem] = []
    backs = 0
    for _ in range(20):
        action = policy.act(observation, history)
        outcome = trac.step(action, timeout_s=60)
        observation = outcome.observation
        history.append(HistoryItem(action, observation, outcome.error))
        backs += action.name == "go_back"
        assert observation["url"].startswith("http://trac.test/"), (action.text, observation["url"])
    assert backs >= 2  # it did go back, over pages of the site


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
