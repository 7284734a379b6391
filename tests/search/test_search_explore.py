"""The search exploring policy: seeded, reproducible, and building queries from what it read.

No engine runs here: the answers the policy reads come from a STAND-IN (:class:`StandIn`, a
handful of pages behind word-overlap ranking and a dict as memory) built by these tests. It
answers with the driver's reply fields (``results`` with url/title/snippet, ``markdown``,
``error``, ``memory``) so that what the policy learns from it is what it learns from the real
driver; the real walk is in ``test_search_environment.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.search.explore import (
    SEED_QUERIES,
    SearchExplorePolicy,
    misspell,
    page_fact,
    page_key,
    phrases_of,
    words_of,
)
from worldtrace.schemas import Action

BASE = "http://docs.localhost/"
PAGES = {
    BASE + "git/git-stash.html": (
        "git-stash(1)",
        "# git-stash\n\nStash the changes in a dirty working directory away.\n\n"
        "Use git stash when you want to record the current state of the working directory "
        "and the index, but want to go back to a clean working directory.",
    ),
    BASE + "man/1/tar.html": (
        "tar(1): an archiving utility",
        "# TAR\n\nGNU tar saves many files together into a single tape or disk archive, and "
        "can restore individual files from the archive. Compress the archive with gzip.",
    ),
    BASE + "python/library/os.html": (
        "os — Miscellaneous operating system interfaces",
        "# os\n\nThis module provides a portable way of using operating system dependent "
        "functionality. Environment variable mapping lives in os.environ for the process.",
    ),
    BASE + "sqlite/lang_createindex.html": (
        "CREATE INDEX",
        "# CREATE INDEX\n\nThe CREATE INDEX command consists of the keywords CREATE INDEX "
        "followed by the name of the new index. A unique index does not allow duplicates.",
    ),
}


class StandIn:
    """STAND-IN for the search driver: word-overlap ranking over PAGES, a dict as memory."""

    def __init__(self) -> None:
        self.memory: dict[str, str] = {}

    def first(self) -> dict[str, Any]:
        """The first observation's fields."""
        return {"memory": {}, "memory_digest": "0" * 64, "tools": []}

    def answer(self, action: Action) -> dict[str, Any]:
        """The driver's reply to one call, with the host's fields."""
        arguments = action.arguments
        reply: dict[str, Any] = {"tool": action.name, "arguments": arguments, "error": None}
        if action.name == "web_search":
            wanted = set(words_of(str(arguments["query"]).replace("title:", "")))
            scored = sorted(
                (
                    (len(wanted & set(words_of(title + " " + text))), url)
                    for url, (title, text) in PAGES.items()
                ),
                reverse=True,
            )
            hits = [url for score, url in scored if score][: arguments["num_results"]]
            reply["results"] = [
                {"rank": k, "url": url, "title": PAGES[url][0], "snippet": PAGES[url][1][:120]}
                for k, url in enumerate(hits, start=1)
            ]
        elif action.name == "web_extractor":
            url = arguments["url"]
            reply["url"] = url
            if url in PAGES:
                reply["markdown"] = PAGES[url][1]
            else:
                reply.update(markdown=None, error="HTTP 404 Not Found")
        else:
            kind, key, value = arguments["action"], arguments.get("key"), arguments.get("value")
            if kind == "add" and key not in self.memory:
                self.memory[key] = value
            elif kind == "list":
                reply["result"] = sorted(self.memory)
            elif key not in self.memory:
                reply["error"] = f"no key {key!r} in memory"
            elif kind == "update":
                self.memory[key] = value
            elif kind == "remove":
                del self.memory[key]
        reply["memory"] = dict(sorted(self.memory.items()))
        return reply


def walk(seed: int, steps: int, **params: Any) -> tuple[list[Action], SearchExplorePolicy]:
    """The policy's actions over ``steps`` steps against a fresh stand-in."""
    policy = SearchExplorePolicy(**params)
    policy.reset(seed, None)
    stand_in = StandIn()
    observation = stand_in.first()
    history: list[HistoryItem] = []
    for _ in range(steps):
        action = policy.act(observation, history)
        assert action is not None
        observation = stand_in.answer(action)
        history.append(HistoryItem(action=action, observation=observation))
    return [item.action for item in history], policy


def test_the_same_seed_gives_the_same_calls_and_another_seed_others() -> None:
    first, _ = walk(3, 80)
    again, _ = walk(3, 80)
    other, _ = walk(4, 80)
    assert [a.text for a in first] == [a.text for a in again]
    assert [a.text for a in first] != [a.text for a in other]
    # A policy object reused for a second episode starts over from the seed.
    policy = SearchExplorePolicy()
    policy.reset(3, None)
    stand_in = StandIn()
    assert policy.act(stand_in.first(), []) == first[0]


def test_queries_come_from_what_was_read_and_every_tool_is_used() -> None:
    actions, policy = walk(11, 200)
    queries = [a.arguments["query"] for a in actions if a.name == "web_search"]
    assert queries[0] in SEED_QUERIES
    read = set(words_of(" ".join(title + " " + text for title, text in PAGES.values())))
    seeded = set(words_of(" ".join(SEED_QUERIES)))
    from_reading = [q for q in queries if set(words_of(q)) & (read - seeded)]
    assert len(from_reading) > len(queries) / 3
    kinds = {kind.removesuffix("+typo") for kind in policy.query_kinds}
    assert {"seed", "terms", "phrase", "narrow", "title"} <= kinds
    assert any(kind.endswith("+typo") for kind in policy.query_kinds)
    assert any(q.startswith('"') and q.endswith('"') and len(q.split()) == 3 for q in queries)
    opened = [a.arguments["url"] for a in actions if a.name == "web_extractor"]
    assert set(PAGES) <= set(opened)
    assert any(url not in PAGES and url.startswith(BASE) for url in opened)  # a 404 now and then
    memory = [a.arguments for a in actions if a.name == "dict_memory"]
    assert {m["action"] for m in memory} == {"add", "update", "retrieve", "remove", "list"}
    # Facts are stored under the page's key, and some retrieves ask for a key never stored.
    assert any(m["action"] == "add" and m["key"] == "git-git-stash" for m in memory)
    stored = {m["key"] for m in memory if m["action"] == "add"}
    assert any(m["action"] == "retrieve" and m["key"] not in stored for m in memory)


def test_helpers() -> None:
    assert words_of("The CREATE INDEX command, os.environ and git-stash!") == [
        "create",
        "index",
        "command",
        "os.environ",
        "git-stash",
    ]
    assert "stash the changes" in phrases_of("Stash the changes in a dirty working directory")
    assert page_key(BASE + "man/1/tar.html") == "man-1-tar"
    assert page_fact(PAGES[BASE + "man/1/tar.html"][1], ["gzip"]) == (
        "Compress the archive with gzip."
    )
    import random

    typo = misspell("archive", random.Random(1))
    assert typo != "archive" and abs(len(typo) - len("archive")) <= 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"open_share": 1.5}, "open_share should be less than or equal to 1, got 1.5"),
        ({"vocabulary": []}, "non-empty list"),
        ({"vocabulary": ["ok", " "]}, "non-empty list"),
    ],
)
def test_bad_parameters_are_refused(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SearchExplorePolicy(**params)
