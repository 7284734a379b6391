"""Docker containers as sandboxes: limits, isolation, exec, file copy, snapshot, cleanup.

A sandbox knows nothing about transitions. It starts a container from one of our images with
CPU, memory, process, disk and wall-clock limits, no network unless asked, no host mounts
unless asked, and labels that mark it as ours; it runs commands with a timeout, copies files,
and removes itself on close, on Ctrl-C, at interpreter exit, and through :func:`gc` after a
crash.

The disk cap: the container's root filesystem is read-only, and the paths its image declares
writable (the label ``worldtrace.writable``, space-separated; ``/tmp`` when absent) are folders
of a small filesystem made for this sandbox alone (:mod:`worldtrace.sandboxes.disk`), seeded with
what the
image holds at those paths. Writing past ``Limits.disk_mb`` fails inside the sandbox with "No
space left on device" and never fills the host's disk.

This module is the container alone: its errors (:mod:`worldtrace.sandboxes.errors`), its
:class:`~worldtrace.sandboxes.limits.Limits` and the choice of engine
(:mod:`worldtrace.sandboxes.engine`) live in modules it builds on, so that the image builds and
remote engines it uses never import it back.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import io
import json
import os
import select
import shlex
import signal
import socket
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container
from docker.models.images import Image
from docker.types import Mount

from worldtrace.sandboxes import page_cache, remote, seccomp, view
from worldtrace.sandboxes.clock import ClockError, SandboxClock, release_folder
from worldtrace.sandboxes.disk import DiskError, SandboxDisk, collect_orphans
from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.errors import SandboxDied, SandboxError
from worldtrace.sandboxes.images import build_if_used_first
from worldtrace.sandboxes.limits import Limits
from worldtrace.sandboxes.owners import pid_alive

REMOVAL_SETTLE_S = 1.0
"""How long a container removed from outside may still say it runs (see ``still_running``)."""
LABEL = "worldtrace.sandbox"
OWNER_PID_LABEL = "worldtrace.owner_pid"
OWNER_HOST_LABEL = "worldtrace.owner_host"
SNAPSHOT_LABEL = "worldtrace.snapshot"
WRITABLE_LABEL = "worldtrace.writable"
"""Image label: the space-separated paths a sandbox of the image may write (on its disk)."""
DEFAULT_WRITABLE = ("/tmp",)


@dataclass(frozen=True)
class ExecResult:
    """What a command run in a sandbox returned."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool

    @property
    def text(self) -> str:
        """Stdout decoded as UTF-8."""
        return self.stdout.decode("utf-8", errors="replace")


def require_image(image: str, client: docker.DockerClient | None = None) -> str:
    """Return the id of a local image, or raise a :class:`SandboxError` saying how to build it.

    Inside ``images.building_on_first_use`` (``worldtrace collect``), an image of ours that is
    missing or stale is built first.
    """
    client = client or docker_client()
    build_if_used_first(image, client)
    return str(_local_image(image, client).id)


def _local_image(image: str, client: docker.DockerClient) -> Image:
    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        raise SandboxError(
            f"image {image!r} does not exist; build it with `worldtrace sandboxes build`"
        ) from None


def writable_paths(image: Image) -> tuple[str, ...]:
    """Return the paths a sandbox of ``image`` may write: its ``worldtrace.writable`` label."""
    declared = (image.labels or {}).get(WRITABLE_LABEL, "").split()
    return tuple(declared) or DEFAULT_WRITABLE


_seeds_by_image: dict[str, dict[str, bytes]] = {}
_seeds_lock = threading.Lock()
_versions_by_image: dict[str, dict[str, str]] = {}
_versions_lock = threading.Lock()


def _image_seeds(client: docker.DockerClient, image: Image) -> dict[str, bytes]:
    """Return the tar archive of each writable path as the image holds it (cached per image)."""
    with _seeds_lock:
        known = _seeds_by_image.get(image.id)
    if known is not None:
        return known
    # A created, never started container shows the image's files without running anything.
    holder = client.containers.create(
        image.id, ["true"], network_mode="none", labels={LABEL: "1", **_owner_labels()}
    )
    try:
        seeds = {}
        for path in writable_paths(image):
            try:
                chunks, _ = holder.get_archive(path)
                seeds[path] = b"".join(chunks)
            except docker.errors.NotFound:
                seeds[path] = b""  # not in the image: the sandbox gets an empty folder
    finally:
        _remove(holder)
    with _seeds_lock:
        _seeds_by_image[image.id] = seeds
    return seeds


def _extract_seed(
    archive: bytes, target: Path, mtime: Callable[[float], float] = lambda time: time
) -> None:
    """Unpack a ``get_archive`` tar of one folder into ``target``, owners and modes kept.

    ``mtime`` maps a file's time in the image to the time it gets (see ``SandboxClock``).
    """
    target.mkdir(mode=0o755)
    if not archive:
        return
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        members = []
        for member in tar.getmembers():
            rest = member.name.partition("/")[2]
            if not rest:
                # The folder itself: the mount point takes its owner and mode (/tmp is 1777).
                os.chown(target, member.uid, member.gid)
                os.chmod(target, member.mode)
                continue
            member.name = rest
            member.mtime = mtime(member.mtime)
            if member.islnk():
                member.linkname = member.linkname.partition("/")[2]
            members.append(member)
        # Our own image's files: owners, modes and links are to be kept exactly.
        tar.extractall(target, members=members, numeric_owner=True, filter="fully_trusted")


def _on_another_machine(client: docker.DockerClient) -> str | None:
    """The sandbox host URL ``client`` was made for, None for this machine's engine."""
    host = remote.host_of(client)
    return host.url if host else None


def _remove(container: Container) -> None:
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as error:
        if error.status_code != 409:  # removal already in progress (auto_remove)
            raise


def _add_file(archive: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, int(time.time())
    archive.addfile(info, io.BytesIO(data))


def _owner_labels() -> dict[str, str]:
    return {OWNER_PID_LABEL: str(os.getpid()), OWNER_HOST_LABEL: socket.gethostname()}


class ExecStream:
    """A long-running process in a sandbox spoken to line by line over its stdin/stdout."""

    def __init__(self, raw: Any, container: Container) -> None:
        self._raw = raw
        # The SDK hands out a socket's raw IO locally, the SSL socket itself over TLS, and
        # the paramiko channel itself over SSH; each can be selected on.
        self._sock: socket.socket = getattr(raw, "_sock", raw)
        self._container = container
        self._pending = b""

    def send_line(self, line: str) -> None:
        """Write one line to the process's stdin."""
        try:
            self._sock.sendall(line.encode() + b"\n")
        except OSError as error:
            raise SandboxDied(f"exec stream closed: {error}") from None

    def read_line(self, timeout: float) -> str:
        """Return the next stdout line; stderr is discarded. Raises on timeout or EOF."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            header = self._recv_exactly(8, deadline, timeout)
            stream, size = header[0], int.from_bytes(header[4:8], "big")
            payload = self._recv_exactly(size, deadline, timeout)
            if stream == 1:
                self._pending += payload
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode("utf-8", errors="replace")

    def _recv_exactly(self, size: int, deadline: float, timeout: float) -> bytes:
        # docker's own frame reader polls with no timeout; wait on the socket ourselves.
        data = b""
        while len(data) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no reply within {timeout:.1f}s")
            # Bytes TLS already decrypted wait in the SSL socket, unseen by select.
            pending = getattr(self._sock, "pending", None)
            if not (pending and pending()):
                ready, _, _ = select.select([self._sock], [], [], remaining)
                if not ready:
                    continue
            try:
                chunk = self._sock.recv(size - len(data))
            except OSError as error:
                raise SandboxDied(f"{self._why_closed()} ({error})") from None
            if not chunk:
                raise SandboxDied(self._why_closed())
            data += chunk
        return data

    def _why_closed(self) -> str:
        try:
            self._container.reload()
            return f"exec stream ended; container is {self._container.status}"
        except docker.errors.NotFound:
            return "exec stream ended; container is gone"

    def close(self) -> None:
        """Close the stream; the process sees end of input."""
        with contextlib.suppress(OSError):
            self._sock.close()


class DockerSandbox:
    """One container started from a local image, with limits and no network by default.

    ``network`` is ``"none"`` (loopback only), ``"host"``, or ``"container:<id>"`` to share
    another sandbox's network namespace (a site and the browser that visits it).
    """

    def __init__(
        self,
        image: str,
        limits: Limits | None = None,
        network: str = "none",
        mounts: list[Mount] | None = None,
        hostname: str = "sandbox",
        labels: dict[str, str] | None = None,
        client: docker.DockerClient | None = None,
        clock_start: datetime | None = None,
    ) -> None:
        if network not in ("none", "host") and not network.startswith("container:"):
            raise ValueError(f"network must be 'none', 'host' or 'container:<id>', not {network!r}")
        self.image = image
        self.limits = limits or Limits()
        self.network = network
        self.mounts = list(mounts or [])
        self.hostname = hostname
        self.labels = dict(labels or {})
        self._client = client
        self._container: Container | None = None
        self._disk: SandboxDisk | None = None
        self._started_at: float | None = None
        self.clock = SandboxClock(clock_start) if clock_start is not None else None
        """Where the container's wall clock starts (None: the real clock; see clock.py)."""
        self._clock_folder: Path | None = None

    @property
    def client(self) -> docker.DockerClient:
        """The Docker client, connected on first use."""
        if self._client is None:
            self._client = docker_client()
        return self._client

    @property
    def container(self) -> Container:
        """The running container; raises if the sandbox was not started."""
        if self._container is None:
            raise SandboxError("sandbox is not started")
        return self._container

    @property
    def image_id(self) -> str:
        """The content id of the image the container runs."""
        return self.container.image.id

    def start(self) -> DockerSandbox:
        """Create and start the container, with its capped disk unless ``disk_mb`` is None.

        A sandbox holds one container: starting it twice (``with sandbox.start():``) is an
        error, not a second container the first one's owner can no longer remove.
        """
        if self._container is not None:
            raise SandboxError(f"this sandbox already runs container {self._container.name}")
        image = _local_image(self.image, self.client)
        # The name is chosen here so that the disk, made first, carries it too (see gc).
        name = f"wt-{uuid.uuid4().hex[:16]}"
        labels = {LABEL: "1", **_owner_labels(), **dict(_context_labels.get()), **self.labels}
        mounts = list(self.mounts)
        elsewhere = _on_another_machine(self.client)
        if self.limits.disk_mb is not None and elsewhere:
            raise SandboxError(
                f"a sandbox on {elsewhere} cannot have a disk cap (a capped disk is a loop "
                "device of this machine); set limits.disk_mb to null"
            )
        if not elsewhere:
            page_cache.warm(image)  # resident sizes the agent sees must not depend on others
        if self.limits.disk_mb is not None:
            self._disk = self._make_disk(name, image)
            mounts += [
                Mount(target=path, source=str(self._disk.path(index)), type="bind")
                for index, path in enumerate(writable_paths(image))
            ]
        if self.clock is not None and self._disk is not None:
            mounts += self._clock_mounts()
        memory = f"{self.limits.memory_mb}m"
        private_view = (image.labels or {}).get(view.VIEW_LABEL) == "private"
        # Taken before the container's clock (its main process) starts, so the wall-clock
        # limit is never judged late.
        self._started_at = time.monotonic()
        try:
            self._container = self.client.containers.run(
                image.id,
                # The main process is the wall-clock limit: when it ends, the container stops
                # and, with auto_remove, disappears even if this process was killed.
                ["sleep", str(int(self.limits.wall_clock_s))],
                name=name,
                detach=True,
                auto_remove=True,
                init=True,
                # A sandbox in another's network namespace has that one's name (Docker
                # refuses both).
                hostname=None if self.network.startswith("container:") else self.hostname,
                network_mode=self.network,
                mounts=mounts,
                labels=labels,
                nano_cpus=int(self.limits.cpus * 1e9),
                mem_limit=memory,
                memswap_limit=memory,
                pids_limit=self.limits.pids,
                # A private view's sandbox also gets Docker's seccomp profile plus the
                # personality value that turns address randomization off (seccomp.py).
                security_opt=["no-new-privileges"]
                + ([seccomp.security_option()] if private_view else []),
                read_only=self._disk is not None,
                environment={},
                **(self._view_options() if private_view else {}),
            )
        except docker.errors.APIError as error:
            self._release_disk()
            raise SandboxError(f"cannot start a container from {self.image!r}: {error}") from None
        except BaseException:
            self._release_disk()
            raise
        with _live_lock:
            _live.add(self)
        if self.clock is not None and self._disk is None:
            # A writable root filesystem (no disk cap, e.g. an engine on another machine):
            # the clock's files are written into it before anything but the keep-alive runs.
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w") as archive:
                for path, data in self._clock_files().items():
                    _add_file(archive, path.lstrip("/"), data)
            if not self.container.put_archive("/", buffer.getvalue()):
                raise SandboxError("could not write the clock's files into the sandbox")
        if private_view:
            self._make_view(image)
        return self

    def _view_options(self) -> dict[str, Any]:
        """Container options of a sandbox with a private view (see :mod:`.view`).

        Its root processes may make namespaces (CAP_SYS_ADMIN, and CAP_SYS_TIME for the time
        namespace's offsets; the agent, an unprivileged user under no-new-privileges, cannot use
        them), and it runs on as many cores as its CPU limit
        (rounded up), so that ``nproc`` says the sandbox's size. Sandboxes take turns over the
        host's cores.
        """
        global _next_core
        count = view.cpu_count(self.limits.cpus)
        host_cores = _host_cores(self.client)
        with _core_lock:
            first, _next_core = _next_core, _next_core + count
        cores = sorted({(first + offset) % host_cores for offset in range(count)})
        # SYS_TIME: the view's time namespace gets a boot clock of its own (writing its offsets
        # needs it); like SYS_ADMIN, only the container's root processes (ours) hold it.
        return {
            "cap_add": ["SYS_ADMIN", "SYS_TIME"],
            "cpuset_cpus": ",".join(str(c) for c in cores),
        }

    def _make_view(self, image: Image) -> None:
        """Make the agent's view in the started container, or remove it and raise."""
        hidden = (image.labels or {}).get(view.HIDDEN_LABEL, "").split()
        offset = round(self.clock.offset_s()) if self.clock is not None else 0
        environment = view.setup_environment(
            self.limits.memory_mb,
            self.limits.cpus,
            hidden,
            offset,
            disk_mb=self.limits.disk_mb,
            writable=writable_paths(image),
        )
        try:
            result = self.exec(["bash", "-c", view.SETUP], timeout=30, env=environment, user="root")
        except BaseException:
            self.close()
            raise
        if result.exit_code != 0:
            self.close()
            raise SandboxError(
                f"cannot make the agent's view in a sandbox of {self.image!r}: "
                f"{result.stderr.decode(errors='replace').strip()[-500:]}"
            )

    def _clock_files(self) -> dict[str, bytes]:
        assert self.clock is not None
        try:
            return self.clock.files(self.client)
        except ClockError as error:
            raise SandboxError(str(error)) from None

    def _clock_mounts(self) -> list[Mount]:
        """Read-only binds of the clock's files, from a folder removed with the disk.

        The folder is inside the disk's own folder, so a process killed before it could close
        its sandbox leaves it where the orphan sweep (:func:`gc`) removes its disk.
        """
        assert self.clock is not None and self._disk is not None
        self._clock_folder = self._disk.folder / "clock"
        self._clock_folder.mkdir()
        try:
            return self.clock.mounts(self.client, self._clock_folder)
        except ClockError as error:
            self._release_disk()
            raise SandboxError(str(error)) from None

    def _make_disk(self, name: str, image: Image) -> SandboxDisk:
        """Make the capped disk and seed it with the image's content at the writable paths."""
        assert self.limits.disk_mb is not None
        seeds = _image_seeds(self.client, image)
        try:
            disk = SandboxDisk(name, self.limits.disk_mb).create()
        except DiskError as error:
            raise SandboxError(str(error)) from None
        try:
            shift = self.clock.shown_as_is if self.clock is not None else (lambda time: time)
            if self.clock is not None:
                # Fixed now, before the first folder is made: seeding is in the start's second.
                self.clock.offset_s()
            for index, path in enumerate(writable_paths(image)):
                _extract_seed(seeds[path], disk.path(index), shift)
        except BaseException:
            disk.release()
            raise
        return disk

    def _release_disk(self) -> None:
        release_folder(self._clock_folder)
        self._clock_folder = None
        disk, self._disk = self._disk, None
        if disk is not None:
            disk.release()

    @property
    def wall_clock_expired(self) -> bool:
        """Whether the sandbox lived past its wall-clock limit (and so stopped itself)."""
        started = self._started_at
        return started is not None and time.monotonic() - started >= self.limits.wall_clock_s

    def lost_reason(self, error: Exception) -> str:
        """Why the sandbox stopped answering during an action, as that step's error says it."""
        if self.wall_clock_expired:
            return (
                f"the sandbox reached its wall-clock limit of {self.limits.wall_clock_s:g} s "
                "and was stopped"
            )
        return f"the sandbox stopped answering after this action: {error}"

    def is_running(self) -> bool:
        """Return True while the container is running."""
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return False
        return self.container.status == "running"

    def still_running(self, settle_s: float = REMOVAL_SETTLE_S) -> bool:
        """Whether the container still runs, judged a moment after a stream into it ended.

        A container being removed or killed from outside still says "running" for a few
        milliseconds after its processes were killed: looked at once, a removal would pass
        for something its own processes did. So a "running" answer is asked again for up to
        ``settle_s``; an engine that does not answer counts as not running.
        """
        deadline = time.monotonic() + settle_s
        while True:
            try:
                running = self.is_running()
            except docker.errors.DockerException:
                return False
            if not running or time.monotonic() >= deadline:
                return running
            time.sleep(0.05)

    def exec(
        self,
        command: str | list[str],
        timeout: float = 60.0,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
    ) -> ExecResult:
        """Run a command (a shell string or an argv list) and kill it after ``timeout`` s.

        ``user`` (a name or uid) runs it as that user instead of the image's default.
        """
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        # coreutils' timeout runs inside the container, so a hung command cannot hang us.
        wrapped = ["timeout", "-s", "KILL", f"{timeout:.3f}", *argv]
        started = time.monotonic()
        try:
            result = self.container.exec_run(
                wrapped, demux=True, workdir=workdir, environment=env or {}, user=user or ""
            )
        except docker.errors.APIError as error:
            raise SandboxDied(f"exec failed: {error}") from None
        stdout, stderr = result.output
        return ExecResult(
            exit_code=result.exit_code,
            stdout=stdout or b"",
            stderr=stderr or b"",
            # 137 is SIGKILL, from our timeout or from the OOM killer; only ours takes this long.
            timed_out=result.exit_code == 137 and time.monotonic() - started >= timeout,
        )

    def open_stream(
        self, command: list[str], workdir: str | None = None, user: str | None = None
    ) -> ExecStream:
        """Start a process (as ``user``, default the image's) and stream lines to and from it."""
        api = self.client.api
        try:
            exec_id = api.exec_create(
                self.container.id,
                command,
                stdin=True,
                stdout=True,
                stderr=True,
                tty=False,
                workdir=workdir,
                environment={},
                user=user or "",
            )["Id"]
            raw = api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as error:
            raise SandboxDied(f"cannot start {shlex.join(command)}: {error}") from None
        return ExecStream(raw, self.container)

    def start_background(
        self,
        command: list[str],
        log_path: str,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
    ) -> str:
        """Start a long-running process (a server) detached, as ``user``; return its exec id.

        Stdout and stderr are appended to ``log_path`` inside the container. The process lives
        until it exits or the container goes; ask :meth:`background_exit_code` whether it did.
        """
        # `exec "$@"` replaces the shell, so the exit code docker reports is the process's own.
        argv = ["sh", "-c", 'log=$1; shift; exec "$@" >>"$log" 2>&1', "sh", log_path, *command]
        api = self.client.api
        try:
            exec_id = api.exec_create(
                self.container.id, argv, workdir=workdir, environment=env or {}, user=user or ""
            )["Id"]
            api.exec_start(exec_id, detach=True)
        except docker.errors.APIError as error:
            raise SandboxDied(f"cannot start {shlex.join(command)}: {error}") from None
        return exec_id

    def background_exit_code(self, exec_id: str) -> int | None:
        """Return the exit code of a process from :meth:`start_background`, None while it runs."""
        try:
            state = self.client.api.exec_inspect(exec_id)
        except docker.errors.APIError as error:
            raise SandboxDied(f"cannot inspect process {exec_id[:12]}: {error}") from None
        return None if state.get("Running") else int(state.get("ExitCode") or 0)

    def put_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        """Write ``data`` to ``path`` inside the container (parent directory must exist)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            _add_file(archive, os.path.basename(path), data, mode)
        if not self.container.put_archive(os.path.dirname(path) or "/", buffer.getvalue()):
            raise SandboxError(f"could not copy a file to {path}")

    def image_versions(self, probe: list[str]) -> dict[str, str]:
        """Return the versions ``probe`` prints in this sandbox, asked once per image.

        An image's packages never change, so the answer is kept per image id and every later
        sandbox of the image gets it without a process start. ``probe`` prints a JSON object
        or ``name=version`` lines.
        """
        image_id = self.image_id
        with _versions_lock:
            known = _versions_by_image.get(image_id)
        if known is not None:
            return dict(known)
        result = self.exec(probe, timeout=30)
        if result.exit_code != 0:
            raise SandboxError(
                f"version probe {shlex.join(probe)} failed (exit {result.exit_code}): "
                f"{result.stderr.decode(errors='replace')[-500:]}"
            )
        try:
            parsed = json.loads(result.text)
        except ValueError:
            parsed = dict(line.split("=", 1) for line in result.text.splitlines() if "=" in line)
        versions = {str(key): str(value) for key, value in parsed.items()}
        with _versions_lock:
            _versions_by_image[image_id] = versions
        return dict(versions)

    def get_file(self, path: str) -> bytes:
        """Return the contents of the file at ``path`` inside the container."""
        try:
            chunks, _ = self.container.get_archive(path)
        except docker.errors.NotFound:
            raise FileNotFoundError(path) from None
        with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as archive:
            member = archive.extractfile(archive.getmembers()[0])
            if member is None:
                raise IsADirectoryError(path)
            return member.read()

    def snapshot(self, repository: str, tag: str = "latest") -> str:
        """Commit the running container, its writable paths included, to an image; return its id.

        The writable paths live on the sandbox's own disk, which ``docker commit`` does not
        see, so their current content is added on top of the commit as one more layer.
        """
        committed = self.container.commit(changes=[f"LABEL {SNAPSHOT_LABEL}=1"])
        if self._disk is None:
            committed.tag(repository, tag)
            return str(committed.id)
        context = io.BytesIO()
        dockerfile = [f"FROM {committed.id}"]
        with tarfile.open(fileobj=context, mode="w") as archive:
            for index, path in enumerate(writable_paths(self.container.image)):
                chunks, _ = self.container.get_archive(path)
                _add_file(archive, f"w{index}.tar", b"".join(chunks))
                # ADD unpacks a local tar archive, keeping owners and modes.
                dockerfile.append(f"ADD w{index}.tar {PurePosixPath(path).parent}")
            _add_file(archive, "Dockerfile", ("\n".join(dockerfile) + "\n").encode())
        context.seek(0)
        try:
            image, _ = self.client.images.build(
                fileobj=context, custom_context=True, tag=f"{repository}:{tag}", rm=True
            )
        except docker.errors.DockerException as error:
            raise SandboxError(f"snapshot of {self.image!r} failed: {error}") from None
        finally:
            with contextlib.suppress(docker.errors.APIError):
                self.client.images.remove(committed.id)
        return str(image.id)

    def close(self) -> None:
        """Remove the container; safe to call more than once."""
        with _live_lock:
            _live.discard(self)
        container, self._container = self._container, None
        try:
            if container is not None:
                _remove(container)
        finally:
            # After the container: its bind mounts must be gone before the disk unmounts.
            self._release_disk()

    def __enter__(self) -> DockerSandbox:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_live: set[DockerSandbox] = set()
_live_lock = threading.Lock()
_next_core = 0
_core_lock = threading.Lock()
_cores_by_client: dict[int, int] = {}


def _host_cores(client: docker.DockerClient) -> int:
    """How many cores the engine's machine has (asked once per client)."""
    known = _cores_by_client.get(id(client))
    if known is None:
        known = max(1, int(client.info().get("NCPU") or 1))
        _cores_by_client[id(client)] = known
    return known


RUN_LABEL = "worldtrace.run"
"""Label of every sandbox started for a collection run (see :func:`labelled`)."""

_context_labels: contextvars.ContextVar[tuple[tuple[str, str], ...]] = contextvars.ContextVar(
    "worldtrace_sandbox_labels", default=()
)


@contextlib.contextmanager
def labelled(labels: dict[str, str]) -> Iterator[None]:
    """Give every sandbox started in this context (thread) these labels as well.

    The collect flow labels an episode's sandboxes with its run, whichever environment starts
    them, so that a resumed run can find and remove the containers its killed attempt left.
    """
    token = _context_labels.set(tuple({**dict(_context_labels.get()), **labels}.items()))
    try:
        yield
    finally:
        _context_labels.reset(token)


def containers_in_use() -> set[str]:
    """The ids of the containers of this process's sandboxes that are started and not closed."""
    with _live_lock:
        return {sandbox._container.id for sandbox in _live if sandbox._container is not None}


def close_all() -> None:
    """Remove every sandbox this process started and has not closed."""
    with _live_lock:
        sandboxes = list(_live)
    for sandbox in sandboxes:
        # Cleanup must go on for the others whatever one of them raises.
        with contextlib.suppress(Exception):
            sandbox.close()


atexit.register(close_all)


def exit_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into a normal exit so that sandboxes are removed as on Ctrl-C."""

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def owner_alive(labels: dict[str, str]) -> bool:
    """Return False when the labels name a process on this host that no longer exists."""
    if labels.get(OWNER_HOST_LABEL) != socket.gethostname():
        return True  # another machine's engine state is not ours to judge
    try:
        return pid_alive(int(labels.get(OWNER_PID_LABEL, "0")))
    except ValueError:
        return False


def gc(
    everything: bool = False,
    client: docker.DockerClient | None = None,
    labels: dict[str, str] | None = None,
) -> list[str]:
    """Remove our containers whose owning process is gone (or all of them); return their ids.

    ``labels`` narrows the sweep to containers carrying them (a resumed run clears its own
    orphans: ``{RUN_LABEL: name}``). A container never started ("created") is judged by the
    same rule as a running one: removed once its owner is gone. Disks whose container is gone
    and whose maker died are released too.
    """
    client = client or docker_client()
    wanted = [LABEL, *(f"{key}={value}" for key, value in (labels or {}).items())]
    removed = []
    for container in live_sandboxes(client, wanted):
        # A live owner's container may be "created" for a moment while it starts: spare it.
        finished = container.status in ("exited", "dead")
        if everything or finished or not owner_alive(container.labels):
            _remove(container)
            removed.append(container.id)
    in_use = {c.name for c in live_sandboxes(client)}
    collect_orphans(in_use)
    return removed


def live_sandboxes(
    client: docker.DockerClient | None = None, labels: list[str] | None = None
) -> list[Container]:
    """Return every container labelled as a worldtrace sandbox (and carrying ``labels``).

    A container removed between the listing and its inspection (another run's episode ending
    meanwhile) is left out: docker-py's own ``containers.list`` raises NotFound for it.
    """
    client = client or docker_client()
    found = []
    for summary in client.api.containers(all=True, filters={"label": labels or [LABEL]}):
        try:
            found.append(client.containers.get(summary["Id"]))
        except docker.errors.NotFound:
            continue
    return found


def remove_left_behind(labels: dict[str, str], host: str | None = None) -> list[str]:
    """Remove this process's sandboxes carrying ``labels`` that no episode uses any more.

    They are the ones whose removal failed while the engine was away
    (:mod:`worldtrace.sandboxes.engine`). Returns their ids.
    """
    client = docker_client(host)
    wanted = [LABEL, f"{OWNER_PID_LABEL}={os.getpid()}", *(f"{k}={v}" for k, v in labels.items())]
    in_use = containers_in_use()
    removed = []
    for container in live_sandboxes(client, wanted):
        if container.id not in in_use:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
            removed.append(container.id)
    return removed
