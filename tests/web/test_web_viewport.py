"""What the text shows of the viewport, the page's clock, and the declared volatile spans."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.web.web_test_pages import step
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.render import WebRenderer

pytestmark = pytest.mark.docker


@pytest.fixture
def trac(site_images: None) -> Iterator[WebEnvironment]:
    """Trac in its sandbox, default settings."""
    env = WebEnvironment(WebConfig(site="trac"))
    yield env
    env.close()


def _visible_lines(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if ", visible" in line}


def test_a_scroll_changes_the_text_as_it_changes_the_screenshot(trac: WebEnvironment) -> None:
    renderer = WebRenderer()
    trac.reset(seed=0, task=None)
    # A report lists every ticket: a page several viewports long.
    top = step(trac, "goto('http://trac.test/report/1')").observation
    down = step(trac, "scroll(0, 1500)").observation
    assert top["screenshot_png"] != down["screenshot_png"]
    top_text = renderer.observation(top).text
    down_text = renderer.observation(down).text
    # Before, the tree listed the whole page, so the text of a scroll was a no-op.
    assert down_text != top_text
    assert down["unchanged"] is False
    # The page's first heading went out of view (it is still in the tree, no longer marked);
    # rows further down came into it.
    heading = next(line for line in _visible_lines(top_text) if " heading '" in line)
    assert heading not in _visible_lines(down_text)
    assert heading.replace(", visible", "") in {line.strip() for line in down_text.splitlines()}
    assert _visible_lines(down_text) - _visible_lines(top_text)
    # Scrolling back shows the first view again, word for word.
    back = step(trac, "scroll(0, -1500)").observation
    assert renderer.observation(back).text == top_text


def test_each_episode_s_page_clock_starts_at_the_configured_instant(site_images: None) -> None:
    instant = datetime(2023, 6, 1, 12, 0, tzinfo=UTC)
    env = WebEnvironment(WebConfig(site="trac", screenshot=False, clock_start=instant))
    try:
        for seed in (0, 1):
            env.reset(seed=seed, task=None)
            now_ms = env.page.evaluate("() => Date.now()")
            elapsed_s = now_ms / 1000 - instant.timestamp()
            # The clock starts at the instant and then runs: seconds of page loading, no more.
            assert 0 <= elapsed_s < 60, elapsed_s
        assert env.describe().components["clock_start"] == "2023-06-01T12:00:00+00:00"
    finally:
        env.close()


def test_datasette_s_query_time_is_a_declared_volatile_span(site_images: None) -> None:
    env = WebEnvironment(WebConfig(site="datasette", screenshot=False))
    try:
        env.reset(seed=0, task=None)
        raw = step(env, "goto('http://datasette.test/library/books')").observation
        observation = WebRenderer().marked_observation(raw)
        spans = [observation.text[span.start : span.end] for span in observation.volatile]
        assert any(span.endswith("ms") and span[0].isdigit() for span in spans), spans
        assert "Queries took" in observation.text
    finally:
        env.close()
