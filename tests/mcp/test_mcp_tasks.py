"""The scripted mcp task library: its shape, its calls against the real tool lists, its checks.

The checks are played against the real servers of ``worldtrace/mcp``: on a fresh reset, before
the script, a task's check must fail; after the script it must hold. A sample of tasks (one per
server, and a git task that starts from a working copy with edits) runs by default; set
``WORLDTRACE_FULL_TASKS=1`` to play the whole library (about five minutes).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.full_run import FULL
from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment
from worldtrace.collectors.mcp.servers import SERVERS
from worldtrace.collectors.mcp.tasks import SERVER_MODULES, McpTask, load_tasks
from worldtrace.collectors.tool_calls import schema_problems, tool_call

TOOL_LISTS = Path(__file__).parent / "data" / "tools"
"""The servers' tool lists as ``tools/list`` gave them through the driver."""

SAMPLE = (
    "time-kathmandu-offset-from-utc",
    "everything-gzip-release-notes",
    "filesystem-move-tests-into-unit-folder",
    "git-commit-stopwords-on-feature-branch",
    "git-cli-commits-in-mid-january",
    "memory-remove-dissolved-office",
    "postgres-revenue-by-top-category",
    "fetch-catalogue-in-pages",
)
"""Tasks played by default: one per server, and a git task with setup."""

LIBRARY = {task.name: task for task in load_tasks()}


def test_every_server_has_at_least_eight_tasks_with_unique_names() -> None:
    assert set(SERVER_MODULES) == set(SERVERS)
    counts = Counter(task.server for task in load_tasks())
    assert all(counts[server] >= 8 for server in SERVERS), counts
    names = [task.name for task in load_tasks()]
    assert len(names) == len(set(names))
    for server in SERVERS:
        tasks = load_tasks(server)
        assert tasks and all(task.server == server for task in tasks)
        assert all(task.name.startswith(f"{server}-") for task in tasks)
    # A user's own server command has no task module: no tasks rather than an error.
    assert load_tasks("my-own-server") == ()


def test_tasks_are_multi_call_with_an_instruction_and_a_check() -> None:
    tasks = load_tasks()
    # load_tasks() passes over a server without a task module: every server must have some.
    assert {task.server for task in tasks} == set(SERVERS)
    for task in tasks:
        assert task.instruction.strip() and task.category, task.name
        assert len(task.steps) >= 2, task.name
        assert callable(task.check), task.name


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_every_call_fits_the_real_tool_list(server: str) -> None:
    tools = json.loads((TOOL_LISTS / f"{server}.json").read_text())["tools"]
    tasks = load_tasks(server)
    # A server without a task module gets no tasks, not an error: no calls would pass here.
    assert tasks, f"no tasks for {server}: is it in SERVER_MODULES?"
    problems = {
        f"{task.name} step {index}": found
        for task in tasks
        for index, step in enumerate(task.steps)
        if (found := schema_problems(step, tools))
    }
    assert problems == {}


@pytest.fixture
def environments() -> Iterator[list[McpEnvironment]]:
    """Environments a test opens, closed after it whatever happens."""
    opened: list[McpEnvironment] = []
    yield opened
    for environment in opened:
        environment.close()


def play(task: McpTask, environments: list[McpEnvironment]) -> tuple[float | None, float | None]:
    """The task's check on a fresh reset, and again after its script: (before, after)."""
    env = McpEnvironment(McpConfig(server=task.server))
    environments.append(env)
    env.reset(0, task)
    before = env.evaluate(task)
    for action in task.steps:
        outcome = env.step(action, timeout_s=60)
        assert not outcome.truncated, f"{task.name}: {outcome.error}"
    return before, env.evaluate(task)


@pytest.mark.docker
@pytest.mark.parametrize("name", SAMPLE)
def test_sampled_check_fails_before_the_script_and_holds_after(
    name: str, mcp_image: str, datasette_image: str, environments: list[McpEnvironment]
) -> None:
    assert play(LIBRARY[name], environments) == (0.0, 1.0)


WRONG_LAST_STEP = {
    # One customer short of the five asked for.
    "postgres-top-customers-by-spend": (
        "query",
        {
            "sql": "SELECT c.first_name, c.last_name, c.city, "
            "sum(oi.quantity * oi.unit_price) AS spent FROM customers c "
            "JOIN orders o ON o.customer_id = c.id JOIN order_items oi ON oi.order_id = o.id "
            "WHERE o.status = 'delivered' GROUP BY c.id, c.first_name, c.last_name, c.city "
            "ORDER BY spent DESC, c.id LIMIT 4"
        },
    ),
    # The overdue loans page cut short: the later loans are not in the answer.
    "fetch-overdue-loans-report": (
        "fetch",
        {"url": "http://127.0.0.1/library/overdue_loans", "max_length": 3000},
    ),
    # A report with a wrong mean written where the right one belongs.
    "filesystem-newlyn-monthly-report": (
        "write_file",
        {
            "path": "/srv/project/data/reports/newlyn-2024-03.json",
            "content": '{"gaps": 0, "highest_m": 5.3, "lowest_m": 1.1, "mean_m": 3.3, '
            '"readings": 192, "spikes": 0, "station": "newlyn"}\n',
        },
    ),
}
"""A wrong last call for tasks whose check compares an answer or a file with the truth."""


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(WRONG_LAST_STEP))
def test_a_wrong_answer_fails_the_check(
    name: str, mcp_image: str, datasette_image: str, environments: list[McpEnvironment]
) -> None:
    task = LIBRARY[name]
    wrong = tool_call(*WRONG_LAST_STEP[name])
    assert wrong != task.steps[-1]
    assert play(dataclasses.replace(task, steps=(*task.steps[:-1], wrong)), environments) == (
        0.0,
        0.0,
    )


@pytest.mark.docker
@pytest.mark.skipif(not FULL, reason="the whole library takes minutes: WORLDTRACE_FULL_TASKS=1")
@pytest.mark.parametrize("name", sorted(set(LIBRARY) - set(SAMPLE)))
def test_every_check_fails_before_the_script_and_holds_after(
    name: str, mcp_image: str, datasette_image: str, environments: list[McpEnvironment]
) -> None:
    assert play(LIBRARY[name], environments) == (0.0, 1.0)
