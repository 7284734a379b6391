"""The llm policy in the terminal domain, end to end, against a stand-in model server.

The stand-in (tests/llm_server.py) is a real HTTP server speaking the chat-completions
protocol, so the real ``openai`` client, our retries and our recording all run for real;
the terminal sandbox is a real container. What is checked: replies become the actions and
the rows say what each call cost; replies that are no action are recorded with the terminal
untouched; the server's failures (429, 500, a timeout, a dropped connection) are retried and
never become transitions; retries that run out stop the run resumable and the resumed run
records every episode once; a planted API key reaches the server and no file the run wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.collecting import curate_and_publish, episode_rewards, rows_of
from tests.llm_collecting import (
    assert_completed,
    assert_gave_up,
    collect_here,
    llm_config,
    publish_and_export,
    read_run,
    run_collect,
)
from tests.llm_server import MODEL, StandInModelServer
from worldtrace.collectors.terminal.prompt import SYSTEM
from worldtrace.collectors.terminal.tasks import TASKS

pytestmark = pytest.mark.usefixtures("terminal_image")

TASK = "organize-downloads"
INSTRUCTION = next(task.instruction for task in TASKS if task.name == TASK)
KEY = "sk-planted-7f3c9a1e5b2d4068"


def _collect(
    tmp_path: Path,
    server_url: str,
    prefect_server: str,
    params: dict[str, Any] | None = None,
    extra_env: dict[str, str] | None = None,
    *,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``worldtrace collect terminal --policy llm`` with the params (base URL too) in its config.

    In this process (:func:`collect_here`), or with ``process`` in a process of its own, for
    the tests about what the process prints.
    """
    params = {"base_url": server_url, "max_retries": 2, **(params or {})}
    config = llm_config("terminal", tmp_path, "llm", tasks=[TASK], params=params, max_steps=8)
    env = {"WORLDTRACE_LOG_DIR": str(tmp_path / "logs"), **(extra_env or {})}
    collect = run_collect if process else collect_here
    return collect(tmp_path, prefect_server, config, extra_env=env)


def _raw_events(run_dir: Path) -> list[dict[str, Any]]:
    (path,) = sorted((run_dir / "raw" / "episodes").glob("*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_replies_become_actions_and_rows_say_what_each_call_cost(
    tmp_path: Path, prefect_server: str
) -> None:
    replies = [
        {
            "content": "First I look around.\n```\nls ~/work/downloads<Enter>\n```",
            "reasoning_content": "The folder is what the task is about.",
        },
        {"content": "cd ~/work/downloads && mkdir -p images docs data<Enter>"},
    ]
    with StandInModelServer(replies, then={"content": "DONE"}) as server:
        result = _collect(
            tmp_path,
            server.url,
            prefect_server,
            {"model": MODEL},
            extra_env={"OPENAI_API_KEY": KEY},
            process=True,  # what the process prints is checked for the key
        )
        requests = server.chat_requests()
        completions = list(server.completions)
        authorizations = list(server.authorizations)
    assert result.returncode == 0, result.stderr
    assert set(authorizations) == {f"Bearer {KEY}"}  # the key went where it belongs
    run = read_run(tmp_path / "runs" / "llm", "terminal", requests)
    rows = run.rows
    assert [row.action.text for row in rows] == [
        "ls ~/work/downloads<Enter>",
        "cd ~/work/downloads && mkdir -p images docs data<Enter>",
    ]
    assert rows[0].policy.name.startswith("llm-")
    # Usage per row is what the server reported for that call; the episode adds the DONE. The
    # model was shown the task, the domain's prompt and the screen the row records.
    reported = [
        (sent["usage"]["prompt_tokens"], sent["usage"]["completion_tokens"]) for sent in completions
    ]
    assert_completed(
        run, instruction=INSTRUCTION, system=SYSTEM, counts=reported[:-1], closing=reported[-1]
    )
    assert all(row.usage is not None and row.usage.cost_usd is None for row in rows)
    first = requests[0]["messages"]
    assert "<Enter>" in first[0]["content"] and "downloads" in first[1]["content"]
    assert first[-1]["content"] == rows[0].observation.text
    # The second request holds the first action and the screen after it.
    second = requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "ls ~/work/downloads<Enter>"}
    assert second[-1]["content"] == rows[0].next_observation.text
    assert "downloads" in rows[0].next_observation.text  # the listing of the folder
    # The raw record keeps the reply as sent, reasoning included; the end keeps the DONE.
    events = _raw_events(run.run_dir)
    assert events[1]["reply"]["reasoning"] == "The folder is what the task is about."
    assert events[-1]["reply"]["content"] == "DONE" and events[-1]["usage"]["calls"] == 1

    dataset, agentworld = publish_and_export(run, tmp_path, "terminal")
    assert dataset[0]["usage"]["model"] == MODEL
    assert any("ls ~/work/downloads<Enter>" in json.dumps(row) for row in agentworld)

    # ... and nowhere else: no record, raw file, export, log, config dump or Prefect database.
    assert KEY not in result.stdout + result.stderr
    caches = Path(os.environ["PREFECT_HOME"]).parent  # the session's Prefect server home too
    leaks = [path for root in (tmp_path, caches) for path in _files(root) if _holds(path, KEY)]
    assert leaks == []
    assert any((tmp_path / "logs").iterdir()) and any(_files(caches))


def _files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and not path.is_symlink()]


def _holds(path: Path, text: str) -> bool:
    try:
        return text.encode() in path.read_bytes()
    except OSError:  # a socket or a file removed while we looked
        return False


def test_replies_that_are_no_action_leave_the_terminal_untouched_then_end_the_episode(
    tmp_path: Path, prefect_server: str
) -> None:
    replies = [{"content": "echo one<Enter>"}, {"content": ""}, {"content": "```\n\n```"}]
    with StandInModelServer(replies, then={"content": "echo never<Enter>"}) as server:
        result = _collect(tmp_path, server.url, prefect_server, {"max_invalid_replies": 2})
        requests = server.chat_requests()
    assert result.returncode == 0, result.stderr
    run = read_run(tmp_path / "runs" / "llm", "terminal", requests)
    rows = run.rows
    assert [row.action.name for row in rows] == ["keys", "invalid_reply", "invalid_reply"]
    # Two unusable replies in a row: the terminal untouched, the model not asked again.
    assert_gave_up(run, after=1)
    assert len(requests) == 3
    assert [row.action_error for row in rows[1:]] == ["the reply holds no action"] * 2
    assert rows[1].action.text == "" and rows[2].action.text == "```\n\n```"
    # Curation keeps them as the episode's history; the environment never saw them, so they
    # are no training target.
    dataset = curate_and_publish(run.run_dir, tmp_path, "terminal")
    marks = {row["step"]: row["curation"] for row in dataset}
    assert marks[0]["target"] and not marks[1]["target"] and not marks[2]["target"]
    assert "invalid_reply" in marks[1]["labels"] and "invalid_reply" in marks[2]["labels"]


def test_server_failures_are_retried_and_never_become_transitions(
    tmp_path: Path, prefect_server: str
) -> None:
    replies = [
        {"status": 429, "headers": {"Retry-After": "1"}},
        {"content": "echo one<Enter>"},
        {"status": 500},
        {"content": "echo two<Enter>"},
        {"sleep": 4.0, "content": "echo late<Enter>"},  # past the request timeout
        {"drop": True},
        {"content": "echo three<Enter>"},
    ]
    with StandInModelServer(replies, then={"content": "DONE"}) as server:
        result = _collect(
            tmp_path, server.url, prefect_server, {"request_timeout_s": 2.0, "max_retries": 3}
        )
        asked = len(server.chat_requests())
    assert result.returncode == 0, result.stderr
    rows = sorted(rows_of(tmp_path / "runs" / "llm", "terminal"), key=lambda row: row.step)
    assert [row.action.text for row in rows] == [
        "echo one<Enter>",
        "echo two<Enter>",
        "echo three<Enter>",
    ]
    assert all(row.action_error is None for row in rows)
    assert asked == len(replies) + 1  # every failure was asked again; then DONE


def test_exhausted_retries_stop_the_run_resumable_and_the_resume_records_it_once(
    tmp_path: Path, prefect_server: str
) -> None:
    replies = [
        {"content": "echo first<Enter>"},
        *[{"status": 503}] * 3,  # max_retries 2: three attempts, then the run stops
        {"content": "echo again<Enter>"},
        {"content": "echo done<Enter>"},
    ]
    with StandInModelServer(replies, then={"content": "DONE"}) as server:
        # In a process of its own: what it prints (no traceback) is checked.
        stopped = _collect(tmp_path, server.url, prefect_server, process=True)
        resumed = _collect(tmp_path, server.url, prefect_server)
    assert stopped.returncode == 1
    assert "the model server did not answer" in stopped.stderr
    assert "run the same command again" in stopped.stderr and "Traceback" not in stopped.stderr
    assert resumed.returncode == 0, resumed.stderr
    run_dir = tmp_path / "runs" / "llm"
    (set_aside,) = (run_dir / "raw" / "interrupted").iterdir()
    assert "the model did not answer" in set_aside.read_text()
    assert len(list((run_dir / "raw" / "episodes").glob("*.jsonl"))) == 1
    rows = sorted(rows_of(run_dir, "terminal"), key=lambda row: row.step)
    assert [row.action.text for row in rows] == ["echo again<Enter>", "echo done<Enter>"]
    assert len({row.id for row in rows}) == 2


def test_history_is_trimmed_to_its_budget_and_the_trim_is_recorded(
    tmp_path: Path, prefect_server: str
) -> None:
    # 40 lines of 150 digits: every screen from then on is larger than the whole budget.
    fill = "printf '%0150d\\n' $(seq 1 40)<Enter>"
    commands = [fill, "echo a<Enter>", "echo b<Enter>", "echo c<Enter>"]
    with StandInModelServer([{"content": c} for c in commands]) as server:
        result = _collect(tmp_path, server.url, prefect_server, {"history_tokens": 1200})
        requests = server.chat_requests()
    assert result.returncode == 0, result.stderr
    rows = sorted(rows_of(tmp_path / "runs" / "llm", "terminal"), key=lambda row: row.step)
    assert [row.action.text for row in rows] == commands
    trimmed = [row.usage.trimmed_steps for row in rows if row.usage]
    assert trimmed[0] == 0 and trimmed[-1] >= 1
    # Left out means left out: the last prompt holds fewer turns than the episode had.
    last = requests[len(commands) - 1]["messages"]
    assert len(last) < 2 + 1 + 2 * (len(commands) - 1)
    assert "characters left out" in last[-1]["content"]  # the current screen, cut to fit
    assert last[0]["role"] == "system" and last[1]["content"].startswith("Instruction:")


def test_a_run_whose_model_server_is_down_fails_before_any_episode(
    tmp_path: Path, prefect_server: str
) -> None:
    with StandInModelServer() as server:
        url = server.url  # closed when the block ends: nothing listens there any more
    result = _collect(tmp_path, url, prefect_server)
    assert result.returncode == 1
    assert "the model server does not answer" in result.stderr
    assert "worldtrace doctor --policy-config" in result.stderr
    assert not (tmp_path / "runs" / "llm" / "raw").exists()


def test_explore_mode_pursues_no_library_task(tmp_path: Path, prefect_server: str) -> None:
    """``mode: explore``: the terminal's exploring plan (a seeded workspace), no task check."""
    with StandInModelServer([{"content": "ls<Enter>"}]) as server:
        params = {"base_url": server.url, "mode": "explore"}
        config = llm_config("terminal", tmp_path, "explore", params=params)
        result = collect_here(tmp_path, prefect_server, config)
        (request, _) = server.chat_requests()
    assert result.returncode == 0, result.stderr
    (row,) = rows_of(tmp_path / "runs" / "explore", "terminal")
    # What the model was told is what the row says it pursued.
    assert request["messages"][1]["content"] == f"Instruction: {row.task}"
    assert row.task == "Explore the workspace with shell commands."
    assert episode_rewards(tmp_path / "runs" / "explore") == [None]  # no task check ran
