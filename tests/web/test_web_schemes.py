"""``goto`` stays on the site: pages the site never served are refused (issue 24).

A world-model corpus of a site has little use for pages an agent writes itself, and a
``data:`` page it opens runs any script it likes. ``goto`` therefore refuses ``data:``,
``blob:``, ``javascript:``, ``file:`` and every ``about:`` page but ``about:blank``, as an
action error recorded like any off-site URL. Pages the site's own script tries to open on
``data:``, ``file:`` and ``about:`` are refused by Chromium in the top frame; inline images
(``data:``) keep loading. What Playwright cannot see is not blocked: a ``blob:`` page the
site's own script made, and ``data:`` iframes (docs/web.md).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.web.web_test_pages import TestPages, bid, environment_on_pages, step
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.environment import WebEnvironment

RUNS = "<title>ran</title><script>document.title = 'ran'</script>"
"""A page that, if it ever runs, says so in its title."""


@pytest.fixture
def env(pages: TestPages) -> Iterator[WebEnvironment]:
    environment = environment_on_pages(pages, start_path="/schemes.html", screenshot=False)
    yield environment
    environment.close()


def assert_still_on_the_page(observation: dict, start: dict) -> None:
    """Nothing ran: the tab shows the site's page it showed before, title and all."""
    assert observation["url"] == start["url"]
    assert observation["title"] == "Schemes"
    assert [tab["title"] for tab in observation["tabs"]] == ["Schemes"]


def test_goto_refuses_pages_the_site_never_served(env: WebEnvironment) -> None:
    start = env.reset(seed=0, task=None)
    # A blob: URL that really exists: made by the site's own page.
    step(env, f"click('{bid(start, 'button', 'Make blob')}')")
    blob = env.page.inner_text("#blob")
    assert blob.startswith(f"blob:{start['url'].split('/schemes.html')[0]}/")
    refused = {
        f"data:text/html,{RUNS}": "data: page",
        "data:text/html;base64,PHNjcmlwdD5kb2N1bWVudC50aXRsZT0icmFuIjwvc2NyaXB0Pg==": "data: page",
        blob: "blob: page",
        "javascript:document.title = 'ran'": "javascript: page",
        "file:///etc/passwd": "file: page",
        "about:version": "about: page",
        "about:srcdoc": "about: page",
        "chrome://version": "chrome: page",
        "http://example.com/": "off-site navigation",
    }
    for url, reason in refused.items():
        outcome = step(env, f"goto({url!r})")
        assert outcome.error is not None and "is blocked" in outcome.error, url
        assert outcome.observation["events"]["blocked"] == [{"url": url, "reason": reason}]
        assert_still_on_the_page(outcome.observation, start)
    blank = step(env, "goto('about:blank')")
    assert blank.error is None and blank.observation["url"] == "about:blank"
    back = step(env, f"goto({start['url']!r})")
    assert back.error is None and back.observation["title"] == "Schemes"


@pytest.mark.parametrize(
    ("role", "name"),
    [
        ("link", "Data link"),
        ("button", "Data script"),
        ("link", "File link"),
    ],
)
def test_the_page_s_own_script_cannot_open_such_pages_either(
    env: WebEnvironment, role: str, name: str
) -> None:
    start = env.reset(seed=0, task=None)
    outcome = step(env, f"click('{bid(start, role, name)}')")
    assert outcome.error is None  # the click itself happened
    assert_still_on_the_page(outcome.observation, start)
    assert "StaticText 'ran'" not in flatten_axtree(outcome.observation["axtree"])


def test_an_about_link_ends_on_chromium_s_blocked_blank_page(env: WebEnvironment) -> None:
    start = env.reset(seed=0, task=None)
    outcome = step(env, f"click('{bid(start, 'link', 'About link')}')").observation
    # Chromium refuses it and shows about:blank#blocked: nothing of about:version is read.
    assert outcome["url"] == "about:blank#blocked"
    assert "version" not in flatten_axtree(outcome["axtree"]).lower()


def test_inline_images_of_the_site_still_load(env: WebEnvironment) -> None:
    env.reset(seed=0, task=None)
    width = env.page.evaluate("document.querySelector('img[alt=\"inline dot\"]').naturalWidth")
    assert width == 1
