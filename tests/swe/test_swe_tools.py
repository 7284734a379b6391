"""The swe tool calls: validation, canonical text, reading calls back, the renderer.

Pure tests (no container): what the environment relies on to turn a bad call into an
``action_error`` transition instead of a crash, and how raw tool results become text.
"""

from __future__ import annotations

import json

import pytest

from worldtrace.collectors.swe.render import OUTPUT_LIMIT_CHARS, SweRenderer, truncate
from worldtrace.collectors.swe.tools import (
    TOOLS,
    check_tool_call,
    parse_tool_call,
    tool_call,
)
from worldtrace.schemas import Action


def test_every_tool_of_the_plan_has_a_model() -> None:
    assert list(TOOLS) == [
        "run_shell_command",
        "read_file",
        "write_file",
        "str_replace",
        "search",
        "list_dir",
        "run_tests",
    ]


def test_canonical_text_fills_defaults_in_field_order() -> None:
    action = tool_call("run_shell_command", command="ls -la")
    assert action.name == "run_shell_command"
    assert action.arguments == {"command": "ls -la", "timeout": 60.0}
    assert (
        action.text
        == '{"name": "run_shell_command", "arguments": {"command": "ls -la", "timeout": 60.0}}'
    )
    # Keyword order does not matter; the model's field order does.
    read = tool_call("read_file", end_line=9, path="a.py", start_line=3)
    assert read.text == (
        '{"name": "read_file", "arguments": {"path": "a.py", "start_line": 3, "end_line": 9}}'
    )
    assert tool_call("search", pattern="def f").arguments == {
        "pattern": "def f",
        "path": ".",
        "glob": None,
    }
    # Not ASCII-escaped: the text is what an agent wrote.
    assert "héllo" in tool_call("write_file", path="f", content="héllo").text
    # One call, one text: an int timeout is the same call as the float one.
    assert tool_call("run_shell_command", command="x", timeout=5).text == (
        tool_call("run_shell_command", command="x", timeout=5.0).text
    )


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("rm_rf", {}, "unknown tool 'rm_rf'"),
        ("run_shell_command", {}, "command: Field required"),
        ("run_shell_command", {"command": ""}, "command: String should have at least 1 char"),
        ("run_shell_command", {"command": "   "}, "command: must not be blank"),
        ("run_shell_command", {"command": "ls", "timeout": 0}, "timeout: Input should be greater"),
        ("run_shell_command", {"command": "ls", "timeout": 601}, "less than or equal to 600"),
        (
            "run_shell_command",
            {"command": "ls", "timeout": "5"},
            "timeout: Input should be a valid",
        ),
        (
            "run_shell_command",
            {"command": "ls", "timeout": True},
            "timeout: Input should be a valid",
        ),
        ("run_shell_command", {"command": "ls", "cwd": "/"}, "cwd: Extra inputs are not permitted"),
        ("read_file", {"path": "a", "start_line": 0}, "start_line: Input should be greater"),
        ("read_file", {"path": "a", "start_line": "3"}, "start_line: Input should be a valid int"),
        ("read_file", {"path": "a", "start_line": 5, "end_line": 4}, "end_line (4) is before"),
        ("read_file", {"path": "a\x00b"}, "path: must not contain a NUL"),
        ("write_file", {"path": "a"}, "content: Field required"),
        ("write_file", {"path": "a", "content": "\ud800"}, "content: must be valid Unicode"),
        ("str_replace", {"path": "a", "old": "", "new": "x"}, "old: String should have at least"),
        ("search", {"pattern": ""}, "pattern: String should have at least 1"),
        ("search", {"pattern": "x", "glob": ""}, "glob: String should have at least 1"),
        ("list_dir", {"path": ""}, "path: String should have at least 1"),
        ("run_tests", {"selector": 3}, "selector: Input should be a valid string"),
        ("run_tests", {"selector": "'unclosed"}, "selector: cannot be split into words"),
        ("run_tests", {"selector": " "}, "selector: must name at least one test"),
    ],
)
def test_a_bad_call_is_a_clear_error(name: str, arguments: dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        tool_call(name, **arguments)
    assert message in str(raised.value)
    # The same call as a recorded action: check_tool_call gives the same text, never raises.
    action = Action(name=name, arguments=arguments, text="whatever the policy wrote")
    assert check_tool_call(action) == str(raised.value)


def test_a_valid_call_checks_clean_even_with_defaults_left_out() -> None:
    assert check_tool_call(Action(name="list_dir", arguments={}, text="list_dir()")) is None
    assert check_tool_call(tool_call("run_tests", selector="tests/test_a.py::test_b")) is None


def test_parse_reads_the_canonical_text_and_objects_back() -> None:
    action = tool_call("str_replace", path="a.py", old="x = 1\n", new="x = 2\n")
    assert parse_tool_call(action.text) == action
    assert parse_tool_call({"name": "str_replace", "arguments": action.arguments}) == action
    # A recorded action object (with a text) comes back with its canonical text.
    assert parse_tool_call({**action.model_dump(), "text": "stale"}) == action
    # Arguments may be left out when the tool needs none.
    assert parse_tool_call({"name": "list_dir"}) == tool_call("list_dir")
    assert parse_tool_call('{"name": "run_tests"}').arguments == {"selector": None}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("ls -la", "is not JSON"),
        ("[1, 2]", "expected"),
        ({"arguments": {}}, "expected"),
        ({"name": "list_dir", "args": {}}, "unexpected keys ['args']"),
        ({"name": "list_dir", "arguments": ["."]}, "must be an object"),
        ('{"name": "nope", "arguments": {}}', "unknown tool 'nope'"),
        ('{"name": "read_file", "arguments": {"path": 3}}', "path: Input should be a valid"),
    ],
)
def test_parse_rejects_what_is_not_a_call(call: str | dict, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_tool_call(call)
    assert message in str(raised.value)


# --- the renderer ---------------------------------------------------------------------------


def raw(**fields: object) -> dict:
    base = {
        "tool": "run_shell_command",
        "output": "",
        "exit_code": 0,
        "timed_out": False,
        "timeout_s": 60.0,
        "error": None,
        "git_status": " M a.py\n",
        "git_diff_stat": " a.py | 2 +-\n",
        "wall_s": 0.25,
        "output_dropped_bytes": 0,
        "forks_refused": 0,
        "skipped_replies": 0,
    }
    return {**base, **fields}


def test_truncation_keeps_head_and_tail_with_a_marker() -> None:
    text = "".join(f"line {n}\n" for n in range(5000))
    cut = truncate(text, 1000)
    assert cut.startswith("line 0\nline 1\n")
    assert cut.endswith("line 4999\n")
    dropped = len(text) - 1000
    assert f"\n[... {dropped} characters truncated ...]\n" in cut
    assert len(cut) == 1000 + len(f"\n[... {dropped} characters truncated ...]\n")
    assert truncate("short", 1000) == "short"


def test_rendered_output_is_cut_at_the_limit_and_the_exit_code_follows() -> None:
    output = "x" * (OUTPUT_LIMIT_CHARS + 500) + "END"
    observation = SweRenderer().observation(raw(output=output, exit_code=1))
    assert observation.format == "tool-result"
    assert f"[... {len(output) - OUTPUT_LIMIT_CHARS} characters truncated ...]" in observation.text
    assert observation.text.endswith("xEND\n[exit code: 1]\n")
    assert observation.meta["exit_code"] == 1
    assert observation.meta["output_chars"] == len(output)
    assert observation.meta["git_status"] == " M a.py\n"
    assert observation.meta["git_diff_stat"] == " a.py | 2 +-\n"
    assert observation.meta["wall_s"] == 0.25
    assert observation.meta["timed_out"] is False
    # The record's own limit wins (the environment's output_limit_chars).
    small = SweRenderer().observation(raw(output="y" * 1000, output_limit_chars=200))
    assert "[... 800 characters truncated ...]" in small.text


def test_status_lines_for_errors_and_timeouts() -> None:
    render = SweRenderer().observation
    timed_out = render(raw(output="partial", exit_code=None, timed_out=True, timeout_s=2.0))
    assert timed_out.text == "partial\n[timed out after 2s]\n"
    assert timed_out.meta["timed_out"] is True
    failed = render(raw(tool="str_replace", exit_code=None, error="old string not found in a.py"))
    assert failed.text == "[error: old string not found in a.py]\n"
    assert failed.meta["error"] == "old string not found in a.py"
    read = render(raw(tool="read_file", output="     1\ta = 1\n", exit_code=None))
    assert read.text == "     1\ta = 1\n"
    assert read.meta["tool"] == "read_file"


def test_renderer_action_rerenders_valid_calls_and_keeps_invalid_ones() -> None:
    partial = Action(name="search", arguments={"pattern": "def"}, text="search def")
    assert SweRenderer().action(partial) == tool_call("search", pattern="def")
    invalid = Action(name="nope", arguments={"x": 1}, text=json.dumps({"name": "nope"}))
    assert SweRenderer().action(invalid) == invalid
