"""A replayed episode that names a task is set up and evaluated as a scripted one (issue 24).

Attacks on a task's check (and, later, model-driven episodes) are replayed from the command
line: ``policy: {kind: replay, tasks: [NAME], params: {actions: [...]}}`` in a config file,
or the same file with ``--task NAME``. The episode must get the task's setup, its
instruction and name in the record, and the check's reward.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from worldtrace.collectors.recorder import read_episode
from worldtrace.flows.cli import app
from worldtrace.flows.config import load_config
from worldtrace.schemas.raw import RawEnd, RawStart, RawStep

TASK = "organize-downloads"
SOLUTION = [
    "cd ~/work/downloads<Enter>",
    "mkdir -p images docs data<Enter>",
    "mv *.jpg *.png images/<Enter>",
    "mv *.pdf *.txt docs/<Enter>",
    "mv *.csv data/<Enter>",
]


def _replay_config(tmp_path: Path, actions: list[str], tasks: list[str] | None) -> Path:
    policy: dict[str, object] = {"kind": "replay", "params": {"actions": actions}}
    if tasks is not None:
        policy["tasks"] = tasks
    path = tmp_path / "replay.yaml"
    config = {"domain": "terminal", "episodes": 1, "out": str(tmp_path / "runs")}
    path.write_text(yaml.safe_dump(config | {"policy": policy}))
    return path


def _collect(config: Path, *flags: str) -> tuple[RawStart, list[RawStep], RawEnd]:
    result = CliRunner().invoke(app, ["collect", "--config", str(config), *flags])
    assert result.exit_code == 0, result.output
    (episode,) = (config.parent / "runs").glob("*/raw/episodes/*.jsonl")
    events = list(read_episode(episode))
    start, end = events[0], events[-1]
    assert isinstance(start, RawStart) and isinstance(end, RawEnd)
    return start, [e for e in events if isinstance(e, RawStep)], end


def test_the_task_flag_keeps_the_replayed_actions_of_the_config_file(tmp_path: Path) -> None:
    config = load_config(_replay_config(tmp_path, SOLUTION, None), {"policy": {"tasks": [TASK]}})
    assert config.policy.kind == "replay"
    assert config.policy.params == {"actions": SOLUTION}
    assert config.policy.tasks == [TASK]


@pytest.mark.docker
def test_a_replay_naming_a_task_is_set_up_and_earns_the_tasks_reward(
    tmp_path: Path, terminal_image: str
) -> None:
    start, steps, end = _collect(
        _replay_config(tmp_path, [*SOLUTION, "ls -R<Enter>"], None), "--task", TASK
    )
    assert start.task_name == TASK and start.task and "downloads" in start.task
    assert [step.action.text for step in steps] == [*SOLUTION, "ls -R<Enter>"]
    # The task's setup ran: the replayed commands found its files.
    assert "IMG_2041.jpg" in str(steps[-1].observation)
    assert end.reward == 1.0


@pytest.mark.docker
def test_a_replay_that_does_not_do_the_task_earns_nothing(
    tmp_path: Path, terminal_image: str
) -> None:
    start, _, end = _collect(_replay_config(tmp_path, ["ls ~/work/downloads<Enter>"], [TASK]))
    assert start.task_name == TASK
    assert end.reward == 0.0


@pytest.mark.docker
def test_a_replay_without_a_task_has_no_reward(tmp_path: Path, terminal_image: str) -> None:
    start, _, end = _collect(_replay_config(tmp_path, ["true<Enter>"], None))
    assert start.task_name is None and end.reward is None
