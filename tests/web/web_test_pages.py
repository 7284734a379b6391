"""Pages written for the web unit tests (not one of the real sites), and the small helpers
every web test uses.

The browser lives in a network namespace of its own (``collectors.web.browser``), so the
pages are served inside that namespace, on its loopback, at ``http://pages.test:<port>``: a
server is started in each browser network that asks for the pages.

The real sites (``sandboxes.websites``) are what the corpus is collected on; these pages hold
the awkward cases in one place — dialogs, pop-ups, iframes, downloads, a page that never
finishes loading, a very large page — so each can be tested without depending on an app.
"""

from __future__ import annotations

import functools
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from worldtrace.collectors.base import StepOutcome
from worldtrace.collectors.web.actions import parse_action
from worldtrace.collectors.web.axtree import find_bids, flatten_axtree
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.sandboxes.websites import SITE_DOMAIN, BrowserNetwork

PAGES = Path(__file__).parent / "web_pages"


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/download.txt":
            self._send(b"quarterly numbers\n", "text/plain", attachment="report.txt")
        elif parts.path == "/thanks.html":
            time.sleep(0.3)  # a server that takes its time, as real apps under load do
            super().do_GET()
        elif parts.path == "/slow":
            self._never_finish()
        elif parts.path == "/large":
            rows = int(parse_qs(parts.query).get("rows", ["2000"])[0])
            body = "".join(
                f"<tr><td>{i}</td><td><a href='/large?row={i}'>Item {i}</a></td>"
                f"<td><input aria-label='Quantity {i}' value='{i % 7}'></td></tr>"
                for i in range(rows)
            )
            page = f"<title>Large</title><h1>Inventory</h1><table>{body}</table>"
            self._send(page.encode(), "text/html")
        else:
            super().do_GET()

    def _send(self, body: bytes, kind: str, attachment: str | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if attachment:
            self.send_header("Content-Disposition", f'attachment; filename="{attachment}"')
        self.end_headers()
        self.wfile.write(body)

    def _never_finish(self) -> None:
        # Headers and the start of a body, then nothing: the load event never fires.
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", "100000")
        self.end_headers()
        self.wfile.write(b"<title>Slow</title><h1>Still loading</h1>")
        self.wfile.flush()
        time.sleep(30)


class PagesSite:
    """The test pages as one browser network sees them: a site handle for the environment."""

    def __init__(self, port: int) -> None:
        self.origin = f"http://pages.{SITE_DOMAIN}:{port}"

    def url(self, path: str) -> str:
        """Absolute URL of ``path``."""
        return self.origin + path

    def versions(self) -> dict[str, str]:
        """The pages have no version but this one."""
        return {"app": "worldtrace-test-pages"}

    def close(self) -> None:
        """Nothing to stop: the server lives as long as the fixture."""


class TestPages:
    """Serves the test pages in every browser network that asks, until closed."""

    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        self._servers: dict[str, http.server.ThreadingHTTPServer] = {}
        self._lock = threading.Lock()

    def site_in(self, network: BrowserNetwork) -> PagesSite:
        """The pages as served in ``network`` (started there on first use)."""
        key = network.namespace.identity()
        with self._lock:
            server = self._servers.get(key)
            if server is None:
                handler = functools.partial(_Handler, directory=str(PAGES))
                # The listening socket is made inside the namespace, so it lives there.
                server = network.namespace.run(
                    lambda: http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
                )
                server.daemon_threads = True
                threading.Thread(target=server.serve_forever, daemon=True).start()
                self._servers[key] = server
        return PagesSite(server.server_port)

    def close(self) -> None:
        """Stop every server."""
        with self._lock:
            servers, self._servers = list(self._servers.values()), {}
        for server in servers:
            server.shutdown()
            server.server_close()


@contextmanager
def serve_test_pages() -> Iterator[TestPages]:
    """Serve ``tests/web_pages`` and the generated pages to the browsers of this process."""
    pages = TestPages()
    try:
        yield pages
    finally:
        pages.close()


def environment_on_pages(pages: TestPages, start_path: str = "/index.html", **config: object):
    """A web environment whose every reset opens ``start_path`` of the test pages."""
    return WebEnvironment(
        # The test pages are no registered site: a valid config, then named after them.
        WebConfig.model_validate(config).model_copy(update={"site": "test-pages"}),
        start_site=lambda _config, network: (pages.site_in(network), start_path),
    )


def bid(observation: dict, role: str, name: str) -> str:
    """The bid of ``role 'name'`` in an observation; fails the test showing the tree if absent."""
    found = find_bid(observation["axtree"], role, name)
    assert found is not None, f"no {role} {name!r} in\n{flatten_axtree(observation['axtree'])}"
    return found


def step(env: WebEnvironment, text: str) -> StepOutcome:
    """Run one BrowserGym action string."""
    return env.step(parse_action(text), timeout_s=60)


def find_bid(tree: dict[str, Any], role: str, name: str) -> str | None:
    """Return the bid of the node with ``role`` and exactly ``name``, else a name prefix match.

    The first node in the order the tree text prints nodes wins (DevTools lists nodes in its
    own order, which differs); None if no node matches either way.
    """
    found = find_bids(tree, role, name)
    return found[0] if found else None
