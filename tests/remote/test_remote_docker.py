"""Sandboxes on a Docker engine reached over SSH (a real OpenSSH server, see conftest.py).

The server runs on loopback and its user reaches this machine's own engine, so what these
tests show is the path: everything goes through paramiko and ``docker system dial-stdio`` on
the server, which its log of accepted logins confirms, and the checks (host key, client key,
disk cap) happen before anything runs.
"""

from __future__ import annotations

import contextlib
import select
import shutil
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import docker
import docker.errors
import polars as pl
import pytest

from tests.remote.conftest import SHARED, SshServer, write_key, write_known_hosts
from worldtrace.flows.collect import run_collection
from worldtrace.flows.config import validate_config
from worldtrace.sandboxes import remote
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.images import ImageDefinition, build_images
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas.errors import ConfigError

pytestmark = pytest.mark.docker

UNCAPPED = Limits(disk_mb=None)


def accepted_logins(server: SshServer) -> int:
    """How many key logins the server has accepted so far (from sshd's own log)."""
    log = server.container.logs().decode(errors="replace")
    return log.count("Accepted publickey for worldtrace")


def with_known_hosts(server: SshServer, known_hosts: Path, key: Path | None = None) -> str:
    """The server's sandbox host URL with another known_hosts file (and key)."""
    return f"{server.url}?key={key or server.key}&known_hosts={known_hosts}"


def test_a_sandbox_through_ssh_runs_a_command_and_is_removed(
    sshd: SshServer, terminal_image: str
) -> None:
    logins = accepted_logins(sshd)
    client = remote.connect(sshd.sandbox_host)
    assert remote.host_of(client) == remote.SandboxHost.parse(sshd.sandbox_host)
    assert accepted_logins(sshd) == logins + 1
    local = docker.from_env()
    with DockerSandbox(terminal_image, limits=UNCAPPED, client=client) as sandbox:
        result = sandbox.exec("echo hello from $(hostname); id -un", timeout=10)
        assert (result.exit_code, result.text) == (0, "hello from sandbox\nroot\n")
        name = sandbox.container.name
        # The engine behind the server is this machine's: the same container, seen locally.
        assert local.containers.get(name).status == "running"
        stream = sandbox.open_stream(["sh", "-c", "while read line; do echo got $line; done"])
        stream.send_line("one")
        assert stream.read_line(timeout=5) == "got one"
        with pytest.raises(TimeoutError):
            stream.read_line(timeout=0.3)  # nothing more: the timeout holds over SSH too
        stream.close()
    with pytest.raises(docker.errors.NotFound):
        local.containers.get(name)
    client.close()


def test_requests_reuse_ssh_sessions(sshd: SshServer, terminal_image: str) -> None:
    # Each new SSH session starts `docker system dial-stdio` on the server (0.1 s or more).
    client = remote.connect(sshd.sandbox_host)
    transport = client.api._custom_adapter.ssh_client.get_transport()
    opened = []
    open_session = transport.open_session
    transport.open_session = lambda *a, **k: opened.append(1) or open_session(*a, **k)
    for _ in range(2):
        with DockerSandbox(terminal_image, limits=UNCAPPED, client=client) as sandbox:
            assert sandbox.exec(["true"]).exit_code == 0
    # A sandbox's requests share one pooled session; an exec takes one of its own (its
    # connection is handed over to the process's streams): the test's, and the one that makes
    # the agent's view (sandboxes/view.py) in each sandbox.
    assert len(opened) <= 1 + 2 * 2
    client.close()


def test_a_collection_through_ssh_produces_transitions(
    sshd: SshServer, terminal_image: str, tmp_path: Path
) -> None:
    logins = accepted_logins(sshd)
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path),
            "sandbox_host": sshd.sandbox_host,
            "policy": {"kind": "script", "tasks": ["git-tag-from-history"]},
            "environment": {"limits": {"disk_mb": None}},
        }
    )
    summary = run_collection(config)
    assert (summary["collected"], summary["failed"], summary["errors"]) == (1, 0, 0)
    assert summary["transitions"] == summary["steps"] > 0
    episodes = pl.read_parquet(config.run_dir / "episodes.parquet")
    assert episodes["total_reward"].to_list() == [1.0]
    # The run's sandboxes went through the server (one connection for the whole run).
    assert accepted_logins(sshd) > logins
    # Where a run's sandboxes ran is not part of what it collected.
    assert "sandbox_host" not in config.identity()


def test_a_disk_cap_on_another_machine_is_refused_before_anything_runs(
    sshd: SshServer, tmp_path: Path, terminal_image: str
) -> None:
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path),
            "sandbox_host": sshd.sandbox_host,
        }
    )
    with pytest.raises(ConfigError, match=r"environment\.limits\.disk_mb.*disk_mb: null"):
        run_collection(config)
    assert not config.run_dir.exists()
    with pytest.raises(SandboxError, match="disk_mb"):
        DockerSandbox(terminal_image, client=remote.client_for(sshd.sandbox_host)).start()


def test_a_wrong_host_key_is_a_clear_error_before_anything_runs(
    sshd: SshServer, tmp_path: Path
) -> None:
    impostor = write_key(tmp_path / "impostor")
    known_hosts = tmp_path / "known_hosts"
    write_known_hosts(known_hosts, sshd.host, sshd.port, impostor)
    logins = accepted_logins(sshd)
    with pytest.raises(remote.SandboxHostError) as raised:
        remote.connect(with_known_hosts(sshd, known_hosts))
    message = str(raised.value)
    assert sshd.host_key.fingerprint in message and impostor.fingerprint in message
    assert "intercepting" in message and "ssh-keygen -R" in message
    # Refused before authenticating: the key never reached the server.
    assert accepted_logins(sshd) == logins

    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path / "runs"),
            "sandbox_host": with_known_hosts(sshd, known_hosts),
            "environment": {"limits": {"disk_mb": None}},
        }
    )
    with pytest.raises(remote.SandboxHostError, match="holds"):
        run_collection(config)
    assert not config.run_dir.exists()


def test_an_unknown_host_key_is_a_clear_error(sshd: SshServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(remote.SandboxHostError) as raised:
        remote.connect(with_known_hosts(sshd, empty))
    message = str(raised.value)
    assert sshd.host_key.fingerprint in message
    assert f"ssh-keyscan -p {sshd.port} 127.0.0.1 >> {empty}" in message
    assert empty.read_text() == ""  # nothing accepted, nothing written


def test_a_refused_key_is_a_clear_error(sshd: SshServer, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    write_key(stranger)
    with pytest.raises(remote.SandboxHostError, match=r"refused key .*stranger.*authorized_keys"):
        remote.connect(with_known_hosts(sshd, sshd.known_hosts, key=stranger))
    with pytest.raises(remote.SandboxHostError, match="does not exist"):
        remote.connect(with_known_hosts(sshd, sshd.known_hosts, key=tmp_path / "missing"))


def test_without_a_key_file_the_ssh_agents_key_is_used(
    sshd: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Debian's ssh-agent, run in the server's container on a socket in the shared folder.
    agent = f"{SHARED}/agent-{tmp_path.name}.sock"
    started = sshd.container.exec_run(["ssh-agent", "-a", agent])
    assert started.exit_code == 0, started.output
    added = sshd.container.exec_run(
        ["ssh-add", f"{SHARED}/{sshd.key.name}"], environment={"SSH_AUTH_SOCK": agent}
    )
    assert added.exit_code == 0, added.output
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ssh/id_* to fall back on
    without_key = f"{sshd.url}?known_hosts={sshd.known_hosts}"
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with pytest.raises(remote.SandboxHostError, match=r"no key to log in to .*\(SSH_AUTH_SOCK\)"):
        remote.connect(without_key)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(sshd.folder / Path(agent).name))
    client = remote.connect(without_key)
    assert client.ping()
    client.close()


def test_a_user_without_docker_there_is_a_clear_error(sshd: SshServer, tmp_path: Path) -> None:
    # A machine without Docker: the CLI hidden on the server for the duration of the test.
    hidden = sshd.container.exec_run(["mv", "/usr/bin/docker", "/usr/bin/docker.hidden"])
    assert hidden.exit_code == 0
    try:
        with pytest.raises(remote.SandboxHostError, match="`docker` command is not installed"):
            remote.connect(sshd.sandbox_host)
    finally:
        sshd.container.exec_run(["mv", "/usr/bin/docker.hidden", "/usr/bin/docker"])


def test_images_are_built_on_the_engine_through_ssh(sshd: SshServer, tmp_path: Path) -> None:
    folder = tmp_path / f"probe-{tmp_path.name}"
    folder.mkdir()
    (folder / "Dockerfile").write_text(
        "ARG BASE\nFROM ${BASE}\nRUN echo built-through-ssh > /probe\n"
    )
    definition = ImageDefinition(f"test-remote-{tmp_path.name.lower()}", folder)
    client = remote.connect(sshd.sandbox_host)
    local = docker.from_env()
    try:
        built = build_images([definition], client)
        assert local.images.get(definition.tag).id == built[definition.name]
        output = local.containers.run(built[definition.name], ["cat", "/probe"], remove=True)
        assert output == b"built-through-ssh\n"
        # A current image is reused, not built again.
        assert build_images([definition], client)[definition.name] == built[definition.name]
    finally:
        client.close()
        with contextlib.suppress(docker.errors.ImageNotFound):
            local.images.remove(definition.tag, force=True)
        shutil.rmtree(folder)


def test_the_default_is_this_machines_engine_and_the_host_comes_from_the_context(
    sshd: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(remote.SANDBOX_HOST_ENV, raising=False)
    local = docker_client()
    assert remote.host_of(local) is None
    assert local.api.base_url == "http+docker://localhost"
    with remote.on_host(sshd.sandbox_host):
        assert remote.host_of(docker_client()) == remote.SandboxHost.parse(sshd.sandbox_host)
    assert remote.host_of(docker_client()) is None
    # A worker's default: the environment variable, under any host a run names itself.
    monkeypatch.setenv(remote.SANDBOX_HOST_ENV, sshd.sandbox_host)
    assert remote.host_of(docker_client()) is not None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ssh://user:secret@host", "no password"),
        ("ssh://user@host?port=3", "unknown option port"),
        ("http://host:2375", "is not ssh://"),
        ("ssh://user@host/path", "has a path"),
        ("tcp://user@host:2376", "takes no user name"),
        ("ssh://user@host:notaport", "is not a URL"),
    ],
)
def test_a_bad_sandbox_host_is_a_config_error(url: str, problem: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        validate_config(
            {"domain": "terminal", "episodes": 1, "out": str(tmp_path), "sandbox_host": url}
        )
    assert "secret" not in str(raised.value)


def test_a_tcp_host_without_its_certificates_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not checked before the others exist")
    with pytest.raises(remote.SandboxHostError, match=r"cert\.pem, key\.pem are missing"):
        remote.connect(f"tcp://127.0.0.1:2376?certs={tmp_path}")


# --- tcp:// with TLS: a TLS front of this machine's engine, as `dockerd --tlsverify` is ----------


def write_certificates(folder: Path) -> None:
    """Make a CA and, signed by it, a server certificate for 127.0.0.1 and a client one.

    Docker's layout for the client: ``ca.pem``, ``cert.pem``, ``key.pem``; the server's
    certificate and key go to ``server.pem`` and ``server-key.pem``.
    """
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def certificate(
        subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: Any, extensions: list
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(subject))
            .issuer_name(name(issuer))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
        )
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical=critical)
        return builder.sign(signer, hashes.SHA256())

    def save(cert_path: Path, cert: x509.Certificate, key_path: Path, key: Any) -> None:
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate(
        "worldtrace test CA",
        ca_key,
        "worldtrace test CA",
        ca_key,
        [(x509.BasicConstraints(ca=True, path_length=None), True)],
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = certificate(
        "127.0.0.1",
        server_key,
        "worldtrace test CA",
        ca_key,
        [
            (
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                False,
            ),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
        ],
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = certificate(
        "worldtrace client",
        client_key,
        "worldtrace test CA",
        ca_key,
        [(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)],
    )
    save(folder / "ca.pem", ca, folder / "ca-key.pem", ca_key)
    save(folder / "server.pem", server, folder / "server-key.pem", server_key)
    save(folder / "cert.pem", client, folder / "key.pem", client_key)


class TlsEngineFront:
    """A TLS listener on 127.0.0.1 requiring a client certificate, relaying to the engine."""

    def __init__(self, certs: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(certs / "server.pem", certs / "server-key.pem")
        self.context.load_verify_locations(certs / "ca.pem")
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.refused = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(connection,), daemon=True).start()

    def _relay(self, connection: socket.socket) -> None:
        try:
            client = self.context.wrap_socket(connection, server_side=True)
        except (ssl.SSLError, OSError):
            self.refused += 1
            connection.close()
            return
        engine = socket.socket(socket.AF_UNIX)
        engine.connect("/var/run/docker.sock")
        # One thread per connection: SSL objects must not be read and written concurrently.
        with client, engine:
            while True:
                ready = [client] if client.pending() else select.select([client, engine], [], [])[0]
                if client in ready:
                    data = client.recv(65536)
                    if not data:
                        return
                    engine.sendall(data)
                if engine in ready:
                    data = engine.recv(65536)
                    if not data:
                        return
                    client.sendall(data)

    def close(self) -> None:
        """Stop accepting connections."""
        self.listener.close()


def test_a_sandbox_through_tcp_with_tls_runs_and_streams(
    tmp_path: Path, terminal_image: str
) -> None:
    write_certificates(tmp_path / "certs")
    front = TlsEngineFront(tmp_path / "certs")
    try:
        client = remote.connect(f"tcp://127.0.0.1:{front.port}?certs={tmp_path / 'certs'}")
        assert remote.host_of(client) is not None
        with DockerSandbox(terminal_image, limits=UNCAPPED, client=client) as sandbox:
            assert sandbox.exec(["echo", "over tls"]).text == "over tls\n"
            stream = sandbox.open_stream(["sh", "-c", "while read l; do echo got $l; done"])
            for word in ("one", "two", "three"):
                stream.send_line(word)
            assert [stream.read_line(timeout=5) for _ in range(3)] == [
                "got one",
                "got two",
                "got three",
            ]
            with pytest.raises(TimeoutError):
                stream.read_line(timeout=0.3)
            stream.close()
        client.close()
        # Another CA's certificate: the client does not trust the server, and says so.
        write_certificates(tmp_path / "other")
        with pytest.raises(remote.SandboxHostError, match="cannot reach the Docker engine"):
            remote.connect(f"tcp://127.0.0.1:{front.port}?certs={tmp_path / 'other'}")
    finally:
        front.close()
