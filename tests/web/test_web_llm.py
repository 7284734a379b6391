"""`worldtrace collect web --policy llm`: a model (the stand-in server) drives real Chromium.

The stand-in (tests/llm_server.py) answers with the actions a model would write, read off the
observation it was sent (the bids of the page in front of it), so the episode really clicks
and fills the site; the run is then normalized, curated, published and exported like any.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from tests.collecting import curate_and_publish, export_both, rows_of
from tests.llm_server import MODEL, StandInModelServer
from tests.prefect_server import client_env
from worldtrace.collectors.recorder import read_episode
from worldtrace.collectors.web.prompt import SYSTEM
from worldtrace.collectors.web.site_tasks import TASKS

pytestmark = pytest.mark.docker

TASK = next(task for task in TASKS if task.name == "datasette-add-review")


@pytest.fixture
def api_env(prefect_server: str) -> dict[str, str]:
    """The collection's environment: the session's Prefect server (no temporary API)."""
    return client_env(prefect_server)


def collect(api_env: dict[str, str], *args: str) -> None:
    """Run ``worldtrace collect web`` in a process of its own, pointed at the Prefect server.

    The stand-in model server runs in this process; the collection reaches it over loopback.
    """
    command = [sys.executable, "-m", "worldtrace.flows.cli", "collect", "web", *args]
    result = subprocess.run(command, env=api_env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def usage(prompt: int, completion: int) -> dict[str, Any]:
    """A usage block as a server reports it, with cached and reasoning tokens."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 3},
        "completion_tokens_details": {"reasoning_tokens": 2},
    }


def shown(body: dict[str, Any]) -> str:
    """The last observation a request showed the model."""
    return str(body["messages"][-1]["content"])


def bid_of(text: str, role: str, name: str) -> str:
    """The bid of the element ``role 'name'`` in an observation text."""
    match = re.search(rf"\[([a-zA-Z]*\d+)\] {role} '{re.escape(name)}'", text)
    assert match, f"no {role} {name!r} in:\n{text}"
    return match.group(1)


def test_a_model_clicks_and_fills_a_real_site_and_the_run_is_published(
    tmp_path: Path, site_images: list[str], api_env: dict[str, str]
) -> None:
    replies: list[str] = []

    def click_add_review(body: dict[str, Any]) -> dict[str, Any]:
        replies.append(f"click('{bid_of(shown(body), 'link', 'Add a review')}')")
        return {"content": replies[-1], "usage": usage(1200, 9)}

    def fill_book_id(body: dict[str, Any]) -> dict[str, Any]:
        action = f"fill('{bid_of(shown(body), 'textbox', 'book_id')}', '35')"
        replies.append(
            "The form is open. I will enter the book first.\n"
            f"```python\n{action}\n```\nThen the reviewer."
        )
        return {"content": replies[-1], "usage": usage(1500, 31)}

    done = {"content": "DONE", "usage": usage(1800, 1)}
    with StandInModelServer([click_add_review, fill_book_id, done]) as model:
        collect(
            api_env,
            "--site", "datasette", "--task", TASK.name,
            "--policy", "llm", "--base-url", model.url,
            "--episodes", "1", "--max-steps", "5",
            "--out", str(tmp_path / "runs"), "--run-name", "llm",
        )  # fmt: skip
        requests = model.chat_requests()
    run_dir = tmp_path / "runs" / "llm"

    rows = sorted(rows_of(run_dir, "web"), key=lambda row: row.step)
    assert [row.action.name for row in rows] == ["click", "fill"]
    assert rows[0].action.text == replies[0]
    # The action of the fenced block, not the prose around it.
    assert rows[1].action.text in replies[1] and rows[1].action.text.startswith("fill(")
    assert all(row.action_error is None for row in rows)
    # The real page changed: the click opened the form, the fill wrote into it.
    assert "textbox 'book_id'" not in rows[0].observation.text
    assert "textbox 'book_id' value='35'" in rows[1].next_observation.text
    assert rows[0].next_observation.text == rows[1].observation.text
    for row, (prompt, completion) in zip(rows, [(1200, 9), (1500, 31)], strict=True):
        assert row.policy.kind == "llm" and row.policy.version == MODEL
        assert row.task == TASK.instruction
        assert row.usage is not None
        assert (row.usage.model, row.usage.calls) == (MODEL, 1)
        assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (prompt, completion)
        assert (row.usage.cached_tokens, row.usage.reasoning_tokens) == (3, 2)
        assert row.usage.latency_s > 0

    (episode,) = pl.read_parquet(run_dir / "episodes.parquet").to_dicts()
    assert episode["status"] == "completed" and episode["length"] == 2
    assert episode["usage"]["calls"] == 3  # the closing DONE is counted
    assert episode["usage"]["prompt_tokens"] == 1200 + 1500 + 1800
    assert episode["usage"]["completion_tokens"] == 9 + 31 + 1
    assert episode["usage"]["cached_tokens"] == 9

    (path,) = (run_dir / "raw" / "episodes").glob("*.jsonl")
    events = list(read_episode(path))
    steps = [event for event in events if event.type == "step"]
    assert [step.reply["content"] for step in steps] == replies
    assert events[-1].type == "end" and events[-1].reply["content"] == "DONE"

    # What the model was shown: the web's system prompt, the task, the rendered tree text.
    assert len(requests) == 3
    first = requests[0]["messages"]
    assert first[0] == {"role": "system", "content": SYSTEM}
    assert first[1] == {"role": "user", "content": f"Instruction: {TASK.instruction}"}
    assert first[2] == {"role": "user", "content": rows[0].observation.text}
    assert first[2]["content"].startswith("RootWebArea")
    third = requests[2]["messages"]
    assert [m["content"] for m in third if m["role"] == "assistant"] == [
        row.action.text for row in rows
    ]
    assert third[-1]["content"] == rows[1].next_observation.text

    dataset = curate_and_publish(run_dir, tmp_path, "web")
    assert dataset.num_rows == 2 and set(dataset["domain"]) == {"web"}
    agentworld, _ = export_both(tmp_path / "dist", tmp_path, "web", dataset)
    assert any(row["current_prompt"].count("fill(") for row in agentworld)


def test_unparseable_replies_are_recorded_without_touching_the_page_then_end_the_episode(
    tmp_path: Path, site_images: list[str], api_env: dict[str, str]
) -> None:
    replies = ["click('12'", "The review form is linked:\n```\nopen_link('12')\n```"]
    with StandInModelServer(
        [{"content": reply} for reply in replies], then={"content": "click('1')"}
    ) as model:
        config = tmp_path / "llm.yaml"
        params = {"base_url": model.url, "max_invalid_replies": 2}
        config.write_text(yaml.safe_dump({"policy": {"kind": "llm", "params": params}}))
        collect(
            api_env,
            "--config", str(config), "--site", "datasette", "--task", TASK.name,
            "--episodes", "1", "--max-steps", "5",
            "--out", str(tmp_path / "runs"), "--run-name", "bad",
        )  # fmt: skip
        requests = model.chat_requests()
    run_dir = tmp_path / "runs" / "bad"

    rows = sorted(rows_of(run_dir, "web"), key=lambda row: row.step)
    assert [row.action.name for row in rows] == ["invalid_reply", "invalid_reply"]
    assert [row.action.text for row in rows] == replies
    assert rows[0].action_error and "not a Python call" in rows[0].action_error
    assert rows[1].action_error and "unknown action 'open_link'" in rows[1].action_error
    for row in rows:
        # The environment was not touched: the page the model saw is the page after.
        assert row.next_observation.text == row.observation.text
        assert row.observation.text.startswith("RootWebArea")
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
