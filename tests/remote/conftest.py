"""A real SSH server (Debian's OpenSSH) on loopback, for tests of machines reached over SSH.

:func:`sshd` starts a container of the test image in ``sshd/`` (built from our base image by
``sandboxes/images.py``, once; later sessions reuse it) with the host's network, sshd
listening on ``127.0.0.1:<a free port>`` and the engine's socket bind-mounted, so that
``ssh://worldtrace@127.0.0.1:<port>`` reaches this machine's Docker engine the way a remote
one is reached. It is a test fixture, not an episode sandbox: made with the Docker SDK
directly, labelled as ours with this process as its owner (``worldtrace sandboxes gc``
removes it if the test process dies) and removed when the module's tests are done.

For other test modules (a terminal episode on an SSH host): the server has

- user ``worldtrace`` (uid 1000, home ``/home/worldtrace``, bash, passwordless ``sudo``,
  member of the group owning the engine's socket) and ``root``, both accepting the key at
  :attr:`SshServer.key`, no passwords;
- ``tmux``, ``python3``, ``sudo``, ``procps`` and the ``docker`` CLI;
- a fresh ed25519 host key per container, written to :attr:`SshServer.known_hosts` (an
  OpenSSH known_hosts file, the only key trusted for ``[127.0.0.1]:<port>``);
- ``MaxSessions 100``;
- the fixture's folder (:attr:`SshServer.folder`, holding the key) mounted at
  :data:`SHARED` (an SSH agent started there is reachable from the tests).

Use it from another module in this folder by naming the fixture ``sshd``; it is
module-scoped (a server start takes about a second; the image is built once), so that no
container outlives the module that asked for it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import paramiko
import pytest
from docker.models.containers import Container
from docker.types import Mount

from worldtrace.sandboxes.docker import LABEL, OWNER_HOST_LABEL, OWNER_PID_LABEL
from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.images import ImageDefinition, ensure_image

SSHD_IMAGE = ImageDefinition("test-sshd", Path(__file__).parent / "sshd")
"""The SSH server's image: OpenSSH, the docker CLI, tmux and python3 on our base image."""
USER = "worldtrace"
ENGINE_SOCKET = "/var/run/docker.sock"
SHARED = "/run/wt-test"
"""Where the server sees the fixture's folder."""
START_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class SshServer:
    """A running SSH server on loopback, and what a client needs to reach it."""

    host: str
    port: int
    user: str
    key: Path
    """Private ed25519 key (OpenSSH format, no passphrase) authorized for ``user`` and root."""
    known_hosts: Path
    """A known_hosts file holding exactly the server's real host key."""
    host_key: paramiko.PKey
    container: Container
    folder: Path
    """A folder of this machine the server sees at :data:`SHARED`."""

    @property
    def url(self) -> str:
        """``ssh://user@127.0.0.1:port``, with no options."""
        return f"ssh://{self.user}@{self.host}:{self.port}"

    @property
    def sandbox_host(self) -> str:
        """The sandbox host URL naming this server's key and known_hosts file."""
        return f"{self.url}?key={self.key}&known_hosts={self.known_hosts}"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on (bound and released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_key(path: Path) -> paramiko.Ed25519Key:
    """Make an ed25519 key pair: the private key at ``path`` (0600), the public at ``.pub``."""
    # paramiko cannot generate ed25519 keys; cryptography (paramiko's own dependency) can.
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    path.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    path.with_name(path.name + ".pub").write_bytes(public + b" worldtrace-test\n")
    return paramiko.Ed25519Key.from_private_key_file(str(path))


def write_known_hosts(path: Path, host: str, port: int, key: paramiko.PKey) -> None:
    """Write a known_hosts file trusting ``key`` (only) for ``host:port``."""
    known = paramiko.HostKeys()
    known.add(f"[{host}]:{port}" if port != 22 else host, key.get_name(), key)
    known.save(str(path))


def _server_key(host: str, port: int, deadline: float, container: Container) -> paramiko.PKey:
    """The host key the server offers, once it answers (read over SSH, as a client sees it)."""
    while True:
        try:
            with socket.create_connection((host, port), timeout=2) as sock:
                transport = paramiko.Transport(sock)
                try:
                    transport.start_client(timeout=5)
                    return transport.get_remote_server_key()
                finally:
                    transport.close()
        except (OSError, paramiko.SSHException, EOFError) as error:
            container.reload()
            if container.status != "running" or time.monotonic() > deadline:
                logs = container.logs().decode(errors="replace")[-2000:]
                raise RuntimeError(f"sshd did not start ({error}); its log:\n{logs}") from None
            time.sleep(0.1)


@contextlib.contextmanager
def running_sshd(folder: Path) -> Iterator[SshServer]:
    """Start the SSH server (its key and known_hosts in ``folder``); remove it on leaving."""
    client = docker_client()
    image_id = ensure_image(SSHD_IMAGE, client)
    key = folder / "id_ed25519"
    write_key(key)
    port = free_port()
    container = client.containers.run(
        image_id,
        detach=True,
        auto_remove=True,
        network_mode="host",
        mounts=[
            Mount(target=ENGINE_SOCKET, source=ENGINE_SOCKET, type="bind"),
            Mount(target=SHARED, source=str(folder), type="bind"),
        ],
        environment={
            "SSHD_PORT": str(port),
            "AUTHORIZED_KEYS": key.with_name(key.name + ".pub").read_text().strip(),
            "DOCKER_GID": str(os.stat(ENGINE_SOCKET).st_gid),
        },
        labels={
            LABEL: "1",
            OWNER_PID_LABEL: str(os.getpid()),
            OWNER_HOST_LABEL: socket.gethostname(),
            "worldtrace.test": "sshd",
        },
        name=f"wt-test-sshd-{port}",
    )
    try:
        host_key = _server_key("127.0.0.1", port, time.monotonic() + START_TIMEOUT_S, container)
        known_hosts = folder / "known_hosts"
        write_known_hosts(known_hosts, "127.0.0.1", port, host_key)
        yield SshServer("127.0.0.1", port, USER, key, known_hosts, host_key, container, folder)
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """An OpenSSH server on 127.0.0.1 whose ``worldtrace`` user may use this machine's engine."""
    with running_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
