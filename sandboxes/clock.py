"""Each episode's clock starts at a fixed instant and then runs normally, in every sandbox.

Collection time must not leak into observations (``ls -l``, ``date``, git's commit dates, a
site's "3 days ago"): two runs of the same episode should see the same dates whenever they are
collected. Linux time namespaces shift only the monotonic and boot clocks, not the wall clock,
so the wall clock is shifted in user space by libfaketime, preloaded into every process of the
container through ``/etc/ld.so.preload``:

- the library is built from Debian's source by the ``clock`` image (``clock_image/``), stateless
  (no shared memory, no variable in any process's environment) and with the monotonic clocks
  left real;
- ``/etc/faketimerc`` holds the offset from the real clock to the episode's instant, computed
  when the container starts, so every process agrees on the time, sleeps take as long as they
  say and files written during the episode carry the episode's dates (``stat`` is shifted too).

The three files are bind-mounted read-only next to Docker's own ``/etc/hosts`` mounts when the
sandbox's root filesystem is read-only (a capped disk), and written into it otherwise (an
engine on another machine). Statically linked programs and Python's ``os.stat`` read the real
clock or file times; see docs/determinism.md.
"""

from __future__ import annotations

import io
import math
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import docker
from docker.types import Mount

DEFAULT_CLOCK_START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
"""Where an episode's clock starts unless its environment config says otherwise."""

CLOCK_IMAGE = "worldtrace/clock:latest"
LIBRARY_IN_IMAGE = "/clock/libfaketime.so.1"
LIBRARY_PATH = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
"""Where Debian's own libfaketime package puts the library, so nothing looks out of place."""
PRELOAD_PATH = "/etc/ld.so.preload"
OFFSET_PATH = "/etc/faketimerc"
SEEDING_MARGIN_S = 0.5
"""The least of a real second left for seeding a sandbox's disk (see ``offset_s``): the first
writable folder (a home folder, a repository, the mcp files) took at most 0.12 s at a load
average of 10 on 2 cores."""
FILE_CLOCK_LAG_S = 0.05
"""How far into the real second the clock's start is put (see ``offset_s``), at least: more than
the kernel's coarse clock, which dates files, lags behind (one tick, 10 ms at the slowest)."""

_cache = Path(tempfile.gettempdir()) / "worldtrace-clock"


class ClockError(RuntimeError):
    """The clock library cannot be had (its image is missing)."""


def clock_library(client: docker.DockerClient) -> bytes:
    """Return the library the ``clock`` image built (cached on this machine by image id)."""
    try:
        image = client.images.get(CLOCK_IMAGE)
    except docker.errors.ImageNotFound:
        raise ClockError(
            f"image {CLOCK_IMAGE} is missing; build it with `worldtrace sandboxes build`"
        ) from None
    cached = _cache / image.id.removeprefix("sha256:")[:16] / "libfaketime.so.1"
    if cached.is_file():
        return cached.read_bytes()
    container = client.containers.create(image.id, ["true"])
    try:
        stream, _ = container.get_archive(LIBRARY_IN_IMAGE)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as archive:
            member = archive.extractfile("libfaketime.so.1")
            assert member is not None
            library = member.read()
    finally:
        container.remove(force=True)
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{time.monotonic_ns()}.part")
    partial.write_bytes(library)
    partial.replace(cached)  # atomic: two sandboxes starting at once both read a whole file
    return library


def offset_seconds(start: datetime, now: float | None = None) -> float:
    """Seconds from the real clock (``now``, epoch seconds; default: now) to ``start``."""
    if start.tzinfo is None:
        raise ValueError("the clock's start must have a time zone (e.g. 2025-03-03T09:00:00Z)")
    return start.timestamp() - (time.time() if now is None else now)


@dataclass
class SandboxClock:
    """The files that start one sandbox's clock at ``start``; made just before it starts."""

    start: datetime
    _offset_s: float | None = None

    def offset_s(self) -> float:
        """Seconds from the real clock to the sandbox's, fixed when first asked (at its start).

        One value for everything the sandbox is given: the clock, and the times of the files
        its disk is seeded with (see ``shown_as_is``). It is asked first just before the disk
        is seeded, and maps the real clock's last whole second onto ``start``: the sandbox's
        clock then reads ``start`` plus less than a second, and the files seeded next are
        created (``stat``'s Birth and Change, Node's ``birthtime``) within ``start``'s second,
        the same second in every run. With less than :data:`SEEDING_MARGIN_S` left of the
        real second, or less than :data:`FILE_CLOCK_LAG_S` of it gone, it waits first (about
        half a second at most), so seeding neither runs across the next second nor starts
        before this one in the kernel's file times.
        """
        if self._offset_s is None:
            now = time.time()
            # File times come from the kernel's coarse clock, a tick (a few ms) behind
            # time.time(): a file made just after a second's boundary can be dated before it.
            if not FILE_CLOCK_LAG_S <= now % 1 <= 1 - SEEDING_MARGIN_S:
                time.sleep((FILE_CLOCK_LAG_S - now % 1) % 1)
                now = time.time()
            # Whole seconds: a seeded file's time (whole seconds in the image) moved back and
            # forth by it lands on the same second, with no rounding on the way.
            self._offset_s = float(round(offset_seconds(self.start, now=math.floor(now))))
        return self._offset_s

    def shown_as_is(self, mtime: float) -> float:
        """The real time to give a seeded file so that the sandbox shows it at ``mtime``.

        Inside, every file time is shown moved by the offset; an image's files (a repository
        checked out at a pinned date) keep the times they were built with, whenever the
        sandbox starts.
        """
        return mtime - self.offset_s()

    def files(self, client: docker.DockerClient) -> dict[str, bytes]:
        """``{path in the container: content}``."""
        return {
            LIBRARY_PATH: clock_library(client),
            PRELOAD_PATH: f"{LIBRARY_PATH}\n".encode(),
            OFFSET_PATH: f"{self.offset_s():+.0f}s\n".encode(),
        }

    def mounts(self, client: docker.DockerClient, folder: Path) -> list[Mount]:
        """Write the files into ``folder`` (on this machine) and return read-only binds of them."""
        mounts = []
        for index, (target, content) in enumerate(self.files(client).items()):
            source = folder / f"{index}-{Path(target).name}"
            source.write_bytes(content)
            source.chmod(0o644)
            mounts.append(Mount(target=target, source=str(source), type="bind", read_only=True))
        return mounts


def release_folder(folder: Path | None) -> None:
    """Remove a folder :meth:`SandboxClock.mounts` wrote into (its container is gone)."""
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
