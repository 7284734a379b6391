"""A collection whose Prefect server dies stops within seconds, resumable, in one line (issue 24).

Before (flows/server_watch.py), killing the server in the middle of `worldtrace collect`
printed minutes of Prefect's retries and payloads, then a traceback, and exited 1.

The killed server is the test's own. The run resumes on the session's server
(tests/prefect_server.py), which knows nothing of it, as Prefect's temporary local API would
not either: a run directory resumes whatever the API. (The temporary API, ~16 s of CPU to start
in the resuming command, runs in tests/flows/test_stopping.py and test_reaper.py.)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from tests.prefect_server import ServerProcess, client_env
from worldtrace.collectors.recorder import read_episode
from worldtrace.flows.server_watch import LOST_AFTER_S, SERVER_LOST_EXIT, SET_ASIDE_WAIT_S
from worldtrace.sandboxes.docker import RUN_LABEL

pytestmark = pytest.mark.docker

COMMAND = [
    sys.executable, "-m", "worldtrace.flows.cli", "collect", "terminal", "--episodes", "3",
    "--max-steps", "3", "--out", "runs", "--run-name", "lost",
]  # fmt: skip


def test_a_killed_server_stops_the_run_in_one_line_and_the_run_resumes(
    tmp_path: Path, terminal_image: str, prefect_server: str
) -> None:
    server = ServerProcess(tmp_path / "server")
    try:
        url = server.url()
        run_dir = tmp_path / "runs" / "lost"
        with (tmp_path / "out.txt").open("wb") as out, (tmp_path / "err.txt").open("wb") as err:
            collect = subprocess.Popen(
                COMMAND, cwd=tmp_path, env=client_env(url), stdout=out, stderr=err
            )
            deadline = time.monotonic() + 240
            while not list((run_dir / "raw" / "episodes").glob("*.jsonl")):
                assert collect.poll() is None, (tmp_path / "err.txt").read_text()
                assert time.monotonic() < deadline, "no episode was sealed"
                time.sleep(0.2)
            server.kill()
            killed_at = time.monotonic()
            returncode = collect.wait(timeout=LOST_AFTER_S + SET_ASIDE_WAIT_S + 60)
            took = time.monotonic() - killed_at
    finally:
        server.stop()
    errors = (tmp_path / "err.txt").read_text()
    assert returncode == SERVER_LOST_EXIT, errors
    assert f"the Prefect server at {url} stopped answering" in errors
    assert "Traceback" not in errors and "EventsWorker" not in errors, errors
    print(f"\nstopped {took:.1f} s after the server was killed")
    # Nothing of the run is left running, and nothing half-recorded is sealed.
    assert not docker.from_env().containers.list(all=True, filters={"label": f"{RUN_LABEL}=lost"})
    assert not list((run_dir / "raw" / "partial").glob("*.jsonl"))
    sealed_before = {p.name: p.read_bytes() for p in (run_dir / "raw" / "episodes").iterdir()}
    assert 1 <= len(sealed_before) < 3

    # The same command resumes it, on another server (the session's).
    resumed = subprocess.run(
        COMMAND, cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env=client_env(prefect_server),
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    episodes = sorted((run_dir / "raw" / "episodes").glob("*.jsonl"))
    assert [p.stem for p in episodes] == [f"lost-s{seed:06d}" for seed in range(3)]
    for path in episodes:
        kinds = [event.type for event in read_episode(path)]
        assert kinds.count("start") == 1 and kinds[-1] == "end"
    for name, content in sealed_before.items():
        assert (run_dir / "raw" / "episodes" / name).read_bytes() == content
