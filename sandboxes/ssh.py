"""Existing machines reached over SSH: commands, files, a line stream, a fresh state per episode.

An SSH host is the sandbox of an environment that runs on a machine someone already has (a
build server, a lab machine) rather than in a container of ours. :class:`SshHost` connects with
paramiko through :func:`worldtrace.sandboxes.remote.open_ssh` (a key file or the SSH agent;
the host key checked against a known_hosts file, an unknown or changed key and a refused key
are errors that say what to do), and offers what a driver-run environment needs from a
sandbox: commands run with a time limit (:meth:`SshHost.run`), files copied over SFTP
(:meth:`SshHost.upload`), and a long-running process spoken to line by line
(:meth:`SshHost.open_stream`, an :class:`SshStream` with the interface of
:class:`~worldtrace.sandboxes.docker.ExecStream`, so
:class:`~worldtrace.sandboxes.channel.DriverChannel` works unchanged).

Nothing is reset by throwing the machine away, so the user chooses how an episode starts
fresh (:class:`SshHostConfig`, ``reset``):

``command``
    ``reset_command`` runs as the login user in its home before each episode (for example
    ``rm -rf ~/work && mkdir ~/work``). The episode runs as that user. What the agent started
    outside its terminal (a ``nohup`` job) survives unless the command ends it, and two
    episodes on one account at once would share its files: run one episode at a time per
    account.
``fresh_user``
    Each episode gets a new account (``useradd --create-home``; names ``wt`` and 12 hex
    digits) and runs as it; afterwards every process of the account is killed and the account
    is removed with its home (``userdel -r``). Needs root, or ``sudo`` without a password
    (``sudo -n``), on the host: a host that refuses says so before any episode.

Every remote operation has a time limit (connecting: the connect timeout; a command: its own
limit run by ``timeout`` on the host, plus :data:`GRACE_S` here; a stream read: the caller's),
so a host that stops answering or a dropped connection is an error in bounded time, never a
hung worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import posixpath
import re
import secrets
import shlex
import time
from pathlib import Path
from typing import Literal

import paramiko
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from worldtrace.sandboxes.docker import ExecResult
from worldtrace.sandboxes.errors import SandboxDied, SandboxError
from worldtrace.sandboxes.remote import SandboxHost, SandboxHostError, open_ssh
from worldtrace.schemas.errors import SetupError

GRACE_S = 10.0
"""How long past a remote command's own limit its answer may take before the host counts as lost."""
SEND_TIMEOUT_S = 15.0
"""How long sending one line to a remote process may block (the host's window being full)."""
KEEPALIVE_S = 15
"""Seconds between SSH keepalive messages (keeps firewalls from dropping an idle step)."""
STDERR_TAIL = 2000
"""How many bytes of a stream's stderr are kept for the message when it ends."""
ACCOUNT_PREFIX = "wt"
"""Fresh accounts are named this plus 12 hex digits (a letter first, as useradd wants)."""
ACCOUNT_NAME = re.compile(rf"^{ACCOUNT_PREFIX}[0-9a-f]{{12}}$")
# What fresh accounts' commands get as their environment: nothing of ours or the login's.
ACCOUNT_PATH = "/usr/local/bin:/usr/bin:/bin"

logger = logging.getLogger(__name__)


class SshResetError(SetupError):
    """The host cannot start an episode fresh: the reset command failed, or no privilege.

    A :class:`~worldtrace.schemas.errors.SetupError`, not a sandbox failure: trying the
    episode again would fail the same way.
    """


class SshHostConfig(BaseModel):
    """An existing machine reached over SSH, and how each episode on it starts fresh."""

    model_config = ConfigDict(extra="forbid")

    host: str = Field(
        description="ssh://user@host[:port] (no password; the user defaults to this "
        "process's, the port to 22)",
    )
    key_file: Path | None = Field(
        default=None,
        description="private key file; none: the SSH agent and the usual ~/.ssh/id_* keys",
    )
    known_hosts: Path | None = Field(
        default=None,
        description="known_hosts file the host's key must be in (default ~/.ssh/known_hosts); "
        "an unknown or changed key is an error, never accepted",
    )
    reset: Literal["command", "fresh_user"] = Field(
        default="command",
        description="how an episode starts fresh: 'command' runs reset_command as the login "
        "user; 'fresh_user' creates an account per episode and removes it after (needs root "
        "or passwordless sudo on the host)",
    )
    reset_command: str | None = Field(
        default=None,
        description="shell command run in the login user's home before each episode "
        "(reset: command), e.g. 'rm -rf ~/work && mkdir ~/work'",
    )
    command_timeout_s: float = Field(
        default=60, gt=0, description="limit of the reset command and of account changes"
    )

    @field_validator("host")
    @classmethod
    def _ssh_url(cls, value: str) -> str:
        parsed = SandboxHost.parse(value)
        if parsed.scheme != "ssh":
            raise ValueError(f"{value!r} is not an ssh:// URL; give ssh://user@host[:port]")
        if parsed.key_file is not None or parsed.known_hosts is not None:
            raise ValueError(
                f"{value!r}: give the key and known_hosts as the fields key_file and "
                "known_hosts here, not in the URL"
            )
        return value

    @model_validator(mode="after")
    def _reset_matches(self) -> SshHostConfig:
        command = (self.reset_command or "").strip()
        if self.reset == "command" and not command:
            raise ValueError(
                "reset 'command' needs a reset_command (e.g. 'rm -rf ~/work && mkdir ~/work'); "
                "or use reset: fresh_user for a new account per episode"
            )
        if self.reset == "fresh_user" and command:
            raise ValueError(
                "reset_command is for reset: command; with reset: fresh_user every episode "
                "starts in a new account, so leave reset_command out"
            )
        return self

    def sandbox_host(self) -> SandboxHost:
        """The parsed host with this config's key and known_hosts files."""
        parsed = SandboxHost.parse(self.host)
        return dataclasses.replace(
            parsed,
            key_file=self.key_file.expanduser() if self.key_file else None,
            known_hosts=self.known_hosts.expanduser() if self.known_hosts else None,
        )


@dataclasses.dataclass(frozen=True)
class Account:
    """The account an episode runs as on the host."""

    name: str
    home: str
    fresh: bool
    """Created for this episode (removed after it); else the login user."""


class SshStream:
    """A process on an SSH host spoken to line by line: the ``ExecStream`` interface.

    Stdout is read in lines; stderr is drained as it comes (a full stderr window would stop
    the process) and its tail kept for the message when the stream ends.
    """

    def __init__(self, channel: paramiko.Channel, where: str) -> None:
        self._channel = channel
        self._where = where
        self._pending = b""
        self._stderr = b""

    def send_line(self, line: str) -> None:
        """Write one line to the process's stdin."""
        try:
            self._channel.settimeout(SEND_TIMEOUT_S)
            self._channel.sendall(line.encode() + b"\n")
        except (OSError, EOFError, paramiko.SSHException) as error:
            raise SandboxDied(f"{self._why_closed()} ({error or type(error).__name__})") from None

    def read_line(self, timeout: float) -> str:
        """Return the next stdout line; TimeoutError after ``timeout`` s, SandboxDied at its end."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no reply within {timeout:.1f}s")
            try:
                self._channel.settimeout(remaining)
                chunk = self._channel.recv(65536)
            except TimeoutError:
                self._drain_stderr()
                continue
            except (OSError, EOFError, paramiko.SSHException) as error:
                raise SandboxDied(f"{self._why_closed()} ({error})") from None
            self._drain_stderr()
            if not chunk:
                raise SandboxDied(self._why_closed())
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode("utf-8", errors="replace")

    def _drain_stderr(self) -> None:
        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            while self._channel.recv_stderr_ready():
                self._stderr = (self._stderr + self._channel.recv_stderr(65536))[-STDERR_TAIL:]

    def _why_closed(self) -> str:
        transport = self._channel.get_transport()
        if transport is None or not transport.is_active():
            return f"the SSH connection to {self._where} was lost"
        self._drain_stderr()
        said = self._stderr.decode(errors="replace").strip()
        if self._channel.exit_status_ready():
            status = self._channel.recv_exit_status()
            return f"the process on {self._where} exited with status {status}" + (
                f": {said[-500:]}" if said else ""
            )
        return f"the stream to the process on {self._where} closed"

    def close(self) -> None:
        """Close the stream; the process sees end of input."""
        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            self._channel.close()


class SshHost:
    """One SSH connection to a host: commands, SFTP uploads, streams and per-episode accounts.

    :meth:`connect` opens it (again, after a drop); :meth:`close` removes what it left on the
    host (its work folder, an episode's account) and disconnects. Commands as root go through
    ``sudo -n`` unless the login user is root.
    """

    def __init__(self, config: SshHostConfig) -> None:
        self.config = config
        self.target = config.sandbox_host()
        self._client: paramiko.SSHClient | None = None
        self._uid: int | None = None
        self._home: str | None = None
        self._workdir: str | None = None
        self._account: Account | None = None
        self._privilege_checked = False
        self._made_accounts = False
        self.host_key = ""
        """The server's host key (type and SHA-256 fingerprint), once connected."""

    @property
    def address(self) -> str:
        """``user@host:port``: the host and login, without any secret (for records and messages)."""
        return self.target.address

    @property
    def is_root(self) -> bool:
        """Whether the login user is root."""
        return self._uid == 0

    @property
    def login_home(self) -> str:
        """The login user's home on the host."""
        if self._home is None:
            raise SandboxError(f"not connected to {self.address}")
        return self._home

    @property
    def account(self) -> Account | None:
        """The account of the current episode, if one began."""
        return self._account

    def connected(self) -> bool:
        """Whether the SSH connection is up."""
        transport = self._client.get_transport() if self._client else None
        return transport is not None and transport.is_active()

    def connect(self) -> SshHost:
        """Connect (if not connected) and learn the login user's uid and home.

        Raises :class:`~worldtrace.sandboxes.remote.SandboxHostError` with the fix for an
        unreachable host, an unknown or changed host key, or a refused key.
        """
        if self.connected():
            return self
        self._disconnect()
        self._client = open_ssh(self.target)
        transport = self._client.get_transport()
        if transport is not None:
            transport.set_keepalive(KEEPALIVE_S)
            key = transport.get_remote_server_key()
            self.host_key = f"{key.get_name()} {key.fingerprint}"
        result = self.run('id -u && printf "%s\\n" "$HOME"', timeout=30)
        lines = result.text.split("\n")
        if result.exit_code != 0 or len(lines) < 2 or not lines[0].isdigit():
            raise SandboxHostError(
                f"{self.address} did not say who its user is (`id -u`, $HOME): exit "
                f"{result.exit_code}, {result.stderr.decode(errors='replace').strip()[-300:]}"
            )
        self._uid, self._home = int(lines[0]), lines[1]
        return self

    # --- commands -------------------------------------------------------------------------

    def privileged(self, argv: list[str]) -> list[str]:
        """``argv`` as root: as is for a root login, else through ``sudo -n``."""
        return argv if self.is_root else ["sudo", "-n", "--", *argv]

    def as_account(self, account: Account, argv: list[str]) -> list[str]:
        """``argv`` run as ``account``, in a clean environment of its own for a fresh one."""
        if not account.fresh:
            return argv
        return self.privileged(
            [
                "runuser",
                "-u",
                account.name,
                "--",
                "env",
                "-i",
                f"HOME={account.home}",
                f"USER={account.name}",
                f"LOGNAME={account.name}",
                "SHELL=/bin/bash",
                f"PATH={ACCOUNT_PATH}",
                "LANG=C.UTF-8",
                *argv,
            ]
        )

    def run(
        self,
        command: str | list[str],
        timeout: float = 60.0,
        account: Account | None = None,
        workdir: str | None = None,
    ) -> ExecResult:
        """Run a command (a shell string or an argv list) on the host; kill it after ``timeout`` s.

        As ``account`` when given (else the login user), in ``workdir`` when given. The host's
        ``timeout`` kills the command at its limit; a connection that gives no answer
        :data:`GRACE_S` later raises :class:`~worldtrace.sandboxes.errors.SandboxDied`.
        """
        argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
        if workdir is not None:
            argv = ["sh", "-c", 'cd -- "$1" || exit 125; shift; exec "$@"', "sh", workdir, *argv]
        argv = ["timeout", "-s", "KILL", f"{timeout:.3f}", *argv]
        if account is not None:
            argv = self.as_account(account, argv)
        started = time.monotonic()
        channel = self._open_channel()
        try:
            channel.exec_command(shlex.join(argv))
            stdout, stderr, status = _collect(channel, started + timeout + GRACE_S)
        except TimeoutError:
            raise SandboxDied(
                f"{self.address} did not answer within {timeout + GRACE_S:.0f}s "
                f"(running {_short(argv)})"
            ) from None
        except (OSError, EOFError, paramiko.SSHException) as error:
            raise SandboxDied(f"the SSH connection to {self.address} failed: {error}") from None
        finally:
            with contextlib.suppress(Exception):
                channel.close()
        return ExecResult(
            exit_code=status,
            stdout=stdout,
            stderr=stderr,
            # 137 is SIGKILL: from `timeout` when the command ran its whole time.
            timed_out=status == 137 and time.monotonic() - started >= timeout,
        )

    def open_stream(self, argv: list[str]) -> SshStream:
        """Start ``argv`` on the host and return a line stream to its stdin and stdout."""
        channel = self._open_channel()
        try:
            channel.exec_command(shlex.join(argv))
        except (OSError, EOFError, paramiko.SSHException) as error:
            with contextlib.suppress(Exception):
                channel.close()
            raise SandboxDied(f"cannot start {_short(argv)} on {self.address}: {error}") from None
        return SshStream(channel, self.address)

    def _open_channel(self) -> paramiko.Channel:
        if not self.connected() or self._client is None:
            raise SandboxDied(f"the SSH connection to {self.address} is not open")
        transport = self._client.get_transport()
        assert transport is not None  # connected() checked it
        try:
            return transport.open_session(timeout=GRACE_S)
        except (OSError, EOFError, paramiko.SSHException) as error:
            raise SandboxDied(f"cannot open a session on {self.address}: {error}") from None

    # --- files ----------------------------------------------------------------------------

    @property
    def workdir(self) -> str:
        """A private folder on the host for this connection's files (removed by :meth:`close`).

        World-readable, so that a fresh account's processes can read what is put there.
        """
        if self._workdir is None:
            result = self.run(
                ["sh", "-c", "dir=$(mktemp -d /tmp/worldtrace-XXXXXXXX) && chmod 755 $dir && "
                 'printf "%s" "$dir"'],
                timeout=30,
            )  # fmt: skip
            if result.exit_code != 0 or not result.text.startswith("/tmp/worldtrace-"):
                raise SandboxError(
                    f"cannot make a folder in /tmp on {self.address}: "
                    f"{result.stderr.decode(errors='replace').strip()[-300:]}"
                )
            self._workdir = result.text
        return self._workdir

    def upload(self, files: dict[str, bytes], mode: int = 0o644) -> dict[str, str]:
        """Copy ``files`` (name → content) into :attr:`workdir` over SFTP; return their paths."""
        folder = self.workdir
        channel = self._open_channel()
        channel.settimeout(GRACE_S)
        try:
            channel.invoke_subsystem("sftp")
            sftp = paramiko.SFTPClient(channel)
            paths = {}
            for name, data in files.items():
                path = posixpath.join(folder, name)
                with sftp.open(path, "wb") as handle:
                    handle.write(data)
                sftp.chmod(path, mode)
                paths[name] = path
        except (OSError, EOFError, paramiko.SSHException) as error:
            raise SandboxDied(f"cannot copy files to {self.address} over SFTP: {error}") from None
        finally:
            with contextlib.suppress(Exception):
                channel.close()
        return paths

    # --- episodes -------------------------------------------------------------------------

    def require_privilege(self) -> None:
        """Raise :class:`SshResetError` unless accounts can be made and removed on the host."""
        needed = "for cmd in useradd userdel runuser; do command -v $cmd >/dev/null || exit 3; done"
        result = self.run(self.privileged(["sh", "-c", needed]), timeout=30)
        if result.exit_code == 3:
            raise SshResetError(
                f"reset: fresh_user needs useradd, userdel and runuser on {self.address}; "
                "install them (Debian: passwd, util-linux) or use reset: command"
            )
        if result.exit_code != 0:
            said = result.stderr.decode(errors="replace").strip()[-300:]
            raise SshResetError(
                f"reset: fresh_user needs root or sudo without a password on {self.address}, "
                f"and {self.target.user} has neither ({said or f'exit {result.exit_code}'}); "
                "log in as root, allow the user `sudo` without a password, or use reset: command"
            )

    def begin_episode(self) -> Account:
        """End the last episode, then start this one fresh as the config says; return its account.

        ``command``: run ``reset_command`` as the login user in its home. ``fresh_user``: make a
        new account with its own home. Raises :class:`SshResetError` when that fails.
        """
        self.connect()
        self.end_episode()
        if self.config.reset == "command":
            command = self.config.reset_command or ""
            result = self.run(
                command, timeout=self.config.command_timeout_s, workdir=self.login_home
            )
            if result.exit_code != 0:
                said = result.stderr.decode(errors="replace").strip()[-500:]
                raise SshResetError(
                    f"the reset command {command!r} on {self.address} exited "
                    f"{result.exit_code}"
                    + (" (timed out)" if result.timed_out else "")
                    + (f": {said}" if said else "")
                )
            self._account = Account(self.target.user, self.login_home, fresh=False)
            return self._account
        if not self._privilege_checked:
            self.require_privilege()
            self._privilege_checked = True
        name = f"{ACCOUNT_PREFIX}{secrets.token_hex(6)}"
        # useradd gives up at once when another one holds the lock on /etc/passwd (episodes
        # starting together): try again for a while.
        create = (
            "for attempt in 1 2 3 4 5 6 7 8 9 10; do "
            'said=$(useradd --create-home --user-group --shell /bin/bash -- "$1" 2>&1); '
            'status=$?; [ $status = 0 ] && exec getent passwd "$1"; '
            "case $status in 1|10) sleep 0.2 ;; *) break ;; esac; "
            'done; echo "$said" >&2; exit $status'
        )
        result = self.run(
            self.privileged(["sh", "-c", create, "sh", name]),
            timeout=self.config.command_timeout_s,
        )
        fields = result.text.strip().split(":")
        if result.exit_code != 0 or len(fields) < 7:
            said = result.stderr.decode(errors="replace").strip()[-500:]
            raise SshResetError(
                f"cannot create the episode's account {name} on {self.address}: exit "
                f"{result.exit_code}: {said}"
            )
        self._account = Account(name, fields[5], fresh=True)
        self._made_accounts = True
        return self._account

    def end_episode(self) -> None:
        """Remove the episode's fresh account: kill its processes, then ``userdel -r``.

        The login user's account (reset: command) stays as it is.
        """
        account, self._account = self._account, None
        if account is None or not account.fresh:
            return
        # Killed as the account itself (kill -1: every process it may signal), again until
        # userdel finds none left: a process may still be exiting or forking when asked.
        remove = (
            "for attempt in 1 2 3 4 5 6 7 8 9 10; do "
            'runuser -u "$1" -- sh -c "kill -9 -1" 2>/dev/null; '
            'said=$(userdel --remove -- "$1" 2>&1) && exit 0; sleep 0.2; '
            'done; echo "$said" >&2; exit 1'
        )
        if not ACCOUNT_NAME.match(account.name):
            raise ValueError(f"refusing to remove {account.name!r}: not an episode account")
        result = self.run(
            self.privileged(["sh", "-c", remove, "sh", account.name]),
            timeout=self.config.command_timeout_s,
        )
        if result.exit_code != 0:
            logger.warning(
                "could not remove the episode account %s on %s: %s",
                account.name,
                self.address,
                result.stderr.decode(errors="replace").strip()[-300:],
            )

    # --- end ------------------------------------------------------------------------------

    def lost_reason(self, error: Exception) -> str:
        """Why the host stopped answering during an action, as that step's error says it."""
        if not self.connected():
            # The error says the same in other words (a closed stream, a reply that never came).
            return f"the SSH connection to {self.address} was lost during this action"
        return f"the terminal on {self.address} stopped answering after this action: {error}"

    def close(self) -> None:
        """Remove the episode's account and the work folder, then disconnect; safe to repeat.

        A connection that dropped is made again once to clean up; if that fails, what is left
        on the host is named in a warning.
        """
        if self._account is not None or self._workdir is not None:
            try:
                if not self.connected():
                    self.connect()
                self.end_episode()
                if self._workdir is not None:
                    folder, self._workdir = self._workdir, None
                    argv = ["rm", "-rf", "--", folder]
                    self.run(self.privileged(argv) if self._uses_root() else argv, timeout=30)
            except (SandboxError, SetupError) as error:
                logger.warning(
                    "could not clean up on %s (account %s, folder %s): %s",
                    self.address,
                    self._account.name if self._account else None,
                    self._workdir,
                    error,
                )
            self._account = None
            self._workdir = None
        self._disconnect()

    def _uses_root(self) -> bool:
        # Fresh accounts own files in the work folder (their tmux socket): root removes it.
        return self._made_accounts and not self.is_root

    def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


def _collect(channel: paramiko.Channel, deadline: float) -> tuple[bytes, bytes, int]:
    """Read a command's stdout and stderr until it ends; return them and its exit status."""
    stdout, stderr = b"", b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        channel.settimeout(remaining)
        chunk = channel.recv(65536)  # TimeoutError (socket.timeout) at the deadline
        while channel.recv_stderr_ready():
            stderr += channel.recv_stderr(65536)
        if not chunk:
            break
        stdout += chunk
    if not channel.status_event.wait(max(0.0, deadline - time.monotonic())):
        raise TimeoutError
    while channel.recv_stderr_ready():
        stderr += channel.recv_stderr(65536)
    return stdout, stderr, channel.recv_exit_status()


def _short(argv: list[str]) -> str:
    text = shlex.join(argv)
    return text if len(text) <= 120 else text[:117] + "..."


__all__ = ["Account", "SshHost", "SshHostConfig", "SshResetError", "SshStream"]
