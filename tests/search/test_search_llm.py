"""`worldtrace collect search --policy llm` end to end: the real search engine and corpus in
their container, a model stand-in (tests/llm_server.py) whose replies are tool calls, then
curate, publish and export.

The model is offered the environment's three tools (``actions.TOOLS``) as function
definitions; its tool calls are the actions, and a reply without a tool call ends the episode.
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
from worldtrace.collectors.search.actions import TOOLS
from worldtrace.collectors.search.prompt import SYSTEM
from worldtrace.collectors.search.tasks import load_tasks
from worldtrace.schemas import Episode, from_row

pytestmark = pytest.mark.docker

TASK = "git-stash-untracked"
"""Three calls (search, open the page, store the answer), checked against the final memory."""


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
                "domain": "search",
                "episodes": 1,
                "max_steps": 8,
                "step_timeout_s": 120,
                "out": str(tmp_path / "runs"),
                "run_name": name,
                # A loaded machine starts and answers slowly: the defaults are 60 s and 30 s.
                "environment": {"start_timeout_s": 240, "call_timeout_s": 120},
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
def test_tool_calls_of_a_model_answer_the_question_and_the_episode_is_published(
    tmp_path: Path, search_image: str, prefect_server: str
) -> None:
    (task,) = [t for t in load_tasks() if t.name == TASK]
    # The model makes the calls an engineer would: the task's scripted ones.
    calls = [{"name": step.name, "arguments": step.arguments} for step in task.steps]
    counts = [(700 + 100 * index, 20 + index) for index in range(len(calls))]
    replies = [
        {"tool_calls": [call], "usage": usage(*count)}
        for call, count in zip(calls, counts, strict=True)
    ]
    closing = {"content": "`git stash push --include-untracked`.", "usage": usage(1200, 7)}
    with StandInModelServer(replies=replies, then=closing) as model:
        run_dir = collect_llm(tmp_path, prefect_server, model, "valid")
        requests = model.chat_requests()

    rows = sorted(rows_of(run_dir, "search"), key=lambda row: row.step)
    assert [{"name": r.action.name, "arguments": r.action.arguments} for r in rows] == calls
    assert [row.action_error for row in rows] == [None] * len(calls)
    assert rows[0].next_observation.text.startswith("[1] http://docs.localhost/")
    assert "--include-untracked" in rows[1].next_observation.text  # the page read
    assert rows[2].next_observation.text == "Added 'answer' to memory."
    for row, (prompt, completion) in zip(rows, counts, strict=True):
        assert row.task == task.instruction
        assert (row.policy.kind, row.policy.version) == ("llm", MODEL)
        assert row.usage is not None and row.usage.model == MODEL
        assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (prompt, completion)
    # The task's check holds against the episode's final memory.
    assert episode_rewards(run_dir) == [1.0]
    episode = episode_row(run_dir)
    assert (episode.status, episode.length, episode.error) == ("completed", len(calls), None)
    assert episode.usage is not None and episode.usage.calls == len(calls) + 1
    assert episode.usage.prompt_tokens == sum(p for p, _ in counts) + 1200
    assert episode.usage.completion_tokens == sum(c for _, c in counts) + 7

    # What the model was shown: the system prompt, the task, the corpus, the tools.
    assert len(requests) == len(calls) + 1
    first = requests[0]
    offered = [tool["function"] for tool in first["tools"]]
    assert [tool["name"] for tool in offered] == [tool["name"] for tool in TOOLS]
    assert [tool["parameters"] for tool in offered] == [tool["inputSchema"] for tool in TOOLS]
    assert [tool["description"] for tool in offered] == [tool["description"] for tool in TOOLS]
    assert first["messages"][0] == {"role": "system", "content": SYSTEM}
    assert first["messages"][1] == {"role": "user", "content": f"Instruction: {task.instruction}"}
    assert first["messages"][2] == {"role": "user", "content": rows[0].observation.text}
    assert rows[0].observation.text.startswith("Documentation search over http://docs.localhost/")
    # The second request holds the first call, then its result as the tool's message.
    assistant, result = requests[1]["messages"][3:5]
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == "web_search"
    assert json.loads(call["function"]["arguments"]) == calls[0]["arguments"]
    assert result == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": rows[0].next_observation.text,
    }

    dataset = curate_and_publish(run_dir, tmp_path, "search")
    assert dataset.num_rows == len(rows)
    assert set(dataset["domain"]) == {"search"}
    agentworld, _ = export_both(tmp_path / "dist", tmp_path, "search", dataset)
    assert {row["transition_id"] for row in agentworld} <= {row.id for row in rows}


@pytest.mark.timeout(600)  # a collect and the task check: minutes on a busy machine
def test_tool_calls_whose_arguments_are_not_json_are_recorded_and_end_the_episode(
    tmp_path: Path, search_image: str, prefect_server: str
) -> None:
    broken = {"tool_calls": [{"name": "web_search", "arguments": "{not json"}]}
    with StandInModelServer(then={**broken, "usage": usage(600, 6)}) as model:
        run_dir = collect_llm(tmp_path, prefect_server, model, "malformed", max_invalid_replies=2)
        requests = model.chat_requests()

    rows = sorted(rows_of(run_dir, "search"), key=lambda row: row.step)
    assert len(rows) == 2
    for row in rows:
        assert row.action.name == "invalid_reply"
        assert json.loads(row.action.text) == {"name": "web_search", "arguments": "{not json"}
        assert row.action_error is not None
        assert row.action_error.startswith("the arguments of 'web_search' are not JSON")
        # Nothing was searched: the next state is the state the model was shown.
        assert row.next_observation.text == row.observation.text
        assert row.usage is not None and row.usage.prompt_tokens == 600
    assert rows[0].observation.text.startswith("Documentation search over ")
    episode = episode_row(run_dir)
    assert episode.status == "truncated"
    assert episode.error == "the model's last 2 replies in a row were no action"
    assert episode.usage is not None and episode.usage.calls == 2
    assert episode_rewards(run_dir) == [0.0]  # nothing is in the memory
    assert len(requests) == 2
    assistant, feedback = requests[1]["messages"][3:5]
    assert assistant == {"role": "assistant", "content": rows[0].action.text}
    assert feedback == {
        "role": "user",
        "content": f"The action failed: {rows[0].action_error}\n\n{rows[0].observation.text}",
    }
