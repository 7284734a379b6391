"""One error boundary: every user-facing error is a message and an exit status, no traceback."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import polars as pl
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
        (["collect", "terminal", "--out", "{tmp}/a-file"], "a-file is a file, not a folder"),
        (["collect", "terminal", "--out", "/proc/runs"], "/proc is on a virtual filesystem"),
        (["collect", "terminal", "--out", "{tmp}/" + "r" * 300], "longer than 255 bytes"),
        (["collect", "terminal", "--run-name", "r" * 300], "run_name"),
        (["collect", "terminal", "--out", "memory://runs"], "lost when it exits"),
        (["collect", "terminal", "--step-timeout", "inf"], "step_timeout_s"),
        (["collect", "terminal", "--env", "limits={{cpus: .nan}}"], "limits.cpus"),
        (["collect", "terminal", "--env", "image=!!python/object/apply:os.getpid []"], "YAML"),
        (["export", "{tmp}", "--format", "openai", "--out", "{tmp}/a-file"], "not a folder"),
        (["inspect", "{tmp}/a-file"], "not a parquet file"),
    ],
)
def test_bad_input_is_exit_2_with_a_message_and_no_traceback(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "a-file").write_text("not a folder, not a corpus")
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


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 12 KiB filesystem (tmpfs), to fill up; unmounted afterwards."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", mount_point], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", mount_point], check=True)


def test_a_read_only_out_is_refused_before_anything_starts(small_disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", small_disk], check=True)
    result = CliRunner().invoke(app, ["collect", "terminal", "--out", str(small_disk / "runs")])
    assert result.exit_code == 2, result.output
    assert "read-only filesystem" in result.output
    assert "run directory:" not in result.output and "Traceback" not in result.output


@pytest.mark.docker
def test_a_full_disk_stops_with_one_line_and_the_run_resumes_once_space_is_freed(
    small_disk: Path, terminal_image: str
) -> None:
    # Two episodes of this task record about 18 KiB of raw events: the disk fills mid-run.
    command = ["collect", "terminal", "--episodes", "2"]
    command += ["--task", "word-frequency", "--out", str(small_disk), "--run-name", "full"]
    full = CliRunner().invoke(app, command)
    assert full.exit_code == 2, full.output
    assert "error: no space left on the disk" in full.output and "run the same" in full.output
    assert "Traceback" not in full.output
    sealed_before = set((small_disk / "full" / "raw" / "episodes").glob("*.jsonl"))
    assert len(sealed_before) < 2

    subprocess.run(["mount", "-o", "remount,size=4m", small_disk], check=True)
    resumed = CliRunner().invoke(app, command)
    assert resumed.exit_code == 0, resumed.output
    episodes = pl.read_parquet(small_disk / "full" / "episodes.parquet")
    assert episodes.height == 2 and episodes["episode_id"].n_unique() == 2
    assert set(episodes["status"]) == {"completed"}  # none sealed as failed by the full disk
