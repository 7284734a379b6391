"""The raw recorder: durable, resumable, lossless episode files in a run directory.

Where things are is :class:`worldtrace.schemas.layouts.RunLayout`; what a line holds is
:mod:`worldtrace.schemas.raw`. An episode is written to ``raw/partial/``: its start event, one
step event per action and its end event, each flushed and fsynced before the write returns,
so a step that returned is on disk; sealing is an atomic rename into ``raw/episodes/``, so an
episode is either sealed whole or not at all. An attempt that never finished (a killed run, a
sandbox that broke on its own, a stop) is moved to ``raw/interrupted/`` with the reason and
recorded again. A finished episode is never recorded twice: ``begin`` refuses a sealed id.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worldtrace.schemas.errors import InputError
from worldtrace.schemas.layouts import RunLayout, RunManifest, write_json_atomically
from worldtrace.schemas.raw import RawAbandoned, RawEnd, RawEvent, RawStart, RawStep, read_events


class RunMismatchError(InputError):
    """A run directory exists but was started with a different configuration."""


class EpisodeAlreadySealed(RuntimeError):
    """An attempt to record an episode that is already complete."""


def now_utc() -> datetime:
    """Return the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class EpisodeWriter:
    """Appends the events of one episode to its partial file; seals or abandons it."""

    def __init__(self, run: RunRecorder, episode_id: str) -> None:
        self.run = run
        self.episode_id = episode_id
        self.path = run.layout.partial / f"{episode_id}.jsonl"
        self._file = open(self.path, "wb")  # noqa: SIM115 - lives with self
        self.steps = 0

    def _write(self, event: RawEvent) -> None:
        self._file.write(event.model_dump_json().encode() + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def write_start(self, start: RawStart) -> None:
        """Record the episode's facts and its first observation."""
        self._write(start)

    def write_step(self, step: RawStep) -> None:
        """Record one step; it is on disk when this returns."""
        self._write(step)
        self.steps += 1

    def seal(self, end: RawEnd) -> Path:
        """Write the end event and atomically move the episode among the sealed ones."""
        self._write(end)
        self._file.close()
        sealed = self.run.layout.sealed / self.path.name
        os.replace(self.path, sealed)
        _fsync_dir(self.run.layout.sealed)
        return sealed

    def abandon(self, reason: str) -> Path:
        """Keep this attempt under ``interrupted/`` with the reason, out of the sealed set."""
        if not self._file.closed:
            self._write(RawAbandoned(reason=reason, at=now_utc()))
            self._file.close()
        return self.run.set_aside(self.path, self.episode_id)


class RunRecorder:
    """A run directory: its configuration, sealed episodes, and the episodes in progress."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.layout = RunLayout(Path(run_dir))
        for folder in (self.layout.partial, self.layout.sealed, self.layout.interrupted):
            folder.mkdir(parents=True, exist_ok=True)
        self._claim_config(config)

    @property
    def run_dir(self) -> Path:
        """The run directory."""
        return self.layout.root

    def _claim_config(self, config: dict[str, Any]) -> None:
        if self.layout.manifest.exists():
            if self.layout.read_manifest().config != config:
                raise RunMismatchError(
                    f"{self.run_dir} was started with a different configuration; "
                    "use another --run-name or --out to start a new run"
                )
            return
        manifest = RunManifest(config=config)
        write_json_atomically(self.layout.manifest, manifest.model_dump(mode="json"))

    def sealed_ids(self) -> set[str]:
        """Return the ids of the episodes that are complete on disk."""
        return {path.stem for path in self.layout.sealed.glob("*.jsonl")}

    def set_aside(self, path: Path, episode_id: str) -> Path:
        """Move an unfinished attempt into ``interrupted/`` under a fresh attempt number."""
        attempt = len(list(self.layout.interrupted.glob(f"{episode_id}.*.jsonl")))
        target = self.layout.interrupted / f"{episode_id}.{attempt}.jsonl"
        os.replace(path, target)
        return target

    def recover_interrupted(self) -> list[Path]:
        """Set aside partial files left by a killed run; they will be recorded again."""
        return [
            self.set_aside(path, path.stem) for path in sorted(self.layout.partial.glob("*.jsonl"))
        ]

    def begin(self, episode_id: str) -> EpisodeWriter:
        """Start recording ``episode_id``; refuses an episode that is already sealed."""
        if (self.layout.sealed / f"{episode_id}.jsonl").exists():
            raise EpisodeAlreadySealed(episode_id)
        stale = self.layout.partial / f"{episode_id}.jsonl"
        if stale.exists():
            self.set_aside(stale, episode_id)
        return EpisodeWriter(self, episode_id)


def read_episode(path: Path) -> Iterator[RawEvent]:
    """Yield the events of an episode file (sealed or not); a torn last line is skipped."""
    return read_events(path)
