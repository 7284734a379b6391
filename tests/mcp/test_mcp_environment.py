"""The mcp environment against the real servers of ``worldtrace/mcp``, one container per episode.

Each test resets real episodes (a fresh container, the server started over stdio or streamable
HTTP, an SDK session) and checks what the host records: the tool list and identity, results and
errors as the server gives them, the state snapshot and its diff, and how an episode ends when
the server dies, hangs or writes garbage. Tests that only read share one reset episode per
server and transport (``shared``); a test that changes or breaks its sandbox opens its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from worldtrace.collectors.base import RawObservation, StepOutcome
from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment
from worldtrace.collectors.mcp.render import McpRenderer
from worldtrace.collectors.mcp.servers import SERVERS
from worldtrace.collectors.tool_calls import tool_call

pytestmark = pytest.mark.docker

TOOL_LISTS = Path(__file__).parent / "data" / "tools"
RENDER = McpRenderer()


@pytest.fixture
def environments() -> Iterator[list[McpEnvironment]]:
    """Environments a test opens, closed after it whatever happens."""
    opened: list[McpEnvironment] = []
    yield opened
    for environment in opened:
        environment.close()


def open_env(opened: list[McpEnvironment], **config: Any) -> McpEnvironment:
    """A new environment of ``config``, closed at the end of the test."""
    environment = McpEnvironment(McpConfig(**config))
    opened.append(environment)
    return environment


Transport = Literal["stdio", "http"]
SharedEnvironments = dict[tuple[str, Transport], tuple[McpEnvironment, RawObservation]]
"""Reset environments by (server, transport), each with the observation its reset returned."""


# Module-scoped because its users only read: each server's container starts once for all of them.
@pytest.fixture(scope="module")
def shared() -> Iterator[SharedEnvironments]:
    """Episodes of the default config that this module's read-only tests share, closed at its end.

    A test using one may call tools that change nothing in the server's world; anything that
    changes or breaks the sandbox opens its own environment with :func:`open_env`.
    """
    opened: SharedEnvironments = {}
    yield opened
    for environment, _ in opened.values():
        environment.close()


def open_shared(
    opened: SharedEnvironments, server: str, transport: Transport = "stdio"
) -> tuple[McpEnvironment, RawObservation]:
    """The shared episode of ``server`` over ``transport`` and its reset's observation.

    Reset on first use, whichever test comes first, so any selection of tests works.
    """
    key = (server, transport)
    if key not in opened:
        environment = McpEnvironment(McpConfig(server=server, transport=transport))
        try:
            opened[key] = (environment, environment.reset(0, None))
        except BaseException:
            environment.close()
            raise
    return opened[key]


def step(
    env: McpEnvironment, name: str, arguments: dict[str, Any], timeout: float = 30
) -> StepOutcome:
    """One tool call."""
    return env.step(tool_call(name, arguments), timeout)


def text(outcome: StepOutcome) -> str:
    """The rendered observation text of a step."""
    return RENDER.observation(outcome.observation).text


@pytest.mark.parametrize(
    ("server", "transport"),
    [*((name, "stdio") for name in SERVERS), ("everything", "http")],
)
def test_each_server_lists_its_tools_and_its_identity(
    server: str,
    transport: Transport,
    mcp_image: str,
    datasette_image: str,
    shared: SharedEnvironments,
) -> None:
    env, first = open_shared(shared, server, transport)
    recorded = json.loads((TOOL_LISTS / f"{server}.json").read_text())
    names = [tool["name"] for tool in first["tools"]]
    assert names == [tool["name"] for tool in recorded["tools"]]
    assert all(isinstance(tool["inputSchema"], dict) for tool in first["tools"])
    # The first observation: the session, with the definitions in meta as tools/list gave them.
    observation = RENDER.observation(first)
    assert observation.text.startswith(f"MCP server {recorded['serverInfo']['name']} ")
    assert f"over {transport}" in observation.text
    assert observation.meta["tools"] == first["tools"]
    assert observation.meta["state"]["kind"] == SERVERS[server].state.kind
    # Every JSON-RPC message of the handshake, as the server wrote it.
    sent = [json.loads(m["line"]) for m in first["messages"] if m["dir"] == "send"]
    assert [m.get("method") for m in sent][:3] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
    ]
    identity = env.describe()
    assert identity.name == f"mcp/{server}"
    assert identity.components["package"] == SERVERS[server].package
    assert identity.components["package_version"] == SERVERS[server].version
    assert identity.components["server_version"] == recorded["serverInfo"]["version"]
    assert identity.components["sdk_version"] == "2.3.0"
    assert identity.components["protocol_version"] == recorded["protocolVersion"]
    assert identity.components["image_digest"] == mcp_image
    assert identity.components["transport"] == transport


def test_a_write_then_a_read_returns_it_and_reset_restores_the_seed(
    mcp_image: str, environments: list[McpEnvironment]
) -> None:
    env = open_env(environments, server="filesystem")
    seeded = env.reset(0, None)["state"]
    path = "/srv/project/notes/standup.md"
    content = "# Stand-up\n\n- gauges: ok ✓\n"
    wrote = step(env, "write_file", {"path": path, "content": content})
    assert wrote.error is None and not wrote.truncated
    diff = wrote.observation["state_diff"]
    assert diff["changed"] and list(diff["added"]) == ["files:notes/standup.md"]
    read = step(env, "read_text_file", {"path": path})
    assert text(read).startswith(content)
    assert read.observation["state_diff"]["changed"] is False
    # The raw record holds the call as sent and the reply as received, byte for byte.
    (sent,) = [json.loads(m["line"]) for m in read.observation["messages"] if m["dir"] == "send"]
    assert sent["method"] == "tools/call" and sent["params"]["arguments"] == {"path": path}
    (received,) = [
        json.loads(m["line"]) for m in read.observation["messages"] if m["dir"] == "recv"
    ]
    assert received["result"] == read.observation["result"]

    again = env.reset(1, None)
    assert again["state"] == seeded
    missing = step(env, "read_text_file", {"path": path})
    assert missing.observation["result"]["isError"] is True
    assert "ENOENT" in text(missing) or "no such file" in text(missing).lower()
    # the tool ran and reported failure: that is the step's error, as in every domain
    assert missing.error is not None and missing.error.startswith("tool error: ")
    assert missing.error.removeprefix("tool error: ") in text(missing)


def test_invalid_calls_get_the_servers_own_error_and_change_nothing(
    mcp_image: str, shared: SharedEnvironments
) -> None:
    env, _ = open_shared(shared, "memory")
    wrong = step(env, "create_entities", {"entities": [{"name": 3}]})
    assert wrong.observation["schema_problems"]  # our check saw it, and sent it anyway
    assert "[tool error]" in text(wrong) or "JSON-RPC error" in (wrong.error or "")
    assert wrong.observation["state_diff"]["changed"] is False
    unknown = step(env, "drop_everything", {})
    assert unknown.observation["schema_problems"][0].startswith("unknown tool 'drop_everything'")
    assert "drop_everything" in text(unknown)
    assert unknown.observation["state_diff"]["changed"] is False
    assert not wrong.truncated and not unknown.truncated


def test_memory_graph_built_then_queried(
    mcp_image: str, environments: list[McpEnvironment]
) -> None:
    env = open_env(environments, server="memory")
    seeded = env.reset(0, None)["state"]
    created = step(
        env,
        "create_entities",
        {
            "entities": [
                {"name": "Cuxhaven", "entityType": "tide_station", "observations": ["On the Elbe"]}
            ]
        },
    )
    assert created.error is None
    assert created.observation["state"]["entities"] == seeded["entities"] + 1
    related = step(
        env,
        "create_relations",
        {"relations": [{"from": "tidewatch", "to": "Cuxhaven", "relationType": "reads_data_from"}]},
    )
    assert related.observation["state"]["relations"] == seeded["relations"] + 1
    found = step(env, "search_nodes", {"query": "Elbe"})
    assert "Cuxhaven" in text(found)
    assert found.observation["state_diff"]["changed"] is False


def test_git_branch_and_checkout_show_in_the_state(
    mcp_image: str, environments: list[McpEnvironment]
) -> None:
    env = open_env(environments, server="git")
    env.reset(0, None)
    made = step(env, "git_create_branch", {"repo_path": "/srv/repo", "branch_name": "docs/faq"})
    assert made.error is None
    assert "branches:docs/faq" in made.observation["state_diff"]["added"]
    moved = step(env, "git_checkout", {"repo_path": "/srv/repo", "branch_name": "docs/faq"})
    assert moved.observation["state_diff"]["modified"]["branch"] == ["main", "docs/faq"]
    status = step(env, "git_status", {"repo_path": "/srv/repo"})
    assert "docs/faq" in text(status)


def test_postgres_answers_sql_and_refuses_writes_with_its_own_error(
    mcp_image: str, shared: SharedEnvironments
) -> None:
    env, _ = open_shared(shared, "postgres")
    counted = step(env, "query", {"sql": "SELECT count(*) AS n FROM customers"})
    assert counted.error is None and '"120"' in text(counted)
    write = step(env, "query", {"sql": "DELETE FROM reviews"})
    assert "read-only transaction" in text(write) or "read-only" in (write.error or "")
    assert write.observation["state"]["tables"]["public.reviews"] == 150
    assert write.observation["state_diff"]["changed"] is False


def test_fetch_reads_the_local_site_and_nothing_else(
    mcp_image: str, datasette_image: str, shared: SharedEnvironments
) -> None:
    env, _ = open_shared(shared, "fetch")
    page = step(env, "fetch", {"url": "http://127.0.0.1/"})
    assert page.error is None and "Riverside Public Library" in text(page)
    assert page.observation["stderr"]  # the server's own warnings are kept in the raw record
    outside = step(env, "fetch", {"url": "http://93.184.215.14/"}, timeout=20)
    assert outside.observation["result"] is None or outside.observation["result"]["isError"]
    assert env.describe().components["site"] == "datasette"


def test_everything_over_streamable_http_answers_calls(
    mcp_image: str, shared: SharedEnvironments
) -> None:
    env, _ = open_shared(shared, "everything", "http")
    echoed = step(env, "echo", {"message": "über http"})
    assert "über http" in text(echoed)
    assert any(m["dir"] == "recv" for m in echoed.observation["messages"])


def test_a_hung_call_times_out_and_the_episode_goes_on(
    mcp_image: str, environments: list[McpEnvironment]
) -> None:
    env = open_env(environments, server="everything", call_timeout_s=1.5)
    env.reset(0, None)
    started = time.monotonic()
    slow = step(env, "trigger-long-running-operation", {"duration": 30, "steps": 3})
    assert time.monotonic() - started < 10
    assert slow.error == "timed out after 1.5s" and not slow.truncated
    assert text(slow) == "[no result: timed out after 1.5s]"
    assert "echo" in text(step(env, "echo", {"message": "echo after"}))


def test_a_killed_server_ends_the_episode_with_its_reason(
    mcp_image: str, environments: list[McpEnvironment]
) -> None:
    env = open_env(environments, server="filesystem")
    env.reset(0, None)
    pid = env._session["server_pid"]
    env.sandbox.exec(["kill", "-KILL", str(pid)])
    after = step(env, "list_allowed_directories", {})
    assert after.truncated
    assert after.error == "the server exited with code -9"
    assert text(after) == "[no result: the server exited with code -9]"
    assert env.evaluate(None) is None


def test_garbage_on_stdout_is_recorded_and_the_session_goes_on(
    mcp_image: str, environments: list[McpEnvironment]
) -> None:
    time_server = list(SERVERS["time"].transports["stdio"].command)
    noisy = ["sh", "-c", 'echo "this is not JSON-RPC"; exec "$@"', "sh", *time_server]
    env = open_env(environments, server="time", command=noisy)
    first = env.reset(0, None)
    assert first["garbage"] == ["this is not JSON-RPC"]
    now = step(env, "get_current_time", {"timezone": "Europe/Paris"})
    assert now.error is None and "Europe/Paris" in text(now)
    assert env.describe().components["command"].startswith("sh -c")


def test_a_driver_lost_during_a_call_ends_the_episode_with_a_fresh_look(
    mcp_image: str, environments: list[McpEnvironment]
) -> None:
    env = open_env(environments, server="filesystem")
    env.reset(0, None)
    env.sandbox.exec(["pkill", "-KILL", "-f", "mcp_driver.py"])
    after = step(env, "list_allowed_directories", {})
    assert after.truncated and after.error
    assert after.observation["sandbox_lost"] is True
    # A second driver process could still look: the state is fresh, not the one from before.
    assert after.observation["state_stale"] is False
    assert after.observation["state"]["kind"] == "files"
    assert text(after) == "[no result: the sandbox stopped answering]"
