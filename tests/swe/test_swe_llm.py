"""`worldtrace collect swe --policy llm` end to end: a real repository container, a model
stand-in (tests/llm_server.py) whose replies are tool calls, then curate, publish and export.

The model is offered the swe tools as function definitions made from the environment's own
tool models, its tool calls are the actions, and a reply without a tool call ends the episode.
What every domain's llm run shows is checked by tests/llm_collecting.py; here, what the calls
did to the repository and the tools offered.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.collecting import episode_rewards
from tests.llm_collecting import collect_a_call_not_json, collect_tool_calls, publish_and_export
from worldtrace.collectors.swe.prompt import SYSTEM
from worldtrace.collectors.swe.tasks import load_tasks
from worldtrace.collectors.swe.tools import TOOLS, parse_tool_call

pytestmark = pytest.mark.docker

TASK = "toolz-bde1e85db3"
"""One failing test among 20 judged: a short episode and a quick judge. Its bug dropped the
line ``args = args + pad`` after ``pad = ...`` in ``toolz/_signatures.py``."""
PAD = "        pad = (None,) * (num_pos_only - len(args))\n"
CALLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "arguments": {"path": "toolz/_signatures.py", "start_line": 695, "end_line": 705},
    },
    {
        "name": "str_replace",
        "arguments": {
            "path": "toolz/_signatures.py",
            "old": PAD,
            "new": PAD + "        args = args + pad\n",
        },
    },
    {
        "name": "run_tests",
        "arguments": {"selector": "toolz/tests/test_signatures.py::test_is_partial"},
    },
]
"""What the stand-in model does: look, fix the bug, run the failing test."""
COLLECT: dict[str, Any] = {
    "tasks": [TASK],
    "max_steps": 8,
    "step_timeout_s": 120,
    "environment": {"repo": "toolz"},
}


@pytest.mark.timeout(900)  # a collect, curate, publish and export: minutes on a busy machine
def test_tool_calls_of_a_model_fix_the_bug_and_the_episode_is_published(
    tmp_path: Path, toolz_image: str, prefect_server: str
) -> None:
    (task,) = [t for t in load_tasks("toolz") if t.name == TASK]
    counts = [(1000, 40), (1500, 60), (2000, 30)]
    closing = ("Restored `args = args + pad`.", (2500, 12))
    run = collect_tool_calls(
        tmp_path, prefect_server, "swe", CALLS, counts, closing,
        instruction=task.instruction, system=SYSTEM, **COLLECT,
    )  # fmt: skip
    rows = run.rows
    # The actions are the calls the model returned, read by the domain's own parser.
    assert [row.action for row in rows] == [parse_tool_call(call) for call in CALLS]
    assert "args = args + pad" not in rows[0].next_observation.text  # the bug, in the file
    assert " M toolz/_signatures.py" in rows[1].next_observation.meta["git_status"]
    assert rows[2].next_observation.text.endswith("[exit code: 0]\n")  # the test passes now
    # The fix is judged by the task's tests in a fresh judge: every one passes.
    assert episode_rewards(run.run_dir) == [1.0]

    # What the model was offered: the repository, the tools of the environment's own models.
    assert rows[0].observation.text.startswith("Repository toolz 1.0.0 in /home/user/repo")
    first = run.requests[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == list(TOOLS)
    for tool in first["tools"]:
        parameters = tool["function"]["parameters"]
        assert set(parameters["properties"]) == set(TOOLS[tool["function"]["name"]].model_fields)
        assert tool["function"]["description"]
    # The last request holds every call and its result.
    assert len(run.requests[3]["messages"]) == 3 + 2 * 3

    publish_and_export(run, tmp_path, "swe")


@pytest.mark.timeout(600)  # a collect and the task check: minutes on a busy machine
def test_tool_calls_whose_arguments_are_not_json_are_recorded_and_end_the_episode(
    tmp_path: Path, toolz_image: str, prefect_server: str
) -> None:
    # Nothing ran: each next state is the state the model was shown.
    run = collect_a_call_not_json(tmp_path, prefect_server, "swe", "run_tests", (900, 9), **COLLECT)
    assert run.rows[0].observation.text.startswith("Repository toolz 1.0.0")
    # The bug is still there: the judge's tests fail.
    assert episode_rewards(run.run_dir) == [0.0]
