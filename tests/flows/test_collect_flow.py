"""The collect flow end to end: real containers, real Prefect, real kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import polars as pl
import pytest

import worldtrace.collectors.terminal as terminal_domain
from tests.prefect_server import client_env
from worldtrace.collectors.recorder import read_episode
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks import TerminalTask
from worldtrace.flows import progress
from worldtrace.flows.collect import run_collection
from worldtrace.flows.config import validate_config
from worldtrace.sandboxes.docker import LABEL, OWNER_PID_LABEL

pytestmark = pytest.mark.docker

TASKS = ["count-http-status-codes", "csv-sales-by-region", "word-frequency", "git-tag-from-history"]
EPISODES = len(TASKS)


def sealed_events(run_dir: Path) -> dict[str, list[dict]]:
    return {
        path.stem: list(read_episode(path))
        for path in sorted((run_dir / "raw" / "episodes").glob("*.jsonl"))
    }


def test_killed_collection_resumes_with_every_episode_exactly_once(
    tmp_path, terminal_image, prefect_server
):
    # Four episodes on two workers: when the first is sealed the third is starting, so a kill
    # then finds a sealed and a half-recorded episode with more to come, and the resume has
    # episodes of each kind (set aside, never started) to collect. Both commands talk to the
    # session's Prefect server: the temporary local API each would start costs more than the
    # episodes, and is not what this test is about (tests/flows/test_stopping.py covers it).
    server_env = client_env(prefect_server)
    command = [
        sys.executable,
        "-m",
        "worldtrace.flows.cli",
        "collect",
        "terminal",
        "--episodes",
        str(EPISODES),
        "--workers",
        "2",
        "--out",
        str(tmp_path),
        "--run-name",
        "killed",
        *[arg for task in TASKS for arg in ("--task", task)],
    ]
    run_dir = tmp_path / "killed"
    first = subprocess.Popen(
        command,
        env=server_env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 180
    # Kill while one episode is sealed and another is half recorded.
    while time.monotonic() < deadline:
        sealed = list((run_dir / "raw" / "episodes").glob("*.jsonl"))
        partial = [
            p
            for p in (run_dir / "raw" / "partial").glob("*.jsonl")
            if len(p.read_text().splitlines()) >= 2
        ]
        if sealed and partial:
            break
        assert first.poll() is None, "the first run ended before it could be killed"
        time.sleep(0.05)
    else:
        pytest.fail("the first run never had a sealed and a partial episode at once")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    sealed_before = {p.name: p.read_bytes() for p in (run_dir / "raw" / "episodes").iterdir()}

    second = subprocess.run(command, env=server_env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]

    episodes = sealed_events(run_dir)
    expected = {f"killed-s{seed:06d}" for seed in range(EPISODES)}
    assert set(episodes) == expected
    for events in episodes.values():
        kinds = [event.type for event in events]
        assert kinds.count("start") == 1 and kinds.count("end") == 1
        steps = [event.step for event in events if event.type == "step"]
        assert steps == list(range(len(steps))) and steps
    # episodes sealed before the kill were not recorded again
    for name, content in sealed_before.items():
        assert (run_dir / "raw" / "episodes" / name).read_bytes() == content
    # the half-recorded attempt was kept aside, not lost
    interrupted = list((run_dir / "raw" / "interrupted").glob("*.jsonl"))
    assert interrupted
    assert not list((run_dir / "raw" / "partial").glob("*.jsonl"))
    frame = pl.read_parquet(run_dir / "transitions" / "terminal" / "*.parquet")
    assert frame["id"].n_unique() == frame.height
    assert frame.height == sum(
        sum(e.type == "step" for e in events) for events in episodes.values()
    )
    assert set(pl.read_parquet(run_dir / "episodes.parquet")["episode_id"]) == expected

    # the killed run's containers were orphans; resuming the run removed them
    assert "orphan sandboxes removed" in second.stdout
    client = docker.from_env()
    left = client.containers.list(
        all=True, filters={"label": [LABEL, f"{OWNER_PID_LABEL}={first.pid}"]}
    )
    assert left == []


class KillSandboxOnFirstStep:
    """Kills this process's sandboxes once, after the first recorded step."""

    def __init__(self) -> None:
        self.killed = 0

    def on_step(self, episode_id: str, step: int, error: str | None) -> None:
        if self.killed:
            return
        client = docker.from_env()
        # This process's terminal sandboxes only (a web test's browser network may live on).
        for container in client.containers.list(
            filters={
                "label": [LABEL, f"{OWNER_PID_LABEL}={os.getpid()}", "worldtrace.domain=terminal"]
            }
        ):
            container.kill()
            self.killed += 1

    def on_episode(self, result) -> None:
        pass


def collect_config(tmp_path: Path, retries: int):
    return validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path),
            "retries": retries,
            "policy": {"kind": "script", "tasks": ["git-tag-from-history"]},
        }
    )


def test_a_dead_sandbox_is_retried_and_the_attempt_kept(tmp_path, terminal_image):
    config = collect_config(tmp_path, retries=2)
    killer = KillSandboxOnFirstStep()
    with progress.listening(killer):
        summary = run_collection(config)
    assert killer.killed == 1
    assert (summary["collected"], summary["failed"]) == (1, 0)
    (events,) = sealed_events(config.run_dir).values()
    assert events[-1].status == "completed"
    assert events[-1].reward == 1.0
    (attempt,) = (config.run_dir / "raw" / "interrupted").glob("*.jsonl")
    last = list(read_episode(attempt))[-1]
    assert last.type == "abandoned" and "sandbox" in last.reason


def test_a_sandbox_that_keeps_dying_is_sealed_as_failed(tmp_path, terminal_image):
    config = collect_config(tmp_path, retries=0)
    with progress.listening(KillSandboxOnFirstStep()):
        summary = run_collection(config)
    assert (summary["collected"], summary["failed"]) == (1, 1)
    episodes = pl.read_parquet(config.run_dir / "episodes.parquet")
    assert episodes["status"].to_list() == ["failed"]
    assert "Sandbox" in episodes["error"][0]
    (attempt,) = (config.run_dir / "raw" / "interrupted").glob("*.jsonl")
    assert sum(1 for e in read_episode(attempt) if e.type == "step") == 1


def test_agent_errors_are_recorded_not_retried(tmp_path, terminal_image):
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path),
            "policy": {"kind": "script", "tasks": ["typo-command-not-found"]},
        }
    )
    summary = run_collection(config)
    assert summary["errors"] >= 1 and summary["failed"] == 0
    assert not list((config.run_dir / "raw" / "interrupted").iterdir())
    frame = pl.read_parquet(config.run_dir / "transitions" / "terminal" / "*.parquet")
    errors = frame.filter(pl.col("action_error").is_not_null())
    assert errors.height >= 1
    meta = json.loads(errors["next_observation"][0]["meta"])
    assert meta["exit_code"] == 127 or meta["exit_code"] not in (0, None)


FORK_BOMB = TerminalTask(
    name="fork-bomb",
    instruction="Run a fork bomb.",
    category="processes",
    setup=("true",),
    steps=(command("echo before"), command(":(){ :|:& };:"), command("echo never typed")),
    check="true",
)


def test_a_fork_bomb_is_the_last_transition_of_its_episode(tmp_path, terminal_image, monkeypatch):
    # A task the library does not hold; the collect flow runs in this process, so it sees it.
    monkeypatch.setattr(
        terminal_domain.TerminalCollector,
        "task_library",
        lambda self, environment=None: (*terminal_domain.TASKS, FORK_BOMB),
    )
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path),
            "step_timeout_s": 10,
            "policy": {"kind": "script", "tasks": [FORK_BOMB.name]},
            "environment": {"image": terminal_image, "limits": {"pids": 48, "cpus": 0.5}},
        }
    )
    summary = run_collection(config)
    assert (summary["collected"], summary["failed"]) == (1, 0)
    assert summary["transitions"] == summary["steps"] == 2
    # No attempt was set aside: the bomb is the agent's doing, not a sandbox to retry.
    assert not list((config.run_dir / "raw" / "interrupted").glob("*"))
    (events,) = sealed_events(config.run_dir).values()
    steps = [event for event in events if event.type == "step"]
    assert [event.action.text for event in steps] == [
        "echo before<Enter>",
        ":(){ :|:& };:<Enter>",
    ]
    assert steps[0].error is None
    assert steps[1].truncated is True
    assert "process limit" in steps[1].error
    assert events[-1].type == "end" and events[-1].status == "truncated"
    assert events[-1].reward is None  # the check could not run in a bombed sandbox
    frame = pl.read_parquet(config.run_dir / "transitions" / "terminal" / "*.parquet")
    last = frame.sort("step").row(-1, named=True)
    assert last["truncated"] is True
    assert "process limit" in last["action_error"]
