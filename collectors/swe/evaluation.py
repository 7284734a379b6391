"""Judging an swe episode: the agent's change to the package source, tested where it cannot reach.

The episode's sandbox belongs to the agent: its repository, its git history (``HEAD`` is
whatever the agent last committed), its ``/tmp``, the processes it left running. Nothing there
may decide the reward. So the evaluation

1. starts a fresh sandbox (the *judge*) from the episode's image (by id, so a rebuilt tag does
   not change the world), with the episode's limits and no network, and applies the task's
   bug patch there: the tree the agent started from, built from the image alone;
2. reads the *source under test* of both trees from the engine (``docker cp``; nothing in
   either sandbox runs to produce it, so nothing the agent wrote can answer for it);
3. takes the agent's change as the difference of the two (:func:`agent_change`): files the agent
   changed, added or removed inside the repository's packages, but never a test file or a
   pytest configuration file (:func:`is_test_path`), never anything outside the packages
   (an untracked ``pytest.py`` or plugin-named module at the top, ``.git``, ``/tmp``), and only
   regular files (a symbolic link could point the judge's writes into the tests);
4. writes that change into the judge's repository and runs the task's tests there with the
   image's runner, its outcomes plugin from the root-owned venv, ``PYTHONSAFEPATH`` (the
   working folder never comes before pytest or the plugin on ``sys.path``) and no user site.

The rule of what counts as the agent's change is :func:`is_source_path`. What it leaves out is
not held against the agent: a fix plus a ``conftest.py`` that flips failures scores as the fix
alone. The tests, their configuration and the rest of the repository are the image's, so
pytest's rootdir, ini file and conftest files are the pristine ones too.

What this cannot rule out: the source under test runs inside the test process, so a change to
it that rewrites pytest's results from within (monkeypatching the framework on import) is still
a change to the source under test. It is recorded in the episode (every edit is a step) for
curation to find; no file outside the package can do it any more.
"""

from __future__ import annotations

import io
import posixpath
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import docker.errors

from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.errors import SandboxError

Files = dict[str, tuple[int, bytes]]
"""Regular files of a tree by path relative to the repository: ``(mode, content)``."""

TEST_CONFIGURATION = frozenset(
    {"conftest.py", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"}
)
"""File names that decide how pytest runs wherever they are (pytest takes the first ini file
above the tests, and a ``conftest.py`` in any folder it passes)."""
SOURCE_LIMIT_BYTES = 64 << 20
"""Most bytes of the packages' archive read from one tree; more is not a plausible source fix."""
REPO_UID = 1000
"""The owner of the repository's files (the image's ``user``)."""


class SourceTooLarge(ValueError):
    """The agent's package folders hold more than :data:`SOURCE_LIMIT_BYTES`."""


def is_test_path(path: str, test_paths: Iterable[str]) -> bool:
    """Whether ``path`` (relative to the repository) is a test file or pytest configuration.

    Test files: anything under one of the repository's test folders (``repo.json``'s
    ``test_paths``), and ``test_*.py``, ``*_test.py`` anywhere. Configuration: every name of
    :data:`TEST_CONFIGURATION`, anywhere.
    """
    name = posixpath.basename(path)
    if name in TEST_CONFIGURATION:
        return True
    if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
        return True
    for folder in test_paths:
        folder = folder.strip("/")
        if folder in ("", "."):
            continue  # tests beside the sources: their names say which they are
        if path == folder or path.startswith(folder + "/"):
            return True
    return False


def source_packages(tracked: Iterable[str], source_root: str) -> tuple[str, ...]:
    """The importable top-level packages and modules under ``source_root``, as committed.

    A package is a folder directly under the source root whose ``__init__.py`` the pristine
    commit holds; a module is a ``.py`` file directly there (but ``setup.py`` and test files).
    Returned as paths relative to the repository (``toolz``, ``src/click``), sorted.
    """
    root = "" if source_root.strip("/") in ("", ".") else source_root.strip("/") + "/"
    found: set[str] = set()
    for path in tracked:
        if not path.startswith(root):
            continue
        parts = path[len(root) :].split("/")
        package = len(parts) == 2 and parts[1] == "__init__.py" and parts[0].isidentifier()
        module = (
            len(parts) == 1
            and parts[0].endswith(".py")
            and parts[0][:-3].isidentifier()
            and parts[0] != "setup.py"
            and not is_test_path(parts[0], ())
        )
        if package or module:
            found.add(root + parts[0])
    return tuple(sorted(found))


def is_source_path(path: str, packages: Iterable[str], test_paths: Iterable[str]) -> bool:
    """Whether a change of ``path`` is part of the agent's change to the source under test.

    It must lie in one of the ``packages`` (:func:`source_packages`) and not be a test file or
    pytest configuration (:func:`is_test_path`).
    """
    inside = any(path == package or path.startswith(package + "/") for package in packages)
    return inside and not is_test_path(path, test_paths)


@dataclass(frozen=True)
class Change:
    """The agent's change to the source under test, as applied in the judge."""

    written: Files = field(default_factory=dict)
    """Files to write: changed or added by the agent."""
    removed: tuple[str, ...] = ()
    """Pristine source files the agent removed (or replaced by something not a regular file)."""
    dropped: tuple[str, ...] = ()
    """Paths the agent changed that the rule leaves out (logged, never applied)."""


def agent_change(
    pristine: Mapping[str, tuple[int, bytes]],
    agent: Mapping[str, tuple[int, bytes]],
    packages: Iterable[str],
    test_paths: Iterable[str],
) -> Change:
    """The difference of the agent's tree from the pristine one that the evaluation applies.

    Both trees map paths to ``(mode, content)`` of regular files. Only paths that
    :func:`is_source_path` accepts are taken; a mode counts by its executable bits alone.
    """
    packages = tuple(packages)
    test_paths = tuple(test_paths)
    written: Files = {}
    dropped: list[str] = []
    for path in sorted(agent):
        mode, content = agent[path]
        before = pristine.get(path)
        if (
            before is not None
            and before[1] == content
            and _exec_bits(before[0]) == _exec_bits(mode)
        ):
            continue
        if is_source_path(path, packages, test_paths):
            written[path] = (0o755 if _exec_bits(mode) else 0o644, content)
        else:
            dropped.append(path)
    removed: list[str] = []
    for path in sorted(set(pristine) - set(agent)):
        if is_source_path(path, packages, test_paths):
            removed.append(path)
        else:
            dropped.append(path)
    return Change(written=written, removed=tuple(removed), dropped=tuple(sorted(dropped)))


def _exec_bits(mode: int) -> bool:
    return bool(mode & 0o111)


class _Chunks(io.RawIOBase):
    """A readable stream over the engine's archive chunks that stops past ``limit`` bytes."""

    def __init__(self, chunks: Iterator[bytes], limit: int) -> None:
        self._chunks = chunks
        self._buffer = b""
        self._read = 0
        self._limit = limit

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
            self._read += len(self._buffer)
            if self._read > self._limit:
                raise SourceTooLarge(f"the package folders hold more than {self._limit} bytes")
        size = min(len(target), len(self._buffer))
        target[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


def read_packages(
    sandbox: DockerSandbox,
    repository: str,
    packages: Iterable[str],
    limit_bytes: int = SOURCE_LIMIT_BYTES,
) -> Files:
    """The regular files of ``packages`` in ``sandbox``'s repository, read through the engine.

    A package that is missing or is a symbolic link contributes nothing (its files count as
    removed); symbolic links, devices and folders inside are skipped; a hard link counts as
    the file it links to. More than ``limit_bytes`` of archive in all is :class:`SourceTooLarge`.
    """
    files: Files = {}
    budget = limit_bytes
    for package in packages:
        path = posixpath.join(repository, package)
        try:
            chunks, stat = sandbox.container.get_archive(path)
        except docker.errors.NotFound:
            continue
        except docker.errors.APIError as error:
            raise SandboxError(f"cannot read {path} from the sandbox: {error}") from None
        if stat.get("linkTarget"):
            continue
        stream = _Chunks(iter(chunks), budget)
        parent = posixpath.dirname(package)
        with tarfile.open(fileobj=io.BufferedReader(stream), mode="r|") as archive:
            for member in archive:
                name = posixpath.normpath(member.name)
                if name.startswith(("/", "../")) or name == "..":
                    continue
                relative = posixpath.join(parent, name) if parent else name
                if member.isfile():
                    handle = archive.extractfile(member)
                    if handle is not None:
                        files[relative] = (member.mode, handle.read())
                elif member.islnk():
                    target = posixpath.normpath(member.linkname)
                    linked = files.get(posixpath.join(parent, target) if parent else target)
                    if linked is not None:
                        files[relative] = linked
        budget -= stream._read
    return files


def change_archive(change: Change) -> bytes:
    """A tar of the change's written files (and their folders), owned by the repository's user."""
    buffer = io.BytesIO()
    folders: set[str] = set()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, (mode, content) in sorted(change.written.items()):
            parent = posixpath.dirname(path)
            missing: list[str] = []
            while parent and parent not in folders:
                missing.append(parent)
                folders.add(parent)
                parent = posixpath.dirname(parent)
            for folder in reversed(missing):
                info = tarfile.TarInfo(folder)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                info.uid = info.gid = REPO_UID
                archive.addfile(info)
            info = tarfile.TarInfo(path)
            info.size = len(content)
            info.mode = mode
            info.uid = info.gid = REPO_UID
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


__all__ = [
    "SOURCE_LIMIT_BYTES",
    "TEST_CONFIGURATION",
    "Change",
    "Files",
    "SourceTooLarge",
    "agent_change",
    "change_archive",
    "is_source_path",
    "is_test_path",
    "read_packages",
    "source_packages",
]
