"""Normalize a whole run directory: sealed raw episodes → transition shards + episodes table.

Output, beside the raw data::

    transitions/<domain>/part-NNNNN.parquet   the transitions, shared schema
    episodes.parquet                          one row per sealed episode
    quarantine.jsonl                          raw episodes that could not be normalized, and why

The outputs are rebuilt from the raw files every time (into a temporary folder, then swapped
in), so normalizing again is safe and gives the same rows.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

import pyarrow.parquet as pq

from worldtrace.normalizers.base import DomainNormalizer, MalformedEpisode
from worldtrace.normalizers.shards import ShardWriter
from worldtrace.schemas import Episode, RecordError, Transition, to_table

ENTRY_POINT_GROUP = "worldtrace.normalizers"
DEFAULT_LICENCE = "cc-by-4.0"


@dataclass
class NormalizeReport:
    """What a normalization produced."""

    episodes: int = 0
    transitions: int = 0
    shards: list[Path] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)


def get_normalizer(domain: str) -> DomainNormalizer:
    """Return the registered normalizer of ``domain``."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == domain:
            return ep.load()()
    known = ", ".join(sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)))
    raise LookupError(f"no normalizer for domain {domain!r} (available: {known or 'none'})")


def normalize_run(run_dir: Path, rows_per_shard: int = 50_000) -> NormalizeReport:
    """Rebuild the transitions, episodes table and quarantine of ``run_dir`` from raw files."""
    run_dir = Path(run_dir)
    manifest = run_dir / "run.json"
    if not manifest.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no run.json)")
    config = json.loads(manifest.read_text())["config"]
    domain, run_id = config["domain"], config["run_name"]
    licence = config.get("licence", DEFAULT_LICENCE)
    normalizer = get_normalizer(domain)

    staging = run_dir / ".normalize-tmp"
    shutil.rmtree(staging, ignore_errors=True)
    report = NormalizeReport()
    episodes: list[Episode] = []
    with ShardWriter(staging / "transitions" / domain, Transition, rows_per_shard) as out:
        for path in sorted((run_dir / "raw" / "episodes").glob("*.jsonl")):
            try:
                episode, transitions = normalizer.normalize_episode(path, run_id, licence)
            except (MalformedEpisode, RecordError, ValueError, KeyError, TypeError) as error:
                report.quarantined.append(
                    {"file": str(path.relative_to(run_dir)), "reason": _reason(error)}
                )
                continue
            out.write(transitions)  # type: ignore[arg-type]
            episodes.append(episode)
            report.transitions += len(transitions)
    report.episodes = len(episodes)
    pq.write_table(to_table(episodes, Episode), staging / "episodes.parquet")  # type: ignore[arg-type]
    with open(staging / "quarantine.jsonl", "w", encoding="utf-8") as handle:
        for item in report.quarantined:
            handle.write(json.dumps(item) + "\n")
    _swap_in(staging, run_dir)
    report.shards = sorted((run_dir / "transitions" / domain).glob("*.parquet"))
    return report


def _reason(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"missing field {error.args[0]!r}"
    return f"{type(error).__name__}: {error}"


def _swap_in(staging: Path, run_dir: Path) -> None:
    for name in ("transitions", "episodes.parquet", "quarantine.jsonl"):
        target = run_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        (staging / name).rename(target)
    shutil.rmtree(staging)
