"""Killing a publish midway and running it again completes it, with no duplicates."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from tests.publishing.helpers import make_corpus, terminal_rows


def test_killed_publish_is_completed_by_the_next_run(tmp_path: Path) -> None:
    rows = terminal_rows(episodes=200, steps=10, text="$ ls\n" + "file.txt " * 300)
    corpus = make_corpus(tmp_path / "corpus", terminal=rows)
    dest = tmp_path / "dist"
    command = [
        sys.executable, "-m", "worldtrace.flows.cli", "publish", str(corpus), "--to", str(dest),
        "--shard-size-mb", "1",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    killed = False
    # Kill it once a temporary folder holds some shards but before it was swapped in.
    while time.monotonic() < deadline and process.poll() is None:
        staged = [p for p in tmp_path.glob(".dist*") if list(p.rglob("*.parquet"))]
        if staged and not dest.exists():
            os.killpg(process.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.01)
    process.wait()
    assert killed, "the first publish finished before it could be killed"
    assert not dest.exists()

    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    frame = pl.read_parquet(dest / "data" / "terminal" / "*.parquet")
    assert frame.height == len(rows)
    assert frame["id"].n_unique() == len(rows)
    assert not list(tmp_path.glob(".dist*")), "leftovers of the killed run are removed"


def test_a_publish_killed_while_validating_leaves_nothing_after_the_next_run(
    tmp_path: Path,
) -> None:
    rows = terminal_rows(episodes=200, steps=10, text="$ ls\n" + "file.txt " * 300)
    corpus = make_corpus(tmp_path / "corpus", terminal=rows)
    dest = tmp_path / "dist"
    command = [
        sys.executable, "-m", "worldtrace.flows.cli", "publish", str(corpus), "--to", str(dest),
        "--shard-size-mb", "1",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    killed = False
    # Kill it while a folder besides the corpus and the staged copy exists: the datasets
    # validation cache, a temporary folder.
    staged = f".dist.publishing-{process.pid}"
    while time.monotonic() < deadline and process.poll() is None:
        others = [p for p in tmp_path.iterdir() if p.name not in ("corpus", "dist", staged)]
        if others and not dest.exists():
            os.killpg(process.pid, signal.SIGKILL)
            killed = True
            break
        time.sleep(0.005)
    process.wait()
    assert killed, "the first publish finished before it could be killed"
    assert len(list(tmp_path.iterdir())) > 1  # the killed run did leave folders behind

    again = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus", "dist"]
