"""Scripted MCP tasks: realistic multi-call work on one server, checked against the real state.

A task is what an agent would be told (``instruction``) and the tool calls an engineer would
make for it (``steps``, built with :func:`worldtrace.collectors.tool_calls.tool_call`), in an
order that chains state: a file written then read, a branch created then committed on, an
entity created then searched. One module per server (``filesystem``, ``git``, ``memory``,
``postgres``, ``time``, ``fetch``, ``everything``), each with ``TASKS`` (at least eight).

After the episode the environment calls the task's ``check`` with a :class:`CheckContext`:
a way to run commands in the episode's container (as root) and what the calls returned. A
check looks at the real world the server changed (the files, the repository, the memory file,
the database through ``psql``), or, for a server without state, recomputes the true answer
independently in the container (zone rules, the web site's data) and compares it with what
the server returned. Every check fails on a freshly seeded container before the script runs
and holds after it.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from worldtrace.collectors.base import ScriptedTask

SERVER_MODULES = ("filesystem", "git", "memory", "postgres", "time", "fetch", "everything")
"""The servers with a task module here, in library order."""

CONTAINER_PYTHON = "/opt/mcp-venv/bin/python"
"""The interpreter checks run their own computations with in the container."""


@dataclass
class CheckContext:
    """What a task's check may look at after the episode."""

    run: Callable[[list[str]], str]
    """Runs argv in the episode's container as root and returns its stdout; raises when the
    command exits non-zero (the check then fails)."""
    results: list[str]
    """The rendered observation text of every call, in order (``results[-1]`` the last)."""
    raw: list[dict[str, Any]]
    """The raw observation of every call, in order: the driver's reply (``result``,
    ``protocol_error`` …) with ``tool`` and ``arguments``."""
    state: dict[str, Any]
    """The server's world after the last call (the driver's state snapshot)."""


@dataclass(frozen=True)
class McpTask(ScriptedTask):
    """A scripted task on one MCP server, with a check of its outcome."""

    server: str = ""
    setup: tuple[tuple[str, ...], ...] = ()
    """Commands (argv) the environment runs in the episode's container as root at reset,
    after the seeded state is in place and before the server starts: the task's starting
    point beyond the seed (a working copy with uncommitted edits for a commit task). Each
    must exit 0."""
    check: Callable[[CheckContext], bool] | None = field(default=None, compare=False, repr=False)


def load_tasks(server: str | None = None) -> tuple[McpTask, ...]:
    """The scripted tasks of ``server``, or of every server when None.

    A server without a task module here (a user's own server command) has no tasks.
    """
    names = SERVER_MODULES if server is None else (server,)
    tasks: list[McpTask] = []
    for name in names:
        if name not in SERVER_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{name}")
        tasks.extend(module.TASKS)
    return tuple(tasks)


# --- helpers the checks share ----------------------------------------------------------------


def calls(context: CheckContext, tool: str | None = None) -> list[dict[str, Any]]:
    """The raw observations of the episode's calls (of ``tool`` only, when given)."""
    return [raw for raw in context.raw if tool is None or raw.get("tool") == tool]


def answered(raw: Mapping[str, Any]) -> bool:
    """True if the call got a result that is not an error."""
    result = raw.get("result")
    return isinstance(result, Mapping) and not result.get("isError")


def result_text(raw: Mapping[str, Any]) -> str:
    """The text blocks of a call's result joined by newlines ("" without a result)."""
    result = raw.get("result")
    if not isinstance(result, Mapping):
        return ""
    blocks = result.get("content") or []
    return "\n".join(
        str(block.get("text", ""))
        for block in blocks
        if isinstance(block, Mapping) and block.get("type") == "text"
    )


def result_blocks(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The content blocks of a call's result (empty without a result)."""
    result = raw.get("result")
    if not isinstance(result, Mapping):
        return []
    return [block for block in result.get("content") or [] if isinstance(block, Mapping)]


def structured(raw: Mapping[str, Any]) -> Any:
    """The structured content of a call's result (None without one)."""
    result = raw.get("result")
    return result.get("structuredContent") if isinstance(result, Mapping) else None


def last_answer(context: CheckContext, tool: str | None = None) -> Mapping[str, Any] | None:
    """The last call (of ``tool``) that got a non-error result, or None."""
    good = [raw for raw in calls(context, tool) if answered(raw)]
    return good[-1] if good else None


def json_text(raw: Mapping[str, Any] | None) -> Any:
    """A call's text result read as JSON (None when there is none or it is not JSON)."""
    if raw is None:
        return None
    try:
        return json.loads(result_text(raw))
    except ValueError:
        return None


def container_json(context: CheckContext, code: str, *args: str) -> Any:
    """Run Python ``code`` in the container (``sys.argv[1:]`` = ``args``); its stdout as JSON."""
    return json.loads(context.run([CONTAINER_PYTHON, "-c", code, *args]))


def file_text(context: CheckContext, path: str) -> str:
    """The text of ``path`` in the container (raises through ``run`` if it is missing)."""
    return context.run(["cat", "--", path])


def path_exists(context: CheckContext, path: str) -> bool:
    """True if ``path`` exists in the container."""
    return context.run(["sh", "-c", 'test -e "$1" && echo yes || echo no', "sh", path]).strip() == (
        "yes"
    )


def all_of(*checks: Callable[[CheckContext], bool]) -> Callable[[CheckContext], bool]:
    """A check that holds when every one of ``checks`` holds (evaluated in order, lazily)."""

    def check(context: CheckContext) -> bool:
        return all(part(context) for part in checks)

    return check


__all__ = [
    "CONTAINER_PYTHON",
    "SERVER_MODULES",
    "CheckContext",
    "McpTask",
    "all_of",
    "answered",
    "calls",
    "container_json",
    "file_text",
    "json_text",
    "last_answer",
    "load_tasks",
    "path_exists",
    "result_blocks",
    "result_text",
    "structured",
]
