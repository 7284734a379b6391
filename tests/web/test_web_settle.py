"""A page is read when it is done: no navigation pending, documents loaded, animations over,
no short page timer pending.

The environment's settle rule (``WebEnvironment._settle``) is tested on a test page with a CSS
transition (fast, no site needed) and on the real sites where runs diverged before it:
TiddlyWiki's story river, read while it was still sliding tiddlers in, and Trac's search
submitted with Enter on a starved renderer (``keyboard.press`` returns before the submission
it set off has even started), read while the old page or a half-loaded new one was shown.
"""

from __future__ import annotations

import pytest

from tests.web.web_test_pages import TestPages, bid, environment_on_pages, step
from worldtrace.collectors.web.actions import parse_action
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.tasks import resolve_step, site_url_of


def text_of(observation: dict) -> str:
    """The observation's text as the corpus records it (with visibility marks)."""
    return flatten_axtree(observation["axtree"], observation["visibility"])


def act(env: WebEnvironment, observation: dict, template: str, timeout_s: float = 60) -> dict:
    """Run a task-script step (``click({link 'Garden'})``) on the page ``observation`` shows."""
    action = resolve_step(template, observation, site_url_of(observation))
    outcome = env.step(action, timeout_s=timeout_s)
    assert outcome.error is None, outcome.error
    return outcome.observation


def assert_final(env: WebEnvironment, observation: dict) -> dict:
    """The page did not change after ``observation`` was read: it was read in its final state."""
    later = env.step(parse_action("noop(1500)"), timeout_s=60).observation
    assert text_of(observation) == text_of(later)
    assert observation["settled"] is True and observation["settle_waiting"] == []
    return later


def test_a_running_transition_is_waited_for_and_an_endless_one_is_not(pages: TestPages) -> None:
    # The panel slides in over 1.2 s; when it arrives the page swaps a paragraph. Read at
    # once (before the rule), the panel was off-screen and "Leaving soon" still there.
    env = environment_on_pages(pages, start_path="/animated.html", screenshot=False)
    try:
        first = env.reset(seed=0, task=None)
        # The spinner turns forever: it does not hold the page (settling took well under the cap).
        assert first["settled"] is True and first["timing"]["settle_s"] < 2.5
        slid = step(env, f"click('{bid(first, 'button', 'Slide in')}')").observation
        text = text_of(slid)
        assert "StaticText 'Arrived'" in text and "Leaving soon" not in text
        assert f"[{bid(slid, 'button', 'Panel button')}] button 'Panel button', visible" in text
        assert slid["timing"]["settle_s"] >= 1.0  # it waited for the transition
        assert_final(env, slid)
    finally:
        env.close()


def test_a_short_timer_the_action_set_is_waited_for_and_far_ones_and_intervals_are_not(
    pages: TestPages,
) -> None:
    # The page re-renders 0.8 s after typing stops (as TiddlyWiki applies an edit after a
    # typing pause): no request, navigation or animation says so. Read before the rule, the
    # new paragraph was not there yet, and the next read showed it.
    env = environment_on_pages(pages, start_path="/debounced.html", screenshot=False)
    try:
        first = env.reset(seed=0, task=None)
        # A timer a minute away, an endless interval and an endless 100 ms poll (a chain of
        # short timers) do not hold the page: before, the poll held every read to the cap.
        assert first["settled"] is True and first["timing"]["settle_s"] < 2.5
        typed = step(env, f"fill('{bid(first, 'textbox', 'Note')}', 'milk')").observation
        assert "StaticText 'Saved: milk'" in text_of(typed)
        assert typed["settled"] is True
        assert 0.7 <= typed["timing"]["settle_s"] < 5  # it waited for the timer, not the poll
        assert_final(env, typed)
    finally:
        env.close()


def test_what_a_read_still_awaited_is_recorded_when_the_cap_cuts_it(pages: TestPages) -> None:
    env = environment_on_pages(pages, settle_cap_s=1.0, screenshot=False)
    try:
        first = env.reset(seed=0, task=None)
        stuck = step(env, f"click('{bid(first, 'link', 'Slow page')}')").observation
        assert stuck["settled"] is False
        assert set(stuck["settle_waiting"]) & {"network", "navigation", "loading"}
    finally:
        env.close()


@pytest.mark.docker
def test_tiddlywiki_is_read_after_its_story_river_stops_moving(site_images: None) -> None:
    # Opening a tiddler slides it into the story river with no request at all, so a quiet
    # network said nothing about it. TiddlyWiki animates for 400 ms; 2 s here, so that even a
    # slow click (a loaded machine) returns while the river still moves.
    env = WebEnvironment(WebConfig(site="tiddlywiki", screenshot=False, settle_cap_s=20))
    try:
        env.reset(seed=0, task=None)
        env.page.evaluate(
            "$tw.wiki.addTiddler(new $tw.Tiddler("
            "{title: '$:/config/AnimationDuration', text: '2000'}))"
        )
        observation = env.step(parse_action("noop(100)"), timeout_s=60).observation
        for template in (
            "click({link 'Garden'})",
            "click({link 'Basil'})",
            "click({link 'Household Tasks'})",
            "click({button 'new tiddler'})",
        ):
            observation = assert_final(env, act(env, observation, template))
    finally:
        env.close()


@pytest.mark.docker
@pytest.mark.timeout(900)  # a throttled renderer on a loaded machine: minutes, not seconds
def test_trac_search_submitted_with_enter_on_a_starved_renderer_shows_the_results(
    site_images: None,
) -> None:
    # Throttled twentyfold, the renderer runs Enter's form submission well after keyboard.press
    # returned; before the rule the results page was read while still loading (busy=1) or not
    # yet started. A long cap: on a loaded machine Trac itself takes seconds per page.
    env = WebEnvironment(
        WebConfig(
            site="trac",
            screenshot=False,
            settle_cap_s=60,
            navigation_timeout_s=90,
            site_startup_timeout_s=300,
        )
    )
    try:
        observation = env.reset(seed=0, task=None)
        observation = act(env, observation, "click({link 'SEARCH'})", timeout_s=120)
        observation = act(env, observation, "fill({textbox 'Search'}, 'thumbnail cache')")
        throttle = env.page.context.new_cdp_session(env.page)
        throttle.send("Emulation.setCPUThrottlingRate", {"rate": 20})
        results = env.step(parse_action("keyboard_press('Enter')"), timeout_s=120).observation
        root = text_of(results).splitlines()[0]
        assert "/search?q=thumbnail+cache" in results["url"]
        assert root.startswith("RootWebArea 'Search Results \N{EN DASH} Skylark'")
        assert "busy" not in root  # read once loaded, not while Trac still sent it
        assert "Thumbnail cache grows without bound" in text_of(results)
        assert results["settled"] is True and results["settle_waiting"] == []
    finally:
        env.close()
