"""`worldtrace run`: collect → curate → publish as one flow, resumable."""

from __future__ import annotations

import pytest
from datasets import load_dataset
from typer.testing import CliRunner

from worldtrace.flows.cli import app
from worldtrace.publishing.inspect import summarize

pytestmark = pytest.mark.docker


def test_pipeline_collects_curates_publishes_and_resumes(tmp_path, terminal_image):
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        f"""
collect:
  domain: terminal
  episodes: 2
  workers: 2
  out: {tmp_path / "runs"}
  run_name: pipe
  policy: {{kind: script, tasks: [word-frequency, csv-sales-by-region]}}
curate: {{}}
corpus: {tmp_path / "corpus"}
publish:
  to: {tmp_path / "dist"}
"""
    )
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(config)])
    assert first.exit_code == 0, first.output
    dataset = load_dataset(str(tmp_path / "dist"), "terminal", split="train")
    summary = summarize(str(tmp_path / "dist"))
    assert summary["episodes"] == 2 and dataset.num_rows == summary["rows"] > 0
    published = {p.name: p.read_bytes() for p in (tmp_path / "dist").rglob("*.parquet")}
    raw = {p.name: p.read_bytes() for p in (tmp_path / "runs" / "pipe").glob("raw/episodes/*")}
    assert len(raw) == 2

    again = runner.invoke(app, ["run", str(config)])
    assert again.exit_code == 0, again.output
    # nothing was collected twice and the published shards are byte-identical
    assert {
        p.name: p.read_bytes() for p in (tmp_path / "runs" / "pipe").glob("raw/episodes/*")
    } == raw
    assert {p.name: p.read_bytes() for p in (tmp_path / "dist").rglob("*.parquet")} == published


def test_invalid_pipeline_file_is_a_clear_error(tmp_path):
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "collect: {domain: terminal, episodes: 1}\ncorpus: c\npublish: {to: d, colour: red}\n"
    )
    result = CliRunner().invoke(app, ["run", str(config)])
    assert result.exit_code == 2
    assert "publish.colour" in result.output
