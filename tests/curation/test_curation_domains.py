"""A terminal run and a web run, collected for real, curated into one corpus and published."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from datasets import load_dataset

from worldtrace.curation import curate
from worldtrace.flows.collect import run_collection
from worldtrace.flows.config import validate_config
from worldtrace.publishing.folder import publish_folder
from worldtrace.schemas.layouts import CorpusLayout

pytestmark = pytest.mark.docker


def test_a_terminal_run_and_a_web_run_make_one_dataset(
    tmp_path: Path, terminal_image: str, site_images: list[str]
) -> None:
    runs = tmp_path / "runs"
    terminal = validate_config(
        {
            "domain": "terminal",
            "episodes": 2,
            "workers": 2,
            "out": str(runs),
            "run_name": "terminal-run",
            "policy": {"kind": "script", "tasks": ["rename-photos-batch", "word-frequency"]},
        }
    )
    web = validate_config(
        {
            "domain": "web",
            "episodes": 1,
            "out": str(runs),
            "run_name": "web-run",
            "policy": {
                "kind": "replay",
                "params": {"actions": ["scroll(0, 300)", "goto('http://datasette.test/')"]},
            },
            "environment": {"site": "datasette", "screenshot": False},
        }
    )
    for config in (terminal, web):
        summary = run_collection(config)
        assert (summary["collected"], summary["failed"]) == (config.episodes, 0), summary

    corpus = tmp_path / "corpus"
    report = curate([terminal.run_dir, web.run_dir], corpus)
    assert report.inputs == [str(terminal.run_dir), str(web.run_dir)]
    assert CorpusLayout(corpus).read_manifest().inputs == report.inputs
    frame = pl.read_parquet(str(corpus / "transitions" / "*" / "*.parquet"))
    rows = dict(frame.group_by("domain").len().iter_rows())
    assert set(rows) == {"terminal", "web"} and sum(rows.values()) == report.rows_out
    assert rows["web"] == 2  # both replayed actions succeeded and were kept
    episodes = pl.read_parquet(corpus / "episodes.parquet")
    assert sorted(episodes["domain"]) == ["terminal", "terminal", "web"]
    stats = json.loads((corpus / "stats.json").read_text())
    assert {domain: entry["rows_out"] for domain, entry in stats["domains"].items()} == rows

    published = publish_folder(corpus, tmp_path / "dist")
    assert published.rows_per_domain == rows
    for domain, count in rows.items():
        assert load_dataset(str(tmp_path / "dist"), domain, split="train").num_rows == count
    everything = load_dataset(str(tmp_path / "dist"), "all", split="train")
    assert everything.num_rows == report.rows_out
    assert sorted(everything["id"]) == sorted(frame["id"])

    # the folder of runs and a glob over it name the same two runs: the same corpus
    for source in (runs, str(runs / "*-run")):
        again = curate(source, tmp_path / f"again-{len(str(source))}")
        assert again.inputs == report.inputs
        other = pl.read_parquet(str(Path(again.output_dir) / "transitions" / "*" / "*.parquet"))
        assert other.sort("id").equals(frame.sort("id"))
