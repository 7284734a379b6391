"""Corpus folders the publishing tests (and the remote storage tests) publish."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
from PIL import Image as PILImage

from tests.records import make_transition
from worldtrace.schemas import (
    EnvironmentRef,
    Episode,
    Observation,
    PolicyRef,
    Transition,
    to_table,
)
from worldtrace.schemas.layouts import CorpusLayout

WEB_ENV = EnvironmentRef(
    name="web/chromium", version="chromium-156", components={"chromium": "156"}, config_hash="beef"
)
"""The environment of the web rows."""


def png(color: str = "red") -> bytes:
    """A 4x3 PNG of one colour."""
    buffer = io.BytesIO()
    PILImage.new("RGB", (4, 3), color).save(buffer, format="PNG")
    return buffer.getvalue()


def terminal_rows(episodes: int = 2, steps: int = 3, text: str = "$ ") -> list[Transition]:
    """``episodes`` terminal episodes (``term-N``) of ``steps`` rows; screens start ``text``."""
    rows = []
    for e in range(episodes):
        for s in range(steps):
            rows.append(
                make_transition(
                    step=s,
                    episode_id=f"term-{e}",
                    observation=Observation(format="terminal-screen", text=f"{text}{e}-{s}"),
                )
            )
    return rows


def web_rows(steps: int = 4) -> list[Transition]:
    """One web episode (``web-0``) with screenshots, a no-op step 1 and a failed step 2."""
    rows = []
    for s in range(steps):
        observation = Observation(format="axtree", text=f"[1] page {s}", screenshot=png())
        # step 1 is a no-op (same text after), step 2 fails.
        after_text = observation.text if s == 1 else f"[1] page {s + 1}"
        rows.append(
            make_transition(
                step=s,
                episode_id="web-0",
                domain="web",
                env=WEB_ENV,
                observation=observation,
                next_observation=Observation(
                    format="axtree", text=after_text, screenshot=png("blue")
                ),
                action_error="element not found" if s == 2 else None,
            )
        )
    return rows


def episodes_of(rows: list[Transition]) -> list[Episode]:
    """The completed episodes the rows belong to, one per episode id."""
    out = {}
    for row in rows:
        out[row.episode_id] = Episode(
            episode_id=row.episode_id,
            run_id="run-1",
            domain=row.domain,
            env=row.env,
            policy=PolicyRef(kind="script", name="task-script", version="1"),
            seed=0,
            status="completed",
            length=sum(1 for r in rows if r.episode_id == row.episode_id),
            started_at=datetime(2026, 1, 2, tzinfo=UTC),
            ended_at=datetime(2026, 1, 3, tzinfo=UTC),
        )
    return list(out.values())


def make_corpus(
    root: Path, terminal: list[Transition] | None = None, web: list[Transition] | None = None
) -> Path:
    """Write a corpus folder with terminal and web transitions, episodes and stats."""
    terminal = terminal_rows() if terminal is None else terminal
    web = web_rows() if web is None else web
    for domain, rows in (("terminal", terminal), ("web", web)):
        folder = root / "transitions" / domain
        folder.mkdir(parents=True, exist_ok=True)
        half = max(1, len(rows) // 2)
        for index, chunk in enumerate((rows[:half], rows[half:])):
            if chunk:
                pq.write_table(to_table(chunk, Transition), folder / f"part-{index:05d}.parquet")
    pq.write_table(to_table(episodes_of(terminal + web), Episode), root / "episodes.parquet")
    (root / "stats.json").write_text(json.dumps({"dedup": {"dropped": 0}}))
    CorpusLayout(root).write_manifest(["test"])
    return root
