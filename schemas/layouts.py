"""The three folders worldtrace writes — a run, a curated corpus, a published dataset.

One module owns where everything is and which layout version a folder is in, as LeRobot's
dataset metadata does for its format. Each folder carries a small manifest with its layout
version; reading a folder written by a newer or older worldtrace whose layout differs is a
:class:`LayoutError` that says so, never a wrong read. Folders written before versions were
recorded are layout version 1, which is the current one.

A run (``worldtrace collect``)::

    run.json                                 RunManifest: the config it was started with
    raw/partial/<episode>.jsonl              episodes being recorded (schemas/raw.py)
    raw/episodes/<episode>.jsonl             sealed episodes
    raw/interrupted/<episode>.<n>.jsonl      attempts that never finished
    transitions/<domain>/part-NNNNN.parquet  Transition rows (from `worldtrace normalize`)
    episodes.parquet                         Episode rows
    quarantine.jsonl                         raw episodes that could not be normalized

A corpus (``worldtrace curate``)::

    corpus.json                              CorpusManifest: curated, from which inputs
    transitions/<domain>/*.parquet, episodes.parquet, quarantine.jsonl, stats.json
    .curation/                               datatrove's work (logs, signatures, …)

A published dataset (``worldtrace publish``), the Hugging Face Hub layout::

    README.md                                dataset card, one config per domain + all
    data/<domain>/train-XXXXX-of-YYYYY-<fingerprint>.parquet
    meta/episodes.parquet, meta/environments.json, meta/schema.json (with the layout
    version), meta/curation_stats.json, meta/manifest.json
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldtrace.schemas.errors import InputError

LAYOUT_VERSION = 1
"""The layout this worldtrace writes and reads."""


class LayoutError(InputError):
    """A folder that is not the layout expected, or in another layout version."""


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    layout_version: int = Field(default=LAYOUT_VERSION, ge=1)


class RunManifest(_Manifest):
    """``run.json``: what a run was started with (checked again when it resumes)."""

    layout: Literal["run"] = "run"
    config: dict[str, Any] = Field(description="the collection config that defines the run")
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class CorpusManifest(_Manifest):
    """``corpus.json``: a folder ``worldtrace curate`` finished, and what went into it."""

    layout: Literal["corpus"] = "corpus"
    curated: bool = True
    inputs: list[str] = Field(default_factory=list, description="the folders curated into it")


def _check_version(kind: str, version: int, where: Path | str) -> None:
    if version > LAYOUT_VERSION:
        raise LayoutError(
            f"{where} is a {kind} in layout version {version}, newer than this worldtrace "
            f"reads ({LAYOUT_VERSION}): upgrade worldtrace to read it"
        )
    if version < LAYOUT_VERSION:
        raise LayoutError(
            f"{where} is a {kind} in layout version {version}, older than this worldtrace "
            f"reads ({LAYOUT_VERSION}): make it again with this version"
        )


M = TypeVar("M", bound=_Manifest)


def parse_manifest(text: str, model: type[M], kind: str, where: str) -> M:
    """Parse a manifest's JSON ``text`` read from ``where`` (a path or URL), version checked.

    Raises :class:`LayoutError` for invalid JSON, another layout version or a bad field.
    """
    try:
        data = json.loads(text)
    except ValueError as error:
        raise LayoutError(f"{where} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise LayoutError(f"{where} must hold a JSON object")
    _check_version(kind, int(data.get("layout_version") or 1), where)
    try:
        # Manifests written before versions existed carry neither version nor kind.
        return model.model_validate({"layout_version": 1, **data})
    except ValidationError as error:
        raise LayoutError(f"{where} is not a {kind} manifest: {error}") from None


def _read_manifest(path: Path, model: type[M], kind: str) -> M:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LayoutError(f"{path.parent} is not a {kind} (no {path.name})") from None
    return parse_manifest(text, model, kind, str(path))


def write_json_atomically(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` through a renamed temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def _domain_files(folder: Path) -> dict[str, list[Path]]:
    if not folder.is_dir():
        return {}
    return {
        domain.name: files
        for domain in sorted(folder.iterdir())
        if domain.is_dir() and (files := sorted(domain.glob("*.parquet")))
    }


@dataclass(frozen=True)
class _TransitionFolder:
    """What a run and a corpus both hold: transition shards, an episodes table, a quarantine."""

    root: Path

    @property
    def transitions(self) -> Path:
        """``transitions/<domain>/`` parquet shards."""
        return self.root / "transitions"

    @property
    def episodes_table(self) -> Path:
        """``episodes.parquet``."""
        return self.root / "episodes.parquet"

    @property
    def quarantine(self) -> Path:
        """What could not be read, and why."""
        return self.root / "quarantine.jsonl"

    def transition_files(self) -> dict[str, list[Path]]:
        """The transition shards of each domain."""
        return _domain_files(self.transitions)


@dataclass(frozen=True)
class RunLayout(_TransitionFolder):
    """A run directory.

    The names relative to the run (``MANIFEST``, ``PARTIAL``, ``SEALED``, ``INTERRUPTED``) are
    for what addresses a run's files by relative name, such as a remote run's staged copy
    (:class:`worldtrace.schemas.storage.RemoteFolder`); :meth:`relative` turns a path of the
    layout into one.
    """

    MANIFEST: ClassVar[str] = "run.json"
    PARTIAL: ClassVar[str] = "raw/partial"
    SEALED: ClassVar[str] = "raw/episodes"
    INTERRUPTED: ClassVar[str] = "raw/interrupted"

    @property
    def manifest(self) -> Path:
        """``run.json``."""
        return self.root / self.MANIFEST

    @property
    def partial(self) -> Path:
        """Episodes being recorded."""
        return self.root / self.PARTIAL

    @property
    def sealed(self) -> Path:
        """Sealed episodes."""
        return self.root / self.SEALED

    @property
    def interrupted(self) -> Path:
        """Attempts that never finished."""
        return self.root / self.INTERRUPTED

    @property
    def normalizing(self) -> Path:
        """``.normalize-tmp/``: a normalization being written, swapped in when complete."""
        return self.root / ".normalize-tmp"

    def sealed_episode(self, episode_id: str) -> Path:
        """Where episode ``episode_id`` is once sealed."""
        return self.sealed / f"{episode_id}.jsonl"

    def relative(self, path: Path) -> str:
        """``path`` (in this run) as a name relative to the run, with ``/`` separators."""
        return path.relative_to(self.root).as_posix()

    def read_manifest(self) -> RunManifest:
        """Return ``run.json``; :class:`LayoutError` if absent, malformed or another version."""
        return _read_manifest(self.manifest, RunManifest, "run directory")

    def read_config(self) -> dict[str, Any]:
        """The configuration the run was started with (``run.json``'s ``config``).

        Raises :class:`LayoutError` when there is no readable manifest.
        """
        return self.read_manifest().config


@dataclass(frozen=True)
class CorpusLayout(_TransitionFolder):
    """A curated corpus folder."""

    @property
    def manifest(self) -> Path:
        """``corpus.json``, written when curation finished."""
        return self.root / "corpus.json"

    @property
    def stats(self) -> Path:
        """``stats.json``."""
        return self.root / "stats.json"

    @property
    def work(self) -> Path:
        """``.curation/``: datatrove's logs, signatures and what a resume must match."""
        return self.root / ".curation"

    def is_curated(self) -> bool:
        """Whether ``worldtrace curate`` finished this folder (it writes the manifest last)."""
        return self.manifest.is_file() and self.read_manifest().curated

    def read_manifest(self) -> CorpusManifest:
        """Return ``corpus.json``; :class:`LayoutError` if absent, malformed or another version."""
        return _read_manifest(self.manifest, CorpusManifest, "corpus")

    def write_manifest(self, inputs: list[str]) -> None:
        """Mark the corpus curated from ``inputs`` (the last thing curation writes)."""
        manifest = CorpusManifest(inputs=inputs)
        write_json_atomically(self.manifest, manifest.model_dump(mode="json"))


@dataclass(frozen=True)
class PublishedLayout:
    """A published dataset folder (the Hugging Face Hub layout)."""

    root: Path

    @property
    def card(self) -> Path:
        """``README.md``, the dataset card."""
        return self.root / "README.md"

    @property
    def data(self) -> Path:
        """``data/<domain>/`` parquet shards."""
        return self.root / "data"

    @property
    def meta(self) -> Path:
        """``meta/``."""
        return self.root / "meta"

    @property
    def episodes_table(self) -> Path:
        """``meta/episodes.parquet``."""
        return self.meta / "episodes.parquet"

    @property
    def environments(self) -> Path:
        """``meta/environments.json``."""
        return self.meta / "environments.json"

    @property
    def schema(self) -> Path:
        """``meta/schema.json``: record schema version, Arrow schema and layout version."""
        return self.meta / "schema.json"

    @property
    def curation_stats(self) -> Path:
        """``meta/curation_stats.json``."""
        return self.meta / "curation_stats.json"

    @property
    def manifest(self) -> Path:
        """``meta/manifest.json``: sha256 and size of every other file."""
        return self.meta / "manifest.json"

    def check_version(self) -> None:
        """Raise :class:`LayoutError` if the folder was published in another layout version."""
        try:
            schema = json.loads(self.schema.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            message = f"{self.root} is not a published dataset (no readable {self.schema.name})"
            raise LayoutError(message) from None
        _check_version("published dataset", int(schema.get("layout_version") or 1), self.root)

    def transition_files(self) -> dict[str, list[Path]]:
        """The data shards of each domain."""
        return _domain_files(self.data)


Layout = RunLayout | CorpusLayout | PublishedLayout


def open_layout(path: Path) -> Layout:
    """Recognise the folder at ``path`` and check its layout version.

    A folder with ``meta/schema.json`` (or ``data/``) is a published dataset, one with
    ``run.json`` a run,
    one with ``corpus.json`` (or, written before corpora had manifests, ``transitions/``
    and no ``run.json``) a corpus. Anything else is a :class:`LayoutError`.
    """
    root = Path(path)
    if not root.is_dir():
        raise LayoutError(f"{root} does not exist or is not a folder")
    published = PublishedLayout(root)
    if published.schema.is_file():
        published.check_version()
        return published
    if published.data.is_dir():  # a Hub folder written without worldtrace's meta/
        return published
    run = RunLayout(root)
    if run.manifest.is_file():
        run.read_manifest()
        return run
    corpus = CorpusLayout(root)
    if corpus.manifest.is_file():
        corpus.read_manifest()
        return corpus
    if corpus.transitions.is_dir():
        return corpus
    raise LayoutError(
        f"{root} is neither a run (run.json), a corpus (corpus.json) nor a published dataset "
        "(meta/schema.json)"
    )


def transition_glob(path: Path) -> str:
    """One glob matching every transition shard of a run, corpus or published folder.

    For readers that expand globs themselves (one polars scan over every shard).
    """
    layout = open_layout(path)
    folder = layout.data if isinstance(layout, PublishedLayout) else layout.transitions
    return str(folder / "*" / "*.parquet")


def transition_files(path: Path) -> dict[str, list[Path]]:
    """The transition parquet files of each domain in a run, corpus or published folder.

    Raises :class:`LayoutError` when the folder holds none.
    """
    layout = open_layout(path)
    files = layout.transition_files()
    if not files:
        raise LayoutError(f"{path} holds no transition parquet files")
    return files
