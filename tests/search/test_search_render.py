"""The search renderer, state diff, config and call mapping, on records in the driver's wire form.

The raw records here are written out by hand in the form the driver replies with (the reply's
fields plus what the host adds: ``tool``, ``arguments``, ``schema_problems``, ``state_diff``);
the same rendering of the real engine's replies is checked in ``test_search_environment.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from worldtrace.collectors.search.actions import TOOLS, dict_memory, web_extractor, web_search
from worldtrace.collectors.search.environment import SearchConfig, driver_request
from worldtrace.collectors.search.render import (
    DEFAULT_MAX_MARKDOWN_CHARS,
    SearchRenderer,
    cut_marker,
)
from worldtrace.collectors.search.state import memory_diff
from worldtrace.collectors.tool_calls import tool_call
from worldtrace.curation.config import FilterSettings

RENDER = SearchRenderer()
MEMORY = {"memory": {"answer": "--soft"}, "memory_digest": "d" * 64}


def call(tool: str, **reply: Any) -> dict[str, Any]:
    """A raw call record: the driver's reply fields and the host's."""
    return {
        "tool": tool,
        "arguments": {},
        "schema_problems": [],
        "state_diff": memory_diff(MEMORY["memory"], MEMORY["memory"]),
        **MEMORY,
        **reply,
    }


def result(rank: int, url: str, title: str, highlighted: str, date: str | None) -> dict[str, Any]:
    """One ranked result as the driver gives it."""
    return {
        "rank": rank,
        "docid": 100 + rank,
        "score": 12.5 / rank,
        "percent": 100 - rank,
        "url": url,
        "title": title,
        "snippet": highlighted.replace("<b>", "").replace("</b>", ""),
        "snippet_highlighted": highlighted,
        "date": date,
    }


def test_search_results_render_numbered_with_title_snippet_and_date() -> None:
    raw = call(
        "web_search",
        query="git rebase autostash",
        num_results=2,
        parsed_query="Query((Zgit@1 OR Zrebas@2 OR Zautostash@3))",
        estimated_matches=41,
        results=[
            result(
                1,
                "http://docs.localhost/git/git-rebase.html",
                "git-rebase(1)",
                "...the --<b>autostash</b> option of\ngit-<b>rebase</b> &amp; friends...",
                "2025-10-07",
            ),
            result(
                2, "http://docs.localhost/packages/git.html", "git:  fast VCS", "no marks", None
            ),
        ],
        search_s=0.01,
        error=None,
    )
    observation = RENDER.observation(raw)
    assert observation.format == "search-results"
    assert observation.text == (
        "[1] http://docs.localhost/git/git-rebase.html\n"
        "Title: git-rebase(1)\n"
        "Snippet: ...the --**autostash** option of git-**rebase** & friends...\n"
        "Date: 2025-10-07\n"
        "\n"
        "[2] http://docs.localhost/packages/git.html\n"
        "Title: git: fast VCS\n"
        "Snippet: no marks\n"
        "Date: N/A"
    )
    assert observation.meta["urls"] == [
        "http://docs.localhost/git/git-rebase.html",
        "http://docs.localhost/packages/git.html",
    ]
    assert observation.meta["estimated_matches"] == 41
    assert observation.meta["memory"] == {"answer": "--soft"}
    assert observation.meta["state_diff"]["changed"] is False


def test_no_results_and_a_refused_query_say_so() -> None:
    empty = RENDER.observation(call("web_search", query="xyzzy plugh", results=[], error=None))
    assert empty.text == "No results found for the query: xyzzy plugh"
    refused = call("web_search", query=3, results=[], error="the query must be a non-empty string")
    assert RENDER.observation(refused).text == "Error: the query must be a non-empty string"


def page(markdown: str | None, limit: int | None = None) -> dict[str, Any]:
    """A raw extract record."""
    raw = call(
        "web_extractor",
        url="http://docs.localhost/git/git-stash.html",
        status=200,
        content_type="text/html; charset=utf-8",
        html="<html>…</html>",
        html_bytes=14,
        markdown=markdown,
        error=None,
        fetch_s=0.002,
        convert_s=0.03,
    )
    if limit is not None:
        raw["max_markdown_chars"] = limit
    return raw


def test_page_markdown_is_shown_with_blank_runs_collapsed() -> None:
    observation = RENDER.observation(page("\n\n# git-stash\n\n\n\n\nStash the changes\n\n"))
    assert observation.format == "markdown"
    assert observation.text == "# git-stash\n\nStash the changes"
    assert observation.meta["markdown_cut"] is False
    assert observation.meta["status"] == 200


def test_long_markdown_is_cut_with_a_marker_curation_keeps() -> None:
    markdown = "# Title\n" + "word " * 10_000
    observation = RENDER.observation(page(markdown, limit=1000))
    shown, marker = observation.text.rsplit("\n\n", 1)
    assert shown == markdown[:1000]
    assert (
        marker
        == cut_marker(1000, len(markdown))
        == "[… markdown cut: 1,000 of 50,008 characters shown]"
    )
    assert observation.meta["markdown_cut"] is True
    assert observation.meta["markdown_chars"] == len(markdown)
    # The cut page is a whole observation, not one curation takes for broken.
    settings = FilterSettings()
    assert not any(observation.text.endswith(m) for m in settings.truncated_markers)
    # Without a limit in the record, the documented default applies.
    default = RENDER.observation(page("x" * (DEFAULT_MAX_MARKDOWN_CHARS + 1)))
    assert default.text.startswith("x" * DEFAULT_MAX_MARKDOWN_CHARS + "\n\n[… markdown cut")


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        (
            {"status": 404, "markdown": None, "error": "HTTP 404 Not Found"},
            "Error: HTTP 404 Not Found",
        ),
        (
            {
                "status": None,
                "html": None,
                "markdown": None,
                "error": "the URL is outside the corpus site (http://docs.localhost/): http://example.com/",
            },
            "Error: the URL is outside the corpus site (http://docs.localhost/): http://example.com/",
        ),
        ({"markdown": "\n\n  \n"}, "[the page has no text]"),
    ],
)
def test_page_errors_and_empty_pages(fields: dict[str, Any], text: str) -> None:
    raw = page("unused")
    raw.update(fields)
    assert RENDER.observation(raw).text == text


def memory(action: str, key: str | None, result: Any = None, error: str | None = None) -> dict:
    """The fields of a memory reply."""
    return {"action": action, "key": key, "ok": error is None, "error": error, "result": result}


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        (memory("add", "k"), "Added 'k' to memory."),
        (memory("update", "k"), "Updated 'k' in memory."),
        (memory("remove", "k"), "Removed 'k' from memory."),
        (memory("retrieve", "k", "--soft"), "Value of 'k':\n--soft"),
        (memory("list", None, ["a", "ü"]), 'Keys in memory: ["a", "ü"]'),
        (memory("list", None, []), "Keys in memory: []"),
        (memory("retrieve", "x", error="no key 'x' in memory"), "Error: no key 'x' in memory"),
    ],
)
def test_memory_results(reply: dict[str, Any], text: str) -> None:
    observation = RENDER.observation(call("dict_memory", **reply))
    assert observation.format == "tool-result"
    assert observation.text == text
    assert observation.meta["action"] == reply["action"]


def test_first_observation_names_the_corpus_and_lists_the_tools_in_meta() -> None:
    raw = {
        "corpus": {
            "base_url": "http://docs.localhost/",
            "engine": {"name": "xapian", "version": "1.4.22"},
            "index": {"sha256": "ab" * 32},
            "documents": {"total": 21000, "per_collection": {"git": 242, "man": 20758}},
        },
        "site": {"base_url": "http://docs.localhost/", "port": 40000},
        "tools": [dict(tool) for tool in TOOLS],
        "memory": {},
        "memory_digest": "e" * 64,
        "state_diff": None,
    }
    observation = RENDER.observation(raw)
    assert observation.text == (
        "Documentation search over http://docs.localhost/: 21,000 documents (git 242, man "
        "20,758), xapian 1.4.22\nTools: web_search, web_extractor, dict_memory\nMemory: 0 keys"
    )
    assert [tool["name"] for tool in observation.meta["tools"]] == [t["name"] for t in TOOLS]
    assert observation.meta["corpus"]["index_sha256"] == "ab" * 32


def test_lost_sandbox_and_unknown_tool() -> None:
    lost = call("web_search", sandbox_lost=True, state_stale=False, error="stopped answering")
    assert RENDER.observation(lost).text == "[no result: the sandbox stopped answering]"
    unknown = call("open_url", error="unknown tool 'open_url' (the tools are: ...)")
    assert RENDER.observation(unknown).text == "Error: unknown tool 'open_url' (the tools are: ...)"


def test_action_text_is_canonical() -> None:
    action = web_search("git stash", 5).model_copy(update={"text": "web_search('git stash')"})
    assert (
        RENDER.action(action).text
        == '{"arguments": {"num_results": 5, "query": "git stash"}, "name": "web_search"}'
    )


def test_memory_diff_names_added_removed_and_modified_keys() -> None:
    diff = memory_diff({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "20", "d": "4"})
    assert diff == {
        "kind": "memory",
        "changed": True,
        "added": {"d": "4"},
        "removed": {"c": "3"},
        "modified": {"b": ["2", "20"]},
    }
    assert memory_diff(None, {})["changed"] is False
    assert memory_diff(None, {"a": "1"})["added"] == {"a": "1"}


def test_config_defaults_and_refusals() -> None:
    config = SearchConfig()
    assert config.image_tag == "worldtrace/search:latest"
    assert config.max_markdown_chars == DEFAULT_MAX_MARKDOWN_CHARS
    with pytest.raises(ValidationError, match="extra"):
        SearchConfig(engine="tantivy")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="max_markdown_chars"):
        SearchConfig(max_markdown_chars=10)
    with pytest.raises(ValidationError, match="call_timeout_s"):
        SearchConfig(call_timeout_s=0)


def test_calls_map_to_driver_requests_with_what_they_have() -> None:
    assert driver_request(web_search("x")) == {"op": "search", "query": "x", "num_results": 10}
    assert driver_request(tool_call("web_search", {"num_results": "5"})) == {
        "op": "search",
        "query": None,
        "num_results": "5",
    }
    assert driver_request(web_extractor("http://docs.localhost/a.html", "g")) == {
        "op": "extract",
        "url": "http://docs.localhost/a.html",
        "goal": "g",
    }
    assert driver_request(dict_memory("list")) == {
        "op": "memory",
        "action": "list",
        "key": None,
        "value": None,
    }
    assert driver_request(tool_call("open_url", {"url": "x"})) is None
