"""`worldtrace tasks swe`: the checked-in tasks listed, new ones synthesized into a task file."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from worldtrace.collectors.swe.tasks import GENERATOR_VERSION, load_tasks, read_task_file
from worldtrace.flows.cli import app


def test_the_checked_in_tasks_are_listed() -> None:
    result = CliRunner().invoke(app, ["tasks", "swe"])
    assert result.exit_code == 0, result.output
    assert load_tasks("toolz")[0].name in result.output


@pytest.mark.docker
def test_synthesize_writes_a_task_file_that_loads(
    tmp_path: Path, swe_images: dict[str, str]
) -> None:
    result = CliRunner().invoke(
        app,
        ["tasks", "swe", "synthesize", "--repo", "toolz", "--count", "1", "--seed", "11",
         "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (task,) = read_task_file(tmp_path / "toolz.json")
    assert task.repo == "toolz" and task.failing_tests and task.gold_patch
    assert task.generator_version == GENERATOR_VERSION
    assert "validated" in result.output


def test_synthesize_refuses_an_unknown_repository(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["tasks", "swe", "synthesize", "--repo", "nope", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "no swe repository 'nope'" in result.output
    assert not list(tmp_path.iterdir())
