"""The flattened polars view and the summary of a corpus."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console

from tests.publishing.helpers import make_corpus
from worldtrace.publishing.folder import publish_folder
from worldtrace.publishing.inspect import parquet_glob, render, scan, summarize
from worldtrace.schemas.layouts import LayoutError

FLAT = {
    "observation_text",
    "observation_format",
    "observation_meta",
    "observation_has_screenshot",
    "action_name",
    "action_text",
    "action_arguments",
    "next_observation_text",
    "env_name",
    "env_version",
    "env_components",
    "env_config_hash",
    "policy_kind",
    "timing_started_at",
    "source_origin",
    "domain",
    "episode_id",
}


@pytest.fixture()
def folders(tmp_path: Path) -> dict[str, Path]:
    corpus = make_corpus(tmp_path / "corpus")
    publish_folder(corpus, tmp_path / "dist")
    return {"corpus": corpus, "published": tmp_path / "dist"}


@pytest.mark.parametrize("kind", ["corpus", "published"])
def test_scan_flattens(folders: dict[str, Path], kind: str) -> None:
    frame = scan(str(folders[kind]))
    assert isinstance(frame, pl.LazyFrame)
    schema = frame.collect_schema()
    assert set(schema.names()) >= FLAT
    assert not any(isinstance(dtype, pl.Struct) for dtype in schema.dtypes())
    assert not any("screenshot" in name and "has_" not in name for name in schema.names())
    rows = frame.filter(pl.col("domain") == "web").sort("step").collect()
    assert rows["observation_text"].to_list() == [f"[1] page {s}" for s in range(4)]
    assert rows["observation_has_screenshot"].to_list() == [True] * 4
    assert rows["env_version"].unique().to_list() == ["chromium-156"]
    assert json.loads(rows["action_arguments"][0]) == {"keys": ["echo hi", "Enter"]}
    counts = frame.group_by("action_name").len().collect()
    assert counts.to_dicts() == [{"action_name": "keys", "len": 10}]


@pytest.mark.parametrize("kind", ["corpus", "published"])
def test_summarize_counts(folders: dict[str, Path], kind: str) -> None:
    summary = summarize(str(folders[kind]))
    assert summary["rows"] == 10
    assert summary["episodes"] == 3
    assert {d: v["rows"] for d, v in summary["domains"].items()} == {"terminal": 6, "web": 4}
    assert {d: v["episodes"] for d, v in summary["domains"].items()} == {"terminal": 2, "web": 1}
    web = summary["domains"]["web"]
    assert web["noop_rate"] == pytest.approx(0.25)
    assert web["action_error_rate"] == pytest.approx(0.25)
    assert web["obs_len_p50"] == len("[1] page 0")
    assert summary["domains"]["terminal"]["noop_rate"] == 0.0
    assert summary["noop_rate"] == pytest.approx(0.1)
    assert summary["action_error_rate"] == pytest.approx(0.1)
    versions = {(e["env_name"], e["env_version"]): e["rows"] for e in summary["environments"]}
    assert versions == {
        ("terminal/bash-tmux", "sha256:abc"): 6,
        ("web/chromium", "chromium-156"): 4,
    }


def test_render_tables(folders: dict[str, Path]) -> None:
    tables = render(summarize(str(folders["published"])))
    assert [t.title for t in tables] == ["Corpus", "Domains", "Environment versions"]
    console = Console(record=True, width=200)
    for table in tables:
        console.print(table)
    text = console.export_text()
    assert "chromium-156" in text
    assert "terminal" in text


def test_scan_rejects_unknown_folder(tmp_path: Path) -> None:
    with pytest.raises(LayoutError, match="neither a run"):
        scan(str(tmp_path))


def test_hf_paths_read_the_data_folders() -> None:
    assert parquet_glob("hf://datasets/org/name") == "hf://datasets/org/name/data/*/*.parquet"
    assert parquet_glob("hf://datasets/org/name/") == "hf://datasets/org/name/data/*/*.parquet"
    one = "hf://datasets/org/name/data/web/train-00000-of-00001.parquet"
    assert parquet_glob(one) == one


def test_scan_is_one_pushed_down_parquet_scan(folders: dict[str, Path]) -> None:
    # Flattening is lazy expressions: a query reads only the top-level columns it touches,
    # in one scan over every shard, with its filter evaluated inside the scan.
    query = (
        scan(str(folders["published"]))
        .filter(pl.col("domain") == "web")
        .group_by("action_name")
        .agg(pl.col("next_observation_text").str.len_chars().mean())
    )
    plan = query.explain()
    assert plan.count("SCAN") == 1 and "UNION" not in plan, plan
    projected = re.search(r"PROJECT (\d+)/(\d+) COLUMNS", plan)
    assert projected and projected.groups() == ("3", "18"), plan  # domain, action, next_obs
    assert re.search(r"SELECTION: .*col\(\"domain\"\)", plan), plan
    assert query.collect().to_dicts() == [
        {"action_name": "keys", "next_observation_text": pytest.approx(10.0)}
    ]


def test_targets_are_counted_and_shards_before_the_curation_column_are_all_targets(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    corpus = folders["corpus"]
    frame = pl.read_parquet(sorted(corpus.glob("transitions/*/*.parquet")))
    # mark one row a duplicate, as curation would
    marked = frame.with_columns(
        pl.when(pl.col("id") == frame["id"][0])
        .then(
            pl.struct(
                target=False,
                duplicate_of=pl.lit("x:00000"),
                duplicate_rule=pl.lit("exact"),
                labels=pl.lit([], dtype=pl.List(pl.String)),
            )
        )
        .otherwise(pl.col("curation"))
        .alias("curation")
    )
    marked.write_parquet(tmp_path / "marked.parquet")
    assert summarize(str(tmp_path / "marked.parquet"))["targets"] == frame.height - 1
    frame.drop("curation").write_parquet(tmp_path / "old.parquet")  # schema 1.0
    old = summarize(str(tmp_path / "old.parquet"))
    assert old["targets"] == old["rows"] == frame.height
