"""The raw recorder: durable, resumable, lossless episode files.

Layout of a run directory::

    run.json                      what was asked for (checked again on resume)
    raw/partial/<episode>.jsonl   an episode being recorded, one line per event
    raw/episodes/<episode>.jsonl  sealed episodes: the same file, renamed when complete
    raw/interrupted/<episode>.<n>.jsonl
                                  attempts that never finished (killed run, dead sandbox),
                                  kept for inspection and never normalized

An episode file holds a ``start`` line (episode facts and the first observation), one ``step``
line per action, and an ``end`` line (status, outcome). Every line is flushed and fsynced
before ``write_step`` returns, so a step that returned is on disk; sealing is an atomic rename,
so an episode is either sealed whole or not at all. A finished episode is never recorded
twice: ``begin`` refuses a sealed id.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worldtrace.schemas.records import EpisodeStatus


class RunMismatchError(RuntimeError):
    """A run directory exists but was started with a different configuration."""


class EpisodeAlreadySealed(RuntimeError):
    """An attempt to record an episode that is already complete."""


def now_utc() -> datetime:
    """Return the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        raise TypeError("raw records hold JSON only; store bytes as files beside the episode")
    raise TypeError(f"cannot record a {type(value).__name__}")


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
        self.path = run.partial_dir / f"{episode_id}.jsonl"
        self._file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - lives with self
        self.steps = 0

    def _write(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, default=_json_default, ensure_ascii=False)
        self._file.write(line + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def write_start(self, facts: dict[str, Any], observation: dict[str, Any]) -> None:
        """Record the episode's facts and its first observation."""
        self._write({"type": "start", **facts, "observation": observation})

    def write_step(self, event: dict[str, Any]) -> None:
        """Record one step; it is on disk when this returns."""
        self._write({"type": "step", **event})
        self.steps += 1

    def seal(self, status: EpisodeStatus, facts: dict[str, Any]) -> Path:
        """Write the end line and atomically move the episode among the sealed ones."""
        self._write({"type": "end", "status": status, "ended_at": now_utc(), **facts})
        self._file.close()
        sealed = self.run.episodes_dir / self.path.name
        os.replace(self.path, sealed)
        _fsync_dir(self.run.episodes_dir)
        return sealed

    def abandon(self, reason: str) -> Path:
        """Keep this attempt under ``interrupted/`` with the reason, out of the sealed set."""
        if not self._file.closed:
            self._write({"type": "abandoned", "reason": reason, "at": now_utc()})
            self._file.close()
        return self.run.set_aside(self.path, self.episode_id)


class RunRecorder:
    """A run directory: its configuration, sealed episodes, and the episodes in progress."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.run_dir = Path(run_dir)
        self.partial_dir = self.run_dir / "raw" / "partial"
        self.episodes_dir = self.run_dir / "raw" / "episodes"
        self.interrupted_dir = self.run_dir / "raw" / "interrupted"
        for folder in (self.partial_dir, self.episodes_dir, self.interrupted_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self._claim_config(config)

    def _claim_config(self, config: dict[str, Any]) -> None:
        path = self.run_dir / "run.json"
        if path.exists():
            recorded = json.loads(path.read_text())
            if recorded.get("config") != config:
                raise RunMismatchError(
                    f"{self.run_dir} was started with a different configuration; "
                    "use another --run-name or --out to start a new run"
                )
            return
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(
            json.dumps(
                {"config": config, "created_at": now_utc().isoformat()},
                indent=2,
                default=_json_default,
            )
        )
        os.replace(tmp, path)

    def sealed_ids(self) -> set[str]:
        """Return the ids of the episodes that are complete on disk."""
        return {path.stem for path in self.episodes_dir.glob("*.jsonl")}

    def set_aside(self, path: Path, episode_id: str) -> Path:
        """Move an unfinished attempt into ``interrupted/`` under a fresh attempt number."""
        attempt = len(list(self.interrupted_dir.glob(f"{episode_id}.*.jsonl")))
        target = self.interrupted_dir / f"{episode_id}.{attempt}.jsonl"
        os.replace(path, target)
        return target

    def recover_interrupted(self) -> list[Path]:
        """Set aside partial files left by a killed run; they will be recorded again."""
        return [
            self.set_aside(path, path.stem) for path in sorted(self.partial_dir.glob("*.jsonl"))
        ]

    def begin(self, episode_id: str) -> EpisodeWriter:
        """Start recording ``episode_id``; refuses an episode that is already sealed."""
        if (self.episodes_dir / f"{episode_id}.jsonl").exists():
            raise EpisodeAlreadySealed(episode_id)
        stale = self.partial_dir / f"{episode_id}.jsonl"
        if stale.exists():
            self.set_aside(stale, episode_id)
        return EpisodeWriter(self, episode_id)


def read_episode(path: Path) -> Iterator[dict[str, Any]]:
    """Yield the events of an episode file; a torn last line (killed mid-write) is skipped."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                return
            yield json.loads(line)
