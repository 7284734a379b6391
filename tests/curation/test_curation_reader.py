"""Rows are validated once across both read passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import worldtrace.curation.documents as documents
from tests.curation.helpers import output_ids, transition, write_rows
from worldtrace.curation import curate


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
