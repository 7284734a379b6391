"""Folders that live on any fsspec filesystem, worked on through a local copy.

Runs, corpora and published folders may be a local path or an fsspec URL (``s3://``,
``sftp://``, ``gs://``, ``hf://`` …) that every worker can reach. Curation reads and writes
URLs directly (datatrove's ``DataFolder``); a run and a published folder are written through a
*staged* local copy instead, because the recorder's durability rests on local files (append,
fsync, atomic rename) that object stores do not have. :class:`RemoteFolder` pairs a URL with
its staging folder, ``$WORLDTRACE_STAGING_HOME`` (default ``$XDG_CACHE_HOME/worldtrace/staging``)
``/<sha256 of the parent URL, 16 hex>/<folder name>``, so the same URL always stages in the same
place and the folder keeps its name (a run directory is named after its run).

Files go up under a temporary name and are then moved into place, so a reader (or a killed
upload) never sees half a file at its real name. Credentials are fsspec's business: its
config files, its ``FSSPEC_<PROTOCOL>_<ARG>`` environment variables, or the protocol's own
(``~/.aws``, ``~/.ssh``, ``HF_TOKEN``); nothing here stores any.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterable
from pathlib import Path

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from worldtrace.schemas.errors import InputError


def is_remote(location: str | Path) -> bool:
    """Whether ``location`` names a filesystem other than this machine's."""
    text = str(location)
    if "://" not in text:
        return False
    return not isinstance(_filesystem(text)[0], LocalFileSystem)


def _filesystem(url: str) -> tuple[AbstractFileSystem, str]:
    """The filesystem of ``url`` and the path on it; a clear error when fsspec cannot open it."""
    try:
        return url_to_fs(url)
    except (ImportError, ValueError) as error:
        raise InputError(
            f"cannot open {url}: {error} (a protocol of fsspec's, with its library installed: "
            "s3fs for s3://, gcsfs for gs://, paramiko for sftp://, huggingface_hub for hf://)"
        ) from None


def local_path(location: str | Path) -> Path:
    """A local location as a path (a ``file://`` URL loses its scheme)."""
    text = str(location)
    return Path(url_to_fs(text)[1]) if "://" in text else Path(text)


NAME_MAX = 255
"""Longest file or folder name (bytes) the filesystems we write to accept."""


def check_writable_folder(path: Path, what: str) -> None:
    """Raise :class:`InputError` unless a folder at ``path`` can be created and written.

    Checked before any work starts, so that a path that can never hold ``what`` (a file in
    the way, a name too long, a read-only or virtual filesystem such as ``/proc``, a folder
    the user may not write) is one clear error rather than a traceback after the run began.
    """
    too_long = [part for part in path.parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long:
        raise InputError(
            f"{what} {path}: the name {too_long[0][:40]}… is longer than {NAME_MAX} bytes"
        )
    existing = path
    while not existing.exists():
        if existing.is_symlink():  # a dangling link: mkdir would fail on it
            raise InputError(f"{what} {path}: {existing} is a broken link")
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{what} {path}: {existing} is a file, not a folder")
    stats = os.statvfs(existing)
    if stats.f_blocks == 0:  # proc, sysfs, cgroup: nothing written there is kept
        raise InputError(f"{what} {path}: {existing} is on a virtual filesystem")
    if stats.f_flag & os.ST_RDONLY:
        raise InputError(f"{what} {path}: {existing} is on a read-only filesystem")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{what} {path}: {existing} is not writable by this user")


def check_persistent(location: str) -> None:
    """Raise :class:`InputError` when ``location`` is a filesystem that forgets (``memory://``).

    A run, corpus or published folder must outlive the process that writes it.
    """
    if "://" in location and isinstance(_filesystem(location)[0], MemoryFileSystem):
        raise InputError(f"{location} is in this process's memory: it is lost when it exits")


def join(location: str | Path, name: str) -> str:
    """``name`` inside the folder at ``location`` (a path or a URL), as text."""
    return (
        f"{str(location).rstrip('/')}/{name}"
        if "://" in str(location)
        else str(Path(location) / name)
    )


def staging_root() -> Path:
    """Where staged copies of remote folders live on this machine."""
    configured = os.environ.get("WORLDTRACE_STAGING_HOME")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "worldtrace" / "staging"


class RemoteFolder:
    """A folder at an fsspec URL and its staged local copy."""

    def __init__(self, url: str) -> None:
        fs, root = _filesystem(url)
        self.url = url.rstrip("/")
        self.fs: AbstractFileSystem = fs
        self.root = root.rstrip("/")
        parent, _, name = self.url.rpartition("/")
        if not name:
            raise InputError(f"{url} names no folder")
        digest = hashlib.sha256(parent.encode()).hexdigest()[:16]
        self.local = staging_root() / digest / name

    def _remote(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def remote_files(self, pattern: str) -> dict[str, int]:
        """Files under the remote folder matching the relative glob ``pattern``, with sizes."""
        found = self.fs.glob(self._remote(pattern), detail=True)
        return {
            path[len(self.root) + 1 :]: int(info.get("size") or 0)
            for path, info in found.items()
            if info.get("type") == "file"
        }

    def exists(self, relative: str) -> bool:
        """Whether the remote folder has the file ``relative``."""
        return bool(self.fs.exists(self._remote(relative)))

    def download(self, pattern: str) -> list[str]:
        """Bring remote files matching ``pattern`` that the local copy lacks or holds otherwise.

        The remote copy wins: a local file of another size is replaced. Returns what was
        fetched (relative paths).
        """
        fetched = []
        for relative, size in sorted(self.remote_files(pattern).items()):
            target = self.local / relative
            if target.is_file() and target.stat().st_size == size:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
            self.fs.get_file(self._remote(relative), str(partial))
            os.replace(partial, target)
            fetched.append(relative)
        return fetched

    def upload(self, relative: str, overwrite: bool = True) -> bool:
        """Put the local file ``relative`` at its place in the remote folder.

        With ``overwrite`` false an existing remote file is kept (a sealed episode is never
        replaced). Returns whether the file was written.
        """
        destination = self._remote(relative)
        if not overwrite and self.fs.exists(destination):
            return False
        parent = destination.rpartition("/")[0]
        self.fs.makedirs(parent, exist_ok=True)
        temporary = f"{parent}/.{relative.rpartition('/')[2]}.{uuid.uuid4().hex}.part"
        self.fs.put_file(str(self.local / relative), temporary)
        if overwrite and self.fs.exists(destination):
            self.fs.rm_file(destination)  # sftp's rename does not replace a file
        self.fs.mv(temporary, destination)
        return True

    def local_files(self) -> list[str]:
        """The files of the local copy (relative paths, sorted), without unfinished downloads."""
        return sorted(
            path.relative_to(self.local).as_posix()
            for path in self.local.rglob("*")
            if path.is_file() and not path.name.endswith(".part")
        )

    def upload_tree(
        self,
        exclude: Iterable[str] = (),
        keep_existing: Iterable[str] = (),
        same_size_is_same: bool = False,
        last: str | None = None,
    ) -> int:
        """Upload the local copy's files, except those under ``exclude`` prefixes; return the count.

        Files under ``keep_existing`` prefixes are uploaded only when the remote lacks them.
        With ``same_size_is_same`` a remote file of the local file's size is taken as the same
        (for files named after their content, like published shards). ``last`` goes up after
        every other file (the manifest a reader trusts).
        """
        excluded, kept = tuple(exclude), tuple(keep_existing)
        remote = self.remote_files("**") if same_size_is_same else {}
        files = [name for name in self.local_files() if not name.startswith(excluded)]
        if last in files:
            files = [name for name in files if name != last] + [last]
        written = 0
        for relative in files:
            if remote.get(relative) == (self.local / relative).stat().st_size:
                continue
            written += self.upload(relative, overwrite=not relative.startswith(kept))
        return written

    def remove_extra(self) -> int:
        """Delete the remote files the local copy does not have; return the count."""
        extra = sorted(set(self.remote_files("**")) - set(self.local_files()))
        for relative in extra:
            self.fs.rm_file(self._remote(relative))
        return len(extra)


__all__ = ["RemoteFolder", "is_remote", "join", "local_path", "staging_root"]
