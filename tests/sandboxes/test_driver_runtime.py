"""The drivers' shared runtime (sandboxes/driver_runtime.py), run on the host: plain Python.

The request loop is driven through real pipes, as the host drives it over the exec stream.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worldtrace.sandboxes import driver_runtime as runtime
from worldtrace.sandboxes.images import DRIVER_RUNTIME


class Loop:
    """``runtime.serve`` in a thread between two pipes: requests in, replies out."""

    def __init__(self, handle: Any, **options: Any) -> None:
        self.request_read, self.request_write = os.pipe()
        self.reply_read, self.reply_write = os.pipe()
        self.replies = os.fdopen(self.reply_read, "rb")
        self.thread = threading.Thread(
            target=runtime.serve,
            args=(handle, self.reply_write),
            kwargs={"input_fd": self.request_read, **options},
            daemon=True,
        )
        self.thread.start()

    def send(self, data: bytes) -> None:
        os.write(self.request_write, data)

    def reply(self) -> dict[str, Any]:
        line = self.replies.readline()
        assert line.endswith(b"\n"), line
        reply = json.loads(line)
        assert isinstance(reply, dict)
        return reply

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(request).encode() + b"\n")
        return self.reply()

    def finished(self, timeout: float = 5.0) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def close(self) -> None:
        for fd in (self.request_write, self.reply_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.finished()
        self.replies.close()
        with contextlib.suppress(OSError):
            os.close(self.request_read)


@pytest.fixture
def loops() -> Iterator[list[Loop]]:
    made: list[Loop] = []
    yield made
    for loop in made:
        loop.close()


def echo(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("op") == "fail":
        raise RuntimeError("it failed")
    return {"echo": request.get("text")}


def test_a_request_gets_the_handlers_reply_with_its_id_and_forks_refused(
    loops: list[Loop],
) -> None:
    loop = Loop(echo, count_forks=True)
    loops.append(loop)
    assert loop.request({"id": "a1", "op": "say", "text": "hi"}) == {
        "echo": "hi",
        "forks_refused": 0,
        "id": "a1",
    }
    # Without count_forks the reply carries the id alone, and blank lines get no reply.
    plain = Loop(echo)
    loops.append(plain)
    plain.send(b"\n   \n")
    assert plain.request({"id": 7, "text": "x"}) == {"echo": "x", "id": 7}


def test_a_failing_handler_and_a_malformed_line_are_replies_not_deaths(
    loops: list[Loop],
) -> None:
    loop = Loop(echo, error_key="driver_error")
    loops.append(loop)
    assert loop.request({"id": "b", "op": "fail"}) == {
        "driver_error": "RuntimeError: it failed",
        "id": "b",
    }
    loop.send(b"{not json\n")
    malformed = loop.reply()
    assert malformed["id"] is None
    assert malformed["driver_error"].startswith("JSONDecodeError: ")
    loop.send(b"[1, 2]\n")
    assert loop.reply() == {
        "driver_error": "ValueError: a request must be a JSON object",
        "id": None,
    }
    loop.send(b"\xff\xfe\n")  # not even UTF-8
    assert set(loop.reply()) == {"driver_error", "id"}
    # Still serving.
    assert loop.request({"id": "c", "text": "after"}) == {"echo": "after", "id": "c"}


def test_the_error_key_is_the_drivers_and_a_request_failure_brings_its_fields(
    loops: list[Loop],
) -> None:
    def handle(request: dict[str, Any]) -> dict[str, Any]:
        raise runtime.RequestFailed("would not start; stderr: 'boom'", {"stderr": "boom"})

    loop = Loop(handle, error_key="error")
    loops.append(loop)
    assert loop.request({"id": 1}) == {
        "error": "would not start; stderr: 'boom'",
        "stderr": "boom",
        "id": 1,
    }


def test_forks_refused_during_a_request_are_counted_and_named_in_its_error(
    loops: list[Loop], monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = iter([5, 5, 5, 8, 8, 8])
    monkeypatch.setattr(runtime, "forks_refused", lambda: next(refused))
    loop = Loop(echo, count_forks=True)
    loops.append(loop)
    assert loop.request({"id": 1, "text": "calm"})["forks_refused"] == 0
    assert loop.request({"id": 2, "op": "fail"}) == {
        "error": "the process limit was reached: RuntimeError: it failed",
        "forks_refused": 3,
        "id": 2,
    }
    assert loop.request({"id": 3, "text": "x"})["forks_refused"] == 0


def test_complete_adds_the_drivers_fields_to_every_reply(loops: list[Loop]) -> None:
    def with_memory(reply: dict[str, Any]) -> None:
        reply["memory"] = {"k": "ü"}

    loop = Loop(echo, error_key="driver_error", complete=with_memory, ensure_ascii=False)
    loops.append(loop)
    loop.send(json.dumps({"id": 1, "op": "fail"}).encode() + b"\n")
    raw = loop.replies.readline()
    assert "ü".encode() in raw  # ensure_ascii=False: the text as it is
    assert json.loads(raw) == {
        "driver_error": "RuntimeError: it failed",
        "memory": {"k": "ü"},
        "id": 1,
    }


def test_the_loop_stops_when_the_input_closes_and_a_last_line_is_answered(
    loops: list[Loop],
) -> None:
    loop = Loop(echo)
    loops.append(loop)
    loop.send(b'{"id": "last", "text": "no newline"}')
    os.close(loop.request_write)
    assert loop.reply() == {"echo": "no newline", "id": "last"}
    assert loop.finished()


def test_the_loop_stops_when_the_reply_channel_is_closed(loops: list[Loop]) -> None:
    handled: list[dict[str, Any]] = []

    def handle(request: dict[str, Any]) -> dict[str, Any]:
        handled.append(request)
        return {}

    loop = Loop(handle)
    loops.append(loop)
    loop.replies.close()  # the host is gone
    loop.send(b'{"id": 1}\n')
    assert loop.finished()
    assert handled == [{"id": 1}]


def test_idle_is_called_while_no_request_arrives(loops: list[Loop]) -> None:
    idled = threading.Event()
    loop = Loop(echo, idle=idled.set)
    loops.append(loop)
    assert idled.wait(5)
    assert loop.request({"id": 1, "text": "x"}) == {"echo": "x", "id": 1}


def test_answer_steps_serve_an_async_loop_alike() -> None:
    answer = runtime.Answer(b'{"id": 9, "op": "x"}', error_key="driver_error")
    assert answer.request() == {"id": 9, "op": "x"}
    assert answer.done(answer.failed(KeyError("name"))) == {
        "driver_error": "KeyError: 'name'",
        "id": 9,
    }


def test_forks_refused_reads_the_pids_controller(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    v2.mkdir()
    (v2 / "pids.events").write_text("max 12\n")
    assert runtime.forks_refused((str(v1), str(v2))) == 12
    (v2 / "pids.events").write_text("")
    assert runtime.forks_refused((str(v2),)) == 0
    assert runtime.forks_refused((str(v1),)) == 0  # no controller: unknown


def test_harness_variables() -> None:
    assert runtime.harness_variable("PIP_CERT", "/x")
    assert runtime.harness_variable("OLDPWD", "/home/user")
    assert runtime.harness_variable("WORLDTRACE_MCP_USER", "user")
    assert runtime.harness_variable("X", "/opt/worldtrace/bin")
    assert not runtime.harness_variable("PATH", "/usr/bin:/bin")
    assert not runtime.harness_variable("DEBIAN_FRONTEND", "noninteractive")
    assert runtime.harness_variable("DEBIAN_FRONTEND", "x", also=frozenset({"DEBIAN_FRONTEND"}))


def test_private_reply_fd_keeps_the_channel_from_prints() -> None:
    # In a child: the test process's own fds 1 and 2 are pytest's.
    read, write = os.pipe()
    err_read, err_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.dup2(write, 1)
            os.dup2(err_write, 2)
            reply_fd = runtime.private_reply_fd()
            print("stray", flush=True)
            os.write(1, b"stray too\n")
            runtime.write_reply(reply_fd, {"id": 1})
        finally:
            os._exit(0)
    os.close(write)
    os.close(err_write)
    os.waitpid(pid, 0)
    with os.fdopen(read, "rb") as replies, os.fdopen(err_read, "rb") as errors:
        assert replies.read() == b'{"id": 1}\n'
        # The print went to sys.stderr (pytest's here), the raw write to fd 1 to stderr.
        assert errors.read() == b"stray too\n"


def test_the_runtime_is_python_3_9_and_standard_library_only() -> None:
    # It runs on an SSH host's python3, 3.9 or newer (collectors/terminal/ssh.py MIN_PYTHON).
    source = DRIVER_RUNTIME.read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
