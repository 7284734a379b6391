"""SIGTERM and Ctrl-C stop a collection within seconds and leave it resumable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from tests.prefect_server import client_env
from worldtrace.collectors.recorder import read_episode
from worldtrace.sandboxes.docker import LABEL, RUN_LABEL

pytestmark = pytest.mark.docker


def _collect_command(out: Path, run_name: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "worldtrace.flows.cli",
        "collect",
        "terminal",
        "--policy",
        "explore",
        "--episodes",
        "3",
        "--workers",
        "2",
        # Short episodes: the stop comes after the first recorded step, long before an episode
        # of five could end, and the resume (three whole episodes) stays short.
        "--max-steps",
        "5",
        "--out",
        str(out),
        "--run-name",
        run_name,
    ]


def _wait_for_a_recorded_step(run_dir: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        partial = list((run_dir / "raw" / "partial").glob("*.jsonl"))
        if any(len(path.read_text().splitlines()) >= 2 for path in partial):
            return
        assert process.poll() is None, "the collection ended before it could be stopped"
        time.sleep(0.05)
    pytest.fail("no episode recorded a step")


def _stop_with(command: list[str], run_dir: Path, sig: signal.Signals, env: dict[str, str]) -> None:
    """Start ``command``, send ``sig`` once a step is recorded; check it stopped as it should."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for_a_recorded_step(run_dir, process)
    sent = time.monotonic()
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    took = time.monotonic() - sent
    assert process.returncode == 128 + sig, (sig.name, stderr.decode()[-2000:])
    assert took < 10, f"the run took {took:.1f}s to stop after {sig.name}"
    assert b"run the same command again" in stderr, sig.name
    # One line, not the temporary API's CancelledError tracebacks after it (issue 24).
    assert b"Traceback" not in stderr, stderr.decode()[-3000:]

    # Nothing half-done was sealed: the unfinished attempts were set aside, none failed.
    assert not list((run_dir / "raw" / "partial").glob("*.jsonl"))
    interrupted = list((run_dir / "raw" / "interrupted").glob("*.jsonl"))
    assert interrupted
    for path in interrupted:
        assert list(read_episode(path))[-1].reason.startswith("interrupted")
    for path in (run_dir / "raw" / "episodes").glob("*.jsonl"):
        assert list(read_episode(path))[-1].status != "failed"
    # The run's sandboxes went with it.
    client = docker.from_env()
    assert not client.containers.list(
        all=True, filters={"label": [LABEL, f"{RUN_LABEL}={run_dir.name}"]}
    )


@pytest.mark.parametrize(
    ("sig", "temporary_api"),
    [(signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["SIGTERM-on-a-server", "SIGINT-on-the-temporary-API"],
)
def test_a_signal_stops_the_run_in_seconds_and_the_same_command_resumes_it(
    tmp_path: Path,
    terminal_image: str,
    prefect_server: str,
    sig: signal.Signals,
    temporary_api: bool,
) -> None:
    """A signal stops the run within seconds, leaving it resumable; the same command resumes it.

    The commands talk to the session's Prefect server (a deployment's run is stopped that
    way), except the Ctrl-C stop, which runs on Prefect's temporary local API, the default for
    a command typed at a terminal: its own server process must go within the same seconds.
    """
    run_name = f"stopped-{sig.name.lower()}"
    run_dir = tmp_path / run_name
    command = _collect_command(tmp_path, run_name)
    on_server = client_env(prefect_server)
    on_temporary_api = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    _stop_with(command, run_dir, sig, on_temporary_api if temporary_api else on_server)

    second = subprocess.run(command, env=on_server, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr[-2000:]
    sealed = sorted(path.stem for path in (run_dir / "raw" / "episodes").glob("*.jsonl"))
    assert sealed == [f"{run_name}-s{seed:06d}" for seed in range(3)]
    for name in sealed:
        events = list(read_episode(run_dir / "raw" / "episodes" / f"{name}.jsonl"))
        assert [event.type for event in events].count("start") == 1
        assert events[-1].status in ("completed", "truncated")


def test_zero_episodes_is_a_bad_input_error(tmp_path: Path) -> None:
    command = _collect_command(tmp_path, "zero")
    command[command.index("--episodes") + 1] = "0"
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "episodes" in result.stderr
    assert not (tmp_path / "zero").exists()
