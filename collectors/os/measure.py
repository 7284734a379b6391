"""How often an os transition's text misses what its screenshot shows (issue 23's measure).

A transition is a *text no-op* when its next observation's text equals its observation's text.
Among the transitions whose screenshot changed (the PNG's pixels differ), the share of text
no-ops says how often the text fails to show what a person saw happen; the domain aims at under
5%. Run: ``.venv/bin/python -m worldtrace.collectors.os.measure RUN_DIR...`` (a run directory
written by ``worldtrace collect os``), which prints one line per run.
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class NoopShare:
    """The counts of one run (or several)."""

    transitions: int = 0
    screenshot_changed: int = 0
    text_unchanged: int = 0

    @property
    def share(self) -> float:
        """Text no-ops among the transitions whose screenshot changed (0 when none did)."""
        return self.text_unchanged / self.screenshot_changed if self.screenshot_changed else 0.0


def _pixels(png: bytes | None) -> bytes | None:
    # PNG bytes could differ for the same pixels (encoder settings): compare the pixels.
    if not png:
        return None
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB").tobytes()


def measure_rows(rows: Iterable[dict[str, Any]]) -> NoopShare:
    """Count the transitions of ``rows`` (transition records as dictionaries)."""
    counts = NoopShare()
    for row in rows:
        counts.transitions += 1
        before, after = row["observation"], row["next_observation"]
        shot_before = (before.get("screenshot") or {}).get("bytes")
        shot_after = (after.get("screenshot") or {}).get("bytes")
        if shot_before == shot_after or _pixels(shot_before) == _pixels(shot_after):
            continue
        counts.screenshot_changed += 1
        if before["text"] == after["text"]:
            counts.text_unchanged += 1
    return counts


def measure_run(run_dir: Path) -> NoopShare:
    """Count every os transition a run directory holds."""
    import polars as pl

    counts = NoopShare()
    for part in sorted((run_dir / "transitions" / "os").glob("*.parquet")):
        frame = pl.read_parquet(part, columns=["observation", "next_observation"])
        one = measure_rows(frame.iter_rows(named=True))
        counts.transitions += one.transitions
        counts.screenshot_changed += one.screenshot_changed
        counts.text_unchanged += one.text_unchanged
    return counts


def main(argv: list[str] | None = None) -> None:
    """Print each run's counts and share."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories")
    args = parser.parse_args(argv)
    for run in args.runs:
        counts = measure_run(run)
        print(
            f"{run}: {counts.transitions} transitions, {counts.screenshot_changed} with a changed"
            f" screenshot, {counts.text_unchanged} of them with an unchanged text"
            f" ({counts.share:.1%})"
        )


if __name__ == "__main__":
    main()
