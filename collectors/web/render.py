"""Web raw records → canonical observations: BrowserGym's tree text, the screenshot, facts.

The raw observation keeps the whole DevTools accessibility tree, so the text can be rendered
again (with a newer :func:`worldtrace.collectors.web.axtree.flatten_axtree`) without collecting
again.

Runs recorded before sites had stable origins reached each site on a loopback port of the
day (``http://127.0.0.1:58325/...``), so the same page read differently in every episode.
Normalizing such an episode maps that origin to the site's stable one (``http://trac.test``)
everywhere in its observations and actions; the raw records keep what was recorded.

Runs recorded since web text version 2 also keep each element's visibility (the share of it
inside the viewport); the text then marks elements at least half in view ``visible``, so a
scroll shows in the text. Older runs have no visibility and render without the marks, as they
were recorded (their bids, marked on every element, stay as recorded too).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.web.actions import action_text
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.sandboxes.sites import SITES
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.raw import RawEpisode, RawObservation

FORMAT = "axtree"

META_FIELDS = (
    "url",
    "title",
    "tabs",
    "active_tab",
    "focused_bid",
    "tree_nodes",
    "tree_truncated",
    "settled",
    "settle_waiting",
    "events",
    "timing",
)
"""Raw fields copied into ``meta`` as they are."""

_LEGACY_START = re.compile(r"^http://127\.0\.0\.1:(\d+)(?=[/?#]|$)")
"""The start page of an episode recorded on a loopback port of the day."""

_NOT_TEXT = frozenset({"screenshot_png"})
"""Raw fields that hold no URL (base64 images): left as they are."""


def legacy_origin_rewrite(site: str, start_url: str) -> Callable[[Any], Any] | None:
    """The rewrite of an old episode's loopback origin to ``site``'s stable one, or None.

    None when the episode already used the stable origin, or its site has none (not a
    registered site). The rewrite replaces ``127.0.0.1:<port>`` (also percent-encoded, as in
    a ``?referer=`` query) with the site's host in every string of a raw record; only the
    episode's own port, so a blocked request to another port keeps its address.
    """
    match = _LEGACY_START.match(start_url)
    definition = SITES.get(site)
    if match is None or definition is None:
        return None
    netloc = re.compile(r"127\.0\.0\.1(?::|%3[aA])" + match.group(1) + r"(?!\d)")

    def rewrite(value: Any) -> Any:
        if isinstance(value, str):
            return netloc.sub(definition.host, value)
        if isinstance(value, list):
            return [rewrite(item) for item in value]
        if isinstance(value, dict):
            return {key: item if key in _NOT_TEXT else rewrite(item) for key, item in value.items()}
        return value

    return rewrite


VOLATILE_PATTERNS: tuple[re.Pattern[str], ...] = (
    # datasette's footer: "Queries took 16.214ms" (the server's own measurement).
    re.compile(r"(?<=Queries took )\d+(?:\.\d+)?ms"),
    # The same measurement in datasette's JSON views: "query_ms": 8.805507999568363.
    re.compile(r'(?<="query_ms": )\d+(?:\.\d+)?(?:[eE][-+]?\d+)?'),
    # Ages counted to the second from the server's clock (Trac: "Opened 0 seconds ago"), which
    # move with the wall time the episode's steps took.
    re.compile(r"\b\d+ seconds? ago\b"),
    # The timeline link behind such an age (Trac: "timeline?from=2024-01-15T09%3A00%3A10Z
    # &precision=second"): the time of day the server's clock gave a change made in the
    # episode, seconds after the clock started. Only the time; the day stays.
    re.compile(
        r"(?<=/timeline\?from=\d{4}-\d\d-\d\dT)\d\d(?:%3A|:)\d\d(?:%3A|:)\d\d"
        r"(?=[^&'\s]*&precision=second)"
    ),
    # datasette's database summary: "3,736 rows in 6 tables, 614 rows in 10 hidden tables",
    # or "6 tables, 10 hidden tables" when its counting ran past its time limit (a loaded
    # server): the whole phrase, so both forms compare alike.
    re.compile(r"\b(?:[\d,]+ rows in )?\d+ tables?(?:, (?:[\d,]+ rows in )?\d+ hidden tables?)?"),
)
"""Spans of web text that vary by nature between identical runs (measurements a page shows)."""


class WebRenderer(Renderer):
    """The page as BrowserGym's tree text; URL, tabs, focus, events and timings in meta."""

    volatile_patterns = VOLATILE_PATTERNS

    def observation(self, raw: RawObservation) -> Observation:
        """Render the tree, decode the screenshot, and label a page that did not change."""
        meta = {key: raw.get(key) for key in META_FIELDS}
        # "Nothing changed" is something a world model must learn; say so explicitly.
        meta["noop"] = bool(raw.get("unchanged", False))
        meta["crashed"] = bool(raw.get("crashed", False))
        meta["unresponsive"] = bool(raw.get("unresponsive", False))
        png = raw.get("screenshot_png")
        return Observation(
            format=FORMAT,
            text=flatten_axtree(
                raw.get("axtree") or {},
                visibility=raw.get("visibility"),
                inline_text_boxes=bool(raw.get("inline_text_boxes", False)),
            ),
            screenshot=base64.b64decode(png) if png else None,
            meta=meta,
        )

    def action(self, action: Action) -> Action:
        """Re-render the canonical call string from the arguments."""
        return action.model_copy(update={"text": action_text(action.name, action.arguments)})

    def upgrade(self, episode: RawEpisode) -> RawEpisode:
        """Map an episode recorded on a loopback port of the day to the site's stable origin."""
        env = episode.start.env
        site = str((env.components if env else {}).get("site", ""))
        start_url = str((episode.start.observation or {}).get("url") or "")
        rewrite = legacy_origin_rewrite(site, start_url)
        if rewrite is None:
            return episode
        start = episode.start.model_copy(update={"observation": rewrite(episode.start.observation)})
        steps = tuple(
            step.model_copy(
                update={
                    "observation": rewrite(step.observation),
                    "action": Action.model_validate(rewrite(step.action.model_dump())),
                    "error": rewrite(step.error),
                }
            )
            for step in episode.steps
        )
        return episode.model_copy(update={"start": start, "steps": steps})
