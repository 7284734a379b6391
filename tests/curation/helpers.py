"""Rows, shards and output readers the curation tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from tests.records import make_transition
from worldtrace.normalizers.shards import ShardWriter
from worldtrace.schemas import Observation, Transition, to_row
from worldtrace.schemas.arrow import arrow_schema_of

PROSE = (
    "The quick brown fox jumps over the lazy dog while the server logs every request it "
    "receives and the operator watches the dashboard for errors warnings and slow queries "
    "that could mean the cache is cold or the database index has gone missing again today"
)
"""A screen of ordinary prose, long enough for the near-duplicate rule to compare."""


def screen(text: str) -> Observation:
    """A terminal screen observation holding ``text``."""
    return Observation(format="terminal-screen", text=text, meta={"cwd": "/root"})


def numbers_screen(seed: int) -> str:
    """A ``ps``-like screen of numbers that differs with ``seed``."""
    return "\n".join(
        f"pid {seed * 1000 + i} cpu {seed + i}.{i} mem {seed * 3 + i} user root" for i in range(12)
    )


def step(episode: str, i: int, obs: str, nxt: str, **changes: object) -> Transition:
    """Step ``i`` of ``episode`` from screen ``obs`` to screen ``nxt`` (and ``changes``)."""
    fields: dict[str, object] = {"observation": screen(obs), "next_observation": screen(nxt)}
    fields.update(changes)
    return make_transition(step=i, episode_id=episode, **fields)


def write_shard(folder: Path, rows: list[Transition]) -> None:
    """Write ``rows`` as a normalized run's shard in ``folder``."""
    with ShardWriter(folder, Transition) as writer:
        writer.write(rows)  # type: ignore[arg-type]


def read_output(out: Path) -> pl.DataFrame:
    """Every transition row of a curated corpus."""
    return pl.read_parquet(sorted((out / "transitions").glob("*/*.parquet")))


def transition(episode: str, screen: str) -> dict[str, Any]:
    """A valid row whose observation and next observation hold ``screen``-based text."""
    return to_row(
        make_transition(
            step=0,
            episode_id=episode,
            observation=Observation(format="terminal-screen", text=f"$ {screen}"),
            next_observation=Observation(format="terminal-screen", text=f"$ {screen}\nok\n$ "),
        )
    )


def write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write raw rows (valid or not) as one parquet file of the transitions schema."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema_of(Transition)), path)


def output_ids(out: Path) -> set[str]:
    """The ids of a curated corpus's rows (none when it has no shard)."""
    files = sorted((out / "transitions").glob("*/*.parquet"))
    return set(pl.read_parquet(files)["id"]) if files else set()
