"""The per-episode clock: a sandbox's wall clock starts at a fixed instant, then runs normally."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from worldtrace.sandboxes import clock
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker

START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
# Everything one shell sees of the time: the clock, a file it writes, a later process's clock,
# and what a process could use to tell our machinery apart (environment, shared memory).
PROBE = (
    "date -u +%FT%T; echo x > /tmp/f; ls -l --time-style=+%F /tmp/f | cut -d' ' -f6; "
    "stat -c %y /tmp/f | cut -c1-10; sleep 1.2; date -u +%s; "
    # (Docker's /dev/shm, outside the agent's view, holds the view's init pid: not the clock's.)
    "env | grep -ci faketime; ls -A /dev/shm | grep -cvx view-init.pid; "
    "python3 -c 'import time; print(int(time.monotonic()))'; cut -d. -f1 /proc/uptime"
)


def _probe(sandbox: DockerSandbox) -> list[str]:
    result = sandbox.exec(PROBE, timeout=20)
    assert result.exit_code == 0, result.stderr
    return result.text.split()


@pytest.mark.parametrize("disk_mb", [64, None], ids=["read-only root", "writable root"])
def test_the_clock_starts_at_the_instant_and_runs(terminal_image, disk_mb):
    limits = Limits(disk_mb=disk_mb)
    with DockerSandbox(terminal_image, limits=limits, clock_start=START) as sandbox:
        now, listed, stated, later, env_vars, shm, monotonic, uptime = _probe(sandbox)
    started = datetime.fromisoformat(now).replace(tzinfo=UTC)
    assert 0 <= (started - START).total_seconds() < 10
    assert listed == stated == "2025-03-03"  # a file written now carries the episode's date
    assert 1 <= int(later) - started.timestamp() < 15  # time runs, at its real pace
    assert (env_vars, shm) == ("0", "0")  # nothing in the environment or shared memory
    assert abs(int(monotonic) - int(uptime)) <= 2  # timeouts and durations stay real


def test_without_a_start_the_sandbox_has_the_real_clock(terminal_image):
    with DockerSandbox(terminal_image) as sandbox:
        shown = int(sandbox.exec("date -u +%s").text)
    assert abs(shown - datetime.now(UTC).timestamp()) < 10


def test_two_sandboxes_started_apart_agree_on_the_time(terminal_image):
    shown = []
    for _ in range(2):
        with DockerSandbox(terminal_image, clock_start=START) as sandbox:
            shown.append(int(sandbox.exec("date -u +%s").text))
    assert all(0 <= value - START.timestamp() < 10 for value in shown)


def test_a_start_without_a_time_zone_is_rejected():
    with pytest.raises(ValueError, match="time zone"):
        clock.offset_seconds(datetime(2025, 3, 3, 9, 0))
    assert clock.offset_seconds(START, now=START.timestamp() + 90.5) == -90.5


def test_seeded_files_keep_their_image_times_whenever_the_sandbox_starts(terminal_image):
    # Files the image put in the writable paths (a repository checked out at a pinned date)
    # show the same times in two sandboxes started seconds apart.
    probe = "stat -c %Y /home/user/.bashrc /home/user/.profile"
    with DockerSandbox(terminal_image) as real:
        in_image = real.exec(probe).text
    shown = []
    for _ in range(2):
        with DockerSandbox(terminal_image, clock_start=START) as sandbox:
            shown.append(sandbox.exec(probe).text)
            time.sleep(1.5)
    assert shown == [in_image, in_image]


def test_pythons_byte_code_caches_stay_valid_on_the_episode_clock(terminal_image):
    # Python checks a module's cached byte code against its source's modification time, read
    # with stat64 (os.stat), which the clock library leaves real: the image's caches, written
    # at build time, stay valid (faking stat64 too made every import recompile: python3
    # started ten times slower and a Trac site no longer served within a minute).
    probe = "python3 -v -c 'import json, email.parser, http.client' 2>&1 | grep -c 'is stale'"
    with DockerSandbox(terminal_image, clock_start=START) as sandbox:
        assert sandbox.exec(["bash", "-c", probe]).text.strip() == "0"
        # ...while ls and stat (statx) show the image's files moved onto the episode's clock.
        path = "/usr/lib/python3.11/json/__init__.py"
        shown = int(sandbox.exec(["stat", "-c", "%Y", path]).text)
        real = int(
            sandbox.exec(
                ["python3", "-c", f"import os; print(int(os.stat({path!r}).st_mtime))"]
            ).text
        )
    assert abs((shown - real) - (START.timestamp() - time.time())) < 120


def test_a_missing_clock_image_is_a_clear_error(terminal_image, monkeypatch):
    monkeypatch.setattr(clock, "CLOCK_IMAGE", "worldtrace/no-clock:0")
    with pytest.raises(SandboxError, match="worldtrace sandboxes build"):
        DockerSandbox(terminal_image, clock_start=START).start()


def test_a_site_serves_on_the_episode_clock():
    from worldtrace.sandboxes.sites import SITES
    from worldtrace.sandboxes.websites import start_site

    with start_site(SITES["trac"], clock_start=START) as site:
        # Processes in the site's container (its server is one) see the episode's date.
        served = site.sandbox.exec(
            "python3 -c 'import datetime; print(datetime.date.today())'"
        ).text.strip()
    assert served == "2025-03-03"


def test_the_agent_sees_its_processes_started_on_the_episode_clock():
    # ps dates a process's START from the boot time in /proc/stat, which the agent's view
    # moves onto the episode's clock (the real one would name the collection's year).
    from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
    from worldtrace.collectors.terminal.render import TerminalRenderer
    from worldtrace.schemas import Action

    env = TerminalEnvironment(TerminalConfig(clock_start=START))
    try:
        env.reset(seed=0, task=None)
        keys = ["ps -o lstart= -p $$", "Enter"]
        outcome = env.step(Action(name="keys", arguments={"keys": keys}, text=""), 30)
        screen = TerminalRenderer().observation(outcome.observation).text
    finally:
        env.close()
    started = screen.splitlines()[-2]
    assert started.startswith("Mon Mar  3 09:00:"), screen
    assert started.endswith(" 2025"), screen


# Each line: when the shell asked the clock, then when ps says the process it started next
# began (both as seconds of the episode's clock). Printed through variables, so the command's
# own echo on the screen never matches.
STARTED_AFTER = (
    "for i in 1 2 3 4 5 6 7 8; do t=$(date +%s.%N); sleep 30 & p=$!; "
    's=$(ps -o lstart= -p $p); kill $p; echo "asked=$t began=$(date -d "$s" +%s)"; '
    "sleep 0.$i; done 2>/dev/null"
)


def test_ps_never_dates_a_process_before_the_clock_said_it_was_started():
    # /proc/stat's btime is whole seconds, rounded down: ps (btime plus the process's start
    # ticks) dated a process up to a second too early, and a shell started in the episode's
    # first second showed 08:59:59 on a clock that starts at 09:00:00.
    import re

    from worldtrace.collectors.terminal.actions import command
    from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
    from worldtrace.collectors.terminal.screen import plain_screen

    env = TerminalEnvironment(TerminalConfig(clock_start=START))
    try:
        env.reset(seed=0, task=None)
        outcome = env.step(command(STARTED_AFTER), timeout_s=60)
    finally:
        env.close()
    screen = plain_screen(outcome.observation["screen"])
    pairs = re.findall(r"^asked=(\d+)\.\d+ began=(\d+)\s*$", screen, re.MULTILINE)
    assert len(pairs) == 8, screen
    assert all(int(began) >= int(asked) for asked, began in pairs), pairs
    assert all(int(began) - int(asked) <= 2 for asked, began in pairs), pairs
