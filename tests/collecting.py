"""What every domain's end-to-end collect test does: run commands, read a run, publish it."""

from __future__ import annotations

import json
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


def export_both(dist: Path, out: Path, domain: str, dataset: Dataset) -> tuple[list, list]:
    """Export ``dist`` as agentworld rows and openai lines; return both for ``domain``.

    Both hold one row per training target of the published ``dataset``, and in both the
    environment is the speaker: the openai lines alternate user (state and action) and
    assistant (next observation) after the system prompt, the last assistant the target,
    with no tool-call messages.
    """
    invoke("export", str(dist), "--format", "agentworld", "--out", str(out / "aw"))
    invoke("export", str(dist), "--format", "openai", "--out", str(out / "oa"))
    with (out / "aw" / f"{domain}_train.jsonl").open() as handle:
        agentworld = [json.loads(line) for line in handle]
    with (out / "oa" / f"{domain}.jsonl").open() as handle:
        chats = [json.loads(line) for line in handle]
    targets = sum(bool(mark["target"]) for mark in dataset["curation"])
    assert targets > 0 and len(agentworld) == len(chats) == targets
    for row, chat in zip(agentworld, chats, strict=True):
        assert row["task"] == domain and isinstance(row["id"], int)
        messages = chat["messages"]
        roles = [message["role"] for message in messages]
        assert roles == ["system"] + ["user", "assistant"] * (len(roles) // 2)
        assert "tools" not in chat and not any("tool_calls" in m for m in messages)
        assert messages[-1]["content"] == row["response"][-1] and messages[-1]["weight"] == 1
        assert chat["transition_id"] == row["transition_id"]
    return agentworld, chats
