"""`worldtrace collect swe --policy llm` end to end: a real repository container, a model
stand-in (tests/llm_server.py) whose replies are tool calls, then curate, publish and export.

The model is offered the swe tools as function definitions made from the environment's own
tool models, its tool calls are the actions, and a reply without a tool call ends the episode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.collecting import curate_and_publish, episode_rewards, export_both, rows_of
from tests.llm_server import MODEL, StandInModelServer
from tests.prefect_server import client_env
from worldtrace.collectors.swe.prompt import SYSTEM
from worldtrace.collectors.swe.tasks import load_tasks
from worldtrace.collectors.swe.tools import TOOLS, parse_tool_call
from worldtrace.schemas import Episode, from_row

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


def usage(prompt: int, completion: int) -> dict[str, Any]:
    """A server's ``usage`` block with these counts."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def collect_llm(
    tmp_path: Path, prefect_server: str, model: StandInModelServer, name: str, **params: Any
) -> Path:
    """Collect one llm episode of :data:`TASK` with the CLI on the session's Prefect server."""
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        json.dumps(
            {
                "domain": "swe",
                "episodes": 1,
                "max_steps": 8,
                "step_timeout_s": 120,
                "out": str(tmp_path / "runs"),
                "run_name": name,
                "environment": {"repo": "toolz"},
                "policy": {"kind": "llm", "tasks": [TASK], "params": params},
            }
        )
    )
    command = [sys.executable, "-m", "worldtrace.flows.cli", "collect", "--config", str(config)]
    done = subprocess.run(
        [*command, "--policy", "llm", "--base-url", model.url],
        env=client_env(prefect_server),
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tmp_path / "runs" / name


def episode_row(run_dir: Path) -> Episode:
    """The run's only row of the episodes table, validated."""
    (row,) = pl.read_parquet(run_dir / "episodes.parquet").to_dicts()
    return from_row(Episode, row)


@pytest.mark.timeout(900)  # a collect, curate, publish and export: minutes on a busy machine
def test_tool_calls_of_a_model_fix_the_bug_and_the_episode_is_published(
    tmp_path: Path, toolz_image: str, prefect_server: str
) -> None:
    counts = [(1000, 40), (1500, 60), (2000, 30)]
    replies = [
        {"tool_calls": [call], "usage": usage(*count)}
        for call, count in zip(CALLS, counts, strict=True)
    ]
    closing = {"content": "Restored `args = args + pad`.", "usage": usage(2500, 12)}
    with StandInModelServer(replies=replies, then=closing) as model:
        run_dir = collect_llm(tmp_path, prefect_server, model, "valid")
        requests = model.chat_requests()

    rows = sorted(rows_of(run_dir, "swe"), key=lambda row: row.step)
    # The actions are the calls the model returned, read by the domain's own parser.
    assert [row.action for row in rows] == [parse_tool_call(call) for call in CALLS]
    assert [row.action_error for row in rows] == [None, None, None]
    assert "args = args + pad" not in rows[0].next_observation.text  # the bug, in the file
    assert " M toolz/_signatures.py" in rows[1].next_observation.meta["git_status"]
    assert rows[2].next_observation.text.endswith("[exit code: 0]\n")  # the test passes now
    (task,) = [t for t in load_tasks("toolz") if t.name == TASK]
    for row, (prompt, completion) in zip(rows, counts, strict=True):
        assert row.task == task.instruction
        assert (row.policy.kind, row.policy.version) == ("llm", MODEL)
        assert row.usage is not None and row.usage.model == MODEL
        assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (prompt, completion)
        assert row.usage.calls == 1
    # The fix is judged by the task's tests in a fresh judge: every one passes.
    assert episode_rewards(run_dir) == [1.0]
    episode = episode_row(run_dir)
    assert (episode.status, episode.length, episode.error) == ("completed", 3, None)
    assert episode.usage is not None
    assert episode.usage.calls == 4  # three actions and the reply that ended the episode
    assert episode.usage.prompt_tokens == 1000 + 1500 + 2000 + 2500
    assert episode.usage.completion_tokens == 40 + 60 + 30 + 12

    # What the model was shown: the system prompt, the task, the repository, the tools.
    assert len(requests) == 4
    first = requests[0]
    assert [tool["function"]["name"] for tool in first["tools"]] == list(TOOLS)
    for tool in first["tools"]:
        parameters = tool["function"]["parameters"]
        assert set(parameters["properties"]) == set(TOOLS[tool["function"]["name"]].model_fields)
        assert tool["function"]["description"]
    assert first["messages"][0] == {"role": "system", "content": SYSTEM}
    assert first["messages"][1] == {"role": "user", "content": f"Instruction: {task.instruction}"}
    assert first["messages"][2] == {"role": "user", "content": rows[0].observation.text}
    assert rows[0].observation.text.startswith("Repository toolz 1.0.0 in /home/user/repo")
    # The second request holds the first call, then its result as the tool's message.
    assistant, result = requests[1]["messages"][3:5]
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == "read_file"
    assert json.loads(call["function"]["arguments"]) == rows[0].action.arguments
    assert result == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": rows[0].next_observation.text,
    }
    assert len(requests[3]["messages"]) == 3 + 2 * 3

    dataset = curate_and_publish(run_dir, tmp_path, "swe")
    assert dataset.num_rows == len(rows)
    assert set(dataset["domain"]) == {"swe"}
    agentworld, _ = export_both(tmp_path / "dist", tmp_path, "swe", dataset)
    assert {row["transition_id"] for row in agentworld} <= {row.id for row in rows}


@pytest.mark.timeout(600)  # a collect and the task check: minutes on a busy machine
def test_tool_calls_whose_arguments_are_not_json_are_recorded_and_end_the_episode(
    tmp_path: Path, toolz_image: str, prefect_server: str
) -> None:
    broken = {"tool_calls": [{"name": "run_tests", "arguments": "{not json"}]}
    with StandInModelServer(then={**broken, "usage": usage(900, 9)}) as model:
        run_dir = collect_llm(tmp_path, prefect_server, model, "malformed", max_invalid_replies=2)
        requests = model.chat_requests()

    rows = sorted(rows_of(run_dir, "swe"), key=lambda row: row.step)
    assert len(rows) == 2
    for row in rows:
        assert row.action.name == "invalid_reply"
        assert json.loads(row.action.text) == {"name": "run_tests", "arguments": "{not json"}
        assert row.action_error is not None
        assert row.action_error.startswith("the arguments of 'run_tests' are not JSON")
        # Nothing ran: the next state is the state the model was shown.
        assert row.next_observation.text == row.observation.text
        assert row.usage is not None and row.usage.prompt_tokens == 900
    assert rows[0].observation.text.startswith("Repository toolz 1.0.0")
    episode = episode_row(run_dir)
    assert episode.status == "truncated"
    assert episode.error == "the model's last 2 replies in a row were no action"
    assert episode.usage is not None and episode.usage.calls == 2
    # The bug is still there: the judge's tests fail.
    assert episode_rewards(run_dir) == [0.0]
    # The model saw its rejected reply, then why it was rejected with the unchanged state.
    assert len(requests) == 2
    assistant, feedback = requests[1]["messages"][3:5]
    assert assistant == {"role": "assistant", "content": rows[0].action.text}
    assert feedback == {
        "role": "user",
        "content": f"The action failed: {rows[0].action_error}\n\n{rows[0].observation.text}",
    }
