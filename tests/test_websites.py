"""The real web applications of the web collector: start, seeded content, writes, reset."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import docker
import httpx
import pytest

from sandboxes import websites
from sandboxes.websites import SITES, RunningSite, SiteError, require_site_images, start_site

pytestmark = pytest.mark.docker


def http() -> httpx.Client:
    # trust_env=False: the servers are on loopback and an environment proxy must not be used.
    return httpx.Client(trust_env=False, timeout=30, follow_redirects=True)


def wait_for(read: Callable[[], list[dict[str, Any]]], timeout: float = 15) -> list:
    """Poll ``read`` until it returns rows (TiddlyWiki saves to disk shortly after a write)."""
    deadline = time.monotonic() + timeout
    while not (rows := read()) and time.monotonic() < deadline:
        time.sleep(0.3)
    return rows


# --- one write per application, through its own HTTP interface ------------------------------


def create_trac_ticket(site: RunningSite, summary: str) -> None:
    with http() as client:
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
    with http() as client:
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
    with http() as client:
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
    with start_site(name) as site:
        took = time.monotonic() - started
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", site.base_url)
        assert site.origin == site.base_url
        assert site.url("/a?b=1") == site.base_url + "/a?b=1"
        with http() as client:
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
    with start_site(name) as site:
        assert read(site, marker) == []
        write(site, marker)
        rows = wait_for(lambda: read(site, marker))
        assert len(rows) == 1
    with start_site(name) as fresh:
        assert read(fresh, marker) == []


def test_trac_ticket_fields_are_stored_as_submitted(site_images):
    with start_site("trac") as site:
        create_trac_ticket(site, "Thumbnails are blurry on HiDPI screens")
        [row] = trac_ticket(site, "Thumbnails are blurry on HiDPI screens")
        assert row == {
            "id": 37,
            "summary": "Thumbnails are blurry on HiDPI screens",
            "component": "Search",
            "reporter": "tester",
        }


def test_two_copies_of_a_site_run_at_once_and_stay_apart(site_images):
    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: start_site("trac"), range(2))
    with first, second:
        assert first.base_url != second.base_url
        create_trac_ticket(first, "Only in the first copy")
        assert len(trac_ticket(first, "Only in the first copy")) == 1
        assert trac_ticket(second, "Only in the first copy") == []
        with http() as client:
            assert client.get(second.url("/report/1")).status_code == 200


def test_different_sites_run_side_by_side(site_images):
    with start_site("datasette") as data, start_site("tiddlywiki") as wiki, http() as client:
        assert data.base_url != wiki.base_url
        assert "Riverside Public Library" in client.get(data.url("/")).text
        assert "Maple Street Notebook" in client.get(wiki.url("/")).text


def site_containers(name: str) -> list:
    return docker.from_env().containers.list(
        all=True, filters={"label": f"{websites.SITE_LABEL}={name}"}
    )


def test_a_server_that_crashes_is_a_clear_error_with_its_log(site_images, monkeypatch):
    broken = replace(
        SITES["trac"],
        name="broken-trac",
        command=("/opt/trac/bin/tracd", "-p", "{port}", "-s", "/srv/no-such-env"),
    )
    monkeypatch.setitem(SITES, "broken-trac", broken)
    expected = r"(?s)exited with code \d+.*log tail:\n.*no-such-env"
    with pytest.raises(SiteError, match=expected) as info:
        start_site("broken-trac", startup_timeout_s=30)
    assert "broken-trac" in str(info.value)
    assert site_containers("broken-trac") == []


def test_a_server_that_is_not_up_in_time_is_a_clear_error(site_images):
    before = {c.id for c in site_containers("datasette")}
    with pytest.raises(SiteError, match=r"did not serve http://127\.0\.0\.1:\d+/ within 0\.2s"):
        start_site("datasette", startup_timeout_s=0.2)
    assert {c.id for c in site_containers("datasette")} <= before


def test_a_port_taken_before_the_server_binds_it_is_retried(site_images, monkeypatch):
    with socket.socket() as squatter:
        # Bound, not listening: the server's bind fails, and connecting is refused at once.
        squatter.bind(("127.0.0.1", 0))
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        choose = websites._free_port
        monkeypatch.setattr(websites, "_free_port", lambda: next(ports, None) or choose())
        with start_site("tiddlywiki") as site:
            assert site.port != taken
            with http() as client:
                assert client.get(site.url("/")).status_code == 200


def test_bad_queries_names_and_images_are_clear_errors(site_images, monkeypatch):
    with pytest.raises(ValueError, match="known sites: datasette, tiddlywiki, trac"):
        start_site("mediawiki")
    with pytest.raises(ValueError, match="unknown site 'nope'"):
        require_site_images(["trac", "nope"])
    require_site_images(SITES)
    monkeypatch.setitem(
        SITES, "ghost", replace(SITES["trac"], name="ghost", image="worldtrace/site-ghost:none")
    )
    with pytest.raises(SiteError, match=r"site-ghost:none.*python -m sandboxes\.images"):
        require_site_images(["trac", "ghost"])
    with start_site("datasette") as site:
        with pytest.raises(ValueError, match="no such table: nope"):
            site.read_data("select * from nope")
        site.close()
        site.close()  # idempotent
        assert site.logs() == ""
