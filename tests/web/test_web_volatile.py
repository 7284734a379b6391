"""The web domain's declared volatile spans: measurements and clock readings, kept narrow."""

from __future__ import annotations

from worldtrace.collectors.web.render import WebRenderer

LINK = (
    "[41] link '0 seconds ago', "
    "url='http://trac.test/timeline?from=2024-01-15T09%3A00%3A10Z&precision=second'"
)


def spans(text: str) -> list[str]:
    """The texts the renderer declares volatile in ``text``."""
    return [text[span.start : span.end] for span in WebRenderer().volatile_spans(text)]


def test_trac_s_timeline_link_masks_the_time_of_day_and_keeps_the_day() -> None:
    # Two runs stamp a ticket made in the episode seconds apart (09:00:10 vs 09:00:08).
    assert spans(LINK) == ["0 seconds ago", "09%3A00%3A10"]
    other_run = LINK.replace("09%3A00%3A10", "09%3A00%3A08").replace("0 seconds", "3 seconds")
    assert spans(other_run) == ["3 seconds ago", "09%3A00%3A08"]


def test_other_timeline_links_are_not_masked() -> None:
    # The timeline's own day links carry no time of day, and other queries are not an age.
    days = "link 'Timeline', url='http://trac.test/timeline?from=2024-01-15&daysback=30'"
    assert spans(days) == []
    assert spans("url='http://trac.test/query?from=2024-01-15T09%3A00%3A10Z'") == []
