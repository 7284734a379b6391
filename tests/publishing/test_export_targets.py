"""Exports take their training targets from curation's marks; other rows are history only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests.records import make_transition
from worldtrace.exports import EXPORTERS, export_agentworld, export_openai
from worldtrace.exports.prompts import parse_response
from worldtrace.schemas import Action, Curation, Observation, Transition, to_table


def _screen(k: int) -> str:
    return f"root@box:~/notes# ls\n{'todo.md ' * k}\nroot@box:~/notes# "


def _episode(episode_id: str, curations: dict[int, Curation], length: int = 4) -> list[Transition]:
    return [
        make_transition(
            k,
            episode_id,
            task="tidy the notes folder",
            observation=Observation(format="terminal-screen", text=_screen(k)),
            action=Action(
                name="keys", arguments={"keys": [f"touch n{k}", "Enter"]}, text=f"touch n{k}<Enter>"
            ),
            next_observation=Observation(format="terminal-screen", text=_screen(k + 1)),
            curation=curations.get(k, Curation()),
        )
        for k in range(length)
    ]


DUPLICATE = Curation(target=False, duplicate_of="ep-other:00000", duplicate_rule="exact")
EXCLUDED = Curation(target=False, labels=("noop",))


def _publish(root: Path, name: str, table: Any) -> Path:
    folder = root / "data" / "terminal"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / name)
    return root


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_rows_that_are_not_targets_are_history_but_never_targets(tmp_path: Path) -> None:
    # Step 0 duplicates another episode's first step, step 2 a curation rule excluded.
    steps = _episode("ep-1", {0: DUPLICATE, 2: EXCLUDED})
    pub = _publish(tmp_path / "pub", "train-0.parquet", to_table(steps, Transition))
    assert export_agentworld(pub, tmp_path / "aw") == {"terminal": 2}
    assert export_openai(pub, tmp_path / "oa") == {"terminal": 2}
    rows = _lines(tmp_path / "aw" / "terminal_train.jsonl")
    lines = _lines(tmp_path / "oa" / "terminal.jsonl")
    assert [r["transition_id"] for r in rows] == ["ep-1:00001", "ep-1:00003"]
    assert [r["id"] for r in rows] == [0, 1]
    assert [line["transition_id"] for line in lines] == ["ep-1:00001", "ep-1:00003"]
    # The duplicate step 0 still gives the initial state and its turn as history.
    first = rows[0]
    assert first["prompt"][0].startswith("### Turn 1\n**Task:** tidy the notes folder\n")
    assert f"**Initial Observation:**\n{steps[0].observation.text}" in first["prompt"][0]
    assert parse_response(first["response"][0])[0] == steps[0].next_observation.text
    assert parse_response(first["response"][-1])[0] == steps[1].next_observation.text
    # The excluded step 2 is a history turn of step 3's row, never a target itself.
    last = rows[1]
    assert last["total_turns"] == 4 and last["trimmed_turns"] == 0
    assert last["prompt"][2].endswith("**Action:**\ntouch n2<Enter>")
    assert parse_response(last["response"][2])[0] == steps[2].next_observation.text
    # In the chat lines the non-target turns are history messages a trainer does not learn.
    chat = lines[1]["messages"]
    assert [m["weight"] for m in chat[2::2]] == [0, 0, 0, 1]
    assert chat[5]["content"].endswith("**Action:**\ntouch n2<Enter>")
    assert parse_response(chat[6]["content"])[0] == steps[2].next_observation.text


def test_an_episode_without_targets_writes_no_rows(tmp_path: Path) -> None:
    kept = _episode("ep-1", {})
    dropped = _episode("ep-2", dict.fromkeys(range(4), EXCLUDED))
    pub = _publish(tmp_path / "pub", "train-0.parquet", to_table(kept + dropped, Transition))
    for name, exporter in EXPORTERS.items():
        assert exporter(pub, tmp_path / name) == {"terminal": 4}
    rows = _lines(tmp_path / "agentworld" / "terminal_train.jsonl")
    assert {r["transition_id"].split(":")[0] for r in rows} == {"ep-1"}


def test_shards_written_before_curation_marks_are_all_targets(tmp_path: Path) -> None:
    # A schema 1.0 shard has no `curation` column; it sits beside a 1.1 shard here.
    old = to_table(_episode("ep-old", {}), Transition).drop_columns(["curation"])
    metadata = {**old.schema.metadata, b"worldtrace.schema_version": b"1.0"}
    pub = _publish(tmp_path / "pub", "train-0.parquet", old.replace_schema_metadata(metadata))
    new = _episode("ep-new", {1: DUPLICATE})
    _publish(pub, "train-1.parquet", to_table(new, Transition))
    assert export_openai(pub, tmp_path / "oa") == {"terminal": 4 + 3}
    ids = [line["transition_id"] for line in _lines(tmp_path / "oa" / "terminal.jsonl")]
    assert ids == [f"ep-new:0000{k}" for k in (0, 2, 3)] + [f"ep-old:0000{k}" for k in range(4)]
