"""`worldtrace collect mcp --policy llm` end to end: a real MCP server in its container, a
model stand-in (tests/llm_server.py) whose replies are tool calls, then curate, publish and
export.

The model is offered the tools the server listed (the episode's first observation holds its
``tools/list`` answer) as function definitions; its tool calls are the actions, and a reply
without a tool call ends the episode. What every domain's llm run shows is checked by
tests/llm_collecting.py; here, what the server did and the tools it offered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.collecting import episode_rewards
from tests.llm_collecting import (
    assert_tools_offered,
    collect_a_call_not_json,
    collect_tool_calls,
    publish_and_export,
)
from worldtrace.collectors.mcp.prompt import SYSTEM
from worldtrace.collectors.mcp.tasks import load_tasks

pytestmark = pytest.mark.docker

SERVER = "memory"
TASK = "memory-add-new-teammate"
"""Three calls (create an entity, relate it, open it), checked against the memory file."""
COLLECT: dict[str, Any] = {
    "tasks": [TASK],
    "max_steps": 8,
    "step_timeout_s": 120,
    # A loaded machine starts and answers slowly: the defaults are 60 s and 30 s.
    "environment": {"server": SERVER, "start_timeout_s": 240, "call_timeout_s": 120},
}


@pytest.mark.timeout(900)  # a collect, curate, publish and export: minutes on a busy machine
def test_tool_calls_of_a_model_do_the_task_and_the_episode_is_published(
    tmp_path: Path, mcp_image: str, prefect_server: str
) -> None:
    (task,) = [t for t in load_tasks(SERVER) if t.name == TASK]
    # The model makes the calls an engineer would: the task's scripted ones.
    calls = [{"name": step.name, "arguments": step.arguments} for step in task.steps]
    counts = [(700 + 100 * index, 20 + index) for index in range(len(calls))]
    closing = ("Inès is in the graph.", (1200, 7))
    run = collect_tool_calls(
        tmp_path, prefect_server, "mcp", calls, counts, closing,
        instruction=task.instruction, system=SYSTEM, **COLLECT,
    )  # fmt: skip
    rows = run.rows
    assert rows[0].action.name == "create_entities"
    assert "Inès" in rows[-1].next_observation.text  # open_nodes shows the new node
    # The task's check holds against the server's real memory file.
    assert episode_rewards(run.run_dir) == [1.0]

    # What the model was offered: the server's tools, as tools/list gave them.
    assert rows[0].observation.text.startswith("MCP server ")
    listed = rows[0].observation.meta["tools"]
    assert "create_entities" in [tool["name"] for tool in listed]
    assert_tools_offered(run, listed)

    publish_and_export(run, tmp_path, "mcp")


@pytest.mark.timeout(600)  # a collect and the task check: minutes on a busy machine
def test_tool_calls_whose_arguments_are_not_json_are_recorded_and_end_the_episode(
    tmp_path: Path, mcp_image: str, prefect_server: str
) -> None:
    # Nothing was sent to the server: each next state is the state the model was shown.
    run = collect_a_call_not_json(
        tmp_path, prefect_server, "mcp", "read_graph", (600, 6), **COLLECT
    )
    assert run.rows[0].observation.text.startswith("MCP server ")
    assert episode_rewards(run.run_dir) == [0.0]  # nothing was added to the graph
