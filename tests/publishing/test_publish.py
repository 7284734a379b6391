"""Publishing a corpus as a Hub-layout folder: configs, shards, card, determinism."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml
from datasets import Image, load_dataset
from typer.testing import CliRunner

from tests.publishing.helpers import make_corpus, png, terminal_rows, web_rows
from tests.records import make_transition
from worldtrace.flows.cli import app
from worldtrace.publishing.folder import (
    MANIFEST,
    PublishError,
    foreign_files,
    manifest_of,
    publish_folder,
)
from worldtrace.schemas import (
    SCHEMA_VERSION,
    Observation,
    Transition,
    to_table,
)
from worldtrace.schemas.layouts import CorpusLayout


def read_front_matter(text: str) -> dict[str, Any]:
    """Parse the YAML front matter of a card (empty dict if there is none)."""
    if not text.startswith("---"):
        return {}
    _, _, rest = text.partition("---")
    block, sep, _ = rest.partition("\n---")
    if not sep:
        return {}
    loaded = yaml.safe_load(block)
    return loaded if isinstance(loaded, dict) else {}


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    return make_corpus(tmp_path / "corpus")


@pytest.fixture()
def published(corpus: Path, tmp_path: Path) -> Path:
    publish_folder(corpus, tmp_path / "dist" / "demo", licence="cc-by-4.0", name="demo")
    return tmp_path / "dist" / "demo"


def test_layout_and_every_config_loads(published: Path, tmp_path: Path) -> None:
    cache = tmp_path / "hf-datasets-cache"
    files = sorted(p.relative_to(published).as_posix() for p in published.rglob("*") if p.is_file())
    shards = [name for name in files if name.startswith("data/")]
    assert [re.sub(r"-[0-9a-f]{12}\.parquet$", "", name) for name in shards] == [
        "data/terminal/train-00000-of-00001",
        "data/web/train-00000-of-00001",
    ]
    for name in shards:  # the name carries the start of the shard's sha256
        digest = hashlib.sha256((published / name).read_bytes()).hexdigest()
        assert name.endswith(f"-{digest[:12]}.parquet")
    for meta in ("episodes.parquet", "environments.json", "schema.json", "manifest.json"):
        assert f"meta/{meta}" in files
    assert "meta/curation_stats.json" in files
    assert "README.md" in files

    counts = {"terminal": 6, "web": 4, "all": 10}
    for config, rows in counts.items():
        dataset = load_dataset(str(published), config, split="train", cache_dir=str(cache))
        assert dataset.num_rows == rows, config
        assert isinstance(dataset.features["observation"]["screenshot"], Image)
    web = load_dataset(str(published), "web", split="train", cache_dir=str(cache))
    first = web[0]["observation"]["screenshot"]
    assert first.size == (4, 3)
    assert sorted(web["step"]) == [0, 1, 2, 3]


def test_polars_scans_the_published_folder(published: Path) -> None:
    frame = pl.scan_parquet(str(published / "data" / "*" / "*.parquet"))
    counts = frame.group_by("domain").len().sort("domain").collect()
    assert counts.to_dicts() == [{"domain": "terminal", "len": 6}, {"domain": "web", "len": 4}]


def test_meta_files(published: Path) -> None:
    environments = json.loads((published / "meta" / "environments.json").read_text())
    by_name = {env["name"]: env for env in environments}
    assert by_name["terminal/bash-tmux"]["rows"] == 6
    assert by_name["terminal/bash-tmux"]["components"] == {"bash": "5.2"}
    assert by_name["web/chromium"] == {
        "name": "web/chromium",
        "version": "chromium-156",
        "config_hash": "beef",
        "components": {"chromium": "156"},
        "domains": ["web"],
        "rows": 4,
        "episodes": 1,
    }
    episodes = pq.read_table(published / "meta" / "episodes.parquet")
    assert episodes.num_rows == 3
    schema = json.loads((published / "meta" / "schema.json").read_text())
    assert schema["schema_version"] == SCHEMA_VERSION
    manifest = json.loads((published / MANIFEST).read_text())
    assert manifest == manifest_of(published)
    assert "README.md" in manifest


def test_card_front_matter_lists_configs(published: Path) -> None:
    text = (published / "README.md").read_text()
    meta = read_front_matter(text)
    assert meta["license"] == "cc-by-4.0"
    names = {c["config_name"]: c["data_files"][0]["path"] for c in meta["configs"]}
    shards = sorted(p.relative_to(published).as_posix() for p in published.glob("data/*/*"))
    assert names == {
        "all": shards,
        "terminal": [s for s in shards if s.startswith("data/terminal/")],
        "web": [s for s in shards if s.startswith("data/web/")],
    }
    # the YAML block parses on its own, and the body has the tables
    assert yaml.safe_load(text.split("---")[1])["configs"]
    assert "| `observation.text` | string |" in text
    assert "| web | 4 | 4 | 1 |" in text  # rows, targets, episodes
    assert "`chromium-156`" in text
    assert "## Polars recipes" in text


def noise(seed: int) -> str:
    return "".join(hashlib.sha256(f"{seed}-{i}".encode()).hexdigest() for i in range(10))


def test_small_shard_size_makes_consistent_shards(tmp_path: Path) -> None:
    big = [
        make_transition(
            step=s,
            episode_id=f"big-{s // 50}",
            observation=Observation(format="terminal-screen", text=noise(s)),
        )
        for s in range(3000)
    ]
    corpus = make_corpus(tmp_path / "corpus", terminal=big)
    report = publish_folder(corpus, tmp_path / "dist", shard_size_mb=0.2, full_validation=True)
    shards = sorted((tmp_path / "dist" / "data" / "terminal").glob("*.parquet"))
    assert len(shards) > 1
    total = len(shards)
    assert [s.name[: -len("-0123456789ab.parquet")] for s in shards] == [
        f"train-{i:05d}-of-{total:05d}" for i in range(total)
    ]
    assert report.shards["terminal"] == [s.name for s in shards]
    assert sum(pq.ParquetFile(s).metadata.num_rows for s in shards) == 3000
    dataset = load_dataset(
        str(tmp_path / "dist"), "terminal", split="train", cache_dir=str(tmp_path / "cache")
    )
    assert dataset.num_rows == 3000


def test_republishing_gives_identical_files(corpus: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dist"
    publish_folder(corpus, dest, licence="mit")
    first = {p: v["sha256"] for p, v in manifest_of(dest).items()}
    publish_folder(corpus, dest, licence="mit")
    second = {p: v["sha256"] for p, v in manifest_of(dest).items()}
    assert first == second
    assert not list(tmp_path.glob(".dist.*"))  # no temp folders left behind


def test_killed_publish_leaves_dest_intact_and_rerun_completes(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import worldtrace.publishing.folder as folder_module

    dest = tmp_path / "dist"
    publish_folder(corpus, dest)
    before = manifest_of(dest)
    # a leftover temp folder of a killed run, and a crash during validation
    (tmp_path / ".dist.publishing-999999" / "data").mkdir(parents=True)

    def crash(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(folder_module, "validate_folder", crash)
    with pytest.raises(KeyboardInterrupt):
        publish_folder(corpus, dest)
    assert manifest_of(dest) == before
    monkeypatch.undo()
    publish_folder(corpus, dest)
    assert manifest_of(dest) == before
    assert not list(tmp_path.glob(".dist.*"))


def test_unrelated_dest_folder_is_not_replaced(corpus: Path, tmp_path: Path) -> None:
    dest = tmp_path / "important"
    dest.mkdir()
    (dest / "notes.txt").write_text("keep me")
    with pytest.raises(PublishError, match="not a published corpus"):
        publish_folder(corpus, dest)
    assert (dest / "notes.txt").read_text() == "keep me"


def test_foreign_schema_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa

    corpus = make_corpus(tmp_path / "corpus")
    pq.write_table(pa.table({"id": ["x"]}), corpus / "transitions" / "web" / "bad.parquet")
    with pytest.raises(PublishError, match="missing"):
        publish_folder(corpus, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


def test_card_summary_gathered_while_writing_matches_the_shards(tmp_path: Path) -> None:
    # Several environments, unicode text (lengths are characters), no-ops and errors.
    terminal = terminal_rows(episodes=3, steps=4, text="é ✓ ")
    other_env = [
        row.model_copy(
            update={
                "episode_id": "term-x",
                "id": f"term-x:{row.step:05d}",
                "env": row.env.model_copy(update={"version": "sha256:def"}),
            }
        )
        for row in terminal_rows(episodes=1, steps=2, text="$ ")
    ]
    corpus = make_corpus(tmp_path / "corpus", terminal=terminal + other_env)
    report = publish_folder(corpus, tmp_path / "dist")
    from worldtrace.publishing.inspect import summarize

    assert report.summary == summarize(str(tmp_path / "dist"))
    assert len(report.summary["environments"]) == 3
    assert report.summary["domains"]["terminal"]["obs_len_max"] == len("é ✓ 2-3")


def test_episode_lengths_are_the_published_rows(tmp_path: Path) -> None:
    rows = terminal_rows(episodes=3, steps=5)
    corpus = make_corpus(tmp_path / "corpus", terminal=rows)
    # Curation dropped two steps of term-0 and every step of term-2 after the episodes were
    # recorded: episodes.parquet still says 5 for each.
    kept = [r for r in rows if r.episode_id != "term-2" and (r.episode_id, r.step) not in {
        ("term-0", 1), ("term-0", 3)}]  # fmt: skip
    for path in (corpus / "transitions" / "terminal").glob("*.parquet"):
        path.unlink()
    pq.write_table(to_table(kept, Transition), corpus / "transitions" / "terminal" / "a.parquet")
    recorded = pq.read_table(corpus / "episodes.parquet").to_pylist()
    assert {e["episode_id"]: e["length"] for e in recorded}["term-0"] == 5

    report = publish_folder(corpus, tmp_path / "dist")
    published = pq.read_table(tmp_path / "dist" / "meta" / "episodes.parquet")
    lengths = {e["episode_id"]: e["length"] for e in published.to_pylist()}
    assert lengths == {"term-0": 3, "term-1": 5, "term-2": 0, "web-0": 4}
    assert report.episodes == 4
    assert published.schema.equals(pq.read_schema(corpus / "episodes.parquet"))


def test_validation_refuses_a_card_resolving_to_other_shards(
    published: Path, tmp_path: Path
) -> None:
    from worldtrace.publishing.folder import validate_folder

    rows = {"terminal": 6, "web": 4}
    validate_folder(published, rows)
    card = published / "README.md"
    meta = read_front_matter(card.read_text())
    (terminal,) = [c for c in meta["configs"] if c["config_name"] == "terminal"]
    terminal["data_files"][0]["path"] = "data/*/*"  # also the web shards
    body = card.read_text().split("\n---\n", 1)[1]
    card.write_text("---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n" + body)
    with pytest.raises(PublishError, match="config terminal: datasets resolves"):
        validate_folder(published, rows)


def test_screenshots_that_do_not_decode_are_refused(tmp_path: Path) -> None:
    web = web_rows()
    web[0] = web[0].model_copy(
        update={"observation": Observation(format="axtree", text="x", screenshot=b"not a png")}
    )
    corpus = make_corpus(tmp_path / "corpus", web=web)
    with pytest.raises(PublishError, match="first row does not decode"):
        publish_folder(corpus, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


def test_unreadable_shard_is_reported_by_name(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    (corpus / "transitions" / "web" / "zz-broken.parquet").write_bytes(b"PAR1 not parquet")
    with pytest.raises(PublishError, match=r"zz-broken\.parquet: unreadable parquet"):
        publish_folder(corpus, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()
    assert not list(tmp_path.glob(".dist.*"))


def test_corpus_without_rows_is_refused(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "transitions" / "web").mkdir(parents=True)
    pq.write_table(to_table([], Transition), corpus / "transitions" / "web" / "part.parquet")
    CorpusLayout(corpus).write_manifest(["test"])
    with pytest.raises(PublishError, match="hold no rows"):
        publish_folder(corpus, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()


def test_a_folder_that_was_not_curated_is_refused_unless_asked_and_then_labelled(
    tmp_path: Path,
) -> None:
    corpus = make_corpus(tmp_path / "run")
    (corpus / "corpus.json").unlink()  # what a run directory looks like: never curated
    (corpus / "stats.json").unlink()
    dest = tmp_path / "dist"
    with pytest.raises(PublishError, match="not curated"):
        publish_folder(corpus, dest)
    assert not dest.exists()
    refused = CliRunner().invoke(app, ["publish", str(corpus), "--to", str(dest)])
    assert refused.exit_code == 2
    assert "--uncurated" in refused.output

    allowed = CliRunner().invoke(app, ["publish", str(corpus), "--to", str(dest), "--uncurated"])
    assert allowed.exit_code == 0, allowed.output
    card = (dest / "README.md").read_text()
    assert "**Not curated.**" in card
    assert "Curated with worldtrace" not in card
    assert "uncurated" in read_front_matter(card)["tags"]
    assert not (dest / "meta" / "curation_stats.json").exists()


def test_a_curated_corpus_card_says_it_was_curated(published: Path) -> None:
    card = (published / "README.md").read_text()
    assert "Curated with worldtrace" in card
    assert "Not curated" not in card
    assert "uncurated" not in read_front_matter(card)["tags"]


def test_a_folder_republished_in_place_with_other_rows_loads_its_new_rows(tmp_path: Path) -> None:
    # datasets caches a local folder by its name and its data files' paths: with the same
    # shard names, a shared cache returned the old 46 rows after a republish with 10.
    cache = tmp_path / "shared-cache"
    dest = tmp_path / "dist"
    big = make_corpus(tmp_path / "big", terminal=terminal_rows(episodes=2, steps=23), web=[])
    publish_folder(big, dest)
    assert load_dataset(str(dest), "terminal", split="train", cache_dir=str(cache)).num_rows == 46
    small = make_corpus(tmp_path / "small", terminal=terminal_rows(episodes=2, steps=5), web=[])
    publish_folder(small, dest)
    again = load_dataset(str(dest), "terminal", split="train", cache_dir=str(cache))
    assert again.num_rows == 10


def test_republishing_over_files_someone_added_refuses_and_keeps_them(
    published: Path, corpus: Path
) -> None:
    added = {"NOTES.md": b"my notes", "figures/plot.png": png(), "data/extra/x.parquet": b"x"}
    for relative, content in added.items():
        (published / relative).parent.mkdir(parents=True, exist_ok=True)
        (published / relative).write_bytes(content)
    refused = CliRunner().invoke(app, ["publish", str(corpus), "--to", str(published)])
    assert refused.exit_code == 2, refused.output
    assert "did not write" in refused.output
    assert all(relative in refused.output for relative in added)
    assert {r: (published / r).read_bytes() for r in added} == added

    forced = CliRunner().invoke(app, ["publish", str(corpus), "--to", str(published), "--force"])
    assert forced.exit_code == 0, forced.output
    assert not any((published / relative).exists() for relative in added)
    assert foreign_files(published) == []


def test_republishing_over_only_its_own_files_needs_no_force(published: Path) -> None:
    # A file publishing wrote, changed by hand, is still publishing's: it is replaced.
    (published / "README.md").write_text("edited")
    assert foreign_files(published) == []
