from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset

from tests.records import make_end, make_start, make_step
from worldtrace.collectors.recorder import RunRecorder
from worldtrace.collectors.terminal.screen import plain_screen, strip_ansi
from worldtrace.normalizers import normalize_run
from worldtrace.schemas import Transition, arrow_schema_of, from_row
from worldtrace.schemas.layouts import LayoutError


def screen(*lines: str) -> dict:
    return {
        "screen": "\n".join(lines) + "\n" * 5,
        "scrollback": "",
        "cursor": [0, 0],
        "prompt": True,
        "exit_code": 0,
        "cwd": "/home/user",
        "foreground": None,
        "timed_out": False,
        "exited": False,
    }


def record_episode(recorder: RunRecorder, episode_id: str, steps: int, status="completed"):
    writer = recorder.begin(episode_id)
    writer.write_start(make_start(episode_id, screen("\x1b[1;32muser@sandbox\x1b[0m:~$ ")))
    for step in range(steps):
        writer.write_step(
            make_step(
                step,
                screen(f"user@sandbox:~$ echo {step}   ", str(step), "user@sandbox:~$ "),
                error="exit status 1" if step == 1 else None,
            )
        )
    writer.seal(make_end(steps, status))


def make_run(tmp_path, episodes=2, steps=3) -> RunRecorder:
    recorder = RunRecorder(tmp_path, {"domain": "terminal", "run_name": "run-a"})
    for index in range(episodes):
        record_episode(recorder, f"run-a-s{index:06d}", steps)
    return recorder


def test_ansi_and_blank_tails_are_removed() -> None:
    raw = "\x1b[1;31mred\x1b[0m text   \n\x1b]0;title\x07next\x1b(B\n\n\n"
    assert strip_ansi("\x1b[?1049h\x1b[Hx") == "x"
    assert plain_screen(raw) == "red text\nnext"


def test_run_becomes_transitions_with_env_policy_source_and_rewards(tmp_path) -> None:
    make_run(tmp_path)
    report = normalize_run(tmp_path)
    assert (report.episodes, report.transitions, report.quarantined) == (2, 6, [])
    rows = pq.read_table(tmp_path / "transitions" / "terminal").to_pylist()
    transitions = [from_row(Transition, row) for row in rows]
    first = transitions[0]
    assert first.observation.text == "user@sandbox:~$"
    assert first.next_observation.text == "user@sandbox:~$ echo 0\n0\nuser@sandbox:~$"
    assert transitions[1].observation == first.next_observation
    assert first.action.text == "echo 0<Enter>"  # re-rendered from the arguments
    assert first.env.components == {"bash": "5.2"}
    assert first.source.collector_version == "0.1.0"
    assert first.source.origin == "collected"
    assert transitions[1].action_error == "exit status 1"
    last = transitions[2]
    assert (last.reward, last.terminated, last.truncated) == (1.0, True, False)
    assert [t.id for t in transitions[:3]] == [f"run-a-s000000:{i:05d}" for i in range(3)]
    episodes = pl.read_parquet(tmp_path / "episodes.parquet")
    assert episodes["length"].to_list() == [3, 3]
    assert episodes["status"].to_list() == ["completed", "completed"]


def test_shards_carry_the_schema_and_load_with_polars_and_datasets(tmp_path) -> None:
    make_run(tmp_path, episodes=3, steps=4)
    report = normalize_run(tmp_path, rows_per_shard=5)
    assert [p.name for p in report.shards] == [f"part-{i:05d}.parquet" for i in range(3)]
    for shard in report.shards:
        assert pq.read_schema(shard).equals(arrow_schema_of(Transition), check_metadata=False)
    frame = pl.scan_parquet(tmp_path / "transitions" / "terminal" / "*.parquet").collect()
    assert frame.height == 12 and frame["id"].n_unique() == 12
    dataset = load_dataset(str(tmp_path / "transitions" / "terminal"), split="train")
    assert dataset.num_rows == 12
    assert "screenshot" in dataset.features["observation"]


def test_renormalizing_gives_the_same_rows(tmp_path) -> None:
    make_run(tmp_path)
    normalize_run(tmp_path)
    before = pl.read_parquet(tmp_path / "transitions" / "terminal" / "*.parquet")
    normalize_run(tmp_path)
    after = pl.read_parquet(tmp_path / "transitions" / "terminal" / "*.parquet")
    assert before.equals(after)


def test_bad_episodes_are_quarantined_with_a_reason_and_the_rest_survive(tmp_path) -> None:
    make_run(tmp_path)
    sealed = tmp_path / "raw" / "episodes"
    (sealed / "garbage.jsonl").write_text("this is not json\n")
    (sealed / "no-end.jsonl").write_text(make_start("no-end").model_dump_json() + "\n")
    lines = (sealed / "run-a-s000000.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["observation"]["screen"]
    (sealed / "missing-screen.jsonl").write_text(
        "\n".join(
            [lines[0].replace("run-a-s000000", "missing-screen"), json.dumps(broken), lines[-1]]
        )
        + "\n"
    )
    report = normalize_run(tmp_path)
    reasons = {item["file"]: item["reason"] for item in report.quarantined}
    assert set(reasons) == {
        "raw/episodes/garbage.jsonl",
        "raw/episodes/no-end.jsonl",
        "raw/episodes/missing-screen.jsonl",
    }
    assert "screen" in reasons["raw/episodes/missing-screen.jsonl"]
    assert "no end line" in reasons["raw/episodes/no-end.jsonl"]
    assert report.episodes == 2 and report.transitions == 6
    quarantine = (tmp_path / "quarantine.jsonl").read_text().splitlines()
    assert len(quarantine) == 3
    assert (sealed / "garbage.jsonl").exists(), "quarantined raw data is never deleted"


def test_an_episode_recorded_before_versions_were_kept_still_normalizes(tmp_path) -> None:
    make_run(tmp_path, episodes=1)
    path = tmp_path / "raw" / "episodes" / "run-a-s000000.jsonl"
    lines = path.read_text().splitlines()
    start = json.loads(lines[0])
    del start["collector_version"]  # the start line as worldtrace 0.1 wrote it
    path.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    manifest = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({"config": manifest["config"]}))
    normalize_run(tmp_path)
    row = pq.read_table(tmp_path / "transitions" / "terminal").to_pylist()[0]
    assert from_row(Transition, row).source.collector_version == "unrecorded"


def test_a_run_in_a_newer_layout_is_refused_not_misread(tmp_path) -> None:
    make_run(tmp_path, episodes=1)
    manifest = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps({**manifest, "layout_version": 99}))
    with pytest.raises(LayoutError, match="layout version 99, newer"):
        normalize_run(tmp_path)
    assert not (tmp_path / "transitions").exists()
