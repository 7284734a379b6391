"""A page cannot reach the host: the browser lives in a network namespace with only its site.

The attack that got through Playwright's request routing: a page (a ``data:`` page, which the
environment allows) makes WebRTC send STUN over UDP and TURN over TCP to host ports. Here the
same page also tries every other way out — fetch, an image, a WebSocket, a form post — to
real listeners on the host's loopback and on its outward address; nothing may arrive, and the
site itself must keep working.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.web.host_listeners import attack_page
from tests.web.web_test_pages import bid, step
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment

pytestmark = pytest.mark.docker


@pytest.fixture
def trac(site_images: None) -> Iterator[WebEnvironment]:
    env = WebEnvironment(WebConfig(site="trac", screenshot=False))
    yield env
    env.close()


def test_a_page_reaches_no_host_port_and_the_site_still_works(trac, listeners) -> None:
    first = trac.reset(seed=0, task=None)
    assert first["url"] == "http://trac.test/"
    page = attack_page(listeners)
    # goto refuses data: pages since issue 24 (tests/web/test_web_schemes.py); the network is
    # under test here, so the page is opened through Playwright itself.
    assert "is blocked" in (step(trac, f"goto('{page}')").error or "")
    trac.page.goto(page)
    blocked = [event["url"] for event in trac._events["blocked"]]
    # Give ICE gathering time to send (it did within a second, before the fix).
    opened = step(trac, "noop(2500)")
    assert "StaticText 'tried'" in flatten_axtree(opened.observation["axtree"])
    assert [item.received for item in listeners] == [[] for _ in listeners]
    # The request routing still refuses and records what it sees (second layer).
    assert f"http://127.0.0.1:{listeners[0].tcp_port}/img" in blocked
    # The site is all the browser can reach, and it works.
    form = step(trac, "goto('http://trac.test/newticket')").observation
    assert form["title"].startswith("New Ticket")
    step(trac, f"fill('{bid(form, 'textbox', 'Summary:')}', 'Still here')")
    created = step(trac, f"click('{bid(form, 'button', 'Create ticket')}')").observation
    # Trac redirects to an absolute URL built from the Host header: the stable origin.
    assert created["url"] == "http://trac.test/ticket/37#ticket"
