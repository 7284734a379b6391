"""What every domain's end-to-end collect test does: run commands, read a run, publish it."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from datasets import Dataset, load_dataset
from typer.testing import CliRunner

from worldtrace.collectors.recorder import read_episode
from worldtrace.flows.cli import app
from worldtrace.schemas import Transition, from_row


def invoke(*args: str) -> str:
    """Run a worldtrace command in this process; fail the test with its output on an error."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def rows_of(run_dir: Path, domain: str) -> list[Transition]:
    """The run's transitions of ``domain``, each validated against the schema."""
    frame = pl.read_parquet(run_dir / "transitions" / domain / "*.parquet")
    return [from_row(Transition, row) for row in frame.to_dicts()]


def episode_rewards(run_dir: Path) -> list[float | None]:
    """The reward each sealed episode ended with, in episode order."""
    return [
        next(event for event in read_episode(path) if event.type == "end").reward
        for path in sorted((run_dir / "raw" / "episodes").glob("*.jsonl"))
    ]


def curate_and_publish(run_dir: Path, folder: Path, domain: str) -> Dataset:
    """Curate the run into ``folder/corpus``, publish it to ``folder/dist``, load ``domain``."""
    invoke("curate", str(run_dir), "--out", str(folder / "corpus"))
    invoke("publish", str(folder / "corpus"), "--to", str(folder / "dist"))
    return load_dataset(str(folder / "dist"), domain, split="train")
