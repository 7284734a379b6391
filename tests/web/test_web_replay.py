"""Replaying BrowserGym action strings from elsewhere records the real next states."""

from __future__ import annotations

import pytest

from tests.web.web_test_pages import environment_on_pages, serve_test_pages
from worldtrace.collectors.base import EpisodePlan
from worldtrace.collectors.episode import EpisodeLimits, run_episode
from worldtrace.collectors.recorder import RunRecorder, read_episode
from worldtrace.collectors.web import WebCollector
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.render import WebRenderer
from worldtrace.flows.config import ConfigError, validate_config


def test_a_replayed_trajectory_is_recorded_with_real_next_states(tmp_path) -> None:
    # Bids on the test home page are assigned in document order; the first run of this
    # trajectory was written against them, as a trajectory from another recorder would be.
    trajectory = ["click('6')", "fill('7', 'Lin')", "click('99')", "keyboard_press('Enter')"]
    policy = WebCollector().make_policy("replay", {"actions": trajectory})
    with serve_test_pages() as pages:
        env = environment_on_pages(pages)
        writer = RunRecorder(tmp_path, {"domain": "web"}).begin("replay")
        try:
            result = run_episode(
                env, policy, writer, EpisodePlan(index=0, seed=0), EpisodeLimits(10, 30)
            )
        finally:
            env.close()
    assert result.status == "completed" and result.steps == 4
    steps = [event for event in read_episode(tmp_path / "raw" / "episodes" / "replay.jsonl")]
    steps = [event for event in steps if event.type == "step"]
    assert [event.action.text for event in steps] == trajectory
    normalizer = WebRenderer()
    after_click = normalizer.observation(steps[0].observation)
    assert after_click.meta["title"] == "Order form"
    assert "[7] textbox 'Name', visible, required" in after_click.text
    assert "value='Lin'" in normalizer.observation(steps[1].observation).text
    # '99' is not on the form page: the error is recorded and the page did not change.
    assert steps[2].error == "no element with bid '99' on the page"
    assert steps[2].observation["unchanged"] is True
    final = normalizer.observation(steps[3].observation)
    assert final.meta["title"] == "Thanks"
    assert "Order for Lin in red" in flatten_axtree(steps[3].observation["axtree"])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"actions": ["click('1')", "os.system('x')"]}, "expected one call"),
        ({"actions": []}, "a non-empty list of actions"),
        ({"actions": ["click('1')"], "speed": 2}, "a non-empty list of actions"),
    ],
)
def test_a_bad_replay_config_is_refused_before_anything_runs(params, message) -> None:
    with pytest.raises(ConfigError, match=message):
        validate_config(
            {
                "domain": "web",
                "episodes": 1,
                "policy": {"kind": "replay", "params": params},
                "environment": {"site": "trac"},
            }
        )
