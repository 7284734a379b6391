"""Search raw records → canonical observations, in the format search world models predict.

The raw record of a call is the driver's whole reply (``collectors/search/image/
search_driver.py``: the engine's scores, document ids, parsed query and highlighted snippets;
the fetched page's HTML and full markdown; the memory) plus the call (``tool``,
``arguments``), the problems the schema check found, and the memory's diff. The text of the
observation depends on the tool:

- ``web_search`` (format ``search-results``): one block per result, blocks separated by a blank
  line::

      [1] http://docs.localhost/git/git-rebase.html
      Title: git-rebase(1)
      Snippet: ...before the rebase and apply it again after the **rebase**...
      Date: 2023-01-13

  ``Snippet`` is the engine's own highlighted snippet (Xapian's ``MSet.snippet``): its
  ``<b>`` marks written as markdown bold ``**…**``, HTML entities decoded, line breaks as
  spaces. ``Date`` is ``N/A`` when the document has none. A search that finds nothing reads
  ``No results found for the query: <query>``; a query the engine refuses reads
  ``Error: <the engine's message>``.
- ``web_extractor`` (format ``markdown``): the page's markdown (the driver's markdownify
  output, runs of blank lines as one blank line, outer blank lines trimmed), cut after
  ``max_markdown_chars`` characters (recorded in the raw record; default
  :data:`DEFAULT_MAX_MARKDOWN_CHARS`) with the marker line
  ``[… markdown cut: N of M characters shown]`` (a marker curation's truncation rule does
  not take for a broken observation); a page without text reads ``[the page has no text]``.
  An HTTP error, a URL outside the corpus site or an invalid URL reads ``Error: <message>``
  (``Error: HTTP 404 Not Found``).
- ``dict_memory`` (format ``tool-result``): ``Added 'k' to memory.``, ``Updated 'k' in
  memory.``, ``Removed 'k' from memory.``, for retrieve ``Value of 'k':`` and the value on
  the next line, for list ``Keys in memory: ["a", "b"]`` (a JSON array, sorted; ``[]`` when
  empty); a refused action reads ``Error: <message>`` (``Error: no key 'x' in memory``).
- any other tool name (no such tool: nothing was sent): ``Error: <message>``.
- a call during which the sandbox stopped answering: ``[no result: the sandbox stopped
  answering]``.

The first observation of an episode (format ``tool-result``) names the corpus, the engine and
the tools; its ``meta`` lists the tool definitions (``tools``, as :data:`~worldtrace.collectors.
search.actions.TOOLS` defines them), so exports put them in the world model's system prompt. Every
observation's ``meta`` holds the memory after the step (``memory``, ``memory_digest``) and its
typed change (``state_diff``, :func:`~worldtrace.collectors.search.state.memory_diff`), so a
curator can tell state-changing calls from read-only ones.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.tool_calls import canonical_text
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.raw import RawObservation

SEARCH_FORMAT = "search-results"
"""Format tag of a ``web_search`` observation."""
MARKDOWN_FORMAT = "markdown"
"""Format tag of a ``web_extractor`` observation."""
TOOL_RESULT_FORMAT = "tool-result"
"""Format tag of a ``dict_memory`` observation, of the episode's first one and of unknown tools."""
DEFAULT_MAX_MARKDOWN_CHARS = 20_000
"""Characters of a page's markdown an observation shows when the record does not say."""
LOST_TEXT = "[no result: the sandbox stopped answering]"
EMPTY_PAGE_TEXT = "[the page has no text]"
HIGHLIGHT = re.compile(r"</?b>")
BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+\n")


def cut_marker(shown: int, total: int) -> str:
    """The line that ends a page's markdown cut after ``shown`` of ``total`` characters."""
    return f"[… markdown cut: {shown:,} of {total:,} characters shown]"


def render_snippet(result: Mapping[str, Any]) -> str:
    """The engine's highlighted snippet as one line of text (``**`` for its highlight marks)."""
    highlighted = result.get("snippet_highlighted")
    if isinstance(highlighted, str):
        text = html.unescape(HIGHLIGHT.sub("**", highlighted))
    else:
        text = str(result.get("snippet") or "")
    return " ".join(text.split())


def render_results(raw: Mapping[str, Any]) -> str:
    """The text of a ``web_search`` observation."""
    if raw.get("error"):
        return f"Error: {raw['error']}"
    results: Sequence[Mapping[str, Any]] = raw.get("results") or ()
    if not results:
        return f"No results found for the query: {raw.get('query')}"
    blocks = [
        f"[{result.get('rank', index)}] {result.get('url')}\n"
        f"Title: {' '.join(str(result.get('title') or '').split())}\n"
        f"Snippet: {render_snippet(result)}\n"
        f"Date: {result.get('date') or 'N/A'}"
        for index, result in enumerate(results, start=1)
    ]
    return "\n\n".join(blocks)


def render_page(raw: Mapping[str, Any]) -> tuple[str, bool]:
    """The text of a ``web_extractor`` observation, and whether the markdown was cut."""
    markdown = raw.get("markdown")
    if raw.get("error") or not isinstance(markdown, str):
        return f"Error: {raw.get('error') or 'no page'}", False
    # Runs of blank lines (what markdownify leaves of a page's head and scripts) as one.
    text = BLANK_RUNS.sub("\n\n", markdown).strip("\n")
    if not text.strip():
        return EMPTY_PAGE_TEXT, False
    limit = int(raw.get("max_markdown_chars") or DEFAULT_MAX_MARKDOWN_CHARS)
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}\n\n{cut_marker(limit, len(text))}", True


def render_memory(raw: Mapping[str, Any]) -> str:
    """The text of a ``dict_memory`` observation."""
    if raw.get("error"):
        return f"Error: {raw['error']}"
    action, key = raw.get("action"), raw.get("key")
    if action == "add":
        return f"Added {key!r} to memory."
    if action == "update":
        return f"Updated {key!r} in memory."
    if action == "remove":
        return f"Removed {key!r} from memory."
    if action == "retrieve":
        return f"Value of {key!r}:\n{raw.get('result')}"
    if action == "list":
        return f"Keys in memory: {json.dumps(list(raw.get('result') or ()), ensure_ascii=False)}"
    return f"Error: unknown memory action {action!r}"


def render_session(raw: Mapping[str, Any]) -> str:
    """The text of an episode's first observation: the corpus, the engine, the tools."""
    corpus = raw.get("corpus") or {}
    engine = corpus.get("engine") or {}
    documents = corpus.get("documents") or {}
    per_collection = documents.get("per_collection") or {}
    collections = ", ".join(f"{name} {count:,}" for name, count in per_collection.items())
    tools = ", ".join(str(tool.get("name")) for tool in raw.get("tools") or ())
    memory = raw.get("memory") or {}
    return (
        f"Documentation search over {corpus.get('base_url', '?')}: "
        f"{int(documents.get('total') or 0):,} documents ({collections}), "
        f"{engine.get('name', '?')} {engine.get('version', '?')}\n"
        f"Tools: {tools}\n"
        f"Memory: {len(memory)} keys"
    )


def is_call(raw: Mapping[str, Any]) -> bool:
    """Whether a raw observation answers a tool call (not the episode's start)."""
    return "tool" in raw


def corpus_summary(corpus: Mapping[str, Any]) -> dict[str, Any]:
    """What the first observation's meta says about the corpus (its identity, not its lists)."""
    index = corpus.get("index") or {}
    documents = corpus.get("documents") or {}
    return {
        "base_url": corpus.get("base_url"),
        "engine": corpus.get("engine") or {},
        "index_sha256": index.get("sha256"),
        "documents": documents.get("total"),
        "per_collection": documents.get("per_collection") or {},
        "converter": corpus.get("converter") or {},
    }


class SearchRenderer(Renderer):
    """Search results, page markdown and memory results; the memory and its change in meta."""

    def observation(self, raw: RawObservation) -> Observation:
        """Return the canonical observation of a raw search record (see the module docstring)."""
        meta: dict[str, Any] = {
            "memory": dict(raw.get("memory") or {}),
            "memory_digest": raw.get("memory_digest"),
            "state_diff": raw.get("state_diff"),
        }
        if not is_call(raw):
            meta.update(
                tools=list(raw.get("tools") or ()),
                corpus=corpus_summary(raw.get("corpus") or {}),
                start_s=raw.get("start_s"),
            )
            return Observation(format=TOOL_RESULT_FORMAT, text=render_session(raw), meta=meta)
        tool = raw.get("tool")
        meta.update(
            tool=tool,
            error=raw.get("error"),
            schema_problems=list(raw.get("schema_problems") or ()),
            skipped_replies=raw.get("skipped_replies", 0),
            sandbox_lost=bool(raw.get("sandbox_lost", False)),
            state_stale=bool(raw.get("state_stale", False)),
        )
        if raw.get("sandbox_lost"):
            return Observation(format=TOOL_RESULT_FORMAT, text=LOST_TEXT, meta=meta)
        if tool == "web_search":
            results = raw.get("results") or ()
            meta.update(
                query=raw.get("query"),
                num_results=raw.get("num_results"),
                parsed_query=raw.get("parsed_query"),
                estimated_matches=raw.get("estimated_matches"),
                urls=[result.get("url") for result in results],
                search_s=raw.get("search_s"),
            )
            return Observation(format=SEARCH_FORMAT, text=render_results(raw), meta=meta)
        if tool == "web_extractor":
            text, cut = render_page(raw)
            markdown = raw.get("markdown")
            meta.update(
                url=raw.get("url"),
                status=raw.get("status"),
                content_type=raw.get("content_type"),
                html_bytes=raw.get("html_bytes"),
                markdown_chars=len(markdown) if isinstance(markdown, str) else None,
                markdown_cut=cut,
                fetch_s=raw.get("fetch_s"),
                convert_s=raw.get("convert_s"),
            )
            return Observation(format=MARKDOWN_FORMAT, text=text, meta=meta)
        if tool == "dict_memory":
            meta.update(action=raw.get("action"), key=raw.get("key"), ok=raw.get("ok"))
            return Observation(format=TOOL_RESULT_FORMAT, text=render_memory(raw), meta=meta)
        text = f"Error: {raw.get('error') or 'no such tool'}"
        return Observation(format=TOOL_RESULT_FORMAT, text=text, meta=meta)

    def action(self, action: Action) -> Action:
        """Re-render the canonical text from the name and arguments."""
        return action.model_copy(update={"text": canonical_text(action.name, action.arguments)})


__all__ = [
    "DEFAULT_MAX_MARKDOWN_CHARS",
    "MARKDOWN_FORMAT",
    "SEARCH_FORMAT",
    "TOOL_RESULT_FORMAT",
    "SearchRenderer",
    "corpus_summary",
    "cut_marker",
    "is_call",
    "render_memory",
    "render_page",
    "render_results",
    "render_session",
    "render_snippet",
]
