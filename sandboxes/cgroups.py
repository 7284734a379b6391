"""A memory cap for a group of host processes: a child memory cgroup of the caller's own.

Docker caps a sandbox's memory for us; a program run on the host (the web domain's Chromium,
see ``collectors/web/browser.py``) gets its cap here. :class:`MemoryCgroup` creates a child of
this process's own memory cgroup (so whatever cap the caller already lives under still holds)
with a hard limit and no swap; every process started in it (a launcher writes its pid to
:attr:`MemoryCgroup.procs_file` before it runs the program) and all their children are counted
together. When they reach the limit the kernel's OOM killer ends one of them (the one with the
highest ``oom_score``, which in Chromium is a renderer) and counts it:
:meth:`MemoryCgroup.oom_kills` says whether the cap, and not something else, ended a process.

Both cgroup layouts are handled: the v1 ``memory`` hierarchy (``memory.limit_in_bytes``,
``memory.memsw.limit_in_bytes``, ``oom_kill`` in ``memory.oom_control``) and the v2 unified one
(``memory.max``, ``memory.swap.max``, ``oom_kill`` in ``memory.events``; the memory controller
must be enabled for children of the caller's cgroup). Creating a cgroup needs root; a machine
whose cgroups are not writable gets :class:`MemoryCapError` saying so.

Groups are named ``worldtrace-<kind>-<pid>-<n>`` after the process that made them: a group left
behind by a process that was SIGKILLed is removed by the next one that creates a group of the
same kind beside it (:func:`remove_stale`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from worldtrace.sandboxes.owners import pid_alive
from worldtrace.schemas.errors import SetupError

_counter = itertools.count()


class MemoryCapError(SetupError, RuntimeError):
    """No memory cgroup can be made here; the message says why and what is needed."""


@dataclass(frozen=True)
class _Hierarchy:
    version: int
    """1: the v1 ``memory`` hierarchy, 2: the unified one."""
    own: Path
    """This process's own cgroup in that hierarchy (where children are made)."""


def _hierarchy() -> _Hierarchy:
    """Find the memory cgroup this process lives in, preferring a v1 memory hierarchy."""
    own_paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            own_paths["v2"] = path
        elif "memory" in controllers.split(","):
            own_paths["v1"] = path
    mounts: dict[str, tuple[str, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        parts = fields.split()
        fstype, _source, options = [*tail.split(), "", "", ""][:3]
        root, mountpoint = parts[3], parts[4].replace("\\040", " ")
        if fstype == "cgroup" and "memory" in options.split(","):
            mounts.setdefault("v1", (root, mountpoint))
        elif fstype == "cgroup2":
            mounts.setdefault("v2", (root, mountpoint))
    for key, version in (("v1", 1), ("v2", 2)):
        if key in mounts and key in own_paths:
            root, mountpoint = mounts[key]
            # A cgroup namespace (a container) mounts its own subtree: paths are relative to it.
            relative = os.path.relpath(own_paths[key], root) if root != "/" else own_paths[key]
            own = Path(mountpoint) / relative.lstrip("/")
            if version == 2 and "memory" not in _read(own / "cgroup.controllers").split():
                continue  # a hybrid machine's unified hierarchy without the memory controller
            return _Hierarchy(version, Path(os.path.normpath(own)))
    raise MemoryCapError(
        "no memory cgroup is mounted (neither a v1 `memory` hierarchy nor cgroup v2 with the "
        "memory controller): the browser's memory cap needs one"
    )


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def remove_stale(parent: Path, kind: str) -> None:
    """Remove empty ``worldtrace-<kind>-<pid>-*`` groups under ``parent`` whose maker is gone."""
    for child in parent.glob(f"worldtrace-{kind}-*-*"):
        try:
            pid = int(child.name.split("-")[-2])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid) and not _read(child / "cgroup.procs").split():
            with contextlib.suppress(OSError):
                child.rmdir()


class MemoryCgroup:
    """A child memory cgroup with a hard limit and no swap; remove it when its processes end."""

    def __init__(self, kind: str, limit_bytes: int) -> None:
        """Create the group ``worldtrace-<kind>-<pid>-<n>`` capped at ``limit_bytes``.

        Raises :class:`MemoryCapError` if the machine's cgroups cannot be written (not root,
        read-only cgroup file system, v2 without the memory controller delegated).
        """
        hierarchy = _hierarchy()
        self.version = hierarchy.version
        self.limit_bytes = limit_bytes
        remove_stale(hierarchy.own, kind)
        self.path = hierarchy.own / f"worldtrace-{kind}-{os.getpid()}-{next(_counter)}"
        try:
            self.path.mkdir()
        except OSError as error:
            raise MemoryCapError(
                f"cannot create the memory cgroup {self.path} ({error.strerror}): "
                "capping the browser's memory needs root and a writable cgroup file system"
            ) from None
        try:
            self._limit()
        except OSError as error:
            self.remove(0)
            raise MemoryCapError(
                f"cannot set the memory limit of {self.path} ({error.strerror})"
            ) from None

    def _limit(self) -> None:
        if self.version == 1:
            (self.path / "memory.limit_in_bytes").write_text(str(self.limit_bytes))
            # With swap accounting the sum of memory and swap gets the same cap: no swapping
            # past it. (The plain limit first: the sum may never be below it.)
            memsw = self.path / "memory.memsw.limit_in_bytes"
            if memsw.exists():
                memsw.write_text(str(self.limit_bytes))
            return
        if not (self.path / "memory.max").exists():
            # The controller must be enabled for our children; a cgroup with processes of its
            # own refuses that unless it is the root ("no internal processes").
            try:
                (self.path.parent / "cgroup.subtree_control").write_text("+memory")
            except OSError as error:
                raise MemoryCapError(
                    f"the memory controller is not enabled below {self.path.parent} and cannot "
                    f"be ({error.strerror}); run worldtrace in a cgroup whose memory controller "
                    "is delegated (e.g. `systemd-run --scope -p Delegate=yes`)"
                ) from None
        (self.path / "memory.max").write_text(str(self.limit_bytes))
        swap = self.path / "memory.swap.max"
        if swap.exists():
            swap.write_text("0")

    @property
    def procs_file(self) -> Path:
        """Write a pid here to move that process (and its future children) into the group."""
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        """The processes in the group now (host pids)."""
        return [int(pid) for pid in _read(self.procs_file).split()]

    def oom_kills(self) -> int:
        """How many processes the kernel killed because the group reached its limit."""
        events = _read(self.path / ("memory.oom_control" if self.version == 1 else "memory.events"))
        for line in events.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def peak_bytes(self) -> int:
        """The most memory the group has used (0 where the kernel does not say)."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        return int(_read(self.path / name).strip() or 0)

    def kill(self) -> None:
        """SIGKILL every process in the group (those that left their process group too)."""
        kill_file = self.path / "cgroup.kill"  # v2, since Linux 5.14: atomic, races no fork
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
                return
        for _ in range(20):  # a process may fork while we read the list
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self, wait_s: float = 5.0) -> bool:
        """Remove the group once it is empty (waiting up to ``wait_s``); whether it is gone.

        Safe to call twice. A group that still has processes after the wait is left in place
        (the next group made beside it removes it once they are gone).
        """
        give_up = time.monotonic() + wait_s
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= give_up:
                    return False
            time.sleep(0.02)
