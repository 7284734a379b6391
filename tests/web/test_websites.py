"""The real web applications of the web collector: start, seeded content, writes, reset."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import docker
import httpcore
import httpx
import pytest

from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.sites import SITES, site_definition
from worldtrace.sandboxes.websites import (
    SITE_LABEL,
    BrowserNetwork,
    RunningSite,
    SiteError,
    start_site,
)

pytestmark = pytest.mark.docker


class _SocketStream(httpcore.NetworkStream):
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._sock.settimeout(timeout)
        return self._sock.recv(max_bytes)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._sock.settimeout(timeout)
        self._sock.sendall(buffer)

    def close(self) -> None:
        self._sock.close()


class _InsideSite(httpcore.NetworkBackend):
    """Connects to the site's server inside its network namespace, whatever the URL says."""

    def __init__(self, site: RunningSite) -> None:
        self._site = site

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: object = None,
    ) -> httpcore.NetworkStream:
        return _SocketStream(self._site.connect(timeout or 30))


class _SiteTransport(httpx.BaseTransport):
    """httpx over connections made inside the site's namespace (the host cannot reach it)."""

    def __init__(self, site: RunningSite) -> None:
        self._pool = httpcore.ConnectionPool(network_backend=_InsideSite(site))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._pool.handle_request(
            httpcore.Request(
                method=request.method,
                url=httpcore.URL(
                    scheme=request.url.raw_scheme,
                    host=request.url.raw_host,
                    port=request.url.port,
                    target=request.url.raw_path,
                ),
                headers=request.headers.raw,
                content=request.stream,
                extensions=request.extensions,
            )
        )
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            content=response.read(),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


def http(site: RunningSite) -> httpx.Client:
    """An HTTP client for ``site``'s own URLs (``http://<name>.test/...``)."""
    return httpx.Client(transport=_SiteTransport(site), timeout=30, follow_redirects=True)


def wait_for(read: Callable[[], list[dict[str, Any]]], timeout: float = 15) -> list:
    """Poll ``read`` until it returns rows (TiddlyWiki saves to disk shortly after a write)."""
    deadline = time.monotonic() + timeout
    while not (rows := read()) and time.monotonic() < deadline:
        time.sleep(0.3)
    return rows


# --- one write per application, through its own HTTP interface ------------------------------


def create_trac_ticket(site: RunningSite, summary: str) -> None:
    with http(site) as client:
        form = client.get(site.url("/newticket")).text
        token = re.search(r'name="__FORM_TOKEN" value="([^"]+)"', form).group(1)
        response = client.post(
            site.url("/newticket"),
            data={
                "__FORM_TOKEN": token,
                "field_summary": summary,
                "field_description": "Written by the test.",
                "field_type": "defect",
                "field_component": "Search",
                "field_milestone": "1.1",
                "field_reporter": "tester",
                "submit": "Create ticket",
            },
        )
    assert response.status_code == 200
    assert summary in response.text


def trac_ticket(site: RunningSite, summary: str) -> list[dict[str, Any]]:
    return site.read_data(
        f"select id, summary, component, reporter from ticket where summary = '{summary}'"
    )


def add_datasette_review(site: RunningSite, body: str) -> None:
    with http(site) as client:
        form = client.get(site.url("/library/add_review")).text
        token = re.search(r'name="csrftoken" value="([^"]+)"', form).group(1)
        response = client.post(
            site.url("/library/add_review"),
            data={
                "csrftoken": token,
                "book_id": "35",
                "reviewer": "Test Reader",
                "rating": "5",
                "body": body,
            },
        )
    assert response.status_code == 200
    assert "Thank you, your review was saved." in response.text


def datasette_review(site: RunningSite, body: str) -> list[dict[str, Any]]:
    return site.read_data(
        f"select book_id, reviewer, rating, body from reviews where body = '{body}'"
    )


def put_tiddler(site: RunningSite, title: str) -> None:
    with http(site) as client:
        response = client.put(
            site.url(f"/recipes/default/tiddlers/{title}"),
            json={"title": title, "text": "Written by the test.", "tags": "Recipe"},
            headers={"X-Requested-With": "TiddlyWiki"},
        )
    assert response.status_code == 204


def tiddler(site: RunningSite, title: str) -> list[dict[str, Any]]:
    return site.read_data(f"[[{title}]]")


WRITES = {
    "trac": (create_trac_ticket, trac_ticket),
    "datasette": (add_datasette_review, datasette_review),
    "tiddlywiki": (put_tiddler, tiddler),
}

# (path, text every fresh copy shows there)
SEEDED_PAGES = {
    "trac": [
        ("/", "Welcome to Skylark"),
        ("/report/1", "Search results ignore album permissions"),
        ("/ticket/8", "Full-text search over captions and comments"),
        ("/wiki/BackupAndRestore", "sqlite3 skylark.db"),
    ],
    "datasette": [
        ("/", "Riverside Public Library"),
        ("/library/books?_search=whale", "Moby-Dick"),
        ("/library/overdue_loans", "Overdue loans"),
    ],
    # TiddlyWiki renders in the browser; the page embeds the tiddlers' JSON.
    "tiddlywiki": [("/", "Maple Street Notebook"), ("/", "Lentil Soup")],
}

SEEDED_DATA = {
    "trac": [
        ("select count(*) as n from ticket", [{"n": 36}]),
        ("select count(*) as n from milestone", [{"n": 4}]),
        ("select owner from component where name = 'Search'", [{"owner": "carol"}]),
    ],
    "datasette": [
        ("select count(*) as n from books", [{"n": 60}]),
        ("select count(*) as n from loans", [{"n": 3000}]),
        ("select title from books_fts where books_fts match 'whale'", [{"title": "Moby-Dick"}]),
    ],
    # TiddlyWiki's read_data takes filters, not SQL: checked in the test itself.
    "tiddlywiki": [],
}

APP_VERSIONS = {
    "trac": ("trac", "1.6"),
    "datasette": ("datasette", "0.65.5"),
    "tiddlywiki": ("tiddlywiki", "5.3.8"),
}


@pytest.mark.parametrize("name", sorted(SITES))
def test_site_serves_its_seeded_content(site_images, name):
    started = time.monotonic()
    with start_site(SITES[name]) as site:
        took = time.monotonic() - started
        # The same origin in every episode and run: no port of the day in any URL.
        assert site.origin == f"http://{name}.test"
        assert site.url("/a?b=1") == f"http://{name}.test/a?b=1"
        with http(site) as client:
            for path, text in SEEDED_PAGES[name]:
                response = client.get(site.url(path))
                assert response.status_code == 200, path
                assert text in response.text, path
        if name == "tiddlywiki":
            recipes = site.read_data("[tag[Recipe]sort[title]]")
            assert [row["title"] for row in recipes][:3] == [
                "Banana Bread",
                "Chicken Curry",
                "Lentil Soup",
            ]
            assert len(recipes) == 6
            soup = site.read_data("[[Lentil Soup]]")[0]
            assert soup["serves"] == "4"
            assert "red lentils" in soup["text"]
        else:
            for query, rows in SEEDED_DATA[name]:
                assert site.read_data(query) == rows, query
        package, version = APP_VERSIONS[name]
        versions = site.versions()
        assert versions[package] == version
        assert versions["image_id"].startswith("sha256:")
        assert site.definition.start_path in site.logs()  # the readiness request was logged
    print(f"{name}: ready in {took:.1f}s")


@pytest.mark.parametrize("name", sorted(SITES))
def test_a_write_through_the_app_is_stored_and_a_new_start_is_a_reset(site_images, name):
    write, read = WRITES[name]
    marker = f"Written by worldtrace test {name}"
    with start_site(SITES[name]) as site:
        assert read(site, marker) == []
        write(site, marker)
        rows = wait_for(lambda: read(site, marker))
        assert len(rows) == 1
        # The root filesystem is read-only: the app writes only where its image says.
        assert "read-only file system" not in site.logs().lower()
    with start_site(SITES[name]) as fresh:
        assert read(fresh, marker) == []


def test_trac_stores_ticket_fields_as_submitted_and_uploaded_files(site_images):
    with start_site(SITES["trac"]) as site:
        create_trac_ticket(site, "Thumbnails are blurry on HiDPI screens")
        [row] = trac_ticket(site, "Thumbnails are blurry on HiDPI screens")
        assert row == {
            "id": 37,
            "summary": "Thumbnails are blurry on HiDPI screens",
            "component": "Search",
            "reporter": "tester",
        }
        # An upload lands in the environment's files folder (on the sandbox's capped disk).
        upload = site.url("/attachment/wiki/WikiStart/?action=new")
        with http(site) as client:
            form = client.get(upload).text
            token = re.search(r'name="__FORM_TOKEN" value="([^"]+)"', form).group(1)
            response = client.post(
                upload,
                data={"__FORM_TOKEN": token, "action": "new", "description": "notes"},
                files={"attachment": ("notes.txt", b"bring the tripod\n", "text/plain")},
            )
        # Trac redirects to an absolute URL it builds from the Host header.
        assert response.url == "http://trac.test/attachment/wiki/WikiStart/"
        assert "notes.txt" in response.text
        [attachment] = site.read_data("select filename, size from attachment")
        assert attachment == {"filename": "notes.txt", "size": 17}
        stored = site.sandbox.exec(["grep", "-rl", "bring the tripod", "/srv/trac/files"])
        assert stored.exit_code == 0, stored.stderr


def test_two_copies_of_a_site_run_at_once_and_stay_apart(site_images):
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: start_site(SITES["trac"]), range(2))
    with first, second:
        # Same origin, separate namespaces: each listens on its own loopback.
        assert first.namespace.identity() != second.namespace.identity()
        create_trac_ticket(first, "Only in the first copy")
        assert len(trac_ticket(first, "Only in the first copy")) == 1
        assert trac_ticket(second, "Only in the first copy") == []
        with http(second) as client:
            assert client.get(second.url("/report/1")).status_code == 200


def test_different_sites_run_side_by_side(site_images):
    with start_site(SITES["datasette"]) as data, start_site(SITES["tiddlywiki"]) as wiki:
        assert data.origin != wiki.origin
        with http(data) as client:
            assert "Riverside Public Library" in client.get(data.url("/")).text
        with http(wiki) as client:
            assert "Maple Street Notebook" in client.get(wiki.url("/")).text


def site_containers(name: str) -> list:
    return docker.from_env().containers.list(all=True, filters={"label": f"{SITE_LABEL}={name}"})


def test_a_server_that_crashes_is_a_clear_error_with_its_log(site_images):
    broken = replace(
        SITES["trac"],
        name="broken-trac",
        command=("/opt/trac/bin/tracd", "-p", "{port}", "-s", "/srv/no-such-env"),
    )
    expected = r"(?s)exited with code \d+.*log tail:\n.*no-such-env"
    with pytest.raises(SiteError, match=expected) as info:
        start_site(broken, startup_timeout_s=30)
    assert "broken-trac" in str(info.value)
    assert site_containers("broken-trac") == []


def test_a_server_that_is_not_up_in_time_is_a_clear_error(site_images):
    before = {c.id for c in site_containers("datasette")}
    with pytest.raises(SiteError, match=r"did not serve http://datasette\.test/ within 0\.2s"):
        start_site(SITES["datasette"], startup_timeout_s=0.2)
    assert {c.id for c in site_containers("datasette")} <= before


@pytest.fixture
def network(site_images) -> Iterator[BrowserNetwork]:
    started = BrowserNetwork().start()
    yield started
    started.close()


def test_a_browser_network_holds_one_site_and_nothing_else(network: BrowserNetwork):
    # Its namespace has a loopback and no other interface: nothing but the site to reach.
    assert [name for _, name in network.namespace.run(socket.if_nameindex)] == ["lo"]
    with start_site(SITES["tiddlywiki"], network=network) as wiki:
        assert wiki.namespace.identity() == network.namespace.identity()
        assert network.site is wiki
        with pytest.raises(SiteError, match=r"still runs RunningSite\('tiddlywiki'"):
            start_site(SITES["trac"], network=network)
        with http(wiki) as client:
            assert client.get(wiki.url("/")).status_code == 200
    assert network.site is None
    with start_site(SITES["trac"], network=network) as trac, http(trac) as client:
        assert "Skylark" in client.get(trac.url("/")).text
    # Not reachable from the host's own network at all.
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", 80), timeout=2):
        pass


def test_bad_queries_names_and_images_are_clear_errors(site_images):
    with pytest.raises(ValueError, match="known sites: datasette, tiddlywiki, trac"):
        site_definition("mediawiki")
    ghost = replace(SITES["trac"], name="ghost", image="worldtrace/site-ghost:none")
    with pytest.raises(SandboxError, match=r"site-ghost:none.*worldtrace sandboxes build"):
        start_site(ghost)
    with start_site(SITES["datasette"]) as site:
        with pytest.raises(ValueError, match="no such table: nope"):
            site.read_data("select * from nope")
        site.close()
        site.close()  # idempotent
        assert site.logs() == ""
