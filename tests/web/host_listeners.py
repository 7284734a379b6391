"""Listeners on the host's own addresses and a page that tries every way to reach them: what
the web isolation tests (tests/web/test_web_isolation.py, test_browser_isolation.py) share.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import quote


@dataclass
class Listeners:
    """A TCP and a UDP listener on one host address, recording everything that arrives."""

    address: str
    tcp: socket.socket
    udp: socket.socket
    received: list[str] = field(default_factory=list)

    @property
    def tcp_port(self) -> int:
        """The TCP listener's port."""
        return int(self.tcp.getsockname()[1])

    @property
    def udp_port(self) -> int:
        """The UDP listener's port."""
        return int(self.udp.getsockname()[1])


def _record(listeners: Listeners, stop: threading.Event) -> None:
    """Record what reaches ``listeners`` until ``stop`` is set."""
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


@contextlib.contextmanager
def host_listeners() -> Iterator[list[Listeners]]:
    """Listeners on the host's loopback and outward address (if any), recording until the end."""
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
    try:
        yield all_listeners
    finally:
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
