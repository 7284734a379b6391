"""The web environment on the real sites: Trac, Datasette and TiddlyWiki in their sandboxes."""

from __future__ import annotations

from collections.abc import Iterator
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
    for url in link_urls(observation):
        parts = urlsplit(url)
        assert parts.hostname not in ("127.0.0.1", "localhost"), url
        assert parts.port is None, url  # no port of the day anywhere
        if parts.hostname and parts.hostname.endswith(".test"):
            assert url.startswith(origin + "/"), url


@pytest.fixture
def trac(site_images: None) -> Iterator[WebEnvironment]:
    env = WebEnvironment(WebConfig(site="trac"))
    yield env
    env.close()


def test_a_known_page_shows_the_expected_roles_names_and_ids(trac: WebEnvironment) -> None:
    first = trac.reset(seed=0, task=None)
    text = flatten_axtree(first["axtree"])
    assert text.startswith("RootWebArea 'Skylark'")
    assert "heading 'Welcome to Skylark'" in text
    for role, name in [("link", "NEW TICKET"), ("link", "VIEW TICKETS"), ("button", "Search")]:
        assert f"[{bid(first, role, name)}] {role} '{name}'" in text
    assert first["url"] == "http://trac.test/"
    assert first["title"] == "Skylark"
    assert "http://trac.test/wiki" in link_urls(first)
    assert_stable_links(first, "http://trac.test")


def test_fill_then_click_creates_a_ticket_in_the_tree_and_in_trac_s_database(trac):
    first = trac.reset(seed=0, task=None)
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


def test_an_invalid_bid_on_a_site_is_an_error_with_an_unchanged_next_state(trac) -> None:
    first = trac.reset(seed=0, task=None)
    outcome = step(trac, "click('a999')")
    assert outcome.error == "no element with bid 'a999' on the page"
    assert outcome.observation["unchanged"] is True
    assert flatten_axtree(outcome.observation["axtree"]) == flatten_axtree(first["axtree"])


def test_reset_restores_the_site_s_data(trac: WebEnvironment) -> None:
    first = trac.reset(seed=0, task=None)
    form = step(trac, f"click('{bid(first, 'link', 'NEW TICKET')}')").observation
    step(trac, f"fill('{bid(form, 'textbox', 'Summary:')}', 'Only in the first episode')")
    step(trac, f"click('{bid(form, 'button', 'Create ticket')}')")
    query = "select count(*) as n from ticket where summary='Only in the first episode'"
    assert trac.site.read_data(query) == [{"n": 1}]  # type: ignore[union-attr]
    trac.reset(seed=1, task=None)
    assert trac.site.read_data(query) == [{"n": 0}]  # type: ignore[union-attr]
    assert trac.site.read_data("select count(*) as n from ticket") == [{"n": 36}]  # type: ignore[union-attr]


# One site by default; TiddlyWiki, whose one URL makes the walk count states instead of pages,
# in a full run (tests/full_run.py).
@pytest.mark.parametrize("site", sample_or_all(["datasette", "tiddlywiki"], ["datasette"]))
def test_the_exploring_policy_stays_on_its_site_over_a_long_walk(site_images, site: str) -> None:
    env = WebEnvironment(WebConfig(site=site, screenshot=False))
    policy = ExplorePolicy()
    try:
        observation = env.reset(seed=3, task=None)
        origin = env.site.origin  # type: ignore[union-attr]
        assert origin == f"http://{site}.test"
        policy.reset(3, None)
        history: list[HistoryItem] = []
        states = set()
        for _ in range(40):
            action = policy.act(observation, history)
            outcome = env.step(action, timeout_s=60)
            observation = outcome.observation
            history.append(HistoryItem(action, observation, outcome.error))
            for tab in observation["tabs"]:
                assert tab["url"] == "about:blank" or tab["url"].startswith(origin), tab
            assert_stable_links(observation, origin)
            assert not [e for e in observation["events"]["blocked"] if "navigation" in e["reason"]]
            states.add((urlsplit(observation["url"]).path, flatten_axtree(observation["axtree"])))
        # A walk that explores: many different states (TiddlyWiki is one URL, so count states
        # rather than pages), and most actions did something.
        assert len(states) >= 10, len(states)
        assert sum(item.error is None for item in history) >= 30
    finally:
        env.close()


def test_the_same_seed_gives_the_same_walk(site_images) -> None:
    walks = []
    for _ in range(2):
        env = WebEnvironment(WebConfig(site="datasette", screenshot=False))
        policy = ExplorePolicy()
        try:
            observation = env.reset(seed=11, task=None)
            policy.reset(11, None)
            history: list[HistoryItem] = []
            for _ in range(8):
                action = policy.act(observation, history)
                outcome = env.step(action, timeout_s=60)
                observation = outcome.observation
                history.append(HistoryItem(action, observation, outcome.error))
            walks.append([item.action.text for item in history])
        finally:
            env.close()
    assert walks[0] == walks[1]
