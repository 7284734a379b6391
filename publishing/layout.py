"""Write a corpus as a Hugging Face Hub dataset folder, validated and swapped in atomically.

Input, a *corpus* folder::

    transitions/<domain>/*.parquet   Transition rows
    episodes.parquet                 Episode rows (optional)
    stats.json                       curation statistics (optional)

Output, the Hub layout::

    README.md                                      dataset card with one config per domain + all
    data/<domain>/train-XXXXX-of-YYYYY.parquet     Transition rows, ~shard_size_mb per shard
    meta/episodes.parquet                          Episode rows (empty table when none were given)
    meta/environments.json                         every environment version, with row counts
    meta/schema.json                               schema version and Arrow schema
    meta/curation_stats.json                       the corpus stats.json, when present
    meta/manifest.json                             sha256 and size of every other file

Everything is written into a temporary folder beside ``dest``, validated, then swapped in, so
a publish killed midway leaves ``dest`` as it was and a re-run completes without duplicates.
The output is deterministic: publishing the same corpus twice gives byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from publishing.card import ALL_CONFIG, render_card
from publishing.inspect import summarize
from schemas import SCHEMA_VERSION, Episode, Transition, arrow_schema_of

MANIFEST = "meta/manifest.json"
SCHEMA_FILE = "meta/schema.json"
# Large row groups: 1,024-row groups made writing 1.6x slower than pyarrow's default
# (benchmarks/publish.py). A shard may overshoot its size target by one batch.
ROWS_PER_ROW_GROUP = 16_384
_TEMP_MARK = ".publishing-"
_OLD_MARK = ".replaced-"


class PublishError(RuntimeError):
    """The corpus cannot be published as it is; the message says why."""


@dataclass
class PublishReport:
    """What :func:`publish_folder` wrote."""

    dest: Path
    rows: int
    rows_per_domain: dict[str, int]
    shards: dict[str, list[str]]
    episodes: int
    environments: int
    files: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def schema_fingerprint(schema: pa.Schema) -> str:
    """Return a sha256 of the Arrow schema's fields and field types (metadata excluded)."""
    return hashlib.sha256(schema.remove_metadata().to_string().encode()).hexdigest()


def schema_document() -> dict[str, Any]:
    """Return the content of ``meta/schema.json`` for the current record schema."""
    schema = arrow_schema_of(Transition)
    return {
        "schema_version": SCHEMA_VERSION,
        "record": "Transition",
        "arrow_schema_sha256": schema_fingerprint(schema),
        "arrow_schema": schema.remove_metadata().to_string().splitlines(),
    }


def file_sha256(path: Path) -> str:
    """Return the hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _DomainShards:
    """Streams one domain's rows into shards cut at about ``limit`` bytes of parquet."""

    def __init__(self, folder: Path, schema: pa.Schema, limit: int) -> None:
        self.folder = folder
        self.schema = schema
        self.limit = limit
        self.parts: list[Path] = []
        self.rows = 0
        self._sink: Any = None
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        if self._writer is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"part-{len(self.parts):05d}.tmp"
            self.parts.append(path)
            self._sink = pa.OSFile(str(path), "wb")
            self._writer = pq.ParquetWriter(self._sink, self.schema, compression="zstd")
        self._writer.write_table(table, row_group_size=ROWS_PER_ROW_GROUP)
        self.rows += table.num_rows
        if self._sink.tell() >= self.limit:
            self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._sink.close()
            self._writer, self._sink = None, None

    def finish(self) -> list[str]:
        """Close the last shard and give every shard its final ``train-i-of-n`` name."""
        self.close()
        total = len(self.parts)
        names = []
        for index, part in enumerate(self.parts):
            name = f"train-{index:05d}-of-{total:05d}.parquet"
            part.rename(self.folder / name)
            names.append(name)
        return names


def _conform(table: pa.Table, schema: pa.Schema, source: Path) -> pa.Table:
    """Return ``table`` in ``schema`` (column order and types), or raise naming the problem."""
    missing = [name for name in schema.names if name not in table.column_names]
    extra = [name for name in table.column_names if name not in schema.names]
    if missing or extra:
        raise PublishError(
            f"{source}: columns differ from the schema (missing {missing}, extra {extra})"
        )
    table = table.select(schema.names)
    try:
        return table.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise PublishError(
            f"{source}: cannot be read with the transition schema: {error}"
        ) from None


def _write_transitions(
    corpus_dir: Path, out: Path, limit: int
) -> tuple[dict[str, list[str]], dict[str, int]]:
    schema = arrow_schema_of(Transition)
    files = sorted((corpus_dir / "transitions").glob("*/*.parquet"))
    if not files:
        raise PublishError(f"{corpus_dir}: no transitions/<domain>/*.parquet files")
    writers: dict[str, _DomainShards] = {}
    for source in files:
        try:
            handle = pq.ParquetFile(source)
            batches = handle.iter_batches(batch_size=ROWS_PER_ROW_GROUP)
            for batch in batches:
                table = _conform(pa.Table.from_batches([batch]), schema, source)
                domains = table.column("domain").unique().to_pylist()
                for domain in sorted(d for d in domains if d is not None):
                    part = (
                        table
                        if len(domains) == 1
                        else table.filter(pc.equal(table["domain"], domain))
                    )
                    if domain not in writers:
                        writers[domain] = _DomainShards(out / "data" / domain, schema, limit)
                    writers[domain].write(part)
                if None in domains:
                    raise PublishError(f"{source}: rows without a domain")
        except (OSError, pa.ArrowInvalid) as error:
            raise PublishError(f"{source}: unreadable parquet: {error}") from None
    shards = {domain: writers[domain].finish() for domain in sorted(writers)}
    rows = {domain: writers[domain].rows for domain in sorted(writers)}
    return shards, rows


def _write_episodes(corpus_dir: Path, out: Path) -> int:
    schema = arrow_schema_of(Episode)
    source = corpus_dir / "episodes.parquet"
    table = (
        _conform(pq.read_table(source), schema, source) if source.exists() else schema.empty_table()
    )
    if table.num_rows:
        table = table.sort_by([("episode_id", "ascending")])
    (out / "meta").mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out / "meta" / "episodes.parquet", compression="zstd")
    return table.num_rows


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _environments(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "name": env["env_name"],
            "version": env["env_version"],
            "config_hash": env["env_config_hash"],
            "components": json.loads(env["env_components"]),
            "domains": env["domains"],
            "rows": env["rows"],
            "episodes": env["episodes"],
        }
        for env in summary["environments"]
    ]


def manifest_of(folder: Path) -> dict[str, dict[str, Any]]:
    """Return ``{relative path: {"sha256", "size"}}`` for every file except the manifest."""
    entries = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative == MANIFEST:
            continue
        entries[relative] = {"sha256": file_sha256(path), "size": path.stat().st_size}
    return entries


def validate_folder(folder: Path, rows_per_domain: dict[str, int], full: bool = False) -> None:
    """Check a published folder before it is swapped in; raise :class:`PublishError` if bad.

    Every shard must carry the transition schema with its ``datasets`` metadata and the
    shard row counts must add up. Every config must resolve through ``datasets`` exactly as
    the Hub resolves it (streamed; ``full=True`` loads every config completely).
    """
    from datasets import Image, load_dataset

    expected = arrow_schema_of(Transition)
    for domain, rows in rows_per_domain.items():
        total = 0
        shards = sorted((folder / "data" / domain).glob("*.parquet"))
        for shard in shards:
            schema = pq.read_schema(shard)
            if not schema.equals(expected, check_metadata=True):
                raise PublishError(f"{shard}: schema differs from the transition schema")
            total += pq.ParquetFile(shard).metadata.num_rows
        if total != rows:
            raise PublishError(f"data/{domain}: {total} rows in shards, {rows} written")
    for config in [ALL_CONFIG, *rows_per_domain]:
        want = sum(rows_per_domain.values()) if config == ALL_CONFIG else rows_per_domain[config]
        if full:
            with tempfile.TemporaryDirectory(dir=folder.parent) as cache:
                dataset = load_dataset(str(folder), config, split="train", cache_dir=cache)
                rows = dataset.num_rows
                features = dataset.features
            if rows != want:
                raise PublishError(f"config {config}: datasets reads {rows} rows, not {want}")
        else:
            streamed = load_dataset(str(folder), config, split="train", streaming=True)
            next(iter(streamed))
            features = streamed.features
        if features is None or not isinstance(features["observation"]["screenshot"], Image):
            raise PublishError(f"config {config}: screenshots do not decode as images")


def _swap_in(temp: Path, dest: Path) -> None:
    old = dest.parent / f".{dest.name}{_OLD_MARK}{os.getpid()}"
    if dest.exists():
        dest.rename(old)
    temp.rename(dest)
    if old.exists():
        shutil.rmtree(old)


def _clean_leftovers(dest: Path) -> None:
    for marker in (_TEMP_MARK, _OLD_MARK):
        for leftover in dest.parent.glob(f".{dest.name}{marker}*"):
            shutil.rmtree(leftover, ignore_errors=True)


def publish_folder(
    corpus_dir: Path,
    dest: Path,
    shard_size_mb: float = 500,
    licence: str | None = None,
    name: str | None = None,
    full_validation: bool = False,
) -> PublishReport:
    """Write ``corpus_dir`` as a Hub-layout dataset folder at ``dest`` and return a report.

    Shards are cut once they reach about ``shard_size_mb`` MB of parquet. ``licence`` goes into
    the card's ``license`` field, ``name`` into its title. The folder is validated before it
    replaces ``dest`` (see :func:`validate_folder`); leftovers of a killed earlier run are
    removed first.
    """
    corpus_dir, dest = Path(corpus_dir), Path(dest)
    if shard_size_mb <= 0:
        raise ValueError("shard_size_mb must be positive")
    if dest.exists() and any(dest.iterdir()) and not (dest / MANIFEST).exists():
        raise PublishError(f"{dest} exists and is not a published corpus: refusing to replace it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(dest)
    temp = dest.parent / f".{dest.name}{_TEMP_MARK}{os.getpid()}"
    temp.mkdir()
    try:
        shards, rows = _write_transitions(corpus_dir, temp, int(shard_size_mb * 1024 * 1024))
        episodes = _write_episodes(corpus_dir, temp)
        summary = summarize(str(temp))
        _write_json(temp / "meta" / "environments.json", _environments(summary))
        _write_json(temp / SCHEMA_FILE, schema_document())
        stats = corpus_dir / "stats.json"
        if stats.exists():
            shutil.copyfile(stats, temp / "meta" / "curation_stats.json")
        (temp / "README.md").write_text(render_card(summary, licence=licence, name=name))
        _write_json(temp / MANIFEST, manifest_of(temp))
        validate_folder(temp, rows, full=full_validation)
        _swap_in(temp, dest)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    return PublishReport(
        dest=dest,
        rows=sum(rows.values()),
        rows_per_domain=rows,
        shards=shards,
        episodes=episodes,
        environments=len(summary["environments"]),
        files=files,
        summary=summary,
    )
