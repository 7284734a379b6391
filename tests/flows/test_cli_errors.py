"""One error boundary: every user-facing error is a message and an exit status, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from worldtrace.flows.cli import app


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["curate", "{tmp}/nowhere", "--out", "{tmp}/corpus"], "nowhere"),
        (["publish", "{tmp}/nowhere", "--to", "{tmp}/dist"], "nowhere"),
        (["inspect", "{tmp}"], "neither a run"),
        (["export", "{tmp}", "--format", "openai", "--out", "{tmp}/sft"], "neither a run"),
        (["export", "{tmp}", "--format", "csv", "--out", "{tmp}/sft"], "unknown format 'csv'"),
        (["normalize", "{tmp}"], "not a run directory"),
        (["collect", "fax", "--episodes", "1"], "no collector for domain 'fax'"),
        (["collect", "terminal", "--episodes", "0"], "episodes"),
        (["collect", "--config", "{tmp}/missing.yaml"], "does not exist"),
        (["run", "{tmp}/missing.yaml"], "missing.yaml"),
        (["tasks", "fax"], "no collector for domain 'fax'"),
        (["curate", "{tmp}", "--out", "{tmp}/c", "--config", "{tmp}/missing.yaml"], "missing"),
    ],
)
def test_bad_input_is_exit_2_with_a_message_and_no_traceback(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, [arg.format(tmp=tmp_path) for arg in args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") or "\nerror: " in result.output, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


@pytest.mark.docker
def test_a_machine_that_cannot_run_the_environment_is_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["collect", "terminal", "--out", str(tmp_path), "--env", "image=worldtrace/nope:0"],
    )
    assert result.exit_code == 1, result.output
    assert "worldtrace/nope:0" in result.output and "worldtrace sandboxes build" in result.output
    assert "Traceback" not in result.output
    assert not list(tmp_path.iterdir())  # nothing started
