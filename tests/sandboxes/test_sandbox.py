"""DockerSandbox against the real engine: exec, files, snapshot, cleanup on signals."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import docker
import docker.errors
import pytest

from worldtrace.sandboxes.docker import LABEL, OWNER_PID_LABEL, DockerSandbox
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker


def test_exec_returns_output_and_kills_a_hung_command(terminal_image):
    with DockerSandbox(terminal_image) as sandbox:
        result = sandbox.exec("echo out; echo err >&2; exit 3", timeout=10)
        assert (result.exit_code, result.stdout, result.stderr) == (3, b"out\n", b"err\n")
        assert not result.timed_out
        started = time.monotonic()
        hung = sandbox.exec(["sleep", "100"], timeout=1.5)
        assert hung.timed_out
        assert time.monotonic() - started < 10
        assert sandbox.exec("echo still here").text == "still here\n"


def test_files_copy_in_and_out(terminal_image):
    with DockerSandbox(terminal_image) as sandbox:
        payload = bytes(range(256)) * 100
        sandbox.put_file("/tmp/blob.bin", payload, mode=0o600)
        assert sandbox.get_file("/tmp/blob.bin") == payload
        assert sandbox.exec("stat -c %a /tmp/blob.bin").text.strip() == "600"
        with pytest.raises(FileNotFoundError):
            sandbox.get_file("/tmp/missing")


def test_snapshot_forks_the_state_into_a_new_sandbox(terminal_image):
    client = docker.from_env()
    with DockerSandbox(terminal_image) as sandbox:
        sandbox.exec("echo forked > /home/user/state.txt")
        image_id = sandbox.snapshot("worldtrace/test-snapshot", "t1")
    try:
        with DockerSandbox("worldtrace/test-snapshot:t1") as fork:
            assert fork.exec("cat /home/user/state.txt").text == "forked\n"
        with DockerSandbox(terminal_image) as fresh:
            assert fresh.exec("cat /home/user/state.txt").exit_code != 0
    finally:
        client.images.remove(image_id, force=True)


def test_missing_image_is_a_clear_error():
    with pytest.raises(SandboxError, match="worldtrace sandboxes build"):
        DockerSandbox("worldtrace/nope:0").start()


def test_only_loopback_or_host_networks_are_allowed():
    with pytest.raises(ValueError, match="network"):
        DockerSandbox("x", network="bridge")


# A Ctrl-C in a terminal reaches a process whose SIGINT is the default. The suite may run with
# SIGINT ignored (a shell starts a background job, `bash .ci/run &`, with SIGINT ignored), and
# a child inherits that, so the holder would never see the signal: it puts the terminal's
# state back first.
HOLDER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
from worldtrace.sandboxes.docker import DockerSandbox, exit_cleanly_on_sigterm
exit_cleanly_on_sigterm()
sandbox = DockerSandbox(sys.argv[1]).start()
print(sandbox.container.id, flush=True)
time.sleep(300)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sandboxes_are_removed_on_ctrl_c_and_sigterm(terminal_image, sig):
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, terminal_image], stdout=subprocess.PIPE, text=True
    )
    container_id = process.stdout.readline().strip()
    client = docker.from_env()
    assert client.containers.get(container_id).labels[OWNER_PID_LABEL] == str(process.pid)
    process.send_signal(sig)
    process.wait(timeout=30)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            client.containers.get(container_id)
        except docker.errors.NotFound:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the sandbox outlived its process")
    assert not client.containers.list(
        all=True, filters={"label": [LABEL, f"{OWNER_PID_LABEL}={process.pid}"]}
    )


def test_a_sandbox_started_twice_is_an_error_not_a_leaked_container(terminal_image):
    client = docker.from_env()

    def ours() -> set[str]:
        # Other tests' shared sandboxes of this process may be running too.
        mine = {"label": [LABEL, f"{OWNER_PID_LABEL}={os.getpid()}"]}
        return {container.id for container in client.containers.list(all=True, filters=mine)}

    before = ours()
    sandbox = DockerSandbox(terminal_image, limits=Limits(disk_mb=None))
    with sandbox:
        with pytest.raises(SandboxError, match="already runs container"):
            sandbox.start()
        assert ours() - before == {sandbox.container.id}
    assert ours() == before


def test_background_process_runs_detached_logs_and_reports_its_exit(terminal_image):
    with DockerSandbox(terminal_image) as sandbox:
        server = sandbox.start_background(
            ["sh", "-c", "echo started; echo oops >&2; sleep 100"], log_path="/tmp/server.log"
        )
        crashing = sandbox.start_background(["sh", "-c", "exit 7"], log_path="/tmp/crash.log")
        deadline = time.monotonic() + 10
        while sandbox.background_exit_code(crashing) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sandbox.background_exit_code(crashing) == 7
        assert sandbox.background_exit_code(server) is None
        while "oops" not in sandbox.exec("cat /tmp/server.log").text:
            assert time.monotonic() < deadline, "the background process wrote no log"
            time.sleep(0.05)
        assert sandbox.exec("cat /tmp/server.log").text == "started\noops\n"
        assert sandbox.exec("pgrep -x sleep").exit_code == 0


# --- disk cap ---------------------------------------------------------------------------------


def _disk_usage(path: str) -> int:
    stats = os.statvfs(path)
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


def test_a_write_past_the_disk_cap_fails_inside_and_spares_the_host(terminal_image):
    from worldtrace.sandboxes.disk import disk_root

    cap_mb = 64
    before = _disk_usage("/")
    with DockerSandbox(terminal_image, limits=Limits(disk_mb=cap_mb)) as sandbox:
        # Twice the cap, into a writable path: the sandbox's own disk fills up, nothing else.
        result = sandbox.exec(f"dd if=/dev/zero of=/tmp/fill bs=1M count={2 * cap_mb}", timeout=60)
        assert result.exit_code != 0
        assert b"No space left on device" in result.stderr
        written = int(sandbox.exec("stat -c %s /tmp/fill").text)
        assert 0.5 * cap_mb * 2**20 < written <= cap_mb * 2**20
        assert _disk_usage("/") - before < (cap_mb + 32) * 2**20
        # Everything else is read-only: no write can reach the image's layer on the host.
        elsewhere = sandbox.exec("echo x > /usr/local/escape", timeout=10)
        assert b"Read-only file system" in elsewhere.stderr
        # The sandbox still works with a full disk.
        assert sandbox.exec("echo alive").text == "alive\n"
        disk = disk_root() / sandbox.container.name
        assert disk.is_dir()
    assert not disk.exists()  # released with the sandbox
    assert _disk_usage("/") - before < 32 * 2**20


def test_writable_paths_are_binds_of_the_disk_seeded_with_the_image_content(terminal_image):
    client = docker.from_env()
    image = client.images.get(terminal_image)
    paths = image.labels["worldtrace.writable"].split()
    with DockerSandbox(terminal_image) as sandbox:
        mounts = {m["Destination"]: m for m in sandbox.container.attrs["Mounts"]}
        assert sorted(mounts) == sorted(paths)
        assert all(m["Type"] == "bind" and m["RW"] for m in mounts.values())
        # /tmp keeps its sticky world-writable mode; the home folder keeps the image's files.
        assert sandbox.exec("stat -c %a /tmp").text.strip() == "1777"
        home = next(path for path in paths if path not in ("/tmp", "/var/tmp", "/run"))
        assert ".bashrc" in sandbox.exec(["ls", "-A", home]).text


def test_two_disks_list_the_same_files_in_the_same_order() -> None:
    # ext4 lists a directory in its names' hash order; with a seed drawn at random per disk,
    # each episode's workspace listed the same files in another order.
    from worldtrace.sandboxes.disk import SandboxDisk

    names = [f"file-{k:02d}.txt" for k in range(30)]
    listings = []
    for name, order in (("wt-test-order-a", names), ("wt-test-order-b", names[::-1])):
        disk = SandboxDisk(name, 16).create()
        try:
            folder = disk.path(0)
            folder.mkdir()
            for file in order:
                (folder / file).write_text(file)
            listings.append(os.listdir(folder))
        finally:
            disk.release()
    assert sorted(listings[0]) == names
    assert listings[0] != names  # hash order, not the order of creation or of names
    assert listings[0] == listings[1]


def test_a_disk_left_by_a_killed_owner_is_released_by_gc(terminal_image):
    from worldtrace.sandboxes.disk import SandboxDisk, disk_root
    from worldtrace.sandboxes.docker import gc

    orphan = SandboxDisk("wt-test-orphan-disk", 16).create()
    # A maker that died: a pid that no longer exists.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    (orphan.folder / "owner").write_text(f"{child.pid} {socket.gethostname()}\n")
    mine = SandboxDisk("wt-test-live-disk", 16).create()
    try:
        # No container carries this label: the sweep releases disks only, and leaves a
        # parallel worker's killed-run sandboxes to their own tests.
        gc(labels={"worldtrace.test": "disk-gc"})
        assert not orphan.folder.exists()
        assert mine.folder.exists()  # its maker (this process) is alive
        assert (disk_root() / "wt-test-live-disk").is_dir()
    finally:
        mine.release()
        orphan.release()


def test_every_host_file_a_sandbox_binds_is_in_its_disk_folder(terminal_image):
    """So gc, which releases a killed owner's disk folder, leaves nothing of it behind: the
    clock's files were once in /tmp/wt-clock-* folders that killed runs left forever."""
    from datetime import UTC, datetime

    from worldtrace.sandboxes.disk import disk_root

    clock_start = datetime(2025, 3, 3, 9, tzinfo=UTC)
    with DockerSandbox(terminal_image, clock_start=clock_start) as sandbox:
        disk = disk_root() / sandbox.container.name
        sources = [Path(m["Source"]) for m in sandbox.container.attrs["Mounts"]]
        assert any(source.name.endswith("faketimerc") for source in sources)
        assert all(source.is_relative_to(disk) for source in sources), sources
    assert not disk.exists()


def test_without_a_disk_cap_the_root_filesystem_is_writable(terminal_image):
    with DockerSandbox(terminal_image, limits=Limits(disk_mb=None)) as sandbox:
        assert sandbox.exec("echo x > /usr/local/ok && cat /usr/local/ok").text == "x\n"
        assert sandbox.container.attrs["Mounts"] == []


def test_gc_of_a_run_removes_its_never_started_orphans_and_nothing_else(terminal_image):
    from worldtrace.sandboxes.docker import OWNER_HOST_LABEL, RUN_LABEL, gc

    client = docker.from_env()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()

    def container(run: str, owner: int, start: bool):
        labels = {
            LABEL: "1",
            OWNER_PID_LABEL: str(owner),
            OWNER_HOST_LABEL: socket.gethostname(),
            RUN_LABEL: run,
        }
        if start:
            return client.containers.run(
                terminal_image, ["sleep", "120"], detach=True, network_mode="none", labels=labels
            )
        return client.containers.create(
            terminal_image, ["sleep", "120"], network_mode="none", labels=labels
        )

    created_orphan = container("run-a", child.pid, start=False)
    running_orphan = container("run-a", child.pid, start=True)
    other_run_orphan = container("run-b", child.pid, start=True)
    live = container("run-a", os.getpid(), start=False)
    try:
        removed = set(gc(labels={RUN_LABEL: "run-a"}))
        assert removed == {created_orphan.id, running_orphan.id}
        assert client.containers.get(other_run_orphan.id).status == "running"
        assert client.containers.get(live.id).status == "created"
    finally:
        for item in (created_orphan, running_orphan, other_run_orphan, live):
            with contextlib.suppress(docker.errors.NotFound):
                item.remove(force=True)


def test_a_sandbox_removed_while_gc_lists_them_is_skipped(terminal_image):
    # Another run's episode ending between the engine's listing and the inspection of each
    # container used to crash gc (and with it a resumed collection) with NotFound.
    from worldtrace.sandboxes.docker import OWNER_HOST_LABEL, RUN_LABEL, gc, live_sandboxes

    client = docker.from_env()
    labels = {
        LABEL: "1",
        OWNER_PID_LABEL: str(os.getpid()),
        OWNER_HOST_LABEL: socket.gethostname(),
        RUN_LABEL: "run-vanishing",
    }
    vanishing = client.containers.create(terminal_image, ["sleep", "120"], labels=labels)
    staying = client.containers.create(terminal_image, ["sleep", "120"], labels=labels)
    listing = client.api.containers

    def list_then_remove_one(*args, **kwargs):
        summaries = listing(*args, **kwargs)
        with contextlib.suppress(docker.errors.NotFound):
            vanishing.remove(force=True)  # a real removal, right after the real listing
        return summaries

    client.api.containers = list_then_remove_one
    try:
        ids = {c.id for c in live_sandboxes(client, [f"{RUN_LABEL}=run-vanishing"])}
        assert ids == {staying.id}
        assert gc(client=client, labels={RUN_LABEL: "run-vanishing"}) == []
        assert client.containers.get(staying.id).status == "created"
    finally:
        client.api.containers = listing
        for item in (vanishing, staying):
            with contextlib.suppress(docker.errors.NotFound):
                item.remove(force=True)
