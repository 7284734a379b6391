"""MCP raw records → canonical observations: the tool result as the client receives it.

The text of a call's observation (format ``tool-result``) is, in this order:

- ``[tool error]`` on a line of its own when the result says ``isError``;
- each content block, joined by newlines: a ``text`` block verbatim; an ``image`` or ``audio``
  block as ``[image: image/png, 1234 bytes]``; an embedded ``resource`` as
  ``[resource: <uri>, <mimeType>, N characters]`` (``N bytes`` for a blob); a
  ``resource_link`` as ``[resource link: <uri>, <name>, <mimeType>]``; a block of another
  type as ``[<type> block] <canonical JSON>``;
- ``[structured content]`` and the result's ``structuredContent`` as canonical JSON (sorted
  keys, non-ASCII kept) when the result has one;
- a protocol error as ``[JSON-RPC error <code>] <message>`` (and ``[error data] <JSON>``);
- no result at all as ``[no result: timed out after Ns]`` or ``[no result: the server exited
  with code N]``.

The first observation of an episode (the session just opened) reads ``MCP server <name>
<version> over <transport>, protocol <version>`` and the list of tool names; its ``meta``
holds the tool definitions exactly as ``tools/list`` gave them, because a tool world model is
conditioned on them. Every observation's ``meta`` holds the server's state after the step
(``state``: files with hashes, git HEAD and status, memory graph counts, row counts per table)
and its typed difference from the state before (``state_diff``), so a curator can tell
state-changing calls from read-only ones. Raw records keep every JSON-RPC message both ways,
so observations can be rendered again.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.tool_calls import canonical_text
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.raw import RawObservation, RawStep

FORMAT = "tool-result"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and non-ASCII kept: one text for one value."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _decoded_size(data: Any) -> int:
    """The size in bytes of base64 ``data`` (its text length if it is not base64)."""
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data)


def render_block(block: Mapping[str, Any]) -> str:
    """One content block as text (see the module docstring)."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType', '?')}, {_decoded_size(block.get('data'))} bytes]"
    if kind == "resource":
        resource = block.get("resource") or {}
        mime = resource.get("mimeType") or "?"
        if "text" in resource:
            size = f"{len(str(resource.get('text') or ''))} characters"
        else:
            size = f"{_decoded_size(resource.get('blob'))} bytes"
        return f"[resource: {resource.get('uri', '?')}, {mime}, {size}]"
    if kind == "resource_link":
        return (
            f"[resource link: {block.get('uri', '?')}, {block.get('name', '?')}, "
            f"{block.get('mimeType') or '?'}]"
        )
    return f"[{kind} block] {canonical_json(dict(block))}"


def render_result(raw: Mapping[str, Any]) -> str:
    """The text of a call's observation from its raw record."""
    lines: list[str] = []
    result = raw.get("result")
    error = raw.get("protocol_error")
    if isinstance(result, Mapping):
        if result.get("isError"):
            lines.append("[tool error]")
        lines.extend(render_block(block) for block in result.get("content") or ())
        if result.get("structuredContent") is not None:
            lines.append("[structured content]")
            lines.append(canonical_json(result["structuredContent"]))
    elif isinstance(error, Mapping):
        lines.append(f"[JSON-RPC error {error.get('code')}] {error.get('message', '')}")
        if error.get("data") is not None:
            lines.append(f"[error data] {canonical_json(error['data'])}")
    elif raw.get("timed_out"):
        lines.append(f"[no result: timed out after {float(raw.get('timeout_s') or 0):g}s]")
    elif raw.get("server_exited") is not None:
        code = (raw.get("server_exited") or {}).get("code")
        lines.append(f"[no result: the server exited with code {code}]")
    elif raw.get("sandbox_lost"):
        lines.append("[no result: the sandbox stopped answering]")
    else:
        lines.append("[no result]")
    return "\n".join(lines)


def render_session(raw: Mapping[str, Any]) -> str:
    """The text of an episode's first observation: the server and its tools."""
    info = raw.get("server_info") or {}
    tools = [str(tool.get("name")) for tool in raw.get("tools") or ()]
    return (
        f"MCP server {info.get('name', raw.get('server', '?'))} {info.get('version', '?')} "
        f"over {raw.get('transport', 'stdio')}, protocol {raw.get('protocol_version', '?')}\n"
        f"{len(tools)} tools: {', '.join(tools)}"
    )


TOOL_ERROR_CHARS = 200
"""The longest tool error message an ``action_error`` repeats (the whole is in the text)."""


def call_error(raw: Mapping[str, Any]) -> str | None:
    """How a call failed, by the record's ``action_error`` rule (see ``schemas.Transition``).

    A JSON-RPC error, a timeout, the server's exit, or a result the server flagged
    ``isError`` (the tool ran and reported failure), with the first line of its text.
    """
    error = raw.get("protocol_error")
    if isinstance(error, Mapping):
        return f"JSON-RPC error {error.get('code')}: {error.get('message', '')}"
    if raw.get("timed_out"):
        return f"timed out after {float(raw.get('timeout_s') or 0):g}s"
    exited = raw.get("server_exited")
    if exited is not None:
        return f"the server exited with code {(exited or {}).get('code')}"
    result = raw.get("result")
    if isinstance(result, Mapping) and result.get("isError"):
        texts = [b.get("text") for b in result.get("content") or () if isinstance(b, Mapping)]
        first = next((t.strip().splitlines()[0] for t in texts if t and t.strip()), "")
        message = first[:TOOL_ERROR_CHARS] + ("…" if len(first) > TOOL_ERROR_CHARS else "")
        return f"tool error: {message}" if message else "tool error"
    return None


def is_call(raw: Mapping[str, Any]) -> bool:
    """Whether a raw observation answers a tool call (not the session's start)."""
    return "tool" in raw


VOLATILE_PATTERNS: tuple[re.Pattern[str], ...] = (
    # mcp-server-time reads the wall clock: get_current_time's "datetime" and "day_of_week",
    # and convert_time's dates (today's), in its JSON text and its structured content.
    re.compile(r'(?<="datetime": ")[^"]*(?=")'),
    re.compile(r'(?<="day_of_week": ")[^"]*(?=")'),
    # server-filesystem's get_file_info: when a file was created, last read or written, as
    # JavaScript writes a date ("Fri Nov 27 2026 02:07:49 GMT+0000 (Coordinated Universal
    # Time)"); files the episode makes or reads get the time of the call.
    re.compile(
        r"(?:(?<=created: )|(?<=modified: )|(?<=accessed: ))"
        r"[A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{4} \d{2}:\d{2}:\d{2} GMT[+-]\d{4}"
        r"(?: \([A-Za-z ]+\))?"
    ),
    # server-everything's dynamic resources say when they were made ("created at 2:07:33 AM").
    re.compile(r"(?<=created at )\d{1,2}:\d{2}:\d{2} [AP]M"),
    # Pages the fetch server reads from the local datasette site: its footer's own timing.
    re.compile(r"(?<=Queries took )\d+(?:\.\d+)?ms"),
)
"""Spans of mcp observation text that vary by nature between identical runs: clock readings
and timings the servers print (see ``Renderer.volatile_patterns``)."""


class McpRenderer(Renderer):
    """Tool results as the client receives them; the server's state and its change in meta."""

    volatile_patterns = VOLATILE_PATTERNS

    def observation(self, raw: RawObservation) -> Observation:
        """Return the rendered result (or session header) with the state as meta."""
        meta: dict[str, Any] = {
            "server": raw.get("server"),
            "state": raw.get("state") or {},
            "state_diff": raw.get("state_diff"),
        }
        if not is_call(raw):
            meta.update(
                transport=raw.get("transport"),
                server_info=raw.get("server_info") or {},
                protocol_version=raw.get("protocol_version"),
                sdk_version=raw.get("sdk_version"),
                tools=list(raw.get("tools") or ()),
            )
            return Observation(format=FORMAT, text=render_session(raw), meta=meta)
        result = raw.get("result")
        error = raw.get("protocol_error")
        meta.update(
            tool=raw.get("tool"),
            is_error=bool(isinstance(result, Mapping) and result.get("isError")),
            protocol_error_code=error.get("code") if isinstance(error, Mapping) else None,
            timed_out=bool(raw.get("timed_out", False)),
            server_exited=raw.get("server_exited"),
            schema_problems=list(raw.get("schema_problems") or ()),
            call_s=raw.get("call_s"),
            wall_s=raw.get("wall_s"),
            # Lines the server wrote to stdout that were not JSON-RPC, and its stderr's size.
            garbage_lines=len(raw.get("garbage") or ()),
            stderr_chars=len(raw.get("stderr") or ""),
            skipped_replies=raw.get("skipped_replies", 0),
            sandbox_lost=raw.get("sandbox_lost", False),
            state_stale=raw.get("state_stale", False),
        )
        return Observation(format=FORMAT, text=render_result(raw), meta=meta)

    def action(self, action: Action) -> Action:
        """Re-render the canonical text from the name and arguments."""
        return action.model_copy(update={"text": canonical_text(action.name, action.arguments)})

    def action_error(self, step: RawStep) -> str | None:
        """Return the recorded error, or how the call failed by :func:`call_error`.

        Episodes recorded before tool errors counted as failures have ``isError`` results
        with no error.
        """
        return step.error or call_error(step.observation)


__all__ = [
    "FORMAT",
    "VOLATILE_PATTERNS",
    "McpRenderer",
    "call_error",
    "canonical_json",
    "is_call",
    "render_block",
    "render_result",
    "render_session",
]
