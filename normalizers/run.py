"""Normalize a whole run directory: sealed raw episodes → transition shards + episodes table.

Output, beside the raw data (:class:`worldtrace.schemas.layouts.RunLayout`)::

    transitions/<domain>/part-NNNNN.parquet   the transitions, shared schema
    episodes.parquet                          one row per sealed episode
    quarantine.jsonl                          raw episodes that could not be normalized, and why

The outputs are rebuilt from the raw files every time (into a temporary folder, then swapped
in), so normalizing again is safe and gives the same rows. The domain's renderer comes from
the collector registry.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.registry import get_collector
from worldtrace.normalizers.base import episode_records
from worldtrace.normalizers.shards import ShardWriter
from worldtrace.schemas import Episode, RecordError, Transition, to_table
from worldtrace.schemas.layouts import RunLayout
from worldtrace.schemas.raw import MalformedEpisode, read_raw_episode

DEFAULT_LICENCE = "cc-by-4.0"


@dataclass
class NormalizeReport:
    """What a normalization produced."""

    episodes: int = 0
    transitions: int = 0
    shards: list[Path] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)


def normalize_run(
    run_dir: Path, rows_per_shard: int = 50_000, renderer: Renderer | None = None
) -> NormalizeReport:
    """Rebuild the transitions, episodes table and quarantine of ``run_dir`` from raw files.

    ``renderer`` is the run's domain's (default: asked of its collector); a caller that holds
    the collector already passes it.
    """
    layout = RunLayout(Path(run_dir))
    config = layout.read_config()
    domain, run_id = config["domain"], config["run_name"]
    licence = config.get("licence", DEFAULT_LICENCE)
    if renderer is None:
        renderer = get_collector(domain).renderer()

    # The outputs are written with the run's own names into a folder beside them.
    staging = RunLayout(layout.normalizing)
    shutil.rmtree(staging.root, ignore_errors=True)
    report = NormalizeReport()
    episodes: list[Episode] = []
    with ShardWriter(staging.transitions / domain, Transition, rows_per_shard) as out:
        for path in sorted(layout.sealed.glob("*.jsonl")):
            try:
                raw = read_raw_episode(path)
                episode, transitions = episode_records(raw, domain, renderer, run_id, licence)
            except (MalformedEpisode, RecordError, ValueError, KeyError, TypeError) as error:
                report.quarantined.append(
                    {"file": str(path.relative_to(layout.root)), "reason": _reason(error)}
                )
                continue
            out.write(transitions)
            episodes.append(episode)
            report.transitions += len(transitions)
    report.episodes = len(episodes)
    pq.write_table(to_table(episodes, Episode), staging.episodes_table)
    with open(staging.quarantine, "w", encoding="utf-8") as handle:
        for item in report.quarantined:
            handle.write(json.dumps(item) + "\n")
    _swap_in(staging, layout)
    report.shards = sorted((layout.transitions / domain).glob("*.parquet"))
    return report


def _reason(error: Exception) -> str:
    if isinstance(error, KeyError):
        return f"missing field {error.args[0]!r}"
    return f"{type(error).__name__}: {error}"


def _swap_in(staging: RunLayout, layout: RunLayout) -> None:
    for written, target in (
        (staging.transitions, layout.transitions),
        (staging.episodes_table, layout.episodes_table),
        (staging.quarantine, layout.quarantine),
    ):
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        written.rename(target)
    shutil.rmtree(staging.root)
