"""`worldtrace collect search --policy llm` end to end: the real search engine and corpus in
their container, a model stand-in (tests/llm_server.py) whose replies are tool calls, then
curate, publish and export.

The model is offered the environment's three tools (``actions.TOOLS``) as function
definitions; its tool calls are the actions, and a reply without a tool call ends the episode.
What every domain's llm run shows is checked by tests/llm_collecting.py; here, what the
searches found and the tools offered.
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
from worldtrace.collectors.search.actions import TOOLS
from worldtrace.collectors.search.prompt import SYSTEM
from worldtrace.collectors.search.tasks import load_tasks

pytestmark = pytest.mark.docker

TASK = "git-stash-untracked"
"""Three calls (search, open the page, store the answer), checked against the final memory."""
COLLECT: dict[str, Any] = {
    "tasks": [TASK],
    "max_steps": 8,
    "step_timeout_s": 120,
    # A loaded machine starts and answers slowly: the defaults are 60 s and 30 s.
    "environment": {"start_timeout_s": 240, "call_timeout_s": 120},
}


@pytest.mark.timeout(900)  # a collect, curate, publish and export: minutes on a busy machine
def test_tool_calls_of_a_model_answer_the_question_and_the_episode_is_published(
    tmp_path: Path, search_image: str, prefect_server: str
) -> None:
    (task,) = [t for t in load_tasks() if t.name == TASK]
    # The model makes the calls an engineer would: the task's scripted ones, three of them.
    calls = [{"name": step.name, "arguments": step.arguments} for step in task.steps]
    closing = ("`git stash push --include-untracked`.", (1200, 7))
    counts = [(700, 20), (800, 21), (900, 22)]
    run = collect_tool_calls(
        tmp_path, prefect_server, "search", calls, counts, closing,
        instruction=task.instruction, system=SYSTEM, **COLLECT,
    )  # fmt: skip
    rows = run.rows
    assert rows[0].action.name == "web_search"
    assert rows[0].next_observation.text.startswith("[1] http://docs.localhost/")
    assert "--include-untracked" in rows[1].next_observation.text  # the page read
    assert rows[2].next_observation.text == "Added 'answer' to memory."
    # The task's check holds against the episode's final memory.
    assert episode_rewards(run.run_dir) == [1.0]

    # What the model was offered: the corpus, the environment's tools.
    assert rows[0].observation.text.startswith("Documentation search over http://docs.localhost/")
    assert all(tool["description"] for tool in TOOLS)
    assert_tools_offered(run, TOOLS)

    publish_and_export(run, tmp_path, "search")


@pytest.mark.timeout(600)  # a collect and the task check: minutes on a busy machine
def test_tool_calls_whose_arguments_are_not_json_are_recorded_and_end_the_episode(
    tmp_path: Path, search_image: str, prefect_server: str
) -> None:
    # Nothing was searched: each next state is the state the model was shown.
    run = collect_a_call_not_json(
        tmp_path, prefect_server, "search", "web_search", (600, 6), **COLLECT
    )
    assert run.rows[0].observation.text.startswith("Documentation search over ")
    assert episode_rewards(run.run_dir) == [0.0]  # nothing is in the memory
