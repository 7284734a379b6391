"""Docker engines on other machines: ``ssh://`` through paramiko, ``tcp://`` with TLS.

A *sandbox host* is one string, the same in a config file (``sandbox_host``), on the command
line (``worldtrace collect --sandbox-host``) and in a worker's environment
(:data:`SANDBOX_HOST_ENV`, the default of every run that names none):

``ssh://user@host[:port][?key=PATH&known_hosts=PATH]``
    The engine of ``host``, reached over SSH with paramiko: the Docker SDK runs
    ``docker system dial-stdio`` there for every connection, so ``user`` must be able to run
    ``docker`` on that machine (be in its ``docker`` group). Authentication uses ``key`` (a
    private key file) when given, else the SSH agent and the usual ``~/.ssh/id_*`` files.
    The server's host key must be in ``known_hosts`` (default ``~/.ssh/known_hosts``):
    an unknown or changed key is an error before anything runs, never a silent accept.
    Each connection to the engine is one SSH session: sshd's ``MaxSessions`` (10 by default)
    must exceed the episodes run at once plus about ten.

``tcp://host:port[?certs=DIR]``
    An engine listening with TLS (``dockerd --tlsverify``): ``DIR`` (default
    ``$DOCKER_CERT_PATH``, else ``~/.docker``) holds ``ca.pem``, ``cert.pem`` and ``key.pem``
    as Docker's own tools expect them. Without TLS, anyone who reaches the port owns the
    machine, so a ``tcp://`` host without its certificates is refused.

What changes on another machine's engine: images are built there by
:func:`worldtrace.sandboxes.images.build_images` through the remote client, and a
sandbox has no disk cap, because a capped disk is a loop device of *this* machine
(:mod:`worldtrace.sandboxes.disk`) that the other machine cannot mount. A configuration that
asks for a cap (``limits.disk_mb``, 1024 by default) is refused with the fix,
``limits: {disk_mb: null}`` (:func:`require_no_disk_cap`), so a run's recorded
configuration never claims a limit its sandboxes did not have.
"""

from __future__ import annotations

import contextlib
import contextvars
import getpass
import logging
import os
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import docker
import docker.errors
import docker.tls
import paramiko
from docker.transport import SSHHTTPAdapter
from pydantic import BaseModel

from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas.errors import ConfigError

SANDBOX_HOST_ENV = "WORLDTRACE_SANDBOX_HOST"
"""The sandbox host of every run in this process that names none (a worker's engine)."""
CONNECT_TIMEOUT_S = 15.0
"""How long connecting and authenticating to an SSH server may take."""
TLS_FILES = ("ca.pem", "cert.pem", "key.pem")

_SSH_OPTIONS = frozenset({"key", "known_hosts"})
_TCP_OPTIONS = frozenset({"certs"})


class SandboxHostError(SandboxError):
    """A sandbox host that cannot be used, and what to do about it.

    Unreachable, an unknown or changed host key, a refused key, missing TLS certificates, no
    Docker engine the user may use there.
    """


@dataclass(frozen=True)
class SandboxHost:
    """A parsed sandbox host URL (see the module docstring for the forms)."""

    url: str
    scheme: Literal["ssh", "tcp"]
    hostname: str
    port: int
    username: str | None = None
    key_file: Path | None = None
    known_hosts: Path | None = None
    cert_dir: Path | None = None

    @classmethod
    def parse(cls, url: str) -> SandboxHost:
        """Read a sandbox host URL; a ValueError says what is wrong and what is expected."""
        expected = "ssh://user@host[:port] or tcp://host:port"
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError as error:
            raise ValueError(
                f"sandbox host {url!r} is not a URL ({error}); give {expected}"
            ) from None
        if parts.scheme not in ("ssh", "tcp") or not parts.hostname:
            raise ValueError(f"sandbox host {url!r} is not {expected}")
        if parts.password is not None:
            # A password would also travel into run records and Prefect's parameters.
            raise ValueError(
                f"sandbox host {parts.scheme}://{parts.username}:…@{parts.hostname}: no password "
                "in the URL; use a key (?key=PATH) or an SSH agent"
            )
        if parts.path not in ("", "/") or parts.fragment:
            raise ValueError(f"sandbox host {url!r} has a path; give {expected}")
        options = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
        allowed = _SSH_OPTIONS if parts.scheme == "ssh" else _TCP_OPTIONS
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ValueError(
                f"sandbox host {url!r}: unknown option {', '.join(unknown)}; "
                f"{parts.scheme}:// takes {', '.join(sorted(allowed))}"
            )
        if any(not value for value in options.values()):
            raise ValueError(f"sandbox host {url!r}: an option has no value")

        def path(name: str) -> Path | None:
            return Path(options[name]).expanduser() if name in options else None

        if parts.scheme == "ssh":
            return cls(
                url=url,
                scheme="ssh",
                hostname=parts.hostname,
                port=port or 22,
                username=parts.username or None,
                key_file=path("key"),
                known_hosts=path("known_hosts"),
            )
        if parts.username:
            raise ValueError(f"sandbox host {url!r}: a tcp:// host takes no user name")
        return cls(
            url=url,
            scheme="tcp",
            hostname=parts.hostname,
            port=port or 2376,
            cert_dir=path("certs"),
        )

    @property
    def user(self) -> str:
        """The SSH user: the one in the URL, else this process's user (as ``ssh`` does)."""
        return self.username or getpass.getuser()

    @property
    def address(self) -> str:
        """``host:port``, or ``user@host:port`` over SSH (for messages)."""
        where = f"{self.hostname}:{self.port}"
        return f"{self.user}@{where}" if self.scheme == "ssh" else where

    @property
    def known_hosts_file(self) -> Path:
        """The known_hosts file an SSH host's key is checked against."""
        return self.known_hosts or Path("~/.ssh/known_hosts").expanduser()

    @property
    def tls_dir(self) -> Path:
        """The folder holding a ``tcp://`` host's TLS files."""
        if self.cert_dir is not None:
            return self.cert_dir
        return Path(os.environ.get("DOCKER_CERT_PATH") or "~/.docker").expanduser()


def parse_sandbox_host(url: str) -> SandboxHost:
    """Parse ``url``, raising :class:`~worldtrace.schemas.errors.ConfigError` if it is bad."""
    try:
        return SandboxHost.parse(url)
    except ValueError as error:
        raise ConfigError(str(error)) from None


# --- which host a sandbox uses ------------------------------------------------------------

_context_host: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "worldtrace_sandbox_host", default=None
)


def current_host() -> str | None:
    """The sandbox host in effect here: :func:`on_host`'s, else :data:`SANDBOX_HOST_ENV`'s.

    None (and an empty variable) means the local engine.
    """
    return _context_host.get() or os.environ.get(SANDBOX_HOST_ENV) or None


@contextlib.contextmanager
def on_host(host: str | None) -> Iterator[None]:
    """Start every sandbox of this context (thread) on ``host``; None keeps the default.

    The collect flow runs an episode in it, so the environments, which start their sandboxes
    with :func:`worldtrace.sandboxes.engine.docker_client`, need no host of their own.
    """
    if host is None:
        yield
        return
    parse_sandbox_host(host)
    token = _context_host.set(host)
    try:
        yield
    finally:
        _context_host.reset(token)


# --- SSH ----------------------------------------------------------------------------------


class _RefuseUnknownHost(paramiko.MissingHostKeyPolicy):
    """Refuse a server whose key is not in known_hosts, saying which key it offered."""

    def __init__(self, host: SandboxHost) -> None:
        self._host = host

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: Any) -> None:
        """Raise :class:`SandboxHostError` naming the key and how to trust it."""
        known = self._host.known_hosts_file
        port = f"-p {self._host.port} " if self._host.port != 22 else ""
        raise SandboxHostError(
            f"the SSH server {hostname} offered host key {_fingerprint(key)}, which is not in "
            f"{known}; after checking that this is the server's key (on the server: "
            "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), add it with "
            f"`ssh-keyscan {port}{self._host.hostname} >> {known}`"
        )


def _fingerprint(key: Any) -> str:
    return f"{key.get_name()} {key.fingerprint}"


def _ssh_client(host: SandboxHost) -> paramiko.SSHClient:
    """An unconnected paramiko client that trusts only the host's known_hosts file."""
    client = paramiko.SSHClient()
    known = host.known_hosts_file
    if known.is_file():
        try:
            client.load_host_keys(str(known))
        except (OSError, paramiko.SSHException) as error:
            raise SandboxHostError(f"cannot read known_hosts file {known}: {error}") from None
    # load_host_keys would also write newly accepted keys back; nothing is ever accepted.
    client.set_missing_host_key_policy(_RefuseUnknownHost(host))
    return client


def _connect_params(host: SandboxHost) -> dict[str, Any]:
    """Arguments of ``SSHClient.connect``: a given key alone, else the agent and ~/.ssh."""
    params: dict[str, Any] = {
        "hostname": host.hostname,
        "port": host.port,
        "username": host.user,
        "timeout": CONNECT_TIMEOUT_S,
        "banner_timeout": CONNECT_TIMEOUT_S,
        "auth_timeout": CONNECT_TIMEOUT_S,
    }
    if host.key_file is not None:
        params |= {"key_filename": str(host.key_file), "allow_agent": False, "look_for_keys": False}
    return params


def _connect(client: paramiko.SSHClient, host: SandboxHost) -> None:
    """Connect and authenticate ``client``, turning every failure into a clear error."""
    if host.key_file is not None and not host.key_file.is_file():
        raise SandboxHostError(f"SSH key {host.key_file} (for {host.url}) does not exist")
    which_key = f"key {host.key_file}" if host.key_file else "the SSH agent's and ~/.ssh's keys"
    try:
        client.connect(**_connect_params(host))
    except SandboxHostError:
        client.close()
        raise
    except paramiko.BadHostKeyException as error:
        client.close()
        raise SandboxHostError(
            f"the SSH server {host.hostname}:{host.port} offered host key "
            f"{_fingerprint(error.key)}, but {host.known_hosts_file} holds "
            f"{_fingerprint(error.expected_key)} for it: someone may be intercepting the "
            "connection, or the server's key was changed; if you know it was, remove the old "
            f"entry (`ssh-keygen -R '[{host.hostname}]:{host.port}' -f {host.known_hosts_file}`) "
            "and add the new one"
        ) from None
    except paramiko.PasswordRequiredException:
        client.close()
        raise SandboxHostError(
            f"SSH key {host.key_file} is protected by a passphrase; load it into an SSH agent "
            "(`ssh-add`) and leave ?key= out of the sandbox host"
        ) from None
    except paramiko.AuthenticationException as error:
        client.close()
        raise SandboxHostError(
            f"the SSH server {host.address} refused {which_key} ({error}); the public key "
            f"must be in ~{host.user}/.ssh/authorized_keys there"
        ) from None
    except paramiko.SSHException as error:
        client.close()
        if "No authentication methods available" not in str(error):
            raise SandboxHostError(
                f"cannot connect to the SSH server {host.address}: {error}"
            ) from None
        raise SandboxHostError(
            f"no key to log in to {host.address} with: the sandbox host names none (?key=PATH), "
            "no SSH agent is reachable (SSH_AUTH_SOCK) and ~/.ssh holds no id_* key"
        ) from None
    except (OSError, EOFError) as error:
        client.close()
        raise SandboxHostError(
            f"cannot connect to the SSH server {host.address}: {error or type(error).__name__}"
        ) from None


def open_ssh(host: SandboxHost | str) -> paramiko.SSHClient:
    """Connect to an ``ssh://`` host with its host key checked; the caller closes the client.

    The one way this project opens SSH connections (a terminal on an SSH host uses it too):
    the key of ``?key=`` or the agent's, the server's key checked against the known_hosts
    file, and a :class:`SandboxHostError` that says what to do on any failure.
    """
    host = host if isinstance(host, SandboxHost) else parse_sandbox_host(host)
    if host.scheme != "ssh":
        raise ConfigError(f"{host.url} is not an ssh:// host")
    client = _ssh_client(host)
    _connect(client, host)
    return client


class _CheckedSSHAdapter(SSHHTTPAdapter):
    """The Docker SDK's paramiko transport, connected the way :func:`open_ssh` connects.

    The SDK's own adapter trusts ``~/.ssh/known_hosts`` only, picks keys itself and raises
    paramiko's errors as they come; this one uses the host's known_hosts file and key.
    """

    def __init__(self, host: SandboxHost, timeout: float, max_pool_size: int) -> None:
        self._host = host
        super().__init__(
            f"ssh://{host.user}@{host.hostname}:{host.port}",
            timeout=timeout,
            max_pool_size=max_pool_size,
        )

    def _create_paramiko_client(self, base_url: str) -> None:
        logging.getLogger("paramiko").setLevel(logging.WARNING)
        self.ssh_client = _ssh_client(self._host)
        self.ssh_params = _connect_params(self._host)

    def _connect(self) -> None:
        _connect(self.ssh_client, self._host)

    def get_connection(self, url: str, proxies: Any = None) -> Any:
        """The one pool of connections to the engine, whatever the request's URL.

        The SDK keys its pools by the whole URL, so every new path (each container id) would
        open another SSH session and start another ``docker system dial-stdio`` on the server
        (0.1 to 0.3 s each); with one pool, open connections are reused.
        """
        return super().get_connection("http+docker://ssh", proxies)


def _ssh_engine(host: SandboxHost, timeout: float) -> docker.DockerClient:
    # Made for the ssh:// scheme without connecting (use_ssh_client: the adapter connects
    # only when used) and with a version, so that nothing is asked before ours is mounted.
    api = docker.APIClient(
        base_url=f"ssh://{host.hostname}",
        version=docker.constants.MINIMUM_DOCKER_API_VERSION,
        timeout=timeout,
        use_ssh_client=True,
    )
    adapter = _CheckedSSHAdapter(
        host, timeout, max_pool_size=docker.constants.DEFAULT_MAX_POOL_SIZE
    )
    api.mount("http+docker://ssh", adapter)
    api._custom_adapter = adapter  # what APIClient closes and reads sockets through
    try:
        _negotiate_version(api)
    except (docker.errors.DockerException, OSError, KeyError) as error:
        reason = _remote_docker_problem(adapter.ssh_client) or str(error)
        adapter.close()
        raise SandboxHostError(
            f"{host.address} has no Docker engine this user can use: {reason}; the user must "
            "be able to run `docker` there (install Docker, add the user to the docker group)"
        ) from None
    return _wrap(api)


def _remote_docker_problem(ssh: paramiko.SSHClient) -> str | None:
    """What ``docker version`` says on the SSH host (why the engine did not answer)."""
    try:
        _, stdout, stderr = ssh.exec_command("docker version --format '{{.Server.Version}}'", 15)
        status = stdout.channel.recv_exit_status()
        said = (stderr.read() + stdout.read()).decode(errors="replace").strip()
    except (OSError, paramiko.SSHException):
        return None
    if status == 127:
        return "the `docker` command is not installed there"
    return f"`docker version` exited {status}: {said[-300:]}" if status else None


# --- TCP with TLS -------------------------------------------------------------------------


def _tls_engine(host: SandboxHost, timeout: float) -> docker.DockerClient:
    folder = host.tls_dir
    missing = [name for name in TLS_FILES if not (folder / name).is_file()]
    if missing:
        raise SandboxHostError(
            f"{host.url}: TLS files {', '.join(missing)} are missing in {folder}; a tcp:// "
            "engine is used with TLS only: put the CA certificate and this client's "
            "certificate and key there (Docker's layout, as for `docker --tlsverify`) or name "
            "their folder with ?certs=DIR"
        )
    tls = docker.tls.TLSConfig(
        client_cert=(str(folder / "cert.pem"), str(folder / "key.pem")),
        ca_cert=str(folder / "ca.pem"),
        verify=str(folder / "ca.pem"),
    )
    api = docker.APIClient(
        base_url=f"https://{host.hostname}:{host.port}",
        tls=tls,
        timeout=timeout,
        version=docker.constants.MINIMUM_DOCKER_API_VERSION,  # asked below, once trusted
    )
    # Else requests lets REQUESTS_CA_BUNDLE (set where a proxy intercepts HTTPS) replace the
    # engine's CA, and the engine's certificate fails to verify.
    api.trust_env = False
    try:
        _negotiate_version(api)
    except (docker.errors.DockerException, OSError, KeyError) as error:  # requests': OSErrors
        api.close()
        raise SandboxHostError(f"cannot reach the Docker engine at {host.url}: {error}") from None
    return _wrap(api)


def _negotiate_version(api: docker.APIClient) -> None:
    """Speak the engine's API version (the SDK's own asking happens before it is set up)."""
    api._version = api.version(api_version=False)["ApiVersion"]


def _wrap(api: docker.APIClient) -> docker.DockerClient:
    """A high-level client around a low-level one made here (DockerClient makes its own)."""
    client = docker.DockerClient.__new__(docker.DockerClient)
    client.api = api
    return client


# --- clients, one per host and process ----------------------------------------------------

_clients: dict[str, docker.DockerClient] = {}
_clients_lock = threading.Lock()
_hosts: weakref.WeakKeyDictionary[docker.DockerClient, SandboxHost] = weakref.WeakKeyDictionary()


def connect(host: SandboxHost | str, timeout: float = 120) -> docker.DockerClient:
    """A new client of the engine of ``host``; raises :class:`SandboxHostError` if unusable."""
    host = host if isinstance(host, SandboxHost) else parse_sandbox_host(host)
    client = _ssh_engine(host, timeout) if host.scheme == "ssh" else _tls_engine(host, timeout)
    _hosts[client] = host
    return client


def client_for(host: str) -> docker.DockerClient:
    """The client of ``host``'s engine, shared by this process's sandboxes on that host.

    One SSH connection carries all of them (a session each); a connection that dropped is
    made again for the next sandbox.
    """
    with _clients_lock:
        client = _clients.get(host)
        if client is not None and not _alive(client):
            with contextlib.suppress(Exception):
                client.close()
            client = None
        if client is None:
            client = _clients[host] = connect(host)
        return client


def _alive(client: docker.DockerClient) -> bool:
    adapter = getattr(client.api, "_custom_adapter", None)
    ssh = getattr(adapter, "ssh_client", None)
    if not isinstance(adapter, _CheckedSSHAdapter) or ssh is None:
        return True
    transport = ssh.get_transport()
    return transport is not None and transport.is_active()


def host_of(client: docker.DockerClient) -> SandboxHost | None:
    """The sandbox host a client was made for by this module; None for the local engine."""
    return _hosts.get(client)


# --- what differs on another machine ------------------------------------------------------


def disk_capped(config: BaseModel, prefix: str = "environment") -> list[str]:
    """The field paths in ``config`` of sandbox limits that ask for a disk cap."""
    found = []
    for name, value in config:
        path = f"{prefix}.{name}"
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, Limits):
                if item.disk_mb is not None:
                    found.append(f"{path}.disk_mb")
            elif isinstance(item, BaseModel):
                found += disk_capped(item, path)
    return found


def require_no_disk_cap(config: BaseModel, host: str, prefix: str = "environment") -> None:
    """Refuse a config whose sandboxes ask for a disk cap on another machine's engine."""
    capped = disk_capped(config, prefix)
    if capped:
        raise ConfigError(
            f"{', '.join(capped)} asks for a disk cap, but sandboxes on {host} cannot have one "
            "(a capped disk is a loop device of this machine, which the engine there cannot "
            "mount); set `limits: {disk_mb: null}` in the environment config (on the command "
            "line: --env 'limits={disk_mb: null}') to run without a cap"
        )


__all__ = [
    "SANDBOX_HOST_ENV",
    "SandboxHost",
    "SandboxHostError",
    "client_for",
    "connect",
    "current_host",
    "disk_capped",
    "host_of",
    "on_host",
    "open_ssh",
    "parse_sandbox_host",
    "require_no_disk_cap",
]
