"""SIGKILL of `worldtrace curate` leaves no process and no temporary folder behind."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from tests.processes import process_stats
from tests.records import make_transition
from worldtrace.schemas import Observation, Transition, to_table

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "report",
    "ticket",
    "build",
    "deploy",
    "error",
    "warning",
    "cache",
    "user",
]


def write_run(root: Path, rows: int) -> Path:
    """A run folder with ``rows`` distinct terminal transitions in four shards."""
    rng = random.Random(7)
    folder = root / "transitions" / "terminal"
    folder.mkdir(parents=True)
    records = [
        make_transition(
            step=index % 20,
            episode_id=f"ep-{index // 20}",
            observation=Observation(
                format="terminal-screen",
                text="\n".join(" ".join(rng.choices(WORDS, k=12)) for _ in range(30)),
            ),
        )
        for index in range(rows)
    ]
    quarter = rows // 4
    for part in range(4):
        chunk = records[part * quarter : (part + 1) * quarter]
        pq.write_table(to_table(chunk, Transition), folder / f"part-{part:05d}.parquet")
    return root


def session_processes(session: int) -> list[int]:
    """Pids of every process in ``session`` (the killed command and whatever it started)."""
    return [
        pid for pid, fields in process_stats() if fields[0] != "Z" and int(fields[3]) == session
    ]


def test_killed_curate_leaves_no_process_and_the_next_run_no_temporary_folder(
    tmp_path: Path,
) -> None:
    # 2,000 rows: datatrove's first stage with workers then lasts seconds of their work (3 s at
    # a load average of 3, with workers that start with the pipeline imported: _LocalExecutor),
    # far longer than the 50 ms between looks for its workers, and the run after the kill,
    # which does all the curation again, takes half as long as with 8,000.
    run = write_run(tmp_path / "run", rows=2000)
    (tmp_path / "curate.yaml").write_text("tasks: 4\n")
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    out = tmp_path / "corpus"
    command = [
        sys.executable, "-m", "worldtrace.flows.cli", "curate", str(run), "--out", str(out),
        "--workers", "2", "--config", str(tmp_path / "curate.yaml"),
    ]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(system_tmp)}
    process = subprocess.Popen(
        command,
        start_new_session=True,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # Kill the command alone (not its group) once datatrove's helpers and workers run.
    deadline = time.monotonic() + 120
    while len(session_processes(process.pid)) < 5:
        assert process.poll() is None, "curate ended before its workers could be seen"
        assert time.monotonic() < deadline, "datatrove's workers never started"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 5
    while session_processes(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert session_processes(process.pid) == [], "processes outlived the killed curate"

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert (out / "stats.json").is_file()
    assert not (out / ".curation" / "tmp").exists()
    assert list(system_tmp.iterdir()) == []
    # A work folder too deep for a socket address keeps them in /tmp, under the output's hash.
    digest = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:12]
    assert not Path(f"/tmp/worldtrace-curate-{digest}").exists()


def test_two_curations_with_workers_in_one_process_both_run_and_leave_no_forkserver(
    tmp_path: Path,
) -> None:
    # The forkserver their workers fork from listens in the first curation's work folder,
    # which is removed when it ends: kept running, the second curation connected to the
    # removed socket (FileNotFoundError).
    from worldtrace.curation import curate

    run = write_run(tmp_path / "run", rows=40)
    first = curate(run, tmp_path / "first", workers=2)
    second = curate(run, tmp_path / "second", workers=2)
    assert first.rows_in == second.rows_in == 40
    children = [pid for pid, fields in process_stats() if int(fields[1]) == os.getpid()]
    assert not [pid for pid in children if b"forkserver" in _command_line(pid)], children


def _command_line(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # ended while we looked
        return b""
