"""A page cannot reach the host: the browser lives in a network namespace with only its site.

The attack that got through Playwright's request routing: a page (a ``data:`` page, which the
environment allows) makes WebRTC send STUN over UDP and TURN over TCP to host ports. Here the
same page also tries every other way out — fetch, an image, a WebSocket, a form post — to
real listeners on the host's loopback and on its outward address; nothing may arrive, and the
site itself must keep working.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

import pytest

from tests.web.web_test_pages import bid, step
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment

pytestmark = pytest.mark.docker


@dataclass
class Listeners:
    """A TCP and a UDP listener on one host address, recording everything that arrives."""

    address: str
    tcp: socket.socket
    udp: socket.socket
    received: list[str] = field(default_factory=list)

    @property
    def tcp_port(self) -> int:
        return int(self.tcp.getsockname()[1])

    @property
    def udp_port(self) -> int:
        return int(self.udp.getsockname()[1])


def _record(listeners: Listeners, stop: threading.Event) -> None:
    listeners.tcp.settimeout(0.1)
    listeners.udp.settimeout(0.1)
    while not stop.is_set():
        try:
            connection, peer = listeners.tcp.accept()
            with connection:
                connection.settimeout(1)
                data = b""
                with contextlib.suppress(OSError):
                    data = connection.recv(4096)
                listeners.received.append(f"tcp from {peer}: {data[:80]!r}")
        except TimeoutError:
            pass
        try:
            data, peer = listeners.udp.recvfrom(4096)
            listeners.received.append(f"udp from {peer}: {data[:80]!r}")
        except TimeoutError:
            pass


def outward_address() -> str | None:
    """The host's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.1", 9))  # TEST-NET-2: only picks the route
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


@pytest.fixture
def listeners() -> Iterator[list[Listeners]]:
    addresses = ["127.0.0.1"] + [a for a in [outward_address()] if a]
    all_listeners = []
    for address in addresses:
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind((address, 0))
        tcp.listen(16)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind((address, 0))
        all_listeners.append(Listeners(address, tcp, udp))
    stop = threading.Event()
    threads = [threading.Thread(target=_record, args=(item, stop)) for item in all_listeners]
    for thread in threads:
        thread.start()
    yield all_listeners
    stop.set()
    for thread in threads:
        thread.join()
    for item in all_listeners:
        item.tcp.close()
        item.udp.close()


def attack_page(targets: list[Listeners]) -> str:
    """A data: URL whose script tries every way it knows to reach each host listener."""
    script = []
    for target in targets:
        host, tcp, udp = target.address, target.tcp_port, target.udp_port
        script.append(
            f"""
            attempt(() => {{
                const pc = new RTCPeerConnection({{iceServers: [
                    {{urls: ["stun:{host}:{udp}"]}},
                    {{urls: ["turn:{host}:{tcp}?transport=tcp"], username: "u", credential: "p"}},
                    {{urls: ["turn:{host}:{udp}?transport=udp"], username: "u", credential: "p"}},
                ]}});
                pc.createDataChannel("leak");
                pc.createOffer().then((offer) => pc.setLocalDescription(offer));
                window.keep = (window.keep || []).concat([pc]);
            }});
            attempt(() => fetch("http://{host}:{tcp}/fetch", {{mode: "no-cors"}}));
            attempt(() => {{ new Image().src = "http://{host}:{tcp}/img"; }});
            attempt(() => {{ new WebSocket("ws://{host}:{tcp}/ws"); }});
            attempt(() => {{
                const form = document.createElement("form");
                form.method = "post";
                form.action = "http://{host}:{tcp}/form";
                form.target = "sink";
                form.innerHTML = '<input name="x" value="leak">';
                document.body.appendChild(form);
                form.submit();
            }});
            """
        )
    html = (
        "<title>Reach the host</title><iframe name=sink></iframe><p id=done>tried</p><script>"
        "function attempt(run) { try { Promise.resolve(run()).catch(() => {}); } catch {} }"
        + "".join(script)
        + "</script>"
    )
    return "data:text/html," + quote(html)


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
