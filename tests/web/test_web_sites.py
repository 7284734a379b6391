"""The web environment on the real sites: Trac, Datasette and TiddlyWiki in their sandboxes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest

from tests.full_run import sample_or_all
from tests.web.web_test_pages import bid, step
from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.web.axtree import flatten_axtree, node_property
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.explore import ExplorePolicy

pytestmark = pytest.mark.docker


def link_urls(observation: dict) -> list[str]:
    """Every URL the page's tree shows (links, frames, the document itself)."""
    urls = [node_property(node, "url") for node in observation["axtree"]["nodes"]]
    return [str(url) for url in urls if url]


def assert_stable_links(observation: dict, origin: str) -> None:
    """The app built every link on the stable origin (Trac makes absolute ones from Host)."""
    assert_stable_urls(link_urls(observation), origin)


def assert_stable_urls(urls: list[str], origin: str) -> None:
    """No URL names the machine or a port; every site URL is on ``origin``."""
    for url in urls:
        parts = urlsplit(url)
        assert parts.hostname not in ("127.0.0.1", "localhost"), url
        assert parts.port is None, url  # no port of the day anywhere
        if parts.hostname and parts.hostname.endswith(".test"):
            assert url.startswith(origin + "/"), url


class SharedTrac:
    """The module's one Trac environment, and its start page while no test has changed it.

    A browser network holds one site at a time, so the module's Trac tests share one
    environment: the tests that only read take its start page as reset (one reset for them
    all); a test that changes the site takes that fresh reset for itself, and the next test
    gets a new one. A test that starts another environment closes this one first.
    """

    def __init__(self) -> None:
        self.env = WebEnvironment(WebConfig(site="trac", screenshot=False))
        self.start: dict | None = None

    def fresh_start(self) -> dict:
        """The start page of a reset no test has changed since (reset now if there is none)."""
        if self.start is None:
            self.start = self.env.reset(seed=0, task=None)
        return self.start

    def close(self) -> None:
        self.start = None
        self.env.close()


@pytest.fixture(scope="module")
def shared_trac(site_images: None) -> Iterator[SharedTrac]:
    shared = SharedTrac()
    yield shared
    shared.close()


@pytest.fixture
def trac_read(shared_trac: SharedTrac) -> tuple[WebEnvironment, dict]:
    """Trac and its start page, for a test that only reads (its actions change nothing)."""
    return shared_trac.env, shared_trac.fresh_start()


@pytest.fixture
def trac_changed(shared_trac: SharedTrac) -> Iterator[tuple[WebEnvironment, dict]]:
    """A freshly reset Trac and its start page, for a test that changes the site."""
    start = shared_trac.fresh_start()
    shared_trac.start = None  # whatever the test does, the next one gets a new reset
    yield shared_trac.env, start


@pytest.fixture
def no_trac(shared_trac: SharedTrac) -> None:
    """The shared Trac closed, for a test that starts an environment of its own."""
    shared_trac.close()


def test_a_known_page_shows_the_expected_roles_names_and_ids(trac_read) -> None:
    _, first = trac_read
    text = flatten_axtree(first["axtree"])
    assert text.startswith("RootWebArea 'Skylark'")
    assert "heading 'Welcome to Skylark'" in text
    for role, name in [("link", "NEW TICKET"), ("link", "VIEW TICKETS"), ("button", "Search")]:
        assert f"[{bid(first, role, name)}] {role} '{name}'" in text
    assert first["url"] == "http://trac.test/"
    assert first["title"] == "Skylark"
    assert "http://trac.test/wiki" in link_urls(first)
    assert_stable_links(first, "http://trac.test")


def test_an_invalid_bid_on_a_site_is_an_error_with_an_unchanged_next_state(trac_read) -> None:
    trac, first = trac_read
    outcome = step(trac, "click('a999')")
    assert outcome.error == "no element with bid 'a999' on the page"
    assert outcome.observation["unchanged"] is True
    assert flatten_axtree(outcome.observation["axtree"]) == flatten_axtree(first["axtree"])


def test_fill_then_click_creates_a_ticket_in_the_tree_and_in_trac_s_database(trac_changed):
    trac, first = trac_changed
    form = step(trac, f"click('{bid(first, 'link', 'NEW TICKET')}')").observation
    filled = step(trac, f"fill('{bid(form, 'textbox', 'Summary:')}', 'Thumbnails are blurry')")
    assert filled.error is None
    assert "value='Thumbnails are blurry'" in flatten_axtree(filled.observation["axtree"])
    assert trac.site.read_data("select id from ticket where summary='Thumbnails are blurry'") == []  # type: ignore[union-attr]
    created = step(trac, f"click('{bid(form, 'button', 'Create ticket')}')")
    assert created.error is None
    text = flatten_axtree(created.observation["axtree"])
    rows = trac.site.read_data(  # type: ignore[union-attr]
        "select id, status, reporter from ticket where summary='Thumbnails are blurry'"
    )
    assert len(rows) == 1 and rows[0]["status"] == "new"
    # Trac answers the form with a redirect to an absolute URL made from the Host header.
    assert created.observation["url"] == f"http://trac.test/ticket/{rows[0]['id']}#ticket"
    assert_stable_links(created.observation, "http://trac.test")
    assert "Thumbnails are blurry" in text


def test_reset_restores_the_site_s_data(trac_changed) -> None:
    trac, first = trac_changed
    form = step(trac, f"click('{bid(first, 'link', 'NEW TICKET')}')").observation
    step(trac, f"fill('{bid(form, 'textbox', 'Summary:')}', 'Only in the first episode')")
    step(trac, f"click('{bid(form, 'button', 'Create ticket')}')")
    query = "select count(*) as n from ticket where summary='Only in the first episode'"
    assert trac.site.read_data(query) == [{"n": 1}]  # type: ignore[union-attr]
    trac.reset(seed=1, task=None)
    assert trac.site.read_data(query) == [{"n": 0}]  # type: ignore[union-attr]
    assert trac.site.read_data("select count(*) as n from ticket") == [{"n": 36}]  # type: ignore[union-attr]


WALK_SEED = 3
WALK_STEPS = 40


@dataclass(frozen=True)
class WalkStep:
    """What the tests read of one step of a walk (an observation's tree is large)."""

    action: str
    error: str | None
    url: str
    tabs: list[str]
    links: list[str]
    blocked: list[dict]
    text: str


@dataclass(frozen=True)
class Walk:
    """An exploring walk on a freshly reset site."""

    origin: str
    start: str
    """The start page's text."""
    steps: list[WalkStep]


def walk(site: str, seed: int, steps: int) -> Walk:
    """An exploring walk of ``steps`` steps on a freshly reset ``site``."""
    env = WebEnvironment(WebConfig(site=site, screenshot=False))
    policy = ExplorePolicy()
    try:
        observation = env.reset(seed=seed, task=None)
        origin = env.site.origin  # type: ignore[union-attr]
        start = flatten_axtree(observation["axtree"])
        policy.reset(seed, None)
        history: list[HistoryItem] = []
        walked = []
        for _ in range(steps):
            action = policy.act(observation, history)
            outcome = env.step(action, timeout_s=60)
            observation = outcome.observation
            history.append(HistoryItem(action, observation, outcome.error))
            walked.append(
                WalkStep(
                    action.text,
                    outcome.error,
                    observation["url"],
                    [tab["url"] for tab in observation["tabs"]],
                    link_urls(observation),
                    observation["events"]["blocked"],
                    flatten_axtree(observation["axtree"]),
                )
            )
        return Walk(origin, start, walked)
    finally:
        env.close()


@pytest.fixture(scope="module")
def walk_cache(site_images: None) -> dict[str, Walk]:
    return {}


@pytest.fixture
def long_walks(walk_cache, no_trac: None) -> dict[str, Walk]:
    """The long walk of each site (seed :data:`WALK_SEED`), walked once for the module when
    a test first asks (see :func:`long_walk`)."""
    return walk_cache


def long_walk(walks: dict[str, Walk], site: str) -> Walk:
    """The long walk of ``site``, walked on first use."""
    if site not in walks:
        walks[site] = walk(site, WALK_SEED, WALK_STEPS)
    return walks[site]


# One site by default; TiddlyWiki, whose one URL makes the walk count states instead of pages,
# in a full run (tests/full_run.py).
@pytest.mark.parametrize("site", sample_or_all(["datasette", "tiddlywiki"], ["datasette"]))
def test_the_exploring_policy_stays_on_its_site_over_a_long_walk(long_walks, site: str) -> None:
    walked = long_walk(long_walks, site)
    origin = walked.origin
    assert origin == f"http://{site}.test"
    assert len(walked.steps) == WALK_STEPS
    states = set()
    for taken in walked.steps:
        for url in taken.tabs:
            assert url == "about:blank" or url.startswith(origin), (taken.action, url)
        assert_stable_urls(taken.links, origin)
        assert not [e for e in taken.blocked if "navigation" in e["reason"]], taken.action
        states.add((urlsplit(taken.url).path, taken.text))
    # A walk that explores: many different states (TiddlyWiki is one URL, so count states
    # rather than pages), and most actions did something.
    assert len(states) >= 10, len(states)
    assert sum(taken.error is None for taken in walked.steps) >= 30


def test_the_same_seed_gives_the_same_walk(long_walks) -> None:
    # A second walk of the long walk's seed on a fresh site takes its first steps again.
    first = long_walk(long_walks, "datasette")
    again = walk("datasette", WALK_SEED, 8)
    # The same page first, or the walks cannot agree: Datasette drops its start page's row
    # counts, and orders its tables otherwise, when a count takes over 10 ms (a loaded
    # machine), which moves every bid after them.
    assert again.start == first.start
    assert [taken.action for taken in again.steps] == [taken.action for taken in first.steps[:8]]
