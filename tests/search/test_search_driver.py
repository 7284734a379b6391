"""The in-container search driver against the real Xapian index and site of ``worldtrace/search``.

One container for the module (network "none", read-only root, as an episode's), one driver
process per test over an exec stream, as the environment speaks to it. Nothing here changes
the corpus, so the container is shared; each driver's start makes a fresh memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from worldtrace.collectors.search.image_definition import DRIVER, IMAGE
from worldtrace.sandboxes.channel import DriverChannel
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.images import ensure_image
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker

BASE_URL = "http://docs.localhost/"
OUTSIDE_PREFIX = "the URL is outside the corpus site (http://docs.localhost/): "


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    """One sandbox of the image, as an episode has it."""
    image = ensure_image(IMAGE)
    box = DockerSandbox(image, limits=Limits(disk_mb=64, cpus=2), network="none").start()
    try:
        yield box
    finally:
        box.close()


class Driver:
    """One driver process in the sandbox."""

    def __init__(self, sandbox: DockerSandbox) -> None:
        self.channel = DriverChannel(sandbox.open_stream(list(DRIVER)), "search driver")
        self.started: dict[str, Any] = {}

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and return the reply; every reply carries the memory."""
        reply = self.channel.request({"op": op, **fields}, 30.0)
        assert set(reply) >= {"memory", "memory_digest"}, reply
        assert reply["memory_digest"] == digest(reply["memory"])
        return reply

    def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        """A request that the driver must serve."""
        reply = self.request(op, **fields)
        assert "driver_error" not in reply, reply["driver_error"]
        return reply

    def memory(self, action: str, **fields: Any) -> dict[str, Any]:
        """One dict_memory action."""
        return self.ok("memory", action=action, **fields)

    def close(self) -> None:
        """Stop, then end the driver."""
        self.request("stop")
        self.channel.close()


def digest(memory: dict[str, Any]) -> str:
    """The memory digest as the protocol defines it."""
    canonical = json.dumps(memory, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@pytest.fixture
def driver(sandbox: DockerSandbox) -> Iterator[Driver]:
    """A started driver process."""
    opened = Driver(sandbox)
    try:
        start = opened.started = opened.ok("start")
        assert start["site"]["base_url"] == BASE_URL
        assert start["corpus"]["documents"]["total"] >= 20_000
        assert start["memory"] == {}
        yield opened
    finally:
        opened.close()


@pytest.mark.parametrize(
    ("query", "url"),
    [
        # git-rebase's NAME line: the man page (git-man) has it in its title too, so it
        # outranks git-doc's HTML page of the same text
        ('"reapply commits on top of another base tip"', f"{BASE_URL}man/1/git-rebase.html"),
        # a sentence of bash's long description (packages collection; bash-static lacks it)
        (
            "Bash is ultimately intended to be a conformant implementation",
            f"{BASE_URL}packages/bash.html",
        ),
        # the opening sentence of PostgreSQL's page on string functions
        (
            '"functions and operators for examining and manipulating string values"',
            f"{BASE_URL}postgresql/functions-string.html",
        ),
    ],
)
def test_known_phrase_ranks_its_document_first(driver: Driver, query: str, url: str) -> None:
    reply = driver.ok("search", query=query, num_results=5)
    assert reply["error"] is None
    first = reply["results"][0]
    assert first["url"] == url, [result["url"] for result in reply["results"]]
    assert first["rank"] == 1 and first["docid"] > 0 and first["percent"] > 0
    assert "<b>" in first["snippet_highlighted"]
    assert "<b>" not in first["snippet"] and first["snippet"].strip()
    assert reply["estimated_matches"] >= len(reply["results"])
    assert reply["parsed_query"].startswith("Query(")


def test_nonsense_query_finds_nothing(driver: Driver) -> None:
    reply = driver.ok("search", query="zqxvbnmw plorktastic", num_results=10)
    assert reply["error"] is None
    assert reply["results"] == [] and reply["estimated_matches"] == 0


def test_bad_search_arguments_are_errors(driver: Driver) -> None:
    too_many = driver.ok("search", query="git", num_results=500)
    assert too_many["error"] == "num_results must be an integer from 1 to 50"
    assert too_many["results"] == []
    empty = driver.ok("search", query="  ", num_results=3)
    assert empty["error"] == "the query must be a non-empty string"


def test_results_carry_dates_and_titles(driver: Driver) -> None:
    reply = driver.ok("search", query="rebase interactive", num_results=10)
    assert len(reply["results"]) == 10
    assert [result["rank"] for result in reply["results"]] == list(range(1, 11))
    scores = [result["score"] for result in reply["results"]]
    assert scores == sorted(scores, reverse=True)
    git_doc = [r for r in reply["results"] if r["url"].startswith(f"{BASE_URL}git/")]
    assert git_doc and all(len(r["date"]) == 10 for r in git_doc), reply["results"]


def test_extract_known_page(driver: Driver) -> None:
    url = f"{BASE_URL}python/library/os.html"
    reply = driver.ok("extract", url=url, goal="what os.getcwd returns")
    assert reply["error"] is None and reply["status"] == 200
    assert reply["content_type"].startswith("text/html")
    assert reply["html_bytes"] == len(reply["html"].encode("utf-8"))
    assert "Miscellaneous operating system interfaces" in reply["markdown"]
    assert "Return a string representing the current working directory" in reply["markdown"]


def test_extract_man_page_rendered_by_mandoc(driver: Driver) -> None:
    reply = driver.ok("extract", url=f"{BASE_URL}man/1/ls.html", goal="sort by time")
    assert reply["status"] == 200
    assert "list directory contents" in reply["markdown"]


def test_extract_keeps_the_page_text_and_drops_the_markup(driver: Driver) -> None:
    # git-doc ships XHTML: an XML declaration, a doctype and a <head> with the title and CSS.
    reply = driver.ok("extract", url=f"{BASE_URL}git/git-rebase.html", goal="autostash")
    assert reply["html"].startswith("<?xml")
    markdown = reply["markdown"].lstrip()
    assert not markdown.startswith("xml") and "DOCTYPE" not in markdown
    assert "Reapply commits on top of another base tip" in markdown


def test_extract_missing_page_is_http_404(driver: Driver) -> None:
    reply = driver.ok("extract", url=f"{BASE_URL}python/library/no-such-page.html", goal="x")
    assert reply["status"] == 404 and reply["error"] == "HTTP 404 Not Found"
    assert reply["markdown"] is None and reply["html"]


@pytest.mark.parametrize(
    "url",
    ["https://docs.python.org/3/library/os.html", "https://docs.localhost/man/1/ls.html"],
)
def test_extract_outside_the_site_is_refused(driver: Driver, url: str) -> None:
    reply = driver.ok("extract", url=url, goal="x")
    assert reply["error"] == OUTSIDE_PREFIX + url
    assert reply["status"] is None and reply["html"] is None and reply["fetch_s"] == 0.0


def test_extract_cannot_reach_the_site_server_by_its_port(driver: Driver) -> None:
    """The site's real loopback address is not the site: the driver never requests it."""
    url = f"http://127.0.0.1:{driver.started['site']['port']}/man/1/ls.html"
    reply = driver.ok("extract", url=url, goal="x")
    assert reply["error"] == OUTSIDE_PREFIX + url and reply["status"] is None


def test_extract_invalid_url(driver: Driver) -> None:
    reply = driver.ok("extract", url="not a url", goal="x")
    assert reply["error"].startswith("invalid URL: ")
    assert driver.ok("extract", url=42, goal="x")["error"].startswith("invalid URL: ")


def test_memory_actions_and_errors(driver: Driver) -> None:
    added = driver.memory("add", key="rebase", value="git rebase -i HEAD~3")
    assert added["ok"] and added["error"] is None and added["result"] is None
    assert added["memory"] == {"rebase": "git rebase -i HEAD~3"}
    duplicate = driver.memory("add", key="rebase", value="other")
    assert not duplicate["ok"]
    assert duplicate["error"] == "key 'rebase' already exists (use update)"
    assert duplicate["memory"] == {"rebase": "git rebase -i HEAD~3"}
    driver.memory("add", key="ls", value="ls -t sorts by time")
    assert driver.memory("retrieve", key="ls")["result"] == "ls -t sorts by time"
    assert driver.memory("list")["result"] == ["ls", "rebase"]
    updated = driver.memory("update", key="ls", value="ls -lt")
    assert updated["ok"] and updated["memory"]["ls"] == "ls -lt"
    removed = driver.memory("remove", key="rebase")
    assert removed["ok"] and removed["memory"] == {"ls": "ls -lt"}
    for action in ("retrieve", "update", "remove"):
        missing = driver.memory(action, key="rebase", value="v")
        assert not missing["ok"] and missing["error"] == "no key 'rebase' in memory"
        assert missing["result"] is None
    assert driver.memory("add", key="x")["error"] == "'value' is required for add"
    assert driver.memory("retrieve")["error"] == "'key' is required for retrieve"
    unknown = driver.memory("drop", key="ls")
    assert unknown["error"].startswith("unknown action 'drop'")
    assert driver.ok("observe")["memory"] == {"ls": "ls -lt"}


def test_memory_survives_requests_and_the_driver(sandbox: DockerSandbox) -> None:
    first = Driver(sandbox)
    first.ok("start")
    first.memory("add", key="fact", value="SELECT length('abc') returns 3")
    first.ok("search", query="length", num_results=3)
    first.ok("extract", url=f"{BASE_URL}man/1/ls.html", goal="x")
    last = first.ok("observe")
    assert last["memory"] == {"fact": "SELECT length('abc') returns 3"}
    first.close()
    # The host's last look: a second process reads the memory file the episode left.
    looked = sandbox.exec([*DRIVER, "--observe"], timeout=30)
    assert looked.exit_code == 0, looked.text
    printed = json.loads(looked.text.strip())
    assert printed == {"memory": last["memory"], "memory_digest": last["memory_digest"]}
    # A new episode starts with an empty memory.
    second = Driver(sandbox)
    try:
        assert second.ok("start")["memory"] == {}
    finally:
        second.close()


def test_second_start_is_a_driver_error(driver: Driver) -> None:
    again = driver.request("start")
    assert again["driver_error"] == "RuntimeError: already started; stop first"


def test_unserved_requests_are_driver_errors(sandbox: DockerSandbox) -> None:
    fresh = Driver(sandbox)
    try:
        before = fresh.request("search", query="git", num_results=3)
        assert before["driver_error"] == "RuntimeError: op 'search' before start"
        unknown = fresh.request("fly")
        assert unknown["driver_error"].startswith("ValueError: unknown op 'fly'")
    finally:
        fresh.close()
