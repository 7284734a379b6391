"""The web environment in a real Chromium, on pages written for these tests.

The awkward cases live here (dialogs, pop-ups, nested iframes, downloads, blocked requests, a
page that never loads, a crashed renderer, a very large page); the real sites are exercised
in tests/web/test_web_sites.py.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from tests.web.web_test_pages import (
    TestPages,
    bid,
    environment_on_pages,
    find_bid,
    step,
)
from worldtrace.collectors.web import WebCollector
from worldtrace.collectors.web.actions import parse_action
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.environment import WATCHDOG_GRACE_S, WebEnvironment


@pytest.fixture
def env(pages: TestPages) -> Iterator[WebEnvironment]:
    """The test pages, without screenshots: the tests given it read trees, events and tabs.

    The tests of pages that load, hang or crash oddly observe them with the defaults
    (screenshots on), so that taking one is part of what must not wait.
    """
    environment = environment_on_pages(pages, screenshot=False)
    yield environment
    environment.close()


@pytest.fixture
def env_with_screenshots(pages: TestPages) -> Iterator[WebEnvironment]:
    environment = environment_on_pages(pages)
    yield environment
    environment.close()


def test_observation_has_roles_names_ids_and_page_facts(
    env_with_screenshots: WebEnvironment,
) -> None:
    env = env_with_screenshots
    first = env.reset(seed=0, task=None)
    text = flatten_axtree(first["axtree"])
    assert text.startswith("RootWebArea 'Test home'")
    assert f"[{bid(first, 'link', 'Order form')}] link 'Order form'" in text
    assert f"[{bid(first, 'button', 'Show alert')}] button 'Show alert'" in text
    assert first["title"] == "Test home"
    assert first["url"].endswith("/index.html")
    assert [tab["title"] for tab in first["tabs"]] == ["Test home"]
    assert first["screenshot_png"]
    assert set(first["timing"]) >= {"action_s", "settle_s", "extract_s", "screenshot_s"}
    # The page keeps no trace of the marking in its own ARIA attributes.
    assert "browsergym_id" not in env.page.content()


def test_iframe_content_has_prefixed_ids_and_can_be_acted_on(env: WebEnvironment) -> None:
    first = env.reset(seed=0, task=None)
    inner = bid(first, "button", "Inner button")
    deep = bid(first, "link", "Deep link")
    assert inner[0] == "a" and inner[1:].isdigit()  # first frame: prefix "a"
    assert deep.startswith("aa") and deep[2:].isdigit()  # a frame inside it: "aa"
    pressed = step(env, f"click('{inner}')")
    assert pressed.error is None
    assert find_bid(pressed.observation["axtree"], "button", "Pressed") == inner


def test_ids_are_stable_across_steps_on_the_same_page(env: WebEnvironment) -> None:
    first = env.reset(seed=0, task=None)
    before = {node["browsergym_id"] for node in first["axtree"]["nodes"] if "browsergym_id" in node}
    after = step(env, f"click('{bid(first, 'button', 'Increment')}')").observation
    assert "Count: 1" in flatten_axtree(after["axtree"]) or "StaticText '1'" in flatten_axtree(
        after["axtree"]
    )
    for role, name in [("link", "Order form"), ("button", "Ask"), ("button", "Inner button")]:
        assert bid(after, role, name) == bid(first, role, name)
    again = {node["browsergym_id"] for node in after["axtree"]["nodes"] if "browsergym_id" in node}
    assert before <= again


def test_fill_select_and_click_submit_a_form(env: WebEnvironment) -> None:
    first = env.reset(seed=0, task=None)
    form = step(env, f"click('{bid(first, 'link', 'Order form')}')").observation
    assert form["title"] == "Order form"
    filled = step(env, f"fill('{bid(form, 'textbox', 'Name')}', 'Ada Lovelace')").observation
    assert "textbox 'Name' value='Ada Lovelace'" in flatten_axtree(filled["axtree"])
    chosen = step(env, f"select_option('{bid(form, 'combobox', '')}', 'blue')").observation
    assert "value='blue'" in flatten_axtree(chosen["axtree"])
    done = step(env, f"click('{bid(form, 'button', 'Send order')}')")
    assert done.error is None
    assert done.observation["title"] == "Thanks"
    assert "Order for Ada Lovelace in blue" in flatten_axtree(done.observation["axtree"])
    back = step(env, "go_back()").observation
    assert back["title"] == "Order form"


def test_enter_in_a_form_is_observed_on_the_page_it_submits_to(env: WebEnvironment) -> None:
    # The key press returns before the navigation starts; settling must wait for it.
    first = env.reset(seed=0, task=None)
    form = step(env, f"click('{bid(first, 'link', 'Order form')}')").observation
    step(env, f"fill('{bid(form, 'textbox', 'Name')}', 'Grace')")
    submitted = step(env, "keyboard_press('Enter')").observation
    assert submitted["title"] == "Thanks"
    assert "Order for Grace in red" in flatten_axtree(submitted["axtree"])


def test_an_invalid_bid_is_an_action_error_and_leaves_the_page_unchanged(env: WebEnvironment):
    first = env.reset(seed=0, task=None)
    outcome = step(env, "click('99999')")
    assert outcome.error == "no element with bid '99999' on the page"
    assert outcome.observation["unchanged"] is True
    assert flatten_axtree(outcome.observation["axtree"]) == flatten_axtree(first["axtree"])
    changed = step(env, f"click('{bid(first, 'button', 'Increment')}')")
    assert changed.observation["unchanged"] is False


def test_off_site_requests_and_navigation_are_blocked_and_recorded(env: WebEnvironment):
    first = env.reset(seed=0, task=None)
    blocked = first["events"]["blocked"]
    assert {
        "url": "http://tracker.example.org/pixel.png",
        "reason": "off-site request",
        "type": "image",
    } in blocked
    for url in ["http://example.com/", "file:///etc/passwd"]:
        outcome = step(env, f"goto('{url}')")
        assert outcome.error is not None and "blocked" in outcome.error
        assert outcome.observation["events"]["blocked"][0]["url"] == url
        assert outcome.observation["url"] == first["url"]
    # A link off the site: the request is refused, and Chromium shows its error page.
    clicked = step(env, f"click('{bid(first, 'link', 'Elsewhere')}')").observation
    assert clicked["events"]["blocked"] == [
        {"url": "http://example.com/elsewhere", "reason": "off-site request", "type": "document"}
    ]
    assert clicked["url"] == "chrome-error://chromewebdata/"


def test_dialogs_are_answered_and_recorded(pages: TestPages) -> None:
    for answer, shown in [("accept", "yes"), ("dismiss", "no")]:
        env = environment_on_pages(pages, dialogs=answer, screenshot=False)
        try:
            first = env.reset(seed=0, task=None)
            outcome = step(env, f"click('{bid(first, 'button', 'Ask')}')")
            assert outcome.observation["events"]["dialogs"] == [
                {"type": "confirm", "message": "Sure?", "answer": answer}
            ]
            assert f"StaticText '{shown}'" in flatten_axtree(outcome.observation["axtree"])
        finally:
            env.close()


def test_a_pop_up_becomes_the_active_tab_and_tabs_can_be_switched_and_closed(env):
    first = env.reset(seed=0, task=None)
    popped = step(env, f"click('{bid(first, 'button', 'Open pop-up')}')").observation
    assert popped["title"] == "Order form"
    assert [tab["title"] for tab in popped["tabs"]] == ["Test home", "Order form"]
    assert popped["active_tab"] == 1
    assert popped["events"]["popups"]
    focused = step(env, "tab_focus(0)").observation
    assert focused["title"] == "Test home" and focused["active_tab"] == 0
    assert step(env, "tab_focus(5)").error == "no tab 5: 2 tab(s) open"
    closed = step(env, "tab_close()").observation
    assert [tab["title"] for tab in closed["tabs"]] == ["Order form"]
    opened = step(env, "new_tab()").observation
    assert len(opened["tabs"]) == 2 and opened["url"] == "about:blank"


def test_a_download_is_recorded(env: WebEnvironment) -> None:
    first = env.reset(seed=0, task=None)
    outcome = step(env, f"click('{bid(first, 'link', 'Get the report')}')")
    assert outcome.error is None
    downloads = outcome.observation["events"]["downloads"]
    assert [d["filename"] for d in downloads] == ["download.txt"] or [
        d["filename"] for d in downloads
    ] == ["report.txt"]


def test_a_page_that_never_finishes_loading_is_observed_at_the_cap(pages: TestPages) -> None:
    env = environment_on_pages(pages, settle_cap_s=1.5, navigation_timeout_s=3)
    try:
        first = env.reset(seed=0, task=None)
        outcome = step(env, f"click('{bid(first, 'link', 'Slow page')}')")
        observation = outcome.observation
        assert observation["settled"] is False
        assert observation["timing"]["settle_s"] < 5
        assert "Still loading" in flatten_axtree(observation["axtree"])
    finally:
        env.close()


def kill_renderers_of_this_process() -> int:
    """SIGKILL the Chromium renderer processes this test process started (as the OOM killer
    would); DevTools' Page.crash cannot be used, its reply never comes."""
    parents = {}
    renderers = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()  # noqa: SIM115
            command = open(f"/proc/{entry}/cmdline", "rb").read()  # noqa: SIM115
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        if b"--type=renderer" in command:
            renderers.append(int(entry))
    killed = 0
    for pid in renderers:
        ancestor = parents.get(pid)
        while ancestor and ancestor != os.getpid():
            ancestor = parents.get(ancestor)
        if ancestor == os.getpid():
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def test_a_crashed_renderer_ends_the_episode_with_a_reason(
    env_with_screenshots: WebEnvironment,
) -> None:
    env = env_with_screenshots
    env.reset(seed=0, task=None)
    assert kill_renderers_of_this_process() > 0
    outcome = step(env, "noop(200)")
    assert outcome.truncated is True
    assert outcome.error == "renderer crashed"
    assert outcome.observation["crashed"] is True


def test_a_page_stuck_in_javascript_ends_the_episode_instead_of_hanging(pages) -> None:
    env = environment_on_pages(pages, start_path="/hang.html", settle_cap_s=2)
    try:
        first = env.reset(seed=0, task=None)
        started = time.monotonic()
        outcome = step(env, f"click('{bid(first, 'button', 'Run forever')}')")
        assert time.monotonic() - started < 20
        assert outcome.truncated is True
        assert outcome.error == "page unresponsive: its JavaScript was busy for 2.0 s"
        assert outcome.observation["unresponsive"] is True
    finally:
        env.close()


def test_a_very_large_page_is_observed_and_capped(pages: TestPages) -> None:
    env = environment_on_pages(pages, start_path="/large?rows=3000", max_tree_nodes=5000)
    try:
        first = env.reset(seed=0, task=None)
        assert first["tree_nodes"] > 5000
        assert first["tree_truncated"] is True
        assert len(first["axtree"]["nodes"]) == 5000
        assert flatten_axtree(first["axtree"]).startswith("RootWebArea 'Large'")
    finally:
        env.close()


def test_report_infeasible_ends_the_episode_and_messages_are_recorded(env: WebEnvironment):
    env.reset(seed=0, task=None)
    said = step(env, "send_msg_to_user('Found it')")
    assert said.observation["events"]["messages"] == [
        {"action": "send_msg_to_user", "text": "Found it"}
    ]
    assert said.terminated is False
    assert step(env, "report_infeasible('no such page')").terminated is True


@pytest.mark.timeout(90)  # the old collector waited forever here: fail instead of hanging
def test_a_frame_that_cannot_be_read_is_left_out_instead_of_waited_for(pages) -> None:
    env = environment_on_pages(pages, start_path="/file_iframe.html")
    try:
        started = time.monotonic()
        first = env.reset(seed=0, task=None)
        assert time.monotonic() - started < 15
        text = flatten_axtree(first["axtree"])
        assert "Iframe 'Host file'" in text
        assert "StaticText 'Inside the frame'" in text  # the readable frame is still read
        started = time.monotonic()
        outcome = env.step(parse_action(f"click('{bid(first, 'button', 'Click me')}')"), 10)
        assert time.monotonic() - started < 10
        assert outcome.error is None and outcome.truncated is False
        assert "button 'Clicked'" in flatten_axtree(outcome.observation["axtree"])
    finally:
        env.close()


@pytest.mark.timeout(90)
def test_a_step_blocked_in_the_page_ends_in_time_and_the_next_episode_works(pages) -> None:
    # The key press never returns (the page's key handler never does): no Playwright timeout
    # covers it, so the watchdog kills the browser once the step overruns.
    env = environment_on_pages(pages, start_path="/stuck_keys.html")
    try:
        env.reset(seed=0, task=None)
        started = time.monotonic()
        outcome = env.step(parse_action("keyboard_press('a')"), timeout_s=2)
        took = time.monotonic() - started
        assert took < 2 + WATCHDOG_GRACE_S + 2, took
        assert outcome.truncated is True
        assert outcome.error == "step timed out: still running 2 s after the action started"
        assert outcome.observation["unresponsive"] is True
        # The same thread's next episode gets a new browser.
        again = env.reset(seed=1, task=None)
        assert again["title"] == "Stuck keys"
        assert step(env, "scroll(0, 100)").error is None
    finally:
        env.close()


@pytest.mark.timeout(90)
def test_interrupt_makes_a_blocked_step_return_at_once(pages) -> None:
    env = environment_on_pages(pages, start_path="/stuck_keys.html")
    try:
        env.reset(seed=0, task=None)
        # As on SIGTERM: the signal handler (another thread here) interrupts the domain.
        timer = threading.Timer(0.5, WebCollector().interrupt)
        timer.start()
        started = time.monotonic()
        outcome = env.step(parse_action("keyboard_press('a')"), timeout_s=60)
        took = time.monotonic() - started
        timer.join()
        assert took < 0.5 + 2, took
        assert outcome.truncated is True
        assert outcome.error == "interrupted: the run was asked to stop"
        assert env.reset(seed=1, task=None)["title"] == "Stuck keys"
    finally:
        env.close()
