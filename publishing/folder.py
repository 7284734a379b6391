"""Write a corpus as a Hugging Face Hub dataset folder, validated and swapped in atomically.

Input, a *corpus* folder::

    transitions/<domain>/*.parquet   Transition rows
    episodes.parquet                 Episode rows (optional)
    stats.json                       curation statistics (optional)
    corpus.json                      written by `worldtrace curate` when it finished

Output, the Hub layout (paths in :class:`worldtrace.schemas.layouts.PublishedLayout`)::

    README.md                                      dataset card with one config per domain + all
    data/<domain>/train-XXXXX-of-YYYYY-<sha>.parquet
                                                   Transition rows, ~shard_size_mb per shard;
                                                   <sha> is the start of the shard's sha256
    meta/episodes.parquet                          Episode rows, length = rows published
                                                   (empty table when none were given)
    meta/environments.json                         every environment version, with row counts
    meta/schema.json                               schema and layout versions, Arrow schema
    meta/curation_stats.json                       the corpus stats.json, when present
    meta/manifest.json                             sha256 and size of every other file

Everything is written into a temporary folder beside ``dest``, validated, then swapped in, so
a publish killed midway leaves ``dest`` as it was and a re-run completes without duplicates.
The output is deterministic: publishing the same corpus twice gives byte-identical files.

The content hash in each shard's name makes a republished folder with other rows a new
dataset to ``datasets``, whose cache is keyed by a local folder's name and its data files'
paths: without it, ``load_dataset`` returned the rows of the folder's previous version.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from worldtrace.publishing.card import ALL_CONFIG, render_card
from worldtrace.publishing.inspect import arrow_row_stats, summarize_stats, usage_totals
from worldtrace.schemas import SCHEMA_VERSION, Episode, Transition, arrow_schema_of
from worldtrace.schemas.arrow import upgrade_episode_table, upgrade_transition_table
from worldtrace.schemas.errors import InputError
from worldtrace.schemas.layouts import LAYOUT_VERSION, CorpusLayout
from worldtrace.schemas.storage import RemoteFolder, is_remote, local_path

MANIFEST = "meta/manifest.json"
SCHEMA_FILE = "meta/schema.json"
FINGERPRINT_CHARS = 12
"""Hex digits of a shard's sha256 kept in its name."""
# Large row groups: 1,024-row groups made writing 1.6x slower than pyarrow's default
# (benchmarks/publish.py). A shard may overshoot its size target by one batch.
ROWS_PER_ROW_GROUP = 16_384
_TEMP_MARK = ".publishing-"
_OLD_MARK = ".replaced-"


class PublishError(InputError, RuntimeError):
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
        "layout_version": LAYOUT_VERSION,
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

    def finish(self) -> dict[str, str]:
        """Close the last shard, name every shard ``train-i-of-n-<sha>``; return names → sha256."""
        self.close()
        total = len(self.parts)
        names = {}
        for index, part in enumerate(self.parts):
            digest = file_sha256(part)
            name = f"train-{index:05d}-of-{total:05d}-{digest[:FINGERPRINT_CHARS]}.parquet"
            part.rename(self.folder / name)
            names[name] = digest
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


@dataclass
class _Written:
    """What :func:`_write_transitions` wrote: shard names, rows, and per-row summary inputs."""

    shards: dict[str, list[str]]
    rows: dict[str, int]
    stats: pa.Table
    digests: dict[str, str]
    """sha256 of every shard written, by its path in the folder (for the manifest)."""


def _read_corpus(files: list[Path], schema: pa.Schema) -> Iterator[tuple[pa.Table, pa.Table]]:
    """Yield every batch of ``files`` in ``schema``, with its :func:`arrow_row_stats`."""
    for source in files:
        try:
            handle = pq.ParquetFile(source)
            for batch in handle.iter_batches(batch_size=ROWS_PER_ROW_GROUP):
                batch_table = upgrade_transition_table(pa.Table.from_batches([batch]))
                table = _conform(batch_table, schema, source)
                if table["domain"].null_count:
                    raise PublishError(f"{source}: rows without a domain")
                yield table, arrow_row_stats(table)
        except (OSError, pa.ArrowInvalid) as error:
            raise PublishError(f"{source}: unreadable parquet: {error}") from None


def _write_transitions(corpus_dir: Path, out: Path, limit: int) -> _Written:
    schema = arrow_schema_of(Transition)
    files = sorted((corpus_dir / "transitions").glob("*/*.parquet"))
    if not files:
        raise PublishError(f"{corpus_dir}: no transitions/<domain>/*.parquet files")
    writers: dict[str, _DomainShards] = {}
    # The card's summary is computed from these, gathered from the batches as they are
    # written: reading the shards back for it cost as much again as a third of the write.
    stats: list[pa.Table] = []
    for table, row_stats in _read_corpus(files, schema):
        domains = sorted(table["domain"].unique().to_pylist())
        for domain in domains:
            part = table if len(domains) == 1 else table.filter(pc.equal(table["domain"], domain))
            if domain not in writers:
                writers[domain] = _DomainShards(out / "data" / domain, schema, limit)
            writers[domain].write(part)
        stats.append(row_stats)
    if not stats:
        raise PublishError(f"{corpus_dir}: the transition files hold no rows")
    digests = {domain: writers[domain].finish() for domain in sorted(writers)}
    shards = {domain: sorted(names) for domain, names in digests.items()}
    known = {
        f"data/{domain}/{name}": digest
        for domain, names in digests.items()
        for name, digest in names.items()
    }
    rows = {domain: writers[domain].rows for domain in sorted(writers)}
    return _Written(shards, rows, pa.concat_tables(stats), known)


def _write_episodes(corpus_dir: Path, out: Path, stats: pa.Table) -> int:
    """Write ``meta/episodes.parquet`` with each episode's published length.

    An episode's ``length`` is the number of its rows published: curation keeps episodes
    whole, so it equals the recorded length unless the folder was published from a partial
    corpus (0 when none of its rows is there).
    """
    schema = arrow_schema_of(Episode)
    source = corpus_dir / "episodes.parquet"
    table = (
        _conform(upgrade_episode_table(pq.read_table(source)), schema, source)
        if source.exists()
        else schema.empty_table()
    )
    if table.num_rows:
        table = table.sort_by([("episode_id", "ascending")])
        counts = pc.value_counts(stats["episode_id"])
        published = pc.index_in(table["episode_id"], value_set=counts.field("values"))
        lengths = pc.fill_null(pc.take(counts.field("counts"), published), 0)
        index = schema.get_field_index("length")
        table = table.set_column(index, schema.field(index), lengths.cast(pa.int64()))
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


def manifest_of(folder: Path, known: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Return ``{relative path: {"sha256", "size"}}`` for every file except the manifest.

    ``known`` gives digests already computed (the shards'), which are not read again.
    """
    entries = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if relative == MANIFEST:
            continue
        digest = (known or {}).get(relative) or file_sha256(path)
        entries[relative] = {"sha256": digest, "size": path.stat().st_size}
    return entries


def validate_folder(folder: Path, rows_per_domain: dict[str, int], full: bool = False) -> None:
    """Check a published folder before it is swapped in; raise :class:`PublishError` if bad.

    Every shard must carry the transition schema with its ``datasets`` metadata and the
    shard row counts must add up. Every config of the card must resolve through ``datasets``
    exactly as the Hub resolves it, to exactly the shards written for it; the features
    ``datasets`` derives from the shards must decode screenshots as images, and the first row
    of every domain must decode through them. ``full=True`` also loads every config
    completely with ``load_dataset`` and checks its row count.
    """
    from datasets import Features, Image, load_dataset, load_dataset_builder

    expected = arrow_schema_of(Transition)
    shards_of: dict[str, list[Path]] = {}
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
        shards_of[domain] = shards
    # The parquet builder takes its features from the first shard's schema; every shard was
    # just checked to carry ``expected``, so these are the features of every config.
    features = Features.from_arrow_schema(expected)
    if not isinstance(features["observation"]["screenshot"], Image):
        raise PublishError("screenshots do not decode as images")
    # A private cache (datasets caches local folders by name, and leaves lock files behind),
    # named after ``folder`` so that a killed run's leftover sweep finds it.
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f"{folder.name}-cache-") as cache:
        for config in [ALL_CONFIG, *rows_per_domain]:
            want = sorted(
                path.resolve()
                for domain, shards in shards_of.items()
                if config in (ALL_CONFIG, domain)
                for path in shards
            )
            # Resolving the card's data_files is what the Hub does; reading rows through a
            # streamed load_dataset per config cost about 0.1 s each and checked less.
            builder = load_dataset_builder(str(folder), config, cache_dir=cache)
            resolved = {
                split: sorted(Path(f).resolve() for f in files)
                for split, files in (builder.config.data_files or {}).items()
            }
            if resolved != {"train": want}:
                raise PublishError(
                    f"config {config}: datasets resolves {resolved}, not the train split {want}"
                )
            if full:
                dataset = load_dataset(str(folder), config, split="train", cache_dir=cache)
                rows, loaded = dataset.num_rows, dataset.features
                want_rows = sum(pq.ParquetFile(path).metadata.num_rows for path in want)
                if rows != want_rows:
                    raise PublishError(
                        f"config {config}: datasets reads {rows} rows, not {want_rows}"
                    )
                if loaded != features:
                    raise PublishError(f"config {config}: datasets loads other features")
    for shards in shards_of.values():
        if shards:
            _decode_first_row(shards[0], features)


def _decode_first_row(shard: Path, features: Any) -> None:
    """Decode the first row of ``shard`` with the ``datasets`` features, images included."""
    batch = next(pq.ParquetFile(shard).iter_batches(batch_size=1), None)
    if batch is None:
        return
    try:
        row = features.decode_example(batch.to_pylist()[0])
        pending: list[Any] = [row]
        while pending:
            value = pending.pop()
            if isinstance(value, dict):
                pending.extend(value.values())
            elif hasattr(value, "load"):  # a PIL image: decode its pixels, not just the header
                value.load()
    except Exception as error:
        raise PublishError(f"{shard}: first row does not decode: {error!r}") from None


def foreign_files(folder: Path) -> list[str]:
    """Files in a published ``folder`` that its manifest does not list (someone else's)."""
    manifest = folder / MANIFEST
    try:
        written = set(json.loads(manifest.read_text()))
    except (OSError, ValueError):
        written = set()
    present = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}
    return sorted(present - written - {MANIFEST})


def _refuse_foreign(dest: str, foreign: Iterable[str], force: bool | None) -> None:
    listed = sorted(foreign)
    if listed and not force:
        more = f" and {len(listed) - 10} more" if len(listed) > 10 else ""
        shown = ", ".join(listed[:10]) + more
        raise PublishError(
            f"{dest} holds files that publishing did not write: {shown}. Move them out of the "
            "folder, or pass --force to replace the folder with them"
        )


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


CORPUS_FILES = ("corpus.json", "stats.json", "episodes.parquet", "transitions/**")
"""What publishing reads of a corpus (a remote corpus brings down only these)."""


def publish_anywhere(
    corpus: str | Path, dest: str | Path, **options: Any
) -> tuple[PublishReport, Path]:
    """:func:`publish_folder` where the corpus and the folder may be fsspec URLs.

    A remote corpus is read from its staged copy (only the files publishing reads); a remote
    folder is written in its staged copy, then uploaded: shards whose name and size are
    already there are not sent again, ``meta/manifest.json`` goes last, and files of an
    earlier version that the new one lacks are deleted after. Returns the report and the
    local folder (for an upload to the Hub).
    """
    if is_remote(corpus):
        staged_corpus = RemoteFolder(str(corpus))
        for pattern in CORPUS_FILES:
            staged_corpus.download(pattern)
        corpus_dir = staged_corpus.local
    else:
        corpus_dir = local_path(corpus)
    if not is_remote(dest):
        report = publish_folder(corpus_dir, local_path(dest), **options)
        return report, report.dest
    target = RemoteFolder(str(dest))
    remote_files = set(target.remote_files("**"))
    if remote_files:
        target.download(MANIFEST)
        manifest = target.local / MANIFEST
        written = set(json.loads(manifest.read_text())) if manifest.exists() else set()
        _refuse_foreign(str(dest), remote_files - written - {MANIFEST}, options.get("force"))
    report = publish_folder(corpus_dir, target.local, **options)
    target.upload_tree(same_size_is_same=True, last=MANIFEST)
    target.remove_extra()
    return report, target.local


def publish_folder(
    corpus_dir: Path,
    dest: Path,
    shard_size_mb: float = 500,
    licence: str | None = None,
    name: str | None = None,
    full_validation: bool = False,
    uncurated: bool = False,
    force: bool = False,
) -> PublishReport:
    """Write ``corpus_dir`` as a Hub-layout dataset folder at ``dest`` and return a report.

    Shards are cut once they reach about ``shard_size_mb`` MB of parquet. ``licence`` goes into
    the card's ``license`` field, ``name`` into its title. The folder is validated before it
    replaces ``dest`` (see :func:`validate_folder`); leftovers of a killed earlier run are
    removed first.

    A folder that ``worldtrace curate`` did not finish (no ``corpus.json``: a run directory, a
    half-curated corpus) is refused with a :class:`PublishError`, because nothing in it was
    deduplicated or scrubbed of secrets; ``uncurated=True`` publishes it anyway and the card
    says that it was not curated.

    An earlier version at ``dest`` is replaced only when every file in it was written by
    publishing (its manifest lists them): files someone added (notes, figures, another
    shard) are named in a :class:`PublishError` and kept, unless ``force`` replaces them too.
    """
    corpus_dir, dest = Path(corpus_dir), Path(dest)
    if shard_size_mb <= 0:
        raise ValueError("shard_size_mb must be positive")
    curated = CorpusLayout(corpus_dir).is_curated()
    if not curated and not uncurated:
        raise PublishError(
            f"{corpus_dir} was not curated (no corpus.json from `worldtrace curate`): nothing in "
            "it was deduplicated or scrubbed of secrets. Curate it first (`worldtrace curate "
            f"{corpus_dir} --out CORPUS`), or pass --uncurated to publish it as it is; the "
            "dataset card will say it was not curated"
        )
    if dest.exists() and any(dest.iterdir()) and not (dest / MANIFEST).exists():
        raise PublishError(f"{dest} exists and is not a published corpus: refusing to replace it")
    if (dest / MANIFEST).exists():
        _refuse_foreign(str(dest), foreign_files(dest), force)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(dest)
    temp = dest.parent / f".{dest.name}{_TEMP_MARK}{os.getpid()}"
    temp.mkdir()
    try:
        written = _write_transitions(corpus_dir, temp, int(shard_size_mb * 1024 * 1024))
        shards, rows = written.shards, written.rows
        episodes = _write_episodes(corpus_dir, temp, written.stats)
        # A Table gives a DataFrame; pyarrow has no types here, so polars' overload cannot tell.
        summary = summarize_stats(cast(pl.DataFrame, pl.from_arrow(written.stats)))
        _write_json(temp / "meta" / "environments.json", _environments(summary))
        _write_json(temp / SCHEMA_FILE, schema_document())
        stats = corpus_dir / "stats.json"
        if stats.exists():
            shutil.copyfile(stats, temp / "meta" / "curation_stats.json")
        usage = usage_totals(str(temp / "meta" / "episodes.parquet"))
        card = render_card(
            summary, shards, licence=licence, name=name, curated=curated, usage=usage
        )
        (temp / "README.md").write_text(card)
        _write_json(temp / MANIFEST, manifest_of(temp, written.digests))
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
