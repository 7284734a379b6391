"""What a command starts ends with it, even when the command is killed with SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.processes import process_stats
from worldtrace.flows.reaper import GRACE_S
from worldtrace.sandboxes.docker import RUN_LABEL, gc


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reaped by nobody yet, counts as ended)."""
    return any(other == pid and fields[0] != "Z" for other, fields in process_stats())


def wait_until_ended(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def children(pid: int) -> list[tuple[int, str]]:
    """The direct children of ``pid`` with their command lines."""
    found = []
    for child, fields in process_stats():
        if int(fields[1]) == pid:
            with contextlib.suppress(OSError):
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                found.append((child, cmdline.replace(b"\0", b" ").decode()))
    return found


def test_a_child_outlives_a_killed_parent_without_the_reaper_and_not_with_it() -> None:
    program = textwrap.dedent(
        """
        import subprocess, sys, time
        from worldtrace.flows.reaper import reap_on_exit
        if sys.argv[1] == "reap":
            reap_on_exit()
        child = subprocess.Popen(["sleep", "600"], start_new_session=True)
        print(child.pid, flush=True)
        time.sleep(600)
        """
    )
    left = []
    for mode in ("plain", "reap"):
        parent = subprocess.Popen(
            [sys.executable, "-c", program, mode], stdout=subprocess.PIPE, text=True
        )
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        ended = wait_until_ended(child, GRACE_S + 10)
        left.append(not ended)
        if not ended:
            os.kill(child, signal.SIGKILL)
    assert left == [True, False]  # the control run shows the child would have been left


@pytest.mark.docker
def test_a_killed_collection_leaves_no_temporary_prefect_api(
    tmp_path: Path, terminal_image: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect")
    command = [sys.executable, "-m", "worldtrace.flows.cli", "collect", "terminal"]
    command += ["--episodes", "1", "--out", str(tmp_path / "runs"), "--run-name", "reaped"]
    collect = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        servers: list[int] = []
        while not servers and time.monotonic() < deadline and collect.poll() is None:
            servers = [pid for pid, cmd in children(collect.pid) if "uvicorn" in cmd]
            time.sleep(0.2)
        assert servers, "the collection never started Prefect's temporary API"
        os.kill(collect.pid, signal.SIGKILL)
        collect.wait()
        assert wait_until_ended(servers[0], GRACE_S + 10)
    finally:
        if collect.poll() is None:
            collect.kill()
            collect.wait()
        gc(labels={RUN_LABEL: "reaped"})  # the killed run's sandbox (its owner is dead)
