"""Scripted web tasks: BrowserGym action sequences written against what the page shows.

Element ids are assigned when a page is read, so a script cannot know them in advance. A
step is therefore a BrowserGym action string in which an element may be named by its role
and accessible name, in braces, exactly as it appears in the tree text::

    click({link 'View Tickets'})
    fill({textbox 'Summary:'}, 'Crash when saving a report')
    fill({textbox 'field value' #-1}, 'Sam')
    goto('{site}/newticket')

:class:`WebScriptPolicy` replaces ``{role 'name'}`` with the element's bid in the current
observation (an exact name match, else the first name starting with it; ``#n`` picks the
n-th such element in the order the tree text prints them, ``#-1`` the last) and ``{site}`` with
the site's address, then parses the result with
:func:`worldtrace.collectors.web.actions.parse_action`,
so the recorded action is a plain BrowserGym action on a real bid. A step whose element is
not on the page ends the script with ``report_infeasible`` saying which element was missing.

A task's ``check`` is either a query on the site's own data (:class:`DataCheck`, through
``RunningSite.read_data``) with the rows it must return, or, for tasks that only read, what
the last page must show (:class:`PageCheck`). The check's result is the episode's reward.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worldtrace.collectors.base import HistoryItem, Policy, RawObservation, Task
from worldtrace.collectors.web.actions import make_action, parse_action
from worldtrace.collectors.web.axtree import find_bids
from worldtrace.schemas import Action

ELEMENT_REFERENCE = re.compile(
    r"""\{([A-Za-z]+) (?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")(?: #(-?[1-9][0-9]*))?\}"""
)
"""``{role 'name'}`` or ``{role "name"}`` in a step template, optionally ``#n``: the n-th
match in printed order (``#-1``: the last)."""


@dataclass(frozen=True)
class DataCheck:
    """A query on the site's data (``RunningSite.read_data``) and what it must return."""

    query: str
    expect: tuple[dict[str, Any], ...]
    """Rows that must all be among the query's result; a row matches when it has every
    key/value of the expected row (values compared as strings). Empty: no rows at all."""

    def passes(self, rows: list[dict[str, Any]]) -> bool:
        """Return True if ``rows`` satisfy the expectation."""
        if not self.expect:
            return not rows
        return all(any(_row_has(row, wanted) for row in rows) for wanted in self.expect)


@dataclass(frozen=True)
class PageCheck:
    """What the last page must show, for tasks that only read (navigation, search)."""

    url_contains: str | None = None
    text_contains: str | None = None
    """Searched in the page's tree text (BrowserGym format)."""

    def passes(self, url: str, text: str) -> bool:
        """Return True if the page's URL and tree text satisfy the check."""
        return (self.url_contains is None or self.url_contains in url) and (
            self.text_contains is None or self.text_contains in text
        )


def _row_has(row: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(key in row and str(row[key]) == str(value) for key, value in wanted.items())


@dataclass(frozen=True)
class WebTask(Task):
    """A scripted task on one site."""

    site: str = ""
    category: str = "navigation"
    start_path: str | None = None
    steps: tuple[str, ...] = ()
    check: DataCheck | PageCheck | None = None


CATEGORIES = ("navigation", "search", "form", "edit", "create")
"""What tasks cover; every site has tasks in several of them."""


class ElementMissing(LookupError):
    """A step names an element the current page does not have."""


def resolve_step(template: str, observation: RawObservation, site_url: str) -> Action:
    """Turn one step template into a parsed action on the current page."""

    def bid_for(match: re.Match[str]) -> str:
        role = match.group(1)
        name = match.group(2) if match.group(2) is not None else match.group(3)
        name = re.sub(r"\\(.)", r"\1", name)
        position = int(match.group(4) or 1)
        found = find_bids(observation.get("axtree") or {}, role, name)
        index = position - 1 if position > 0 else position
        if not -len(found) <= index < len(found):
            raise ElementMissing(f"{role} {name!r}" + (f" #{position}" if match.group(4) else ""))
        return repr(found[index])

    text = ELEMENT_REFERENCE.sub(bid_for, template)
    return parse_action(text.replace("{site}", site_url.rstrip("/")))


def site_url_of(observation: RawObservation) -> str:
    """The scheme, host and port of the page in ``observation``."""
    match = re.match(r"^(https?://[^/]+)", observation.get("url") or "")
    return match.group(1) if match else ""


class WebScriptPolicy(Policy[WebTask]):
    """Plays a :class:`WebTask`'s steps, finding each named element on the current page."""

    kind = "script"
    name = "web-task-script"

    def __init__(self) -> None:
        self._steps: tuple[str, ...] = ()
        self._site_url = ""
        self._done = False

    def reset(self, seed: int, task: WebTask | None) -> None:
        """Load the task's steps; a task without steps is an error."""
        if task is None or not task.steps:
            raise ValueError(f"the script policy needs a web task with steps, got {task!r}")
        self._steps = task.steps
        self._site_url = ""
        self._done = False

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next step on the current page, or None at the end of the script."""
        if self._done or len(history) >= len(self._steps):
            return None
        if not self._site_url:
            self._site_url = site_url_of(observation)
        try:
            return resolve_step(self._steps[len(history)], observation, self._site_url)
        except ElementMissing as missing:
            self._done = True
            return make_action("report_infeasible", f"the page has no {missing.args[0]}")
