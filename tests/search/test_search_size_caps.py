"""A huge value in search's memory is recorded capped, and the rows say so (issue 24).

Before the size caps, a 10 MB value stored through ``dict_memory`` made 144 MB of raw records
per 10 steps: the value came back in every later observation.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests.collecting import rows_of
from worldtrace.collectors.size_caps import TEXT_CAP_CHARS

pytestmark = pytest.mark.docker


def test_a_huge_value_in_search_memory_is_recorded_capped_and_marked(
    tmp_path: Path, search_image: str
) -> None:
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    value = "0123456789" * 200_000  # 2 MB, in every one of the 5 steps without the caps
    memory = {"name": "dict_memory", "arguments": {"action": "add", "key": "k", "value": value}}
    retrieve = {"name": "dict_memory", "arguments": {"action": "retrieve", "key": "k"}}
    reads = [retrieve, *[{"name": "dict_memory", "arguments": {"action": "list"}}] * 3]
    config = validate_config(
        {
            "domain": "search",
            "episodes": 1,
            "out": str(tmp_path),
            "run_name": "big",
            "policy": {"kind": "replay", "params": {"actions": [memory, *reads]}},
        }
    )
    run_collection(config)
    (episode,) = (tmp_path / "big" / "raw" / "episodes").glob("*.jsonl")
    # Uncapped, the action, the state and the text each carry the value: over 10 MB.
    assert episode.stat().st_size < 4 * TEXT_CAP_CHARS * 5
    steps = [json.loads(line) for line in episode.read_text().splitlines()][1:-1]
    text_cut, value_cut = steps[0]["cut"][:2]
    assert value_cut == {
        "where": "action.arguments.value",
        "chars": len(value),
        "kept": TEXT_CAP_CHARS,
    }
    assert text_cut["where"] == "action.text" and text_cut["chars"] > len(value)
    assert all(any(cut["where"].startswith("observation") for cut in s["cut"]) for s in steps)

    rows = sorted(rows_of(tmp_path / "big", "search"), key=lambda row: row.step)
    assert len(rows) == 5
    assert "characters truncated ..." in rows[1].next_observation.text
    assert rows[1].next_observation.meta["cut"][0]["chars"] >= len(value)
    assert "cut" not in rows[0].observation.meta  # nothing was cut from the first state
    shards = list((tmp_path / "big" / "transitions").rglob("*.parquet"))
    frame = pl.read_parquet(shards)
    assert frame.height == 5
