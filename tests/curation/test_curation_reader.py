"""Rows are validated once across both read passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import worldtrace.curation.documents as documents
from tests.records import make_transition
from worldtrace.curation import curate
from worldtrace.schemas import Observation, Transition, to_row
from worldtrace.schemas.arrow import arrow_schema_of


def transition(episode: str, screen: str) -> dict[str, Any]:
    """A valid row whose observation and next observation hold ``screen``-based text."""
    return to_row(
        make_transition(
            step=0,
            episode_id=episode,
            observation=Observation(format="terminal-screen", text=f"$ {screen}"),
            next_observation=Observation(format="terminal-screen", text=f"$ {screen}\nok\n$ "),
        )
    )


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema_of(Transition)), path)


def output_ids(out: Path) -> set[str]:
    files = sorted((out / "transitions").glob("*/*.parquet"))
    return set(pl.read_parquet(files)["id"]) if files else set()


def test_rows_validated_once_and_positions_stay_aligned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    invalid = transition("ep-bad", "cat broken.txt")
    invalid["id"] = "wrong-id"  # the id must be <episode>:<step>
    rows = [
        transition("ep-a", "ls -la /etc"),
        invalid,
        transition("ep-b", "uname -a"),
        transition("ep-c", "uname -a"),  # exact duplicate of ep-b, found by position
        transition("ep-d", "df -h /"),
    ]
    write_rows(tmp_path / "in" / "transitions" / "terminal" / "part-00000.parquet", rows)
    calls = []
    original = documents.from_row

    def counting_from_row(model: Any, row: dict[str, Any]) -> Any:
        calls.append(row["id"])
        return original(model, row)

    monkeypatch.setattr(documents, "from_row", counting_from_row)
    report = curate(tmp_path / "in", tmp_path / "out")
    assert sorted(calls) == sorted(row["id"] for row in rows)  # one validation per row
    # were the invalid row not skipped in the write pass too, the dedup marks would land on
    # the document at ep-c's position in that pass: ep-b
    assert output_ids(tmp_path / "out") == {"ep-a:00000", "ep-b:00000", "ep-c:00000", "ep-d:00000"}
    files = sorted((tmp_path / "out" / "transitions").glob("*/*.parquet"))
    marks = {row["id"]: row["curation"] for row in pl.read_parquet(files).to_dicts()}
    assert marks["ep-b:00000"]["target"] and not marks["ep-c:00000"]["target"]
    assert marks["ep-c:00000"]["duplicate_of"] == "ep-b:00000"
    assert report.quarantined_rows == 1
    entries = (tmp_path / "out" / "quarantine.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in entries] == ["wrong-id"]
    assert "invalid row" in json.loads(entries[0])["reason"]
