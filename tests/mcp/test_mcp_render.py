"""The mcp action space, renderer and state diff, on records in the driver's wire form.

The raw records here are written out by hand in the form the driver replies with (results as
the server sent them, camelCase keys); the same rendering of real servers' replies is checked
in ``test_mcp_environment.py``.
"""

from __future__ import annotations

import base64
import json

import pytest

from worldtrace.collectors.mcp.render import McpRenderer, render_result
from worldtrace.collectors.mcp.state import state_diff
from worldtrace.collectors.tool_calls import (
    canonical_text,
    parse_tool_call,
    schema_problems,
    tool_call,
)
from worldtrace.schemas.errors import InputError

WRITE_FILE = {
    "name": "write_file",
    "description": "Create a new file or overwrite an existing file.",
    "inputSchema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
    },
}


def test_canonical_text_sorts_keys_at_every_depth_and_keeps_unicode() -> None:
    one = tool_call("t", {"b": {"y": 1, "x": 2}, "a": "é"})
    other = parse_tool_call('{"arguments": {"a": "é", "b": {"x": 2, "y": 1}}, "name": "t"}')
    assert one == other
    assert one.text == '{"arguments": {"a": "é", "b": {"x": 2, "y": 1}}, "name": "t"}'
    assert canonical_text("t", {}) == '{"arguments": {}, "name": "t"}'


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("not json", "must be a JSON object"),
        ("[1]", "must be a JSON object"),
        ({"name": "", "arguments": {}}, "needs a tool name"),
        ({"name": "t", "arguments": [1]}, "must be an object"),
        ({"name": "t", "args": {}}, "not args"),
    ],
)
def test_bad_tool_calls_are_clear_input_errors(call: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_tool_call(call)  # type: ignore[arg-type]


def test_schema_problems_name_the_unknown_tool_and_each_violation() -> None:
    assert (
        schema_problems(tool_call("write_file", {"path": "a", "content": "b"}), [WRITE_FILE]) == []
    )
    problems = schema_problems(tool_call("write_file", {"path": 3, "extra": 1}), [WRITE_FILE])
    assert any("'content' is a required property" in p for p in problems)
    assert any(p.startswith("$.path: 3 is not of type 'string'") for p in problems)
    assert any("Additional properties" in p for p in problems)
    (unknown,) = schema_problems(tool_call("nope", {}), [WRITE_FILE])
    assert unknown == "unknown tool 'nope' (the server has: write_file)"


def test_result_blocks_render_as_documented() -> None:
    png = base64.b64encode(b"\x89PNG" + bytes(96)).decode()
    raw = {
        "tool": "t",
        "result": {
            "isError": True,
            "content": [
                {"type": "text", "text": "first\nsecond"},
                {"type": "image", "mimeType": "image/png", "data": png},
                {
                    "type": "resource",
                    "resource": {"uri": "test://r/1", "mimeType": "text/plain", "text": "abc"},
                },
                {"type": "resource", "resource": {"uri": "test://r/2", "blob": png}},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": None},
                {"type": "novel", "x": 1},
            ],
            "structuredContent": {"b": [1, "é"], "a": None},
        },
    }
    assert render_result(raw).split("\n") == [
        "[tool error]",
        "first",
        "second",
        "[image: image/png, 100 bytes]",
        "[resource: test://r/1, text/plain, 3 characters]",
        "[resource: test://r/2, ?, 100 bytes]",
        "[resource link: file:///a, a, ?]",
        '[novel block] {"type": "novel", "x": 1}',
        "[structured content]",
        '{"a": null, "b": [1, "é"]}',
    ]


def test_errors_and_missing_results_render_their_reason() -> None:
    error = {"code": -32602, "message": "Unknown tool: nope", "data": {"k": 1}}
    assert render_result({"tool": "t", "result": None, "protocol_error": error}) == (
        '[JSON-RPC error -32602] Unknown tool: nope\n[error data] {"k": 1}'
    )
    assert render_result({"tool": "t", "timed_out": True, "timeout_s": 2.5}) == (
        "[no result: timed out after 2.5s]"
    )
    assert render_result({"tool": "t", "server_exited": {"code": 137}}) == (
        "[no result: the server exited with code 137]"
    )


def test_session_observation_lists_tools_and_keeps_definitions_in_meta() -> None:
    raw = {
        "server": "filesystem",
        "transport": "stdio",
        "server_info": {"name": "secure-filesystem-server", "version": "0.2.0"},
        "protocol_version": "2025-11-25",
        "sdk_version": "2.3.0",
        "tools": [WRITE_FILE],
        "state": {"kind": "files", "files": {"a": "0123"}},
        "state_diff": None,
    }
    observation = McpRenderer().observation(raw)
    assert observation.format == "tool-result"
    assert observation.text == (
        "MCP server secure-filesystem-server 0.2.0 over stdio, protocol 2025-11-25\n"
        "1 tools: write_file"
    )
    assert observation.meta["tools"] == [WRITE_FILE]
    assert observation.meta["state"] == raw["state"]
    json.dumps(observation.meta)  # meta must be JSON


def test_call_observation_meta_says_what_happened() -> None:
    raw = {
        "tool": "write_file",
        "server": "filesystem",
        "result": {"content": [{"type": "text", "text": "ok"}], "isError": False},
        "protocol_error": None,
        "schema_problems": ["$.path: 3 is not of type 'string'"],
        "garbage": ["not json"],
        "stderr": "warn\n",
        "state": {"kind": "files", "files": {"a": "1"}},
        "state_diff": state_diff(
            {"kind": "files", "files": {}}, {"kind": "files", "files": {"a": "1"}}
        ),
    }
    meta = McpRenderer().observation(raw).meta
    assert meta["tool"] == "write_file"
    assert meta["is_error"] is False
    assert meta["garbage_lines"] == 1
    assert meta["stderr_chars"] == 5
    assert meta["schema_problems"] == raw["schema_problems"]
    assert meta["state_diff"]["added"] == {"files:a": "1"}


def test_state_diff_is_typed_by_entry() -> None:
    before = {
        "kind": "git",
        "head": "aaa",
        "branches": {"main": "aaa"},
        "status": [],
    }
    after = {
        "kind": "git",
        "head": "bbb",
        "branches": {"main": "bbb", "feature": "bbb"},
        "status": ["?? new.txt"],
    }
    diff = state_diff(before, after)
    assert diff == {
        "kind": "git",
        "changed": True,
        "added": {"branches:feature": "bbb"},
        "removed": {},
        "modified": {
            "head": ["aaa", "bbb"],
            "branches:main": ["aaa", "bbb"],
            "status": [[], ["?? new.txt"]],
        },
    }
    assert state_diff(after, after)["changed"] is False
    removed = state_diff({"kind": "files", "files": {"a": "1"}}, {"kind": "files", "files": {}})
    assert removed["removed"] == {"files:a": "1"}
