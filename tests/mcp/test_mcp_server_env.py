"""The servers see an ordinary machine: nothing of our build or harness in their environment.

server-everything's ``get-env`` tool prints its process's environment to the agent, so what a
server process inherits is part of the observation. The image keeps build settings in its
environment (the certificate bundle npm and pip trusted behind the build's proxy,
``DEBIAN_FRONTEND``); the driver must start every server without them. Checked on the real
servers of ``worldtrace/mcp``: through the tool itself, and for every server by reading the
environment of each process the server runs as (``/proc/PID/environ``, as root in the sandbox).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment
from worldtrace.collectors.mcp.render import McpRenderer
from worldtrace.collectors.mcp.servers import SERVERS
from worldtrace.collectors.tool_calls import tool_call

pytestmark = pytest.mark.docker

HARNESS = re.compile(
    r"^(?:PIP_CERT|NODE_EXTRA_CA_CERTS|REQUESTS_CA_BUNDLE|SSL_CERT_FILE|CURL_CA_BUNDLE|"
    r"DEBIAN_FRONTEND|WORLDTRACE_\w*)=|worldtrace|host-ca",
    re.IGNORECASE,
)
"""A variable of ours: build and certificate settings, or anything naming the project."""

SERVER_PROCESSES = (
    "for p in /proc/[0-9]*; do "
    'echo "== $(tr "\\0" " " < "$p/cmdline")"; tr "\\0" "\\n" < "$p/environ"; echo; '
    "done 2>/dev/null"
)
"""Prints the command and environment of every process the servers' user may read."""


def server_processes(environment: McpEnvironment) -> dict[str, list[str]]:
    """The environment (``KEY=VALUE`` lines) of each server process, by its command.

    Read as the servers' user (uid 1000): the sandbox's root has no right to read another
    user's ``environ``. The listing's own shell runs as that user too, with the environment
    ``docker exec`` gives it, so only the servers' programs (under ``/opt/mcp-*``, not the
    driver, which runs as root) count.
    """
    listing = environment.sandbox.exec(["sh", "-c", SERVER_PROCESSES], timeout=30, user="user")
    processes: dict[str, list[str]] = {}
    for block in listing.stdout.decode(errors="replace").split("== ")[1:]:
        command, _, rest = block.partition("\n")
        if "/opt/mcp-" in command and "mcp_driver" not in command:
            processes[command.strip()] = [line for line in rest.splitlines() if "=" in line]
    return processes


@pytest.fixture
def environment(request: pytest.FixtureRequest) -> Iterator[McpEnvironment]:
    """A fresh episode of the server the test is parametrized with, closed afterwards."""
    server, transport = request.param
    env = McpEnvironment(McpConfig(server=server, transport=transport))
    try:
        env.reset(0, None)
        yield env
    finally:
        env.close()


def ours(lines: list[str]) -> list[str]:
    """The lines of ``KEY=VALUE`` that belong to our harness."""
    return [line for line in lines if HARNESS.search(line)]


@pytest.mark.parametrize(
    "environment",
    [("everything", "stdio"), ("everything", "http")],
    indirect=True,
    ids=["stdio", "http"],
)
def test_get_env_shows_an_ordinary_environment(mcp_image: str, environment: McpEnvironment) -> None:
    outcome = environment.step(tool_call("get-env", {}), 30)
    text = McpRenderer().observation(outcome.observation).text
    shown = json.loads(text)
    lines = [f"{key}={value}" for key, value in shown.items()]
    assert ours(lines) == [], text
    # What an ordinary login as the server's user has is still there, and the server's own.
    assert shown["HOME"] == "/home/user" and shown["USER"] == "user"
    assert "/usr/bin" in shown["PATH"].split(":")
    assert shown["PORT"] == "3001" and shown["TZ"] == "UTC"


@pytest.mark.parametrize(
    "environment",
    [(name, "stdio") for name in SERVERS if "site" not in SERVERS[name].services],
    indirect=True,
    ids=[name for name in SERVERS if "site" not in SERVERS[name].services],
)
def test_no_server_process_inherits_our_variables(
    mcp_image: str, environment: McpEnvironment
) -> None:
    processes = server_processes(environment)
    assert processes, "no server process found"
    for command, variables in processes.items():
        assert ours(variables) == [], command
        assert "HOME=/home/user" in variables, (command, variables)


def test_the_fetch_server_process_inherits_none_of_our_variables(
    mcp_image: str, datasette_image: str
) -> None:
    env = McpEnvironment(McpConfig(server="fetch"))
    try:
        env.reset(0, None)
        processes = server_processes(env)
    finally:
        env.close()
    assert any("mcp-server-fetch" in command for command in processes), processes
    for command, variables in processes.items():
        assert ours(variables) == [], command
