"""`worldtrace collect os --policy llm`: a model (the stand-in server) drives the real desktop.

The stand-in (tests/llm_server.py) answers with the pyautogui code a model would write for the
first editing task, so the episode really edits and saves the file in the container and its
check passes; the run is then normalized, curated, published and exported like any.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from tests.collecting import curate_and_publish, episode_rewards, export_both, rows_of
from tests.llm_server import MODEL, StandInModelServer
from tests.prefect_server import client_env
from worldtrace.collectors.os.prompt import SYSTEM
from worldtrace.collectors.os.tasks import load_tasks
from worldtrace.collectors.recorder import read_episode

pytestmark = pytest.mark.docker

TASK = next(task for task in load_tasks() if task.name == "mousepad-append-todo-item")


@pytest.fixture
def api_env(prefect_server: str) -> dict[str, str]:
    """The collection's environment: the session's Prefect server (no temporary API)."""
    return client_env(prefect_server)


def collect(api_env: dict[str, str], *args: str) -> None:
    """Run ``worldtrace collect os`` in a process of its own, pointed at the Prefect server.

    The stand-in model server runs in this process; the collection reaches it over loopback.
    """
    command = [sys.executable, "-m", "worldtrace.flows.cli", "collect", "os", *args]
    result = subprocess.run(command, env=api_env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def usage(prompt: int, completion: int) -> dict[str, Any]:
    """A usage block as a server reports it, with cached and reasoning tokens."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 4},
        "completion_tokens_details": {"reasoning_tokens": 1},
    }


def test_a_model_edits_and_saves_a_file_on_the_desktop_and_the_run_is_published(
    tmp_path: Path, os_image: str, api_env: dict[str, str]
) -> None:
    write = "pyautogui.write('5. Pay the rent\\n')"
    replies = [
        "pyautogui.hotkey('ctrl', 'End')",
        f"The caret is at the end of the list now. I type the item:\n```python\n{write}\n```\n"
        "and save next.",
        "pyautogui.hotkey('ctrl', 's')",
    ]
    tokens = [(2100, 12), (2600, 40), (3100, 12)]
    scripted = [
        {"content": reply, "usage": usage(*counts)}
        for reply, counts in zip(replies, tokens, strict=True)
    ]
    done = {"content": "DONE", "usage": usage(3600, 1)}
    with StandInModelServer([*scripted, done]) as model:
        collect(
            api_env,
            "--task", TASK.name, "--policy", "llm", "--base-url", model.url,
            "--episodes", "1", "--max-steps", "6",
            "--out", str(tmp_path / "runs"), "--run-name", "llm",
        )  # fmt: skip
        requests = model.chat_requests()
    run_dir = tmp_path / "runs" / "llm"

    rows = sorted(rows_of(run_dir, "os"), key=lambda row: row.step)
    # The actions are the model's code (of the fenced block, not the prose around it).
    assert [row.action.text for row in rows] == [replies[0], write, replies[2]]
    assert [row.action.name for row in rows] == ["hotkey", "write", "hotkey"]
    assert all(row.action_error is None for row in rows)
    # The real desktop did it: the item is in the editor and the task's check passed.
    assert "5. Pay the rent" not in rows[0].observation.text
    assert "5. Pay the rent" in rows[1].next_observation.text
    assert episode_rewards(run_dir) == [1.0]
    for row, (prompt, completion) in zip(rows, tokens, strict=True):
        assert row.policy.kind == "llm" and row.policy.version == MODEL
        assert row.task == TASK.instruction
        assert row.usage is not None
        assert (row.usage.model, row.usage.calls) == (MODEL, 1)
        assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (prompt, completion)
        assert (row.usage.cached_tokens, row.usage.reasoning_tokens) == (4, 1)
        assert row.usage.latency_s > 0

    (episode,) = pl.read_parquet(run_dir / "episodes.parquet").to_dicts()
    assert episode["status"] == "completed" and episode["length"] == 3
    assert episode["usage"]["calls"] == 4  # the closing DONE is counted
    assert episode["usage"]["prompt_tokens"] == 2100 + 2600 + 3100 + 3600
    assert episode["usage"]["completion_tokens"] == 12 + 40 + 12 + 1
    assert episode["usage"]["reasoning_tokens"] == 4

    (path,) = (run_dir / "raw" / "episodes").glob("*.jsonl")
    events = list(read_episode(path))
    steps = [event for event in events if event.type == "step"]
    assert [step.reply["content"] for step in steps] == replies
    assert events[-1].type == "end" and events[-1].reply["content"] == "DONE"

    # What the model was shown: the desktop's system prompt, the task, the rendered text.
    assert len(requests) == 4
    first = requests[0]["messages"]
    assert first[0] == {"role": "system", "content": SYSTEM}
    assert first[1] == {"role": "user", "content": f"Instruction: {TASK.instruction}"}
    assert first[2] == {"role": "user", "content": rows[0].observation.text}
    assert first[2]["content"].startswith("[window 1] ")
    last = requests[3]["messages"]
    assert [m["content"] for m in last if m["role"] == "assistant"] == [
        row.action.text for row in rows
    ]
    assert last[-1]["content"] == rows[2].next_observation.text

    dataset = curate_and_publish(run_dir, tmp_path, "os")
    assert dataset.num_rows == 3 and set(dataset["domain"]) == {"os"}
    agentworld, _ = export_both(tmp_path / "dist", tmp_path, "os", dataset)
    assert any("pyautogui.hotkey('ctrl', 's')" in row["current_prompt"] for row in agentworld)


def test_unparseable_code_is_recorded_without_touching_the_desktop_then_ends_the_episode(
    tmp_path: Path, os_image: str, api_env: dict[str, str]
) -> None:
    replies = [
        "pyautogui.click(640, 400",
        "First the imports:\n```python\nimport os\nos.system('ls')\n```",
    ]
    with StandInModelServer(
        [{"content": reply} for reply in replies], then={"content": "WAIT"}
    ) as model:
        config = tmp_path / "llm.yaml"
        params = {"base_url": model.url, "max_invalid_replies": 2}
        config.write_text(yaml.safe_dump({"policy": {"kind": "llm", "params": params}}))
        collect(
            api_env,
            "--config", str(config), "--task", TASK.name,
            "--episodes", "1", "--max-steps", "5",
            "--out", str(tmp_path / "runs"), "--run-name", "bad",
        )  # fmt: skip
        requests = model.chat_requests()
    run_dir = tmp_path / "runs" / "bad"

    rows = sorted(rows_of(run_dir, "os"), key=lambda row: row.step)
    assert [row.action.name for row in rows] == ["invalid_reply", "invalid_reply"]
    assert [row.action.text for row in rows] == replies
    assert rows[0].action_error and "not Python: '(' was never closed" in rows[0].action_error
    assert rows[1].action_error and "import os" in rows[1].action_error
    for row in rows:
        # The desktop was not touched: the screen the model saw is the screen after.
        assert row.next_observation.text == row.observation.text
        assert row.observation.text.startswith("[window 1] ")
        assert row.policy.kind == "llm" and row.usage is not None
    # The second request showed the model its rejected reply and why.
    assert len(requests) == 2  # the third act gave up before asking
    second = requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": replies[0]}
    assert second[-1]["content"].startswith(f"The action failed: {rows[0].action_error}")

    (episode,) = pl.read_parquet(run_dir / "episodes.parquet").to_dicts()
    assert episode["status"] == "truncated" and episode["length"] == 2
    assert [row.truncated for row in rows] == [False, True]
    assert "2 replies in a row were no action" in episode["error"]
    assert episode["usage"]["calls"] == 2
