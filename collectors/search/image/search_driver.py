r"""Serve the search domain's three tools inside the sandbox: Xapian, the site, the memory.

Runs as root with ``/opt/search-venv/bin/python`` (Python 3.11 with Debian's python3-xapian and
markdownify) for the lifetime of an episode. One JSON request per stdin line, exactly one JSON
reply per stdout line; a reply echoes its request's ``id``. Nothing else is ever written to
stdout: the reply channel is a private copy of the original stdout and fd 1 is pointed at
stderr, so a library's print or a child that inherits fd 1 cannot corrupt it.

Every reply (also a ``driver_error``) carries the episode's memory:
  "memory": {key: value} of the whole memory, sorted by key ({} before start);
  "memory_digest": sha256 hex of ``json.dumps(memory, sort_keys=True, separators=(",", ":"),
      ensure_ascii=False).encode("utf-8")``.

Requests and replies:
  {"id", "op": "start"}
      -> {"corpus": /opt/worldtrace/corpus.json as it is, "site": {"base_url":
          "http://docs.localhost/", "port"}, "start_s"}
      Starts site_server.py as ``user`` (uid 1000) on 127.0.0.1 and a free port, waits until
      it answers (HEAD /), opens the index (/srv/search/index.glass) and creates the episode's
      empty memory: a new SQLite file /srv/memory/memory.sqlite3 (any earlier one is removed).
      A second start without a stop is a driver_error.
  {"id", "op": "search", "query": str, "num_results": int (1..50, default 10)}
      -> {"query", "num_results", "parsed_query" (str(xapian.Query): the engine's own
          description), "estimated_matches" (MSet.get_matches_estimated), "results": [{"rank"
          (1-based), "docid", "score" (BM25 weight), "percent", "url", "title", "snippet"
          (plain text), "snippet_highlighted" (MSet.snippet as the engine returns it: HTML
          escaped, matches in <b>...</b>, "..." where text is left out), "date" (str|null)}],
          "search_s" (parse + match + snippets), "error": null}
      QueryParser with the English stemmer (STEM_SOME), default operator OR, the flags
      FLAG_DEFAULT (phrases, boolean operators, +/-, brackets) and the field prefix
      ``title:``. A query the engine cannot parse, or a query or num_results of the wrong
      type or range, gives "error" (str) and empty results. Zero hits: empty results.
  {"id", "op": "extract", "url": str, "goal": str}
      -> {"url", "status" (int|null), "content_type" (str|null), "html" (the body decoded by the
          response's charset, else the page's <meta charset>, else UTF-8, undecodable bytes
          replaced; null when no response), "html_bytes" (int|null), "markdown" (markdownify
          of the html without its <head>, XML declaration, doctype and comments, ATX
          headings; null unless status 200), "error", "fetch_s",
          "convert_s"}
      Only ``http://docs.localhost/<path>`` is fetched: GET over loopback to the site server
      with ``Host: docs.localhost``, no redirects followed (the site sends none). "error" is
      null on 200; "HTTP <status> <reason>" otherwise (a missing page: "HTTP 404 Not Found");
      "the URL is outside the corpus site (http://docs.localhost/): <url>" for any other
      scheme, host or port (nothing is requested); "invalid URL: <why>" for a URL that is not
      a string or does not parse as scheme://host/path; "fetch failed: <why>" when the site
      server gave no response. ``goal`` is not used by the fetch (it is the agent's note).
  {"id", "op": "memory", "action", "key", "value"}
      -> {"action", "key", "value", "ok" (error is null), "error", "result"}
      action add (key, value; the key must be new), update (key, value; the key must exist),
      retrieve (key; result: the value), remove (key), list (result: the sorted keys);
      add/update/remove give result null. Errors: "no key 'x' in memory", "key 'x' already
      exists (use update)", "unknown action 'x' (one of add, update, retrieve, remove,
      list)", "'key' is required for <action>", "'value' is required for <action>",
      "'key' must be a string", "'value' must be a string". A failed action changes nothing.
      Every change is committed to the SQLite file before the reply.
  {"id", "op": "observe"} -> the common fields only.
  {"id", "op": "stop"} -> {"stopped": true}: the site server is killed, the index closed; the
      memory file stays (the host's last look reads it). Stdin EOF does the same.
A request the driver could not serve gets {"id", "driver_error": "...", "memory",
"memory_digest"} (an unknown op, a search before start, ...).
``search_driver.py --observe`` prints one line with the common fields (the memory file as it is,
{} when there is none) and exits: the host's last look when the driver is lost.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import http.client
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import driver_runtime as runtime
import xapian
from bs4 import BeautifulSoup, Comment, Declaration, Doctype, ProcessingInstruction
from markdownify import MarkdownConverter

CORPUS_JSON = Path(os.environ.get("WORLDTRACE_SEARCH_CORPUS", "/opt/worldtrace/corpus.json"))
INDEX_PATH = Path(os.environ.get("WORLDTRACE_SEARCH_INDEX", "/srv/search/index.glass"))
SITE_ROOT = Path("/srv/search/site")
SITE_SERVER = Path(__file__).with_name("site_server.py")
MEMORY_PATH = Path(os.environ.get("WORLDTRACE_SEARCH_MEMORY", "/srv/memory/memory.sqlite3"))
SITE_USER = "user"
BASE_URL = "http://docs.localhost/"
SITE_HOST = "docs.localhost"
MAX_NUM_RESULTS = 50
DEFAULT_NUM_RESULTS = 10
SNIPPET_LENGTH = 300
"""Characters of document text MSet.snippet may return (before its highlight marks)."""
SITE_START_TIMEOUT_S = 20.0
FETCH_TIMEOUT_S = 30.0
MEMORY_ACTIONS = ("add", "update", "retrieve", "remove", "list")
PR_SET_PDEATHSIG = 1
META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
HIGHLIGHT = re.compile(r"</?b>")


# --- memory ---------------------------------------------------------------------------------------


def read_memory(path: Path = MEMORY_PATH) -> dict[str, Any]:
    """The whole memory in the SQLite file, sorted by key ({} when there is no file)."""
    if not path.exists():
        return {}
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute("SELECT key, value FROM memory ORDER BY key").fetchall()
    finally:
        connection.close()
    return {key: json.loads(value) for key, value in sorted(rows)}


def memory_fields(memory: dict[str, Any]) -> dict[str, Any]:
    """The fields every reply carries: the memory and its digest."""
    canonical = json.dumps(memory, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {
        "memory": dict(sorted(memory.items())),
        "memory_digest": hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
    }


class Memory:
    """The episode's key-value store: one SQLite table, every change committed at once."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        for leftover in (path, path.with_name(path.name + "-journal")):
            leftover.unlink(missing_ok=True)
        self.path = path
        # Autocommit: each statement is its own transaction, on disk before the reply.
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("CREATE TABLE memory (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def contents(self) -> dict[str, Any]:
        """Every entry, sorted by key."""
        rows = self.connection.execute("SELECT key, value FROM memory ORDER BY key").fetchall()
        return {key: json.loads(value) for key, value in rows}

    def apply(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run one memory action; the reply's action fields."""
        action, key, value = request.get("action"), request.get("key"), request.get("value")
        reply: dict[str, Any] = {"action": action, "key": key, "value": value, "result": None}
        error = self._problem(action, key, value)
        if error is None:
            held = self.connection.execute(
                "SELECT value FROM memory WHERE key = ?", (key,)
            ).fetchone()
            if action == "list":
                reply["result"] = sorted(self.contents())
            elif action == "add":
                if held is not None:
                    error = f"key {key!r} already exists (use update)"
                else:
                    self.connection.execute(
                        "INSERT INTO memory (key, value) VALUES (?, ?)", (key, json.dumps(value))
                    )
            elif held is None:
                error = f"no key {key!r} in memory"
            elif action == "update":
                self.connection.execute(
                    "UPDATE memory SET value = ? WHERE key = ?", (json.dumps(value), key)
                )
            elif action == "retrieve":
                reply["result"] = json.loads(held[0])
            elif action == "remove":
                self.connection.execute("DELETE FROM memory WHERE key = ?", (key,))
        reply["ok"] = error is None
        reply["error"] = error
        return reply

    @staticmethod
    def _problem(action: Any, key: Any, value: Any) -> str | None:
        """What is wrong with the action's arguments, before the store is looked at."""
        if action not in MEMORY_ACTIONS:
            return f"unknown action {action!r} (one of {', '.join(MEMORY_ACTIONS)})"
        if action == "list":
            return None
        if key is None:
            return f"'key' is required for {action}"
        if not isinstance(key, str):
            return "'key' must be a string"
        if action in ("add", "update"):
            if value is None:
                return f"'value' is required for {action}"
            if not isinstance(value, str):
                return "'value' must be a string"
        return None

    def close(self) -> None:
        """Close the connection (the file stays)."""
        self.connection.close()


# --- the site server ------------------------------------------------------------------------------


def die_with_parent() -> None:
    """In the child: get SIGKILL when the driver dies, so no server outlives its episode."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Site:
    """The site server process, run as the unprivileged user on loopback."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(SITE_SERVER), "--root", str(SITE_ROOT), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            user=SITE_USER,
            group=SITE_USER,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"},
            preexec_fn=die_with_parent,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait(timeout=5)
            raise RuntimeError(f"the site server exited with code {code} before listening")
        self.port = int(json.loads(line)["port"])
        deadline = time.monotonic() + SITE_START_TIMEOUT_S
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                connection.request("HEAD", "/", headers={"Host": SITE_HOST})
                connection.getresponse().read()
                connection.close()
                break
            except OSError as error:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the site server does not answer: {error}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Kill the server and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=5)


# --- extract --------------------------------------------------------------------------------------


def outside_site(url: str) -> dict[str, Any] | None:
    """The error reply fields for a URL that is not a valid URL on the site, else None."""
    if not isinstance(url, str):
        return {"error": f"invalid URL: expected a string, got {type(url).__name__}"}
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        return {"error": f"invalid URL: {error}: {url!r}"}
    if not parts.scheme or not parts.netloc:
        return {"error": f"invalid URL: not of the form scheme://host/path: {url!r}"}
    if parts.scheme.lower() != "http" or (parts.hostname or "") != SITE_HOST or port is not None:
        return {"error": f"the URL is outside the corpus site ({BASE_URL}): {url}"}
    return None


def decode_body(body: bytes, content_type: str | None) -> str:
    """The body as text: the response's charset, else the page's <meta charset>, else UTF-8."""
    charset = None
    if content_type:
        for parameter in content_type.split(";")[1:]:
            name, _, value = parameter.strip().partition("=")
            if name.lower() == "charset" and value:
                charset = value.strip('"')
    if charset is None:
        found = META_CHARSET.search(body[:4096])
        charset = found.group(1).decode("ascii") if found else "utf-8"
    try:
        return body.decode(charset, "replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", "replace")


def extract(port: int, url: Any) -> dict[str, Any]:
    """Fetch one page of the site and convert it to markdown."""
    reply: dict[str, Any] = {
        "url": url,
        "status": None,
        "content_type": None,
        "html": None,
        "html_bytes": None,
        "markdown": None,
        "error": None,
        "fetch_s": 0.0,
        "convert_s": 0.0,
    }
    refused = outside_site(url)
    if refused is not None:
        reply.update(refused)
        return reply
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=FETCH_TIMEOUT_S)
        try:
            connection.request("GET", target, headers={"Host": SITE_HOST})
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
    except (OSError, http.client.HTTPException) as error:
        reply["fetch_s"] = round(time.perf_counter() - started, 6)
        reply["error"] = f"fetch failed: {type(error).__name__}: {error}"
        return reply
    reply["fetch_s"] = round(time.perf_counter() - started, 6)
    content_type = response.getheader("Content-Type")
    markup = decode_body(body, content_type)
    reply.update(
        status=response.status, content_type=content_type, html=markup, html_bytes=len(body)
    )
    if response.status != 200:
        reply["error"] = f"HTTP {response.status} {response.reason}"
        return reply
    started = time.perf_counter()
    reply["markdown"] = page_markdown(markup)
    reply["convert_s"] = round(time.perf_counter() - started, 6)
    return reply


MARKUP_ONLY = (Comment, Declaration, Doctype, ProcessingInstruction)
"""Nodes that are markup, not page text: markdownify printed an XHTML page's ``<?xml …?>``."""
CONVERTER = MarkdownConverter(heading_style="ATX")


def page_markdown(markup: str) -> str:
    """The page as markdown: its body's text, without the ``<head>``, declarations or comments."""
    soup = BeautifulSoup(markup, "html.parser")
    for node in soup.find_all(string=lambda text: isinstance(text, MARKUP_ONLY)):
        node.extract()
    if soup.head is not None:
        soup.head.decompose()
    return CONVERTER.convert_soup(soup)


# --- search ---------------------------------------------------------------------------------------


class Engine:
    """The Xapian database and its query parser."""

    def __init__(self, path: Path) -> None:
        self.database = xapian.Database(str(path))
        self.stemmer = xapian.Stem("english")
        self.parser = xapian.QueryParser()
        self.parser.set_stemmer(self.stemmer)
        self.parser.set_stemming_strategy(xapian.QueryParser.STEM_SOME)
        self.parser.set_database(self.database)
        self.parser.set_default_op(xapian.Query.OP_OR)
        self.parser.add_prefix("title", "S")
        self.enquire = xapian.Enquire(self.database)

    def search(self, query: Any, num_results: Any) -> dict[str, Any]:
        """Rank the corpus for ``query``; the search reply's fields."""
        started = time.perf_counter()
        reply: dict[str, Any] = {
            "query": query,
            "num_results": num_results,
            "parsed_query": None,
            "estimated_matches": 0,
            "results": [],
            "error": None,
        }
        if not isinstance(query, str) or not query.strip():
            reply["error"] = "the query must be a non-empty string"
        elif (
            isinstance(num_results, bool)
            or not isinstance(num_results, int)
            or not 1 <= num_results <= MAX_NUM_RESULTS
        ):
            reply["error"] = f"num_results must be an integer from 1 to {MAX_NUM_RESULTS}"
        else:
            try:
                parsed = self.parser.parse_query(query, xapian.QueryParser.FLAG_DEFAULT)
            except xapian.QueryParserError as error:
                reply["error"] = f"the query cannot be parsed: {error}"
            else:
                reply["parsed_query"] = str(parsed)
                self.enquire.set_query(parsed)
                matches = self.enquire.get_mset(0, num_results)
                reply["estimated_matches"] = matches.get_matches_estimated()
                reply["results"] = [self._result(matches, item) for item in matches]
        reply["search_s"] = round(time.perf_counter() - started, 6)
        return reply

    def _result(self, matches: xapian.MSet, item: Any) -> dict[str, Any]:
        """One ranked result with the engine's snippet of its text."""
        data = json.loads(item.document.get_data())
        highlighted = matches.snippet(
            data["text"],
            SNIPPET_LENGTH,
            self.stemmer,
            xapian.MSet.SNIPPET_BACKGROUND_MODEL | xapian.MSet.SNIPPET_EXHAUSTIVE,
            "<b>",
            "</b>",
            "...",
        )
        if isinstance(highlighted, bytes):
            highlighted = highlighted.decode("utf-8", "replace")
        return {
            "rank": item.rank + 1,
            "docid": item.docid,
            "score": item.weight,
            "percent": item.percent,
            "url": data["url"],
            "title": data["title"],
            "snippet": unescape(HIGHLIGHT.sub("", highlighted)),
            "snippet_highlighted": highlighted,
            "date": data["date"],
        }


# --- the driver -----------------------------------------------------------------------------------


class Driver:
    """Serves requests; holds the episode's site server, index and memory once started."""

    def __init__(self) -> None:
        self.site: Site | None = None
        self.engine: Engine | None = None
        self.memory: Memory | None = None

    def current_memory(self) -> dict[str, Any]:
        """The memory of the episode (the file's, before start or after stop)."""
        if self.memory is not None:
            return self.memory.contents()
        return read_memory()

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Execute one request and return its reply (without the common fields)."""
        op = request.get("op")
        if op == "start":
            return self.start()
        if op == "stop":
            self.stop()
            return {"stopped": True}
        if op == "observe":
            return {}
        if op not in ("search", "extract", "memory"):
            raise ValueError(f"unknown op {op!r} (start, search, extract, memory, observe, stop)")
        if self.site is None or self.engine is None or self.memory is None:
            raise RuntimeError(f"op {op!r} before start")
        if op == "search":
            return self.engine.search(
                request.get("query"), request.get("num_results", DEFAULT_NUM_RESULTS)
            )
        if op == "extract":
            return extract(self.site.port, request.get("url"))
        return self.memory.apply(request)

    def start(self) -> dict[str, Any]:
        """Start the site server, open the index, create the empty memory."""
        if self.site is not None:
            raise RuntimeError("already started; stop first")
        started = time.monotonic()
        corpus = json.loads(CORPUS_JSON.read_text(encoding="utf-8"))
        self.site = Site()
        try:
            self.engine = Engine(INDEX_PATH)
            self.memory = Memory(MEMORY_PATH)
        except BaseException:
            self.stop()
            raise
        return {
            "corpus": corpus,
            "site": {"base_url": BASE_URL, "port": self.site.port},
            "start_s": round(time.monotonic() - started, 6),
        }

    def stop(self) -> None:
        """Stop the site server, close the index and the memory."""
        if self.site is not None:
            self.site.stop()
        if self.engine is not None:
            self.engine.database.close()
        if self.memory is not None:
            self.memory.close()
        self.site = self.engine = self.memory = None


def serve(reply_fd: int) -> None:
    """Serve requests from stdin until it closes or the host goes."""
    driver = Driver()

    def with_memory(reply: dict[str, Any]) -> None:
        # Every reply, a driver_error too, carries the episode's memory.
        try:
            reply.update(memory_fields(driver.current_memory()))
        except (sqlite3.Error, ValueError) as error:
            reply.setdefault("driver_error", f"the memory cannot be read: {error}")

    try:
        runtime.serve(
            driver.handle,
            reply_fd,
            error_key="driver_error",
            complete=with_memory,
            ensure_ascii=False,
        )
    finally:
        driver.stop()


def main() -> None:
    """Serve requests, or with ``--observe`` print the common fields once."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--observe", action="store_true", help="print the memory fields once")
    args = parser.parse_args()
    if args.observe:
        print(json.dumps(memory_fields(read_memory()), ensure_ascii=False))
        return
    serve(runtime.private_reply_fd())


if __name__ == "__main__":
    main()
