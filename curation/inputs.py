"""The runs and corpora one curation reads, from paths, folders of runs and globs.

A source given to ``worldtrace curate`` is one of:

* a run directory (``run.json``) or a corpus (``corpus.json``, or a bare ``transitions/``
  folder as written before corpora had manifests) — see :mod:`worldtrace.schemas.layouts`;
* a folder that is neither but holds runs or corpora one level down (``runs/``): each of them;
* a glob (``runs/terminal-*``): every folder it matches, each read as above.

Any of these may be a local path or an fsspec URL. A source that holds no run or corpus, a
published dataset, or a run not normalized yet is an :class:`InputError` naming it. The same
folder named twice is read once.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from glob import has_magic
from pathlib import Path
from typing import Literal

from datatrove.io import DataFolder
from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

from worldtrace.curation.storage import describe
from worldtrace.schemas.errors import InputError
from worldtrace.schemas.layouts import (
    CorpusLayout,
    CorpusManifest,
    PublishedLayout,
    RunLayout,
    RunManifest,
    parse_manifest,
)

# The names inside a run, corpus and published folder, as the layouts module defines them.
_HERE = Path()
RUN_MANIFEST = RunLayout(_HERE).manifest.as_posix()
CORPUS_MANIFEST = CorpusLayout(_HERE).manifest.as_posix()
TRANSITIONS = RunLayout(_HERE).transitions.as_posix()
EPISODES_TABLE = RunLayout(_HERE).episodes_table.as_posix()
PUBLISHED_MARKS = (PublishedLayout(_HERE).schema.as_posix(), PublishedLayout(_HERE).data.as_posix())
SHARDS_GLOB = "*/*.parquet"
"""Transition shards inside ``transitions/``: ``<domain>/<name>.parquet``."""


@dataclass(frozen=True)
class CurationInput:
    """One run or corpus read by a curation."""

    url: str
    """The folder as recorded in the corpus manifest: an absolute path or an fsspec URL."""
    kind: Literal["run", "corpus"]
    folder: DataFolder
    shards: tuple[str, ...]
    """Its transition shards, relative to ``folder`` (``transitions/<domain>/<name>.parquet``)."""
    has_episodes: bool
    """Whether it has an ``episodes.parquet``."""


def _check_manifest(fs: AbstractFileSystem, path: str, kind: Literal["run", "corpus"]) -> None:
    """Read a run's or corpus's manifest and check its layout version, as the layouts do."""
    with fs.open(path, "r", encoding="utf-8") as handle:
        text = handle.read()
    model = RunManifest if kind == "run" else CorpusManifest
    parse_manifest(text, model, kind, path)


def _kind(fs: AbstractFileSystem, path: str) -> Literal["run", "corpus", "published"] | None:
    """What the folder at ``path`` is (checking its manifest), or ``None``."""
    join = posixpath.join
    if any(fs.exists(join(path, mark)) for mark in PUBLISHED_MARKS):
        return "published"
    if fs.isfile(join(path, RUN_MANIFEST)):
        _check_manifest(fs, join(path, RUN_MANIFEST), "run")
        return "run"
    if fs.isfile(join(path, CORPUS_MANIFEST)):
        _check_manifest(fs, join(path, CORPUS_MANIFEST), "corpus")
        return "corpus"
    if fs.isdir(join(path, TRANSITIONS)):
        return "corpus"
    return None


def _url(fs: AbstractFileSystem, path: str) -> str:
    return describe(DataFolder(path, fs=fs))


def _open(fs: AbstractFileSystem, path: str, kind: Literal["run", "corpus"]) -> CurationInput:
    folder = DataFolder(path, fs=fs)
    url = describe(folder)
    if not folder.isdir(TRANSITIONS):
        raise InputError(
            f"the run {url} has no transitions yet: run `worldtrace normalize {url}` first"
        )
    shards = tuple(folder.list_files(subdirectory=TRANSITIONS, glob_pattern=SHARDS_GLOB))
    return CurationInput(url, kind, folder, shards, folder.isfile(EPISODES_TABLE))


def _expand_folder(
    fs: AbstractFileSystem, path: str, source: str, output: str | None
) -> list[CurationInput]:
    """The folder itself if it is a run or corpus, else the runs and corpora directly in it.

    The corpus being written (``output``) is never one of its own inputs: named, it is an
    error; inside a folder of runs (``curate runs/ --out runs/all``) it is passed over.
    """
    if _url(fs, path) == output:
        raise InputError(f"{source} is the output folder: a corpus cannot be its own input")
    kind = _kind(fs, path)
    if kind == "published":
        raise InputError(
            f"{source} is a published dataset; curate the runs or corpus it was published from"
        )
    if kind is not None:
        return [_open(fs, path, kind)]
    found = []
    for child in sorted(fs.ls(path, detail=False)):
        child = child.rstrip("/")
        if _url(fs, child) == output:
            continue
        if fs.isdir(child) and (child_kind := _kind(fs, child)) in ("run", "corpus"):
            found.append(_open(fs, child, child_kind))
    if not found:
        raise InputError(
            f"{source} holds no run or corpus: neither it nor a folder directly in it has "
            f"{RUN_MANIFEST}, {CORPUS_MANIFEST} or {TRANSITIONS}/"
        )
    return found


def _expand(source: str, output: str | None) -> list[CurationInput]:
    fs, path = url_to_fs(source)
    if isinstance(fs, LocalFileSystem):
        path = posixpath.normpath(str(Path(path).absolute()))
    else:
        path = path.rstrip("/")
    if has_magic(path):
        matches = [match.rstrip("/") for match in sorted(fs.glob(path))]
        folders = [m for m in matches if fs.isdir(m) and _url(fs, m) != output]
        if not folders:
            raise InputError(f"no folder matches {source}")
        return [found for m in folders for found in _expand_folder(fs, m, m, output)]
    if not fs.exists(path):
        raise InputError(f"{source} does not exist")
    if not fs.isdir(path):
        raise InputError(f"{source} is a file, not a run, a corpus or a folder of runs")
    return _expand_folder(fs, path, source, output)


def find_inputs(sources: Sequence[str | Path], output: str | None = None) -> list[CurationInput]:
    """Expand ``sources`` into the runs and corpora they name, each once, sorted by URL.

    ``output`` (a URL as :func:`~worldtrace.curation.storage.describe` gives it) is the corpus
    to be written, which is never an input. Raises :class:`InputError` for a source that
    holds none.
    """
    if not sources:
        raise InputError("give at least one run, corpus, folder of runs or glob to curate")
    inputs: dict[str, CurationInput] = {}
    for source in sources:
        for found in _expand(str(source), output):
            inputs.setdefault(found.url, found)
    # In a canonical order: the same inputs make the same corpus whatever order they are
    # given in (the first of exact duplicates is kept), and resume it.
    return sorted(inputs.values(), key=lambda found: found.url)


def shared_folder(inputs: Sequence[CurationInput]) -> tuple[DataFolder, list[str]]:
    """One folder holding every input, and every input's shards relative to it, in order.

    datatrove's readers read files relative to one data folder; inputs on different
    filesystems cannot share one and are an :class:`InputError`.
    """
    fs = inputs[0].folder.fs
    for found in inputs[1:]:
        if found.folder.fs != fs:
            raise InputError(
                f"{inputs[0].url} and {found.url} are on different filesystems: curate inputs "
                "from one filesystem (copy them first)"
            )
    roots = [found.folder.path for found in inputs]
    common = posixpath.commonpath(roots) if all(r.startswith("/") for r in roots) else ""
    if not common:  # object store paths ("bucket/x") share no root below the store's
        common = posixpath.commonprefix([r + "/" for r in roots]).rpartition("/")[0]
    root = DataFolder(common or "/", fs=fs)
    files = []
    for found in inputs:
        prefix = posixpath.relpath(found.folder.path, common) if common else found.folder.path
        for shard in found.shards:
            files.append(shard if prefix == "." else f"{prefix}/{shard}")
    return root, files
