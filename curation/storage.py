"""Where curation reads and writes: datatrove's ``DataFolder`` over any fsspec URL.

Every file curation touches — the input shards, its work folders, tallies, quarantine,
validation verdicts, the written corpus, its episodes table, stats and manifest — goes through
a :class:`~datatrove.io.DataFolder`, so a corpus can be read from and written to any fsspec
URL (``s3://``, ``hf://``, ``file://``, ``memory://``) as well as a local path. On the local
filesystem small files are written to a temporary name and renamed (a killed run never leaves
half a file); object stores write an object at once, so there they are written directly.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeAlias

from datatrove.io import DataFolder, get_datafolder
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem

Location: TypeAlias = str | Path | DataFolder
"""A local path, an fsspec URL, or a ``DataFolder``."""


def as_folder(location: Location) -> DataFolder:
    """Return the folder at ``location``; a local path (or ``file://`` URL) is made absolute."""
    if isinstance(location, DataFolder):
        return location
    fs, path = url_to_fs(str(location))
    if isinstance(fs, LocalFileSystem):
        path = os.path.abspath(path)
    return get_datafolder((path, fs))


def subfolder(folder: DataFolder, name: str) -> DataFolder:
    """Return the folder ``name`` inside ``folder``, on the same filesystem."""
    return DataFolder(folder._join(name), fs=folder.fs)


def local_path(folder: DataFolder) -> Path | None:
    """The folder as a local path, or ``None`` when it is on another filesystem."""
    return Path(folder.path) if folder.is_local() else None


def describe(folder: DataFolder, name: str = "") -> str:
    """A path or URL naming ``folder`` (or a file in it) in messages and manifests."""
    full = folder._join(name) if name else folder.path
    if folder.is_local():
        # a root-level data folder joins with a double slash: "//tmp/x" is "/tmp/x"
        return "/" + os.path.normpath(full).lstrip("/")
    return str(folder.fs.unstrip_protocol(full))


def write_text(folder: DataFolder, name: str, text: str) -> None:
    """Write ``text`` to ``name`` in ``folder``; on a local disk through a renamed temporary."""
    if not folder.is_local():
        with folder.open(name, "w", encoding="utf-8") as handle:
            handle.write(text)
        return
    target = Path(folder._join(name))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def write_json(folder: DataFolder, name: str, data: Any) -> None:
    """Write ``data`` as indented, sorted JSON to ``name`` in ``folder`` (as :func:`write_text`)."""
    write_text(folder, name, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def read_text(folder: DataFolder, name: str) -> str | None:
    """Return the text of ``name`` in ``folder``, or ``None`` if there is no such file."""
    try:
        with folder.open(name, "r", encoding="utf-8") as handle:
            text: str = handle.read()
    except FileNotFoundError:
        return None
    return text


def write_bytes_file(folder: DataFolder, name: str, write: Any) -> None:
    """Call ``write(handle)`` on a binary handle for ``name``; atomic on a local disk."""
    if not folder.is_local():
        with folder.open(name, "wb") as handle:
            write(handle)
        return
    target = Path(folder._join(name))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with tmp.open("wb") as handle:
        write(handle)
    os.replace(tmp, target)


def scan_parquet(folder: DataFolder, files: list[str]) -> Any:
    """A polars ``LazyFrame`` over ``files`` in ``folder``.

    Local files are scanned in place (projection and predicates pushed down); files on
    another filesystem are read through fsspec one at a time, which polars' own object-store
    readers cannot do for every fsspec protocol (``memory://``).
    """
    import polars as pl

    if folder.is_local():
        return pl.scan_parquet([folder._join(name) for name in files])
    frames = []
    for name in files:
        with folder.open(name, "rb") as handle:
            frames.append(pl.read_parquet(handle).lazy())
    return pl.concat(frames, how="vertical_relaxed")
