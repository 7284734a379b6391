"""Task-free web collection: a seeded, weighted random walk over what the page offers.

Each step the policy lists the interactive elements of the page (links, buttons, inputs,
selects, checkboxes…), weighs them — elements it has not tried yet, and links to pages it has
not seen yet, weigh more — and acts on one: click, fill with a value that suits the field's
label, or pick an option. Sometimes it goes back, forward, scrolls, or opens, switches or
closes a tab instead. It never follows a link off the episode's site, so the walk stays on
the site it was started on. The same seed on the same site gives the same walk.

History moves stay on the site too. A tab's history begins with ``about:blank``, so
``go_back()`` from the first page of a tab leaves the site for a blank page; the walk counts,
per episode, the on-site pages it can go back (and forward) to in the active tab and goes back
only over those. If it still finds itself off the site (a new tab, a page that replaced its
own history entry), its next move is ``goto`` the episode's start page.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from worldtrace.collectors.base import (
    HistoryItem,
    Policy,
    PolicyParams,
    RawObservation,
    Weight,
    merged_weights,
)
from worldtrace.collectors.web.actions import make_action
from worldtrace.collectors.web.axtree import node_name, node_property, node_role
from worldtrace.collectors.web.tasks import WebTask, site_url_of
from worldtrace.schemas import Action

CLICKABLE_ROLES = frozenset(
    {"link", "button", "tab", "menuitem", "checkbox", "radio", "switch", "treeitem"}
)
TEXT_ROLES = frozenset({"textbox", "searchbox", "spinbutton"})
CHOICE_ROLES = frozenset({"combobox", "listbox"})

AVOIDED_NAMES = re.compile(r"\b(log ?out|sign ?out|delete|remove|destroy)\b", re.IGNORECASE)
"""Elements that end the walk's usefulness early; rarely chosen, never forbidden."""

# Plausible values by what a field's label mentions; the first pattern that matches wins.
FIELD_VALUES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"e-?mail", re.I), ("ada@example.org", "grace.hopper@example.com")),
    (re.compile(r"search|query|find|filter", re.I), ("report", "error", "2024", "admin", "page")),
    (re.compile(r"date|due|when", re.I), ("2024-05-17", "2025-01-31")),
    (re.compile(r"phone|tel", re.I), ("+44 20 7946 0958",)),
    (re.compile(r"url|link|website", re.I), ("https://example.org/docs",)),
    (re.compile(r"name|author|owner|user|reporter|assign", re.I), ("ada", "Grace Hopper", "lin")),
    (re.compile(r"number|count|amount|price|age|size|limit", re.I), ("3", "42", "100")),
    (re.compile(r"title|summary|subject", re.I), ("Crash when saving", "Update the docs")),
    (
        re.compile(r"comment|description|text|body|message|content", re.I),
        (
            "Steps to reproduce: open the page and press save.",
            "Looks good to me.",
        ),
    ),
)
DEFAULT_VALUES = ("hello", "test entry", "42")

# Weights of the ways to act; the element choice itself is weighted by novelty.
MOVES = {"element": 0.82, "scroll": 0.06, "go_back": 0.05, "go_forward": 0.02, "tabs": 0.05}

TAB_ACTIONS = frozenset({"new_tab", "tab_close", "tab_focus"})
"""Actions after which the active tab's history is another one (counted afresh)."""


class WebExploreParams(PolicyParams):
    """The parameters of :class:`ExplorePolicy` (a config's ``policy.params``)."""

    policy = "web explore policy"

    novelty: float = Field(
        default=4.0, ge=1, strict=True, description="how much more an untried element weighs"
    )
    avoided_weight: Weight = Field(
        default=0.05,
        description="what the weight of an element named like AVOIDED_NAMES (log out, delete, "
        "...) is multiplied by",
    )
    moves: dict[str, Weight] = Field(
        default_factory=lambda: dict(MOVES),
        description="relative frequency of the ways to act (keys of MOVES); the ways given "
        "replace their defaults",
    )

    @field_validator("moves")
    @classmethod
    def _known_moves(cls, moves: dict[str, float]) -> dict[str, float]:
        return merged_weights(moves, MOVES, "moves", "moves")


class ExplorePolicy(Policy[WebTask]):
    """A seeded random walk over the site's interactive elements, preferring the untried.

    Its parameters are :class:`WebExploreParams`, given as the model or as keywords
    (``ExplorePolicy(novelty=2)``).
    """

    kind = "explore"
    name = "web-explore"
    version = "2"
    """2: never goes back off the site, and returns to the start page from a blank one."""

    def __init__(self, params: WebExploreParams | None = None, /, **keywords: Any) -> None:
        self.params = WebExploreParams.given(params, keywords)
        self.novelty = self.params.novelty
        self.avoided_weight = self.params.avoided_weight
        self.moves = dict(self.params.moves)
        """Weights of the ways to act (:data:`MOVES`, with the given ones replaced)."""
        self._random = random.Random(0)
        self._tried: set[tuple[str, str, str]] = set()
        self._seen_pages: set[str] = set()
        self._start_url = ""
        self._last_url = ""
        self._back = 0
        self._forward = 0

    def reset(self, seed: int, task: WebTask | None) -> None:
        """Start a new walk with its own random stream and memory."""
        self._random = random.Random(seed)
        self._tried = set()
        self._seen_pages = set()
        self._start_url = ""
        self._last_url = ""
        self._back = 0
        self._forward = 0

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action:
        """Choose the next action on the current page."""
        url = str(observation.get("url") or "")
        here = site_url_of(observation)
        if not self._start_url and here:
            self._start_url = url  # the episode's first page on the site
        site = site_url_of({"url": self._start_url}) or _origin(history)
        self._follow_history(url, history)
        if not here or (site and here != site):
            # A blank tab or a page off the site: back onto the site's start page.
            self._back = self._forward = 0
            return make_action("goto", self._start_url or site + "/")
        page = _page_key(url)
        self._seen_pages.add(page)
        move = self._random.choices(list(self.moves), weights=list(self.moves.values()))[0]
        if move == "scroll":
            return make_action("scroll", 0, self._random.choice((-400, 300, 600)))
        if move == "go_back" and self._back > 0:
            return make_action("go_back")
        if move == "go_forward" and self._forward > 0:
            return make_action("go_forward")
        if move == "tabs":
            return self._tab_move(observation)
        candidates = self._candidates(observation, site)
        if not candidates:
            if self._back > 0:
                return make_action("go_back")
            return make_action("scroll", 0, self._random.choice((-400, 300, 600)))
        weights = [self._weight(node, page) for node, _ in candidates]
        node, options = self._random.choices(candidates, weights=weights)[0]
        self._tried.add((page, node_role(node), node_name(node)))
        return self._act_on(node, options)

    def _follow_history(self, url: str, history: Sequence[HistoryItem]) -> None:
        """Count the on-site pages behind and ahead of the active tab's page.

        Conservative: a page that replaced its own history entry counts as one more step
        back (the recovery covers that); after a tab move nothing counts until the tab
        navigates.
        """
        previous, self._last_url = self._last_url, url
        if not history:
            return
        action = history[-1].action.name
        if action in TAB_ACTIONS:
            self._back = self._forward = 0
        elif action == "go_back":
            if url != previous:
                self._back = max(0, self._back - 1)
                self._forward += 1
        elif action == "go_forward":
            if url != previous:
                self._forward = max(0, self._forward - 1)
                self._back += 1
        elif url != previous and previous:
            # A navigation (a link, a form, goto) pushed the previous page behind this one.
            if site_url_of({"url": previous}):
                self._back += 1
            self._forward = 0

    def _tab_move(self, observation: RawObservation) -> Action:
        tabs = observation.get("tabs") or []
        if len(tabs) > 1:
            if self._random.random() < 0.5:
                return make_action("tab_close")
            return make_action("tab_focus", self._random.randrange(len(tabs)))
        if self._random.random() < 0.3:
            return make_action("new_tab")
        if self._back > 0:
            return make_action("go_back")
        return make_action("scroll", 0, self._random.choice((-400, 300, 600)))

    def _candidates(
        self, observation: RawObservation, site: str
    ) -> list[tuple[dict[str, Any], list[str]]]:
        """Interactive, enabled, on-site elements, each with its options if it is a select."""
        nodes = (observation.get("axtree") or {}).get("nodes") or []
        by_id = {node.get("nodeId"): node for node in nodes}
        found = []
        for node in nodes:
            role = node_role(node)
            if node.get("browsergym_id") is None or node.get("ignored"):
                continue
            if role not in CLICKABLE_ROLES | TEXT_ROLES | CHOICE_ROLES:
                continue
            if node_property(node, "disabled") or node_property(node, "hidden"):
                continue
            url = node_property(node, "url")
            if role == "link" and url and not _on_site(str(url), site):
                continue  # the walk stays on the episode's site
            found.append((node, _option_names(node, by_id) if role in CHOICE_ROLES else []))
        return found

    def _weight(self, node: dict[str, Any], page: str) -> float:
        weight = 1.0
        if (page, node_role(node), node_name(node)) not in self._tried:
            weight *= self.novelty
        url = node_property(node, "url")
        if url and _page_key(str(url)) not in self._seen_pages:
            weight *= self.novelty
        if AVOIDED_NAMES.search(node_name(node)):
            weight *= self.avoided_weight
        return weight

    def _act_on(self, node: dict[str, Any], options: list[str]) -> Action:
        bid = node["browsergym_id"]
        role = node_role(node)
        if role in TEXT_ROLES:
            return make_action("fill", bid, self._value_for(node_name(node), role))
        if options:
            return make_action("select_option", bid, self._random.choice(options))
        return make_action("click", bid)

    def _value_for(self, label: str, role: str) -> str:
        if role == "spinbutton":
            return str(self._random.randint(1, 100))
        for pattern, values in FIELD_VALUES:
            if pattern.search(label):
                return self._random.choice(values)
        return self._random.choice(DEFAULT_VALUES)


def _option_names(node: dict[str, Any], by_id: dict[Any, dict[str, Any]]) -> list[str]:
    """Names of the options below a select (through its popup node)."""
    names: list[str] = []
    pending = list(node.get("childIds") or [])
    while pending:
        child = by_id.get(pending.pop(0))
        if child is None:
            continue
        if node_role(child) == "option":
            names.append(node_name(child))
        else:
            pending.extend(child.get("childIds") or [])
    return [name for name in names if name]


def _page_key(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def _on_site(url: str, site: str) -> bool:
    if not site:
        return False
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" == site


def _origin(history: Sequence[HistoryItem]) -> str:
    for item in reversed(history):
        origin = site_url_of(item.observation)
        if origin:
            return origin
    return ""
