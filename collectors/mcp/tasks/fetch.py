"""Scripted tasks on ``mcp-server-fetch`` against the local "Riverside Public Library" site.

The server's container shares the network namespace of a fresh web-domain datasette site, so
``http://127.0.0.1/`` is Datasette 0.65 over the library's database (branches, authors, 60
books, members, loans, reviews) and nothing else is reachable. The one tool, ``fetch``, turns
an HTML page into markdown (tables as markdown tables), returns JSON as it is, and cuts a long
answer at ``max_length`` characters, to be continued with ``start_index``. The tasks read
pages, query Datasette's JSON API (filters, full-text search, SQL) and page through a long
page, as one would to answer a question about the library.

The server keeps no state, so each check fetches the truth itself from the same site inside
the container (``urllib``, through a different route where there is one: the SQL endpoint or
a facet for what the task read from a table) and compares it with what the server returned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

from worldtrace.collectors.mcp.tasks import (
    CheckContext,
    McpTask,
    all_of,
    answered,
    calls,
    container_json,
    result_text,
)
from worldtrace.collectors.tool_calls import tool_call
from worldtrace.schemas import Action

SITE = "http://127.0.0.1"

SITE_GET = """
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=20) as response:
    print(json.dumps(json.load(response)))
"""
"""Fetches one JSON document from the site, inside the container."""

TRUNCATED = re.compile(r"\s*<error>Content truncated\..*</error>\s*$", re.DOTALL)


def site_json(context: CheckContext, path: str) -> Any:
    """The site's JSON at ``path``, fetched in the container."""
    return container_json(context, SITE_GET, SITE + path)


def sql_path(sql: str) -> str:
    """The path of Datasette's JSON answer to ``sql`` on the library database, as rows."""
    return "/library.json?" + urlencode({"sql": " ".join(sql.split()), "_shape": "array"})


def _fetch(path: str, **options: Any) -> Action:
    return tool_call("fetch", {"url": SITE + path, **options})


def answers_for(context: CheckContext, path: str) -> list[Mapping[str, Any]]:
    """The answered fetches of ``path`` (any options), in order."""
    return [
        raw
        for raw in calls(context, "fetch")
        if answered(raw) and (raw.get("arguments") or {}).get("url") == SITE + path
    ]


def body(raw: Mapping[str, Any]) -> str:
    """What a fetch returned of the page: without the server's header lines or truncation note."""
    text = result_text(raw)
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith("Contents of "):
            text = "\n".join(lines[index + 1 :])
            break
    return TRUNCATED.sub("", text)


def _json_body(raw: Mapping[str, Any] | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(body(raw))
    except ValueError:
        return None


def _table_rows(markdown: str) -> dict[str, str]:
    """Markdown table lines by their first cell (an id), markdown escapes removed."""
    rows: dict[str, str] = {}
    for line in markdown.replace("\\", "").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0].isdigit():
            rows[cells[0]] = line.replace("\\", "")
    return rows


def table_shows(
    path: str, truth_path: str, columns: Sequence[str], exact_count: bool = False
) -> Callable[[CheckContext], bool]:
    """The page at ``path`` shows every row of ``truth_path`` (JSON rows with an ``id``).

    Each row's line must hold the row's ``columns``; with ``exact_count``, no other row shows.
    """

    def check(context: CheckContext) -> bool:
        answers = answers_for(context, path)
        if not answers:
            return False
        shown = _table_rows(body(answers[-1]))
        truth = site_json(context, truth_path)
        if not truth or (exact_count and len(shown) != len(truth)):
            return False
        for row in truth:
            line = shown.get(str(row["id"]))
            if line is None or not all(f" {row[column]} |" in line for column in columns):
                return False
        return True

    return check


def json_rows_equal(
    path: str, truth_path: str, key: Callable[[Mapping[str, Any]], Any]
) -> Callable[[CheckContext], bool]:
    """The JSON rows fetched from ``path`` are those of ``truth_path``, in the same order.

    Rows are compared by ``key``.
    """

    def check(context: CheckContext) -> bool:
        answers = answers_for(context, path)
        rows = _json_body(answers[-1]) if answers else None
        if not isinstance(rows, list) or not all(isinstance(row, Mapping) for row in rows):
            return False
        truth = site_json(context, truth_path)
        return bool(truth) and [key(row) for row in rows] == [key(row) for row in truth]

    return check


def pages_show_titles_in_order(path: str, count: int) -> Callable[[CheckContext], bool]:
    """The chunks fetched of ``path``, joined, show the catalogue's first ``count`` titles.

    Chunks are joined in ``start_index`` order; the titles must appear in title order, as the
    site's SQL sorts them.
    """

    def check(context: CheckContext) -> bool:
        chunks = sorted(
            answers_for(context, path),
            key=lambda raw: int((raw.get("arguments") or {}).get("start_index", 0)),
        )
        if len(chunks) < 2:
            return False
        text = "".join(body(raw) for raw in chunks).replace("\\", "")
        truth = site_json(context, sql_path("SELECT title FROM books ORDER BY title"))
        position = 0
        for row in truth[:count]:
            position = text.find(f"| {row['title']} |", position)
            if position < 0:
                return False
        return True

    return check


def refused_first(status: int) -> Callable[[CheckContext], bool]:
    """The episode's first fetch was refused with HTTP ``status``."""

    def check(context: CheckContext) -> bool:
        episode = calls(context, "fetch")
        if not episode:
            return False
        result = episode[0].get("result")
        return (
            isinstance(result, Mapping)
            and bool(result.get("isError"))
            and f"status code {status}" in result_text(episode[0])
        )

    return check


def facet_counts_match(path: str) -> Callable[[CheckContext], bool]:
    """The SQL answer at ``path`` (branch_id, loans) agrees with the loans table's facet."""

    def check(context: CheckContext) -> bool:
        answers = answers_for(context, path)
        rows = _json_body(answers[-1]) if answers else None
        if not isinstance(rows, list):
            return False
        facet = site_json(context, "/library/loans.json?_facet=branch_id&_size=0")
        truth = {
            item["value"]: item["count"] for item in facet["facet_results"]["branch_id"]["results"]
        }
        shown = {row.get("branch_id"): row.get("loans") for row in rows if isinstance(row, Mapping)}
        return bool(truth) and shown == truth

    return check


def raw_title_matches(path: str, table: str) -> Callable[[CheckContext], bool]:
    """The raw HTML fetched from ``path`` has the table page's title with its true row count."""

    def check(context: CheckContext) -> bool:
        answers = [
            raw for raw in answers_for(context, path) if (raw.get("arguments") or {}).get("raw")
        ]
        if not answers:
            return False
        count = site_json(context, sql_path(f"SELECT count(*) AS n FROM {table}"))[0]["n"]
        # Datasette adds how the rows are sorted after the count ("30 rows sorted by name").
        title = re.search(r"<title>([^<]*)</title>", result_text(answers[-1]))
        return (
            title is not None
            and re.match(rf"library: {table}: {count} rows\b", title.group(1)) is not None
        )

    return check


def tables_listed(path: str) -> Callable[[CheckContext], bool]:
    """The database JSON fetched from ``path`` lists the tables the site has, hidden or not."""

    def check(context: CheckContext) -> bool:
        answers = answers_for(context, path)
        shown = _json_body(answers[-1]) if answers else None
        if not isinstance(shown, Mapping) or not isinstance(shown.get("tables"), list):
            return False
        truth = site_json(context, sql_path("SELECT name FROM sqlite_master WHERE type = 'table'"))
        names = {table.get("name") for table in shown["tables"] if isinstance(table, Mapping)}
        return bool(truth) and names == {row["name"] for row in truth}

    return check


DICKENS_BOOKS = "/library/books.json?_shape=array&author_id=2&_col=title&_col=year&_sort=title"
LOANS_PER_BRANCH = sql_path(
    "SELECT branch_id, count(*) AS loans FROM loans GROUP BY branch_id ORDER BY branch_id"
)
FRANKENSTEIN_REVIEWS = "/library/reviews.json?_shape=array&book_id=12&_sort=created"

TASKS: tuple[McpTask, ...] = (
    McpTask(
        name="fetch-branch-opening-years",
        instruction=(
            "Open the Riverside Public Library site and list its branches with the year each "
            "one opened."
        ),
        category="read",
        server="fetch",
        steps=(_fetch("/"), _fetch("/library/branches")),
        check=table_shows(
            "/library/branches",
            "/library/branches.json?_shape=array",
            ("name", "opened_year"),
            exact_count=True,
        ),
    ),
    McpTask(
        name="fetch-dickens-books-from-the-json-api",
        instruction=(
            "Which books by Charles Dickens does the library hold, and from which years? Use "
            "the site's JSON API: find his author id, then his books."
        ),
        category="api",
        server="fetch",
        steps=(
            _fetch("/library/authors.json?_shape=array&name=" + quote("Charles Dickens")),
            _fetch(DICKENS_BOOKS),
        ),
        check=json_rows_equal(
            DICKENS_BOOKS,
            sql_path(
                """SELECT b.title, b.year FROM books b JOIN authors a ON a.id = b.author_id
                   WHERE a.name = 'Charles Dickens' ORDER BY b.title"""
            ),
            key=lambda row: (row.get("title"), row.get("year")),
        ),
    ),
    McpTask(
        name="fetch-catalogue-in-pages",
        instruction=(
            "Read the start of the book catalogue page, which is too long for one answer: "
            "fetch it in three 1,500-character parts."
        ),
        category="paginate",
        server="fetch",
        steps=(
            _fetch("/library/books", max_length=1500),
            _fetch("/library/books", max_length=1500, start_index=1500),
            _fetch("/library/books", max_length=1500, start_index=3000),
        ),
        check=pages_show_titles_in_order("/library/books", 20),
    ),
    McpTask(
        name="fetch-overdue-loans-report",
        instruction=(
            "Open the library database page, then the 'Overdue loans' query, and report every "
            "overdue loan with its book, member and branch."
        ),
        category="read",
        server="fetch",
        steps=(_fetch("/library"), _fetch("/library/overdue_loans", max_length=20000)),
        check=table_shows(
            "/library/overdue_loans",
            "/library/overdue_loans.json?_shape=array&_size=max",
            ("title", "member", "branch", "due_on"),
            exact_count=True,
        ),
    ),
    McpTask(
        name="fetch-search-the-whale-book",
        instruction=(
            "Search the catalogue for 'whale' and open the row of the book found to give its "
            "author id, year and page count."
        ),
        category="search",
        server="fetch",
        steps=(_fetch("/library/books?_search=whale"), _fetch("/library/books/35")),
        check=all_of(
            table_shows(
                "/library/books?_search=whale",
                "/library/books.json?_shape=array&_search=whale",
                ("title",),
                exact_count=True,
            ),
            table_shows(
                "/library/books/35",
                "/library/books.json?_shape=array&id=35",
                ("title", "author_id", "year", "pages"),
            ),
        ),
    ),
    McpTask(
        name="fetch-loans-per-branch-with-sql",
        instruction=(
            "How many loans has each branch made? Ask Datasette's SQL endpoint for the count "
            "per branch id, after looking up the branches."
        ),
        category="api",
        server="fetch",
        steps=(_fetch("/library/branches.json?_shape=array"), _fetch(LOANS_PER_BRANCH)),
        check=facet_counts_match(LOANS_PER_BRANCH),
    ),
    McpTask(
        name="fetch-frankenstein-reviews",
        instruction=(
            "Find Frankenstein's book id through the JSON API and fetch its reviews, oldest first."
        ),
        category="api",
        server="fetch",
        steps=(
            _fetch("/library/books.json?_shape=array&title=Frankenstein&_col=title"),
            _fetch(FRANKENSTEIN_REVIEWS),
        ),
        check=json_rows_equal(
            FRANKENSTEIN_REVIEWS,
            sql_path(
                """SELECT r.id FROM reviews r JOIN books b ON b.id = r.book_id
                   WHERE b.title = 'Frankenstein' ORDER BY r.created, r.id"""
            ),
            key=lambda row: row.get("id"),
        ),
    ),
    McpTask(
        name="fetch-authors-page-raw-html",
        instruction=(
            "Fetch the raw HTML of the authors table page (the first 400 characters) to read "
            "the page title with its row count."
        ),
        category="read",
        server="fetch",
        steps=(
            _fetch("/library/authors", max_length=2000),
            _fetch("/library/authors", raw=True, max_length=400),
        ),
        check=raw_title_matches("/library/authors", "authors"),
    ),
    McpTask(
        name="fetch-missing-page-then-database-tables",
        instruction=(
            "The link /library/loan is broken; when the site answers 404, list the database's "
            "tables from its JSON description instead."
        ),
        category="recover",
        server="fetch",
        steps=(_fetch("/library/loan"), _fetch("/library.json", max_length=50000)),
        check=all_of(refused_first(404), tables_listed("/library.json")),
    ),
)
"""The fetch server's tasks."""
