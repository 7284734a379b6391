"""Many runs into one corpus, from lists, folders of runs and globs, on any fsspec URL."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.curation.helpers import PROSE, numbers_screen, read_output, step, write_shard
from tests.records import make_transition
from worldtrace.curation import CurationConfig, CurationError, curate
from worldtrace.flows.cli import app
from worldtrace.publishing.folder import publish_folder
from worldtrace.schemas import Episode, Transition, to_table
from worldtrace.schemas.errors import InputError
from worldtrace.schemas.layouts import CorpusLayout, LayoutError

NO_MINHASH = CurationConfig(minhash={"enabled": False})


def episodes_of(rows: list[Transition], run_id: str) -> list[Episode]:
    first = rows[0]
    return [
        Episode(
            episode_id=episode,
            run_id=run_id,
            domain=next(row.domain for row in rows if row.episode_id == episode),
            policy=first.policy,
            seed=index,
            status="completed",
            length=sum(row.episode_id == episode for row in rows),
            started_at=first.timing.started_at,
            ended_at=first.timing.started_at,
        )
        for index, episode in enumerate(sorted({row.episode_id for row in rows}))
    ]


def write_run(folder: Path, rows: list[Transition]) -> Path:
    """A run directory: its manifest, its transitions per domain and its episodes table."""
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"layout": "run", "config": {"run": folder.name}}))
    for domain in sorted({row.domain for row in rows}):
        write_shard(folder / "transitions" / domain, [r for r in rows if r.domain == domain])
    table = to_table(episodes_of(rows, folder.name), Episode)  # type: ignore[arg-type]
    pq.write_table(table, folder / "episodes.parquet")
    return folder


def terminal_rows() -> list[Transition]:
    return [
        step("term-s000000", 0, PROSE, PROSE + " done"),
        step("term-s000000", 1, "$ ls", "file.txt"),
        step("term-s000001", 0, numbers_screen(1), numbers_screen(2)),
    ]


def web_rows() -> list[Transition]:
    return [
        step("web-s000000", 0, "[1] link 'Home'", "[1] link 'Home'\n[2] button 'Go'", domain="web"),
        # the same transition as the terminal run's second: found across runs
        step("web-s000000", 1, "$ ls", "file.txt", domain="web"),
    ]


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    write_run(tmp_path / "runs" / "term", terminal_rows())
    write_run(tmp_path / "runs" / "web", web_rows())
    return tmp_path / "runs"


def test_a_list_a_folder_of_runs_and_a_glob_make_one_and_the_same_corpus(
    runs: Path, tmp_path: Path
) -> None:
    listed = curate([runs / "web", runs / "term"], tmp_path / "listed", NO_MINHASH)
    inputs = [str(runs / "term"), str(runs / "web")]
    assert listed.inputs == inputs  # in a canonical order, whatever order they were given in
    assert CorpusLayout(tmp_path / "listed").read_manifest().inputs == inputs
    frame = read_output(tmp_path / "listed")
    # the exact duplicate across the two runs stays in its episode, marked: the first
    # input's row is the training target
    assert sorted(frame["id"]) == [
        "term-s000000:00000",
        "term-s000000:00001",
        "term-s000001:00000",
        "web-s000000:00000",
        "web-s000000:00001",
    ]
    marked = frame.filter(~pl.col("curation").struct.field("target"))
    assert marked["id"].to_list() == ["web-s000000:00001"]
    assert marked["curation"].struct.field("duplicate_of").to_list() == ["term-s000000:00001"]
    assert set(frame["domain"]) == {"terminal", "web"}
    episodes = pl.read_parquet(tmp_path / "listed" / "episodes.parquet")
    assert episodes["episode_id"].to_list() == ["term-s000000", "term-s000001", "web-s000000"]
    assert set(episodes["run_id"]) == {"term", "web"}
    stats = json.loads((tmp_path / "listed" / "stats.json").read_text())
    assert stats["total"]["exact_duplicates"] == 1 and stats["inputs"] == inputs

    folder = curate(runs, tmp_path / "folder", NO_MINHASH)
    globbed = curate(str(runs / "*"), tmp_path / "globbed", NO_MINHASH)
    for report in (folder, globbed):
        assert report.inputs == inputs
        assert read_output(Path(report.output_dir)).sort("id").equals(frame.sort("id"))

    result = CliRunner().invoke(
        app, ["curate", str(runs / "te*"), str(runs / "web"), "--out", str(tmp_path / "cli")]
    )
    assert result.exit_code == 0, result.output
    assert CorpusLayout(tmp_path / "cli").read_manifest().inputs == inputs


def test_a_run_and_a_corpus_made_from_it_curate_to_the_corpus(runs: Path, tmp_path: Path) -> None:
    first = curate(runs / "term", tmp_path / "first", NO_MINHASH)
    both = curate([runs / "term", tmp_path / "first"], tmp_path / "both", NO_MINHASH)
    assert both.inputs == sorted([str(runs / "term"), str(tmp_path / "first")])
    assert both.rows_in == 2 * first.rows_out and both.rows_out == first.rows_out
    assert (
        read_output(tmp_path / "both").sort("id").equals(read_output(tmp_path / "first").sort("id"))
    )
    episodes = pl.read_parquet(tmp_path / "both" / "episodes.parquet")
    assert episodes["episode_id"].to_list() == ["term-s000000", "term-s000001"]


def test_two_runs_sharing_a_run_name_are_refused(tmp_path: Path) -> None:
    # Two folders whose runs were both named "term": same episode ids, other transitions.
    write_run(tmp_path / "a" / "term", terminal_rows())
    other = [make_transition(step=0, episode_id="term-s000000")]
    write_run(tmp_path / "b" / "term", other)
    with pytest.raises(InputError, match=r"episode term-s000000 is in .* two runs share a run"):
        curate([tmp_path / "a" / "term", tmp_path / "b" / "term"], tmp_path / "out", NO_MINHASH)


def test_sources_that_hold_no_run_or_corpus_are_clear_errors(runs: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (runs / "term" / "notes.txt").write_text("x")
    unnormalized = tmp_path / "raw-only"
    unnormalized.mkdir()
    (unnormalized / "run.json").write_text(json.dumps({"config": {}}))
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "run.json").write_text(json.dumps({"config": {}, "layout_version": 99}))
    published = tmp_path / "dist"
    (published / "data").mkdir(parents=True)
    cases = {
        tmp_path / "empty": "holds no run or corpus",
        tmp_path / "missing": "does not exist",
        str(tmp_path / "nothing-*"): "no folder matches",
        runs / "term" / "notes.txt": "is a file",
        unnormalized: "has no transitions yet: run `worldtrace normalize",
        published: "is a published dataset",
    }
    for source, message in cases.items():
        with pytest.raises(InputError, match=message):
            curate(source, tmp_path / "out")
        result = CliRunner().invoke(app, ["curate", str(source), "--out", str(tmp_path / "o")])
        output = " ".join(result.output.split())
        assert result.exit_code == 2 and message.split(":")[0] in output, result.output
    with pytest.raises(LayoutError, match="layout version 99, newer"):
        curate(newer, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "o").exists()
    # the whole list is checked before anything is written
    with pytest.raises(InputError, match="holds no run or corpus"):
        curate([runs / "term", tmp_path / "empty"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_resumed_corpus_refuses_an_added_input(runs: Path, tmp_path: Path) -> None:
    curate(runs / "term", tmp_path / "out", NO_MINHASH)
    assert curate(runs / "term", tmp_path / "out", NO_MINHASH).stages_run == []
    with pytest.raises(CurationError, match=r"inputs added: .*/runs/web"):
        curate(runs, tmp_path / "out", NO_MINHASH)


def test_exact_duplicates_keep_the_first_by_rank_then_position(tmp_path: Path) -> None:
    # Rank 0 reads part-00000, rank 1 part-00001. The duplicated transition is the last row of
    # rank 0 and both rows of rank 1: the rank decides before the position does.
    shards = tmp_path / "in" / "transitions" / "terminal"
    shards.mkdir(parents=True)
    parts = [
        [step("a", 0, "$ a", "1"), step("a", 1, "$ b", "2"), step("a", 2, "$ x", "y")],
        [step("b", 0, "$ x", "y"), step("b", 1, "$ x", "y")],
    ]
    for index, rows in enumerate(parts):
        pq.write_table(to_table(rows, Transition), shards / f"part-{index:05d}.parquet")
    out = tmp_path / "out"
    report = curate(tmp_path / "in", out, CurationConfig(tasks=2, minhash={"enabled": False}))
    frame = read_output(out)
    assert sorted(frame["id"]) == ["a:00000", "a:00001", "a:00002", "b:00000", "b:00001"]
    marks = {row["id"]: row["curation"] for row in frame.to_dicts()}
    assert marks["a:00002"]["target"]
    assert [marks[i]["duplicate_of"] for i in ("b:00000", "b:00001")] == ["a:00002"] * 2
    assert (report.rows_in, report.rows_out, report.targets) == (5, 5, 3)
    # datatrove's own files: sorted signatures per rank, duplicates per rank found by stage 2
    signatures = out / ".curation" / "exact" / "signatures" / "0000"
    assert sorted(p.name for p in signatures.iterdir()) == ["00000.c4_sig", "00001.c4_sig"]
    record = np.dtype([("hash", "<u8"), ("priority", "<u2"), ("doc", "<u4")])
    hashes = np.fromfile(signatures / "00001.c4_sig", dtype=record)
    assert list(hashes["hash"]) == sorted(hashes["hash"]) and set(hashes["priority"]) == {65534}
    # the duplicates found for each rank, by position
    duplicates = out / ".curation" / "duplicates"
    assert sorted(p.name for p in duplicates.glob("*.parquet")) == ["00001.parquet"]
    found = pq.read_table(duplicates / "00001.parquet").to_pylist()
    assert found == [
        {"position": 0, "duplicate_of": "a:00002", "rule": "exact"},
        {"position": 1, "duplicate_of": "a:00002", "rule": "exact"},
    ]


def test_file_urls_in_and_out(runs: Path, tmp_path: Path) -> None:
    local = curate([runs / "term", runs / "web"], tmp_path / "local", NO_MINHASH)
    report = curate(
        [f"file://{runs}/term", f"file://{runs}/web"], f"file://{tmp_path}/url", NO_MINHASH
    )
    assert report.output_dir == str(tmp_path / "url") and report.inputs == local.inputs
    assert (
        read_output(tmp_path / "url").sort("id").equals(read_output(tmp_path / "local").sort("id"))
    )
    assert CorpusLayout(tmp_path / "url").is_curated()
    published = publish_folder(tmp_path / "url", tmp_path / "dist")
    assert published.rows == report.rows_out == 5 and published.episodes == 3
    assert published.summary["targets"] == report.targets == 4


def test_memory_urls_in_and_out(runs: Path, tmp_path: Path) -> None:
    """``memory://`` works with the local executor and one worker (all tasks in this process).

    With more workers datatrove's pool processes would write into copies of the memory
    filesystem that this process never sees, so that is refused before anything runs.
    """
    memory = fsspec.filesystem("memory")
    for path in runs.rglob("*"):
        if path.is_file():
            memory.pipe(f"/curation-test/{path.relative_to(runs.parent)}", path.read_bytes())
    try:
        with pytest.raises(InputError, match="--workers 1"):
            curate("memory://curation-test/runs", "memory://curation-test/out", workers=2)
        report = curate("memory://curation-test/runs", "memory://curation-test/out", NO_MINHASH)
        local = curate(runs, tmp_path / "local", NO_MINHASH)
        assert report.inputs == [
            "memory:///curation-test/runs/term",
            "memory:///curation-test/runs/web",
        ]
        assert (report.rows_in, report.rows_out) == (local.rows_in, local.rows_out)
        shards = sorted(memory.glob("/curation-test/out/transitions/*/*.parquet"))
        with fsspec.open_files([f"memory://{s}" for s in shards], "rb") as handles:
            frame = pl.concat([pl.read_parquet(handle) for handle in handles])
        assert frame.sort("id").equals(read_output(tmp_path / "local").sort("id"))
        manifest = json.loads(memory.cat("/curation-test/out/corpus.json"))
        assert manifest["curated"] and manifest["inputs"] == report.inputs
        for name in ("stats.json", "episodes.parquet", "quarantine.jsonl", ".curation/input.json"):
            assert memory.isfile(f"/curation-test/out/{name}"), name
        assert (
            curate(
                "memory://curation-test/runs", "memory://curation-test/out", NO_MINHASH
            ).stages_run
            == []
        )
    finally:
        memory.rm("/curation-test", recursive=True)


def test_a_corpus_written_into_its_folder_of_runs_is_not_its_own_input(runs: Path) -> None:
    first = curate(runs, runs / "all", NO_MINHASH)
    assert first.inputs == [str(runs / "term"), str(runs / "web")]
    again = curate(runs, runs / "all", NO_MINHASH)  # runs/all is a corpus now: passed over
    assert again.stages_run == [] and again.inputs == first.inputs
    assert curate(str(runs / "*"), runs / "all", NO_MINHASH).stages_run == []
    with pytest.raises(InputError, match="a corpus cannot be its own input"):
        curate([runs / "term", runs / "all"], runs / "all", NO_MINHASH)
