"""A memory cgroup made by worldtrace caps real processes, counts its kills, and goes away."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from worldtrace.sandboxes.cgroups import MemoryCgroup, remove_stale


def run_in(group: MemoryCgroup, code: str) -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` in ``group``: the shell joins it, then becomes the interpreter."""
    script = f'echo $$ > {group.procs_file} && exec "$0" -c "$1"'
    return subprocess.run(
        ["sh", "-c", script, sys.executable, code], capture_output=True, text=True, timeout=60
    )


def test_a_process_past_the_cap_is_killed_and_counted() -> None:
    group = MemoryCgroup("test", 64 << 20)
    try:
        assert group.oom_kills() == 0
        small = run_in(group, "data = bytearray(16 << 20); print('fits')")
        assert small.returncode == 0 and small.stdout.strip() == "fits"
        assert group.oom_kills() == 0

        # Written, not only reserved: the pages are really used.
        big = run_in(group, "data = bytearray(256 << 20); print('escaped the cap')")
        assert big.returncode == -signal.SIGKILL
        assert "escaped" not in big.stdout
        assert group.oom_kills() == 1
        assert group.peak_bytes() <= 64 << 20
    finally:
        assert group.remove()
    assert not group.path.exists()


def test_kill_ends_every_process_and_the_group_can_then_be_removed() -> None:
    group = MemoryCgroup("test", 64 << 20)
    sleeper = subprocess.Popen(
        ["sh", "-c", f"echo $$ > {group.procs_file}; sleep 300 & sleep 300 & wait"],
        start_new_session=True,
    )
    try:
        # The shell joins, then starts both sleeps in the group. Waited for by time: a bounded
        # number of yields passed in microseconds under load, before the shell had joined (with
        # `&&` the join itself ran in the background), and the empty group was removed.
        deadline = time.monotonic() + 30
        while len(group.pids()) < 3:
            assert sleeper.poll() is None and time.monotonic() < deadline, group.pids()
            time.sleep(0.01)
        assert not group.remove(0.2)  # still in use
        group.kill()
        sleeper.wait(timeout=10)
        assert group.remove()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
        group.kill()
        group.remove()


def test_a_group_left_by_a_dead_process_is_removed_beside_the_next() -> None:
    group = MemoryCgroup("test", 64 << 20)
    stale = group.path.parent / "worldtrace-test-999999999-0"  # above any pid_max: no maker
    stale.mkdir()
    try:
        remove_stale(group.path.parent, "test")
        assert not stale.exists()
        assert group.path.exists()  # ours: its maker (this process) lives
    finally:
        if stale.exists():
            stale.rmdir()
        group.remove()
