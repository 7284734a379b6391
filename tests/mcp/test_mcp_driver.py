"""The in-container MCP driver against real servers in a real ``worldtrace/mcp`` container.

One container for the module (network "none", read-only root, as an episode's), one driver
process per test over an exec stream, as the environment speaks to it. Misbehaving servers
(hanging, crashing, writing garbage or floods of stderr) are a tiny stdio server written here
and run through the driver's ``command`` override.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from worldtrace.sandboxes.channel import DriverChannel
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker

DRIVER = ["/opt/mcp-venv/bin/python", "/opt/worldtrace/mcp_driver.py"]
ROGUE_PATH = "/tmp/rogue_server.py"
# A stdio MCP server that misbehaves on request: "hang" never answers, "crash" exits with
# code 3, "garbage" writes a non-JSON line before its answer, "stderr" floods stderr.
ROGUE = r"""
import json, os, sys
TOOLS = [{"name": n, "inputSchema": {"type": "object"}}
         for n in ("echo", "hang", "crash", "garbage", "stderr")]
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": request_id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "rogue", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "hang":
            continue
        if name == "crash":
            sys.stderr.write("crashing now\n")
            sys.stderr.flush()
            os._exit(3)
        if name == "garbage":
            sys.stdout.write("this is not json\n")
        if name == "stderr":
            sys.stderr.write("x" * 100000 + "\nlast words\n")
            sys.stderr.flush()
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [
            {"type": "text", "text": json.dumps(message["params"].get("arguments"))}]}})
"""


@pytest.fixture(scope="module")
def sandbox(mcp_image: str) -> Iterator[DockerSandbox]:
    """One sandbox of the image, as an episode has it, with the rogue server in /tmp."""
    box = DockerSandbox(mcp_image, limits=Limits(disk_mb=256, cpus=2), network="none").start()
    try:
        box.put_file(ROGUE_PATH, ROGUE.encode())
        yield box
    finally:
        box.close()


class Driver:
    """One driver process in the sandbox."""

    def __init__(self, sandbox: DockerSandbox) -> None:
        self.channel = DriverChannel(sandbox.open_stream(DRIVER), "mcp driver")

    def request(self, op: str, timeout: float = 30.0, **fields: Any) -> dict[str, Any]:
        """Send one request and return the reply."""
        return self.channel.request({"op": op, "timeout": timeout, **fields}, timeout)

    def start(self, server: str, **fields: Any) -> dict[str, Any]:
        """Start ``server``; the start must succeed."""
        reply = self.request("start", server=server, **fields)
        assert "driver_error" not in reply, reply["driver_error"]
        return reply

    def call(self, name: str, arguments: Any, timeout: float = 10.0) -> dict[str, Any]:
        """Call one tool."""
        reply = self.request("call", timeout=timeout, name=name, arguments=arguments)
        assert "driver_error" not in reply, reply["driver_error"]
        return reply

    def close(self) -> None:
        """Stop the server, then end the driver."""
        self.request("stop")
        self.channel.close()


@pytest.fixture
def driver(sandbox: DockerSandbox) -> Iterator[Driver]:
    """A fresh driver process."""
    opened = Driver(sandbox)
    try:
        yield opened
    finally:
        opened.close()


def parsed(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """Each recorded message's direction and its parsed JSON."""
    return [(entry["dir"], json.loads(entry["line"])) for entry in messages]


def text_of(result: dict[str, Any]) -> str:
    """The text blocks of a tool result, joined."""
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def test_stdio_start_and_call_recorded_byte_exact(driver: Driver, sandbox: DockerSandbox) -> None:
    started = driver.start("filesystem")
    assert started["server_info"]["name"] == "secure-filesystem-server"
    assert started["sdk_version"] == "2.3.0" and started["protocol_version"]
    tools = {tool["name"]: tool for tool in started["tools"]}
    # Wire form: camelCase keys as the server sent them, not the SDK's snake_case.
    assert tools["read_text_file"]["inputSchema"]["required"] == ["path"]
    methods = [message.get("method") for _, message in parsed(started["messages"])]
    assert methods[0] == "initialize" and "tools/list" in methods
    assert (
        started["state"]["files"]["README.md"]
        == hashlib.sha256(sandbox.get_file("/srv/project/README.md")).hexdigest()[:16]
    )

    reply = driver.call("read_text_file", {"path": "/srv/project/README.md"})
    assert text_of(reply["result"]) == sandbox.get_file("/srv/project/README.md").decode()
    (send_dir, sent), (recv_dir, received) = parsed(reply["messages"])
    assert (send_dir, recv_dir) == ("send", "recv")
    assert sent["params"] == {
        "name": "read_text_file",
        "arguments": {"path": "/srv/project/README.md"},
    }
    assert received["id"] == sent["id"] and received["result"] == reply["result"]

    # Byte for byte: the same lines sent to a fresh server give the recorded answer's bytes.
    sends = [m["line"] for m in started["messages"] + reply["messages"] if m["dir"] == "send"]
    sandbox.put_file("/tmp/replay.jsonl", ("\n".join(sends) + "\n").encode())
    server = "/opt/mcp-npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
    replayed = sandbox.exec(
        ["sh", "-c", f"(cat /tmp/replay.jsonl; sleep 1) | node {server} /srv/project"],
        timeout=20,
        user="user",
    )
    assert reply["messages"][1]["line"] in replayed.stdout.decode().splitlines()


def test_invalid_arguments_and_unknown_tool_reach_the_server(driver: Driver) -> None:
    before = driver.start("filesystem")["state"]
    wrong_type = driver.call("read_text_file", {"path": 5})
    (_, sent), (_, received) = parsed(wrong_type["messages"])
    assert sent["params"]["arguments"] == {"path": 5}  # sent as asked, not validated away
    answer = wrong_type["result"] or {}
    assert answer.get("isError") is True or wrong_type["protocol_error"] is not None
    assert received.get("result", received.get("error")) in (
        wrong_type["result"],
        wrong_type["protocol_error"],
    )
    assert wrong_type["state"] == before

    unknown = driver.call("no_such_tool", {"x": 1})
    (_, sent), (_, received) = parsed(unknown["messages"])
    assert sent["params"]["name"] == "no_such_tool"
    error_text = (
        text_of(unknown["result"]) if unknown["result"] else unknown["protocol_error"]["message"]
    )
    assert "no_such_tool" in error_text
    assert unknown["state"] == before


def test_streamable_http_start_and_call(driver: Driver) -> None:
    started = driver.start("everything", transport="http")
    assert started["transport"] == "http"
    assert {"echo", "get-sum"} <= {tool["name"] for tool in started["tools"]}
    assert "listening" in started["stderr"].lower() or started["stderr"]
    reply = driver.call("echo", {"message": "hi there"})
    assert text_of(reply["result"]) == "Echo: hi there"
    kinds = [(direction, message.get("method")) for direction, message in parsed(reply["messages"])]
    assert kinds == [("send", "tools/call"), ("recv", None)]
    assert parsed(reply["messages"])[1][1]["result"] == reply["result"]
    assert reply["garbage"] == []

    slow = driver.call("trigger-long-running-operation", {"duration": 5, "steps": 5}, timeout=1.0)
    assert slow["timed_out"] is True and slow["result"] is None
    methods = [message.get("method") for _, message in parsed(slow["messages"])]
    assert methods[0] == "tools/call" and methods[-1] == "notifications/cancelled"


def test_hang_times_out_and_the_session_goes_on(driver: Driver) -> None:
    driver.start("time", command=["python3", ROGUE_PATH])
    started = time.monotonic()
    reply = driver.call("hang", {}, timeout=1.0)
    assert time.monotonic() - started < 2.5
    assert reply["timed_out"] is True and reply["result"] is None
    methods = [message.get("method") for _, message in parsed(reply["messages"])]
    assert methods == ["tools/call", "notifications/cancelled"]
    assert text_of(driver.call("echo", {"a": [1, None]})["result"]) == '{"a": [1, null]}'


def test_server_crashing_during_a_call(driver: Driver) -> None:
    driver.start("time", command=["python3", ROGUE_PATH])
    started = time.monotonic()
    reply = driver.call("crash", {}, timeout=20.0)
    assert time.monotonic() - started < 3
    assert reply["server_exited"] == {"code": 3} and reply["result"] is None
    assert "crashing now" in reply["stderr"]
    again = driver.call("echo", {})
    assert again["server_exited"] == {"code": 3} and again["messages"] == []


def test_server_killed_during_a_call(driver: Driver, sandbox: DockerSandbox) -> None:
    pid = driver.start("time", command=["python3", ROGUE_PATH])["server_pid"]
    killer = threading.Timer(0.5, sandbox.exec, (["kill", "-9", str(pid)],))
    killer.start()
    started = time.monotonic()
    reply = driver.call("hang", {}, timeout=20.0)
    killer.join()
    assert time.monotonic() - started < 5
    assert reply["server_exited"] == {"code": -9} and reply["timed_out"] is False


def test_garbage_and_stderr_are_recorded(driver: Driver) -> None:
    driver.start("time", command=["python3", ROGUE_PATH])
    reply = driver.call("garbage", {"k": "v"})
    assert reply["garbage"] == ["this is not json"]
    assert text_of(reply["result"]) == '{"k": "v"}'
    flood = driver.call("stderr", {})
    assert flood["stderr"].endswith("last words\n")
    assert flood["stderr"].startswith("[... ") and len(flood["stderr"]) < 70_000
    assert flood["result"] is not None


def test_start_failures_are_driver_errors(sandbox: DockerSandbox) -> None:
    driver = Driver(sandbox)
    try:
        crash = driver.request(
            "start",
            server="time",
            command=["python3", "-c", "import sys; sys.stderr.write('boom\\n'); sys.exit(2)"],
        )
        assert "code 2" in crash["driver_error"] and "boom" in crash["driver_error"]
        started = time.monotonic()
        silent = driver.request("start", timeout=2.0, server="time", command=["sleep", "60"])
        assert "within 2s" in silent["driver_error"]
        assert time.monotonic() - started < 5
    finally:
        driver.close()


def test_snapshots_follow_the_servers_changes(driver: Driver, sandbox: DockerSandbox) -> None:
    driver.start("filesystem")
    wrote = driver.call("write_file", {"path": "/srv/project/notes/new.md", "content": "fresh\n"})
    assert wrote["state"]["files"]["notes/new.md"] == hashlib.sha256(b"fresh\n").hexdigest()[:16]
    driver.request("stop")

    before = driver.start("git")["state"]
    assert before["head"] == before["branches"][before["branch"]] and before["tags"]
    made = driver.call("git_create_branch", {"repo_path": "/srv/repo", "branch_name": "h2-test"})
    assert made["state"]["branches"]["h2-test"] == before["head"]
    driver.request("stop")

    before = driver.start("memory")["state"]
    entity = {"name": "Ada", "entityType": "person", "observations": ["writes tests"]}
    made = driver.call("create_entities", {"entities": [entity]})["state"]
    assert made["entities"] == before["entities"] + 1 and made["entity_names"]["Ada"] == "person"
    assert made["observations"] == before["observations"] + 1
    driver.request("stop")

    before = driver.start("postgres")["state"]
    assert before["tables"] and all(count > 0 for count in before["tables"].values())
    # server-postgres is read-only: the change comes from outside, the snapshot must see it.
    sql = "CREATE TABLE probe (x int); INSERT INTO probe VALUES (1), (2)"
    assert sandbox.exec(["psql", "-d", "shop", "-c", sql], user="postgres").exit_code == 0
    after = driver.request("observe")["state"]
    assert after["tables"] == {**before["tables"], "public.probe": 2}
    observed = sandbox.exec([*DRIVER, "--observe", "--server", "postgres"])
    assert json.loads(observed.stdout) == {"state": after}


def kept_psql_pids(sandbox: DockerSandbox) -> list[str]:
    """The pids of the psql processes running in the sandbox (the driver's kept one)."""
    found = sandbox.exec(["pgrep", "-x", "psql"])
    return found.stdout.decode().split()


def test_postgres_snapshots_keep_one_psql_and_outlive_its_loss(
    driver: Driver, sandbox: DockerSandbox
) -> None:
    seeded = driver.start("postgres")["state"]
    assert seeded["tables"] and "error" not in seeded
    (kept,) = kept_psql_pids(sandbox)
    assert driver.request("observe")["state"] == seeded
    assert kept_psql_pids(sandbox) == [kept]  # the same process answers every snapshot

    # A kept psql that died: a fresh psql answers at once, the next snapshot keeps a new one.
    assert sandbox.exec(["kill", "-KILL", kept]).exit_code == 0
    started = time.monotonic()
    assert driver.request("observe")["state"] == seeded
    assert time.monotonic() - started < 3
    (renewed,) = kept_psql_pids(sandbox)
    assert renewed != kept

    # A kept psql that hangs: the snapshot still answers, correctly, within its time limit.
    assert sandbox.exec(["kill", "-STOP", renewed]).exit_code == 0
    started = time.monotonic()
    assert driver.request("observe")["state"] == seeded
    assert time.monotonic() - started < 9  # PSQL_SESSION_TIMEOUT_S (5 s), then a fresh psql
    assert renewed not in kept_psql_pids(sandbox)
    assert driver.request("observe")["state"] == seeded

    driver.request("stop")
    assert kept_psql_pids(sandbox) == []


def test_the_kept_psql_session_cannot_write(sandbox: DockerSandbox) -> None:
    attempt = """
import sys, time
sys.path.insert(0, "/opt/worldtrace")
import mcp_driver
sessions = mcp_driver.PsqlSessions()
print(sessions.query("shop", "CREATE TABLE intruder (x int)", time.monotonic() + 5))
print(sessions.query("shop", "SELECT count(*) FROM pg_tables WHERE tablename = 'intruder'",
                     time.monotonic() + 5))
sessions.close()
"""
    ran = sandbox.exec([DRIVER[0], "-c", attempt])
    assert ran.exit_code == 0, ran.stdout
    refused, count = [line for line in ran.stdout.decode().splitlines() if line.strip()]
    assert "read-only transaction" in refused
    assert count.strip() == "0"
