"""Sandbox isolation against the real Docker engine: network, limits, host files, secrets.

Each test starts real containers from the terminal image and tries to get out: reach the
network or the host's loopback, exhaust processes or memory, read host files, leak host
environment variables into a recording. Cleanup (labels, close, gc) is checked too.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pyarrow.parquet as pq
import pytest
from docker.models.containers import Container

from worldtrace.collectors.base import EpisodePlan, ScriptPolicy
from worldtrace.collectors.episode import EpisodeLimits, run_episode
from worldtrace.collectors.recorder import RunRecorder, read_episode
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.render import TerminalRenderer
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.collectors.terminal.tasks import TerminalTask
from worldtrace.normalizers import normalize_run
from worldtrace.sandboxes.disk import disk_root
from worldtrace.sandboxes.docker import (
    LABEL,
    OWNER_HOST_LABEL,
    OWNER_PID_LABEL,
    DockerSandbox,
    gc,
    writable_paths,
)
from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas.raw import RawStep

pytestmark = pytest.mark.docker

TOKEN_VAR = "WORLDTRACE_FAKE_TOKEN"
CHECKOUT = str(Path(__file__).resolve().parents[2])
"""This checkout on the host: nothing of it may be visible inside a sandbox."""


@pytest.fixture(scope="module")
def terminal_docker() -> docker.DockerClient:
    return docker_client()


@pytest.fixture
def terminal_sandbox(terminal_image: str) -> Iterator[DockerSandbox]:
    """A started sandbox with the default limits and no network."""
    sandbox = DockerSandbox(terminal_image, labels={"worldtrace.test": "isolation"}).start()
    yield sandbox
    sandbox.close()


def gone(client: docker.DockerClient, container_id: str, within_s: float = 10) -> bool:
    """Return True once the container no longer exists (removal may take a moment)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            client.containers.get(container_id)
        except docker.errors.NotFound:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def host_still_works() -> None:
    """The test process can still start processes and they run normally."""
    done = subprocess.run(
        [sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0
    assert done.stdout.strip() == "42"


# --- network --------------------------------------------------------------------------------


def test_network_is_unreachable(terminal_sandbox: DockerSandbox) -> None:
    started = time.monotonic()
    result = terminal_sandbox.exec("curl -sS -m 3 http://1.1.1.1", timeout=20)
    assert result.exit_code not in (0, 137)  # failed by itself, not killed by our timeout
    assert b"Couldn't connect" in result.stderr or b"resolve" in result.stderr
    assert time.monotonic() - started < 10

    result = terminal_sandbox.exec("getent hosts example.com", timeout=20)
    assert result.exit_code != 0

    # Only the loopback interface exists.
    dev = terminal_sandbox.exec(["cat", "/proc/net/dev"], timeout=10).text
    interfaces = [line.split(":")[0].strip() for line in dev.splitlines()[2:] if ":" in line]
    assert interfaces == ["lo"]


def _host_addresses() -> list[str]:
    """The host's loopback and, if it has one, its primary outward address."""
    addresses = ["127.0.0.1"]
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        outward = probe.getsockname()[0]
        if outward not in addresses and not outward.startswith("0."):
            addresses.append(outward)
    except OSError:
        pass
    finally:
        probe.close()
    return addresses


def test_host_ports_are_unreachable(terminal_sandbox: DockerSandbox) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("0.0.0.0", 0))
    server.listen(8)
    port = server.getsockname()[1]
    try:
        addresses = _host_addresses()
        # Control: the listener is reachable from the host itself.
        for address in addresses:
            socket.create_connection((address, port), timeout=2).close()
            server.settimeout(2)
            server.accept()[0].close()

        script = (
            "import json, socket, sys\n"
            "out = {}\n"
            "for host in sys.argv[2:]:\n"
            "    s = socket.socket(); s.settimeout(3)\n"
            "    try:\n"
            "        s.connect((host, int(sys.argv[1]))); out[host] = 'connected'\n"
            "    except OSError as e:\n"
            "        out[host] = e.errno\n"
            "print(json.dumps(out))\n"
        )
        result = terminal_sandbox.exec(["python3", "-c", script, str(port), *addresses], timeout=30)
        assert result.exit_code == 0, result.stderr
        outcome = json.loads(result.text)
        assert set(outcome) == set(addresses)
        # The container's 127.0.0.1 is its own loopback: nobody listens there.
        assert outcome["127.0.0.1"] == errno.ECONNREFUSED
        for address in addresses[1:]:
            assert outcome[address] in (errno.ENETUNREACH, errno.EHOSTUNREACH), outcome

        # Nothing reached the listener.
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


# --- resource limits ------------------------------------------------------------------------


FORK_COUNTER = """
import errno, os, time
children = []
failure = None
try:
    while len(children) < 10000:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as error:
    failure = error.errno
for pid in children:
    os.kill(pid, 9)
for pid in children:
    os.waitpid(pid, 0)
print(len(children), failure)
"""


def test_fork_bomb_is_contained_by_the_pids_limit(terminal_image: str) -> None:
    pids = 64
    env = TerminalEnvironment(
        TerminalConfig(image=terminal_image, limits=Limits(pids=pids, cpus=0.5))
    )
    try:
        env.reset(seed=0, task=None)
        sandbox = env.sandbox
        container_id = sandbox.container.id

        # Forking stops with EAGAIN below the limit (the shell, tmux, driver count too).
        result = sandbox.exec(["python3", "-c", FORK_COUNTER], timeout=60)
        assert result.exit_code == 0, result.stderr
        forked, failure = result.text.split()
        assert 10 < int(forked) < pids
        assert int(failure) == errno.EAGAIN

        # The classic bash fork bomb, typed into the terminal: the step is recorded with the
        # error and ends the episode, whether the driver could still answer or not.
        outcome = env.step(command(":(){ :|:& };:"), timeout_s=3)
        assert outcome.truncated and not outcome.terminated
        assert outcome.error is not None and "process limit" in outcome.error, outcome.error
        assert isinstance(outcome.observation["screen"], str)
        assert env.evaluate(TerminalTask(name="t", instruction="t", check="true")) is None
        seen = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            stats = sandbox.container.stats(stream=False, one_shot=True)["pids_stats"]
            seen.append(stats["current"])
            assert stats["limit"] == pids
            time.sleep(0.2)
        assert max(seen) <= pids
        assert max(seen) >= pids - 8  # the bomb did fill the container

        host_still_works()
        started = time.monotonic()
        env.close()
        assert time.monotonic() - started < 30
        assert gone(sandbox.client, container_id)
    finally:
        env.close()
    host_still_works()


def test_the_wall_clock_limit_ends_a_step_and_says_so(terminal_image: str) -> None:
    # `sleep 30` is still at work, so the step goes on until the limit stops the container.
    # (8 s: starting a sandbox with the agent's view takes a few seconds on a loaded machine.)
    config = TerminalConfig(image=terminal_image, limits=Limits(wall_clock_s=8))
    env = TerminalEnvironment(config)
    try:
        env.reset(seed=0, task=None)
        started = time.monotonic()
        outcome = env.step(command("sleep 30"), timeout_s=28)
        assert time.monotonic() - started < 15
        assert outcome.truncated and not outcome.terminated
        assert outcome.error == "the sandbox reached its wall-clock limit of 8 s and was stopped"
        # The container is gone: the screen is the last one seen, and says so.
        assert outcome.observation["sandbox_lost"] is True
        assert outcome.observation["screen_stale"] is True
        assert plain_screen(outcome.observation["screen"]) == "user@sandbox:~$"
        assert env.evaluate(TerminalTask(name="t", instruction="t", check="true")) is None
    finally:
        env.close()


def _used_bytes(path: str | Path) -> int:
    """Bytes in use on the filesystem holding ``path``."""
    stats = os.statvfs(path)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


@pytest.mark.parametrize("cap_mb", [64, 1024], ids=["64MB", "default-1GiB"])
def test_a_write_twice_the_disk_cap_fails_inside_and_spares_the_host(
    terminal_image: str, cap_mb: int
) -> None:
    limits = Limits(disk_mb=cap_mb) if cap_mb != Limits().disk_mb else Limits()
    env = TerminalEnvironment(TerminalConfig(image=terminal_image, limits=limits))
    try:
        env.reset(seed=0, task=None)
        folder = disk_root() / env.sandbox.container.name
        image = folder / "disk.img"
        assert image.is_file()
        places = (disk_root(), Path("/"))
        before = {place: _used_bytes(place) for place in places}

        outcome = env.step(command(f"dd if=/dev/zero of=~/fill bs=1M count={2 * cap_mb}"), 120)
        screen = plain_screen(outcome.observation["screen"])
        assert "dd: error writing '/home/user/fill': No space left on device" in screen
        assert outcome.error == "exit status 1"
        assert outcome.observation["prompt"] is True
        assert not outcome.truncated

        cap = cap_mb * 2**20
        # The sparse disk image holds what was written, never more than the cap ...
        assert image.stat().st_blocks * 512 <= cap
        # ... and so the host's disk grew by about the cap, not the 2x written. Other
        # processes on this machine write too: half a cap of slack for them.
        for place, used in before.items():
            assert _used_bytes(place) - used < cap + cap // 2, place

        # The sandbox goes on: the shell answers, and freeing space works.
        outcome = env.step(command("rm ~/fill && echo freed"), 20)
        assert plain_screen(outcome.observation["screen"]).split("\n")[-2] == "freed"
    finally:
        env.close()
    assert not folder.exists()


WRITABLE_FIND = (
    "find / \\( -path /proc -o -path /sys \\) -prune -o -writable \\( -type d -o -type f \\) "
    "-printf '%D %p\\n' 2>/dev/null"
)


def test_every_place_the_user_can_write_is_on_the_capped_disk(terminal_image: str) -> None:
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        env.reset(seed=0, task=None)
        sandbox = env.sandbox
        disk = sandbox.exec(["stat", "-c", "%d", "/home/user"], user="user").text.strip()
        found = sandbox.exec(["sh", "-c", WRITABLE_FIND], timeout=60, user="user").text
        by_device: dict[str, list[str]] = {}
        for line in found.splitlines():
            device, path = line.split(" ", 1)
            by_device.setdefault(device, []).append(path)
        on_disk = by_device.pop(disk)
        # tmux's default socket folder holds the socket and the prompt hook's status file.
        status = "/tmp/tmux-1000/default.status"
        for place in ("/home/user", "/tmp", "/var/tmp", "/tmp/tmux-1000", status):
            assert place in on_disk
        # Everything else is Docker's memory-backed /dev/shm (64 MB, charged to the
        # container's memory limit) and the POSIX message queue folder.
        elsewhere = sorted(path for paths in by_device.values() for path in paths)
        assert elsewhere == ["/dev/mqueue", "/dev/shm"], elsewhere
        shm = sandbox.exec(["stat", "-f", "-c", "%T %b %S", "/dev/shm"], user="user").text.split()
        assert shm[0] == "tmpfs"
        assert int(shm[1]) * int(shm[2]) <= 64 * 2**20

        # Outside the writable paths the root filesystem refuses writes, even root's.
        for who, path in (("user", "/var/lock/x"), ("root", "/usr/local/x")):
            result = sandbox.exec(["touch", path], user=who)
            assert result.exit_code == 1, (who, path)
            assert b"Read-only file system" in result.stderr, result.stderr
    finally:
        env.close()


def test_memory_hog_is_killed(terminal_image: str) -> None:
    with DockerSandbox(terminal_image, limits=Limits(memory_mb=256)) as sandbox:
        started = time.monotonic()
        result = sandbox.exec(
            ["python3", "-c", "b = b'x' * (2 * 1024**3); print(len(b))"], timeout=60
        )
        assert time.monotonic() - started < 50
        assert result.timed_out is False
        assert result.exit_code != 0
        assert result.stdout == b""
        # The kernel's OOM killer (SIGKILL, 137) or a refused allocation (MemoryError).
        assert result.exit_code == 137 or b"MemoryError" in result.stderr
        # Only the hog died: the sandbox goes on working.
        assert sandbox.is_running()
        assert sandbox.exec("echo alive", timeout=10).text == "alive\n"
    host_still_works()


def test_container_limits_are_configured(terminal_image: str) -> None:
    limits = Limits(cpus=0.5, memory_mb=300, pids=77)
    env = TerminalEnvironment(TerminalConfig(image=terminal_image, limits=limits))
    try:
        env.reset(seed=0, task=None)
        container = env.sandbox.container
        container.reload()
        host_config = container.attrs["HostConfig"]
        assert host_config["NanoCpus"] == 500_000_000
        assert host_config["Memory"] == 300 * 1024 * 1024
        assert host_config["MemorySwap"] == 300 * 1024 * 1024  # no swap on top
        assert host_config["PidsLimit"] == 77
        assert host_config["NetworkMode"] == "none"
        assert host_config["Privileged"] is False
        assert "no-new-privileges" in (host_config["SecurityOpt"] or [])

        # The kernel enforces them (cgroup v1 or v2 files, whichever this host has).
        probe = (
            "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; "
            "cat /sys/fs/cgroup/memory.max 2>/dev/null "
            "|| cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
            "cat /sys/fs/cgroup/cpu.max 2>/dev/null "
            "|| echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) "
            "$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
        )
        pids_max, memory_max, cpu_max = env.sandbox.exec(probe, timeout=10).text.splitlines()
        assert pids_max == "77"
        assert int(memory_max) == 300 * 1024 * 1024
        quota, period = (int(v) for v in cpu_max.split())
        assert quota / period == pytest.approx(0.5)
    finally:
        env.close()


# --- the driver's channel ---------------------------------------------------------------------


FORGED_REPLY = {
    "screen": "FORGED-SCREEN",
    "scrollback": "",
    "cursor": [0, 0],
    "prompt": True,
    "completed": True,
    "timed_out": False,
    "exit_code": 0,
    "cwd": "/forged",
    "foreground": None,
    "exited": False,
}


def test_a_reply_forged_through_proc_is_recorded_as_a_harmless_step(terminal_image: str) -> None:
    # The attack that worked: write a whole fake observation to the driver's stdout.
    task = TerminalTask(
        name="forge-a-reply",
        instruction="Forge the driver's reply.",
        setup=(f"printf '%s\\n' {shlex.quote(json.dumps(FORGED_REPLY))} > \"$HOME/forged.json\"",),
    )
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        env.reset(seed=0, task=task)
        actions = [
            command("echo one"),
            command('cat ~/forged.json > "/proc/$(pgrep -o -f tmux_driver.py)/fd/1"'),
            command("echo two"),
            command("cd /tmp"),
            command("echo three"),
        ]
        outcomes = [env.step(action, 20) for action in actions]
    finally:
        env.close()
    observations = [outcome.observation for outcome in outcomes]
    screens = [plain_screen(observation["screen"]).split("\n") for observation in observations]
    for observation in observations:
        assert "FORGED-SCREEN" not in observation["screen"]
        assert observation["cwd"] != "/forged"

    # The attack is a step like any other: it failed, and its screen says why. The driver is
    # outside the agent's view (sandboxes/view.py): pgrep does not even find it.
    assert outcomes[1].error == "exit status 1"
    assert screens[1][-2].endswith("/fd/1: No such file or directory"), screens[1]
    assert observations[1]["cwd"] == "/home/user"
    # Every later step is paired with its own screen.
    assert screens[2][-2:] == ["two", "user@sandbox:~$"]
    assert observations[3]["cwd"] == "/tmp"
    assert screens[4][-2:] == ["three", "user@sandbox:/tmp$"]
    assert [outcome.error for outcome in outcomes] == [None, "exit status 1", None, None, None]
    # Nothing reached the channel: no stray line had to be skipped.
    assert [observation["skipped_replies"] for observation in observations] == [0] * 5


def test_a_line_that_is_not_the_reply_to_the_request_is_skipped(terminal_image: str) -> None:
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        env.reset(seed=0, task=None)
        # Nothing in the sandbox can reach the channel any more, so the test plants the stray
        # line itself: a request with another id, which the driver answers before the step.
        assert env._driver is not None
        env._driver.stream.send_line(json.dumps({"op": "observe", "id": "not-the-pending-request"}))
        outcome = env.step(command("echo paired"), 20)
        assert plain_screen(outcome.observation["screen"]).split("\n")[-2:] == [
            "paired",
            "user@sandbox:~$",
        ]
        assert outcome.observation["skipped_replies"] == 1
        meta = TerminalRenderer().observation(outcome.observation).meta
        assert meta["skipped_replies"] == 1
        assert env.step(command("true"), 20).observation["skipped_replies"] == 0
    finally:
        env.close()


def test_a_silent_process_cannot_hang_the_host(terminal_sandbox: DockerSandbox) -> None:
    stream = terminal_sandbox.open_stream(["sleep", "60"])
    # If read_line hangs, closing the sandbox ends it (with SandboxDied) after a while.
    rescue = threading.Timer(4, terminal_sandbox.close)
    rescue.start()
    started = time.monotonic()
    try:
        stream.read_line(1.0)
    except Exception as error:
        outcome: BaseException | None = error
    else:
        outcome = None
    finally:
        rescue.cancel()
        stream.close()
    elapsed = time.monotonic() - started
    assert isinstance(outcome, TimeoutError), outcome
    assert elapsed < 3


# --- host files and environment ---------------------------------------------------------------


ALLOWED_MOUNTS = {"/", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/usr/sbin/docker-init"}


def test_host_files_are_invisible(terminal_sandbox: DockerSandbox) -> None:
    name = f"worldtrace-host-{uuid.uuid4().hex}"
    host_file = Path("/tmp") / name
    host_file.write_text("host secret\n")
    try:
        assert host_file.exists()
        result = terminal_sandbox.exec(f"test -e /tmp/{name}", timeout=10)
        assert result.exit_code == 1
        found = terminal_sandbox.exec(f"find / -xdev -name '{name}' 2>/dev/null", timeout=30)
        assert found.text == ""
        sockets = ("/var/run/docker.sock", "/run/docker.sock")
        for path in (CHECKOUT, f"{CHECKOUT}/pyproject.toml", *sockets):
            assert terminal_sandbox.exec(["test", "-e", path], timeout=10).exit_code == 1, path
    finally:
        host_file.unlink()

    container = terminal_sandbox.container
    container.reload()
    # The only mounts are the writable paths, each a folder of the sandbox's own capped disk.
    writable = set(writable_paths(container.image))
    disk = disk_root() / container.name / "mnt"
    mounts_by_target = {mount["Destination"]: mount for mount in container.attrs["Mounts"]}
    assert set(mounts_by_target) == writable
    for mount in mounts_by_target.values():
        assert mount["Type"] == "bind"
        assert Path(mount["Source"]).parent == disk, mount
    assert not container.attrs["HostConfig"].get("Binds")

    mounts = terminal_sandbox.exec(["cat", "/proc/mounts"], timeout=10).text
    entries = [line.split() for line in mounts.splitlines()]
    assert not [e for e in entries if e[0].startswith(CHECKOUT) or e[1].startswith(CHECKOUT)]
    points = {entry[1] for entry in entries}
    unexpected = {
        point
        for point in points - ALLOWED_MOUNTS - writable
        if not point.startswith(("/proc/", "/dev", "/sys")) and point != "/proc"
    }
    assert unexpected == set()
    # The only files bound in from the host are Docker's own per-container files.
    mountinfo = terminal_sandbox.exec(["cat", "/proc/self/mountinfo"], timeout=10).text
    for line in mountinfo.splitlines():
        root, point = line.split()[3:5]
        if point in ("/etc/hosts", "/etc/hostname", "/etc/resolv.conf"):
            assert root.startswith(f"/var/lib/docker/containers/{container.id}/"), line
        assert not root.startswith((CHECKOUT, "/home", "/tmp", "/root")), line


def _all_recorded_text(run_dir: Path) -> tuple[bytes, str]:
    """Every byte under ``run_dir``, and the decoded contents of its parquet files."""
    raw = b""
    tables = []
    files = [path for path in sorted(run_dir.rglob("*")) if path.is_file()]
    assert files
    for path in files:
        raw += path.read_bytes()
        if path.suffix == ".parquet":
            # Parquet pages are compressed: search the decoded rows, not just the bytes.
            tables.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    return raw, "\n".join(tables)


def test_host_environment_never_reaches_a_recording(
    terminal_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_VAR, token)
    assert os.environ[TOKEN_VAR] == token

    task = TerminalTask(
        name="dump-environment",
        instruction="Show every environment variable.",
        category="environment",
        steps=(
            command("env; printenv"),
            command(f"printenv {TOKEN_VAR}; echo status=$?"),
            command("tr '\\0' '\\n' < /proc/1/environ | sort"),
            command("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c sk-test-"),
        ),
    )
    run_dir = tmp_path / "secrets-run"
    recorder = RunRecorder(run_dir, {"domain": "terminal", "run_name": "secrets-run"})
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        result = run_episode(
            env,
            ScriptPolicy(),
            recorder.begin("secrets-run-s000000"),
            EpisodePlan(index=0, seed=0, task=task),
            EpisodeLimits(max_steps=10, step_timeout_s=20),
        )
        inside = env.sandbox.exec(["env"], timeout=10, user="user").text
    finally:
        env.close()
    assert result.status == "completed"
    assert result.steps == 4
    assert inside and "HOME=/home/user" in inside
    assert token not in inside
    assert TOKEN_VAR not in inside

    episode_file = run_dir / "raw" / "episodes" / "secrets-run-s000000.jsonl"
    steps = [event for event in read_episode(episode_file) if isinstance(event, RawStep)]
    screens = [plain_screen(step.observation["screen"]) for step in steps]
    # The environment was shown and recorded, without the planted variable.
    assert "HOME=/home/user" in screens[0]
    assert "PATH=/usr/local/sbin" in screens[0]
    assert "status=1" in screens[1]
    assert screens[3].split("\n")[-2] == "0"

    report = normalize_run(run_dir)
    assert report.transitions == 4
    raw, decoded = _all_recorded_text(run_dir)
    assert b"HOME=/home/user" in raw  # control: the recording does hold the screens
    assert "HOME=/home/user" in decoded
    # The variable's name was typed by the task itself; its value must appear nowhere.
    assert token.encode() not in raw
    assert token not in decoded


def test_host_environment_never_reaches_a_collected_run(
    terminal_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real collect flow (Prefect, registry, recorder, normalizer) with a planted secret."""
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    token = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_VAR, token)
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "WARNING")
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path / "runs"),
            "max_steps": 10,
            "step_timeout_s": 20,
            "policy": {"kind": "script", "tasks": ["env-export-and-persist"]},
            "environment": {"image": terminal_image},
        }
    )
    summary = run_collection(config)
    assert summary["collected"] == 1
    assert summary["failed"] == 0
    assert summary["transitions"] == summary["steps"] > 0

    raw, decoded = _all_recorded_text(config.run_dir)
    assert b"APP_ENV=staging" in raw  # control: the task's `env | grep` output was recorded
    assert token.encode() not in raw
    assert TOKEN_VAR.encode() not in raw
    assert token not in decoded
    assert TOKEN_VAR not in decoded


# --- labels and cleanup -----------------------------------------------------------------------


def test_sandbox_is_labelled_and_removed_on_close(
    terminal_image: str, terminal_docker: docker.DockerClient
) -> None:
    sandbox = DockerSandbox(terminal_image, labels={"worldtrace.test": "labels"}).start()
    try:
        container = terminal_docker.containers.get(sandbox.container.id)
        assert container.status == "running"
        assert container.labels[LABEL] == "1"
        assert container.labels[OWNER_PID_LABEL] == str(os.getpid())
        assert container.labels[OWNER_HOST_LABEL] == socket.gethostname()
        assert container.labels["worldtrace.test"] == "labels"
        listed = terminal_docker.containers.list(filters={"label": LABEL})
        assert container.id in {item.id for item in listed}
    finally:
        sandbox.close()
    assert gone(terminal_docker, container.id)
    sandbox.close()  # a second close is harmless


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)
    return child.pid


def _labelled_container(
    client: docker.DockerClient, image: str, owner_pid: int, start: bool = True
) -> Container:
    labels = {
        LABEL: "1",
        OWNER_PID_LABEL: str(owner_pid),
        OWNER_HOST_LABEL: socket.gethostname(),
        "worldtrace.test": "gc",
    }
    make = client.containers.run if start else client.containers.create
    extra = {"detach": True} if start else {}
    return make(image, ["sleep", "120"], network_mode="none", labels=labels, **extra)


GC_TEST = {"worldtrace.test": "gc"}
"""The label of this module's gc containers: its sweeps leave other tests' (a parallel
worker's killed run) alone."""


def test_gc_removes_orphans_but_not_live_sandboxes(
    terminal_image: str, terminal_docker: docker.DockerClient
) -> None:
    orphan = _labelled_container(terminal_docker, terminal_image, _dead_pid())
    mine = _labelled_container(terminal_docker, terminal_image, os.getpid())
    sandbox = DockerSandbox(terminal_image, labels=GC_TEST).start()
    try:
        removed = gc(labels=GC_TEST)
        assert orphan.id in removed
        assert gone(terminal_docker, orphan.id)
        assert mine.id not in removed
        assert sandbox.container.id not in removed
        assert terminal_docker.containers.get(mine.id).status == "running"
        assert sandbox.is_running()
    finally:
        sandbox.close()
        for container in (orphan, mine):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_gc_spares_a_live_owners_container_being_started(
    terminal_image: str, terminal_docker: docker.DockerClient
) -> None:
    created = _labelled_container(terminal_docker, terminal_image, os.getpid(), start=False)
    try:
        removed = gc(labels=GC_TEST)
        assert created.id not in removed
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            created.remove(force=True)
