"""The search action space: three tools, ``web_search``, ``web_extractor`` and ``dict_memory``.

An action is one tool call (:mod:`worldtrace.collectors.tool_calls`): ``Action(name=<tool>,
arguments={...}, text=<canonical JSON>)``. :data:`TOOLS` defines the three tools the way an
MCP server's ``tools/list`` would (name, description, JSON Schema of the input); the episode's
first observation lists them in its meta, so exports put them in the world model's system
prompt. A call is checked against its schema and sent whatever the check says: what the
environment answers to a bad call is data too.
"""

from __future__ import annotations

from typing import Any

from worldtrace.collectors.tool_calls import tool_call
from worldtrace.schemas import Action

DEFAULT_NUM_RESULTS = 10
"""Results ``web_search`` returns when the call does not say."""
MAX_NUM_RESULTS = 50
"""The most results one ``web_search`` returns."""
MEMORY_ACTIONS = ("add", "update", "retrieve", "remove", "list")
"""What ``dict_memory`` can do."""

TOOLS: tuple[dict[str, Any], ...] = (
    {
        "name": "web_search",
        "description": (
            "Search the documentation corpus. Returns up to num_results ranked results, each "
            "with its URL, title, a snippet and a date."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "The search query."},
                "num_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_NUM_RESULTS,
                    "default": DEFAULT_NUM_RESULTS,
                    "description": "How many results to return.",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    {
        "name": "web_extractor",
        "description": "Fetch a page of the documentation site and return its text as markdown.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "url": {"type": "string", "description": "The page's URL."},
                "goal": {"type": "string", "description": "What you are looking for."},
            },
            "required": ["url", "goal"],
            "additionalProperties": False,
        },
    },
    {
        "name": "dict_memory",
        "description": (
            "A key-value memory that lasts the episode: add, update, retrieve or remove a "
            "key, or list every key."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": list(MEMORY_ACTIONS)},
                "key": {"type": "string", "minLength": 1},
                "value": {"type": "string"},
            },
            "required": ["action"],
            "additionalProperties": False,
        },
    },
)


def web_search(query: str, num_results: int = DEFAULT_NUM_RESULTS) -> Action:
    """Search the corpus for ``query``."""
    return tool_call("web_search", {"query": query, "num_results": num_results})


def web_extractor(url: str, goal: str) -> Action:
    """Fetch ``url`` from the corpus site as markdown (``goal`` says what for)."""
    return tool_call("web_extractor", {"url": url, "goal": goal})


def dict_memory(action: str, key: str | None = None, value: str | None = None) -> Action:
    """Operate on the episode's memory; ``key`` and ``value`` only when given."""
    arguments: dict[str, Any] = {"action": action}
    if key is not None:
        arguments["key"] = key
    if value is not None:
        arguments["value"] = value
    return tool_call("dict_memory", arguments)


__all__ = [
    "DEFAULT_NUM_RESULTS",
    "MAX_NUM_RESULTS",
    "MEMORY_ACTIONS",
    "TOOLS",
    "dict_memory",
    "web_extractor",
    "web_search",
]
