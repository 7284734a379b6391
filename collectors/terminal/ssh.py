"""The terminal environment on an existing machine reached over SSH, driven as in a container.

Chosen by the terminal config's ``ssh`` field (:class:`~worldtrace.sandboxes.ssh.SshHostConfig`)::

    environment:
      ssh:
        host: ssh://alice@build-01:22
        key_file: ~/.ssh/worldtrace          # else the SSH agent and ~/.ssh/id_*
        known_hosts: ~/.ssh/known_hosts      # the host key must be there (checked, always)
        reset: command                       # or fresh_user: a new account per episode
        reset_command: rm -rf ~/work && mkdir ~/work

The same tmux driver as in the terminal image (``image/tmux_driver.py``) is copied to the host
over SFTP with ``ssh_driver.py``, which points it at a private folder (socket, prompt hook
state, rc file) and the image's ``tmux.conf``, and runs on the host's ``python3`` over one SSH
exec channel (:class:`~worldtrace.sandboxes.ssh.SshStream`, the interface of the container's
exec stream): the same requests, the same observations, the same actions, one round trip a
step. The shell reads the account's own ``~/.bashrc`` and then the image's prompt hook.

An episode starts fresh as the config says (see :mod:`worldtrace.sandboxes.ssh`): the reset
command as the login user, or a fresh account (the driver then runs as root through
``sudo -n`` and drops to the account, as in the image). Task setup and checks run as the
episode's account in its home; the task library's paths name the image's home
``/home/user``, which on the host stands for the account's home.

A dropped connection, or a driver that stops answering, during a step is the step's end: the
transition is recorded with the reason and the best screen there is (a second driver process
if the connection still works, else the screen from before), and the episode is truncated;
every request has a time limit, so a worker never hangs on a host that went away.

The environment's identity (``describe``) is the host (``ssh://user@host:port``, no key, no
secret), its host key's fingerprint, the OS, kernel, bash, tmux and python3 versions found
there, and the reset mode; its version is a digest of those.
"""

from __future__ import annotations

import hashlib
import json
import logging
import posixpath
import re
import secrets
from pathlib import Path

from worldtrace.collectors.base import StepOutcome, TaskSetupError
from worldtrace.collectors.driven import LAST_LOOK_TIMEOUT_S
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.tasks.helpers import HOME, TerminalTask
from worldtrace.sandboxes.channel import DriverChannel, json_object
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.images import DRIVER_RUNTIME
from worldtrace.sandboxes.limits import Limits
from worldtrace.sandboxes.ssh import Account, SshHost
from worldtrace.schemas import EnvironmentRef
from worldtrace.schemas.raw import RawObservation

IMAGE_FOLDER = Path(__file__).parent / "image"
DRIVER_FILES = {
    "tmux_driver.py": IMAGE_FOLDER / "tmux_driver.py",
    "driver_runtime.py": DRIVER_RUNTIME,
    "ssh_driver.py": Path(__file__).parent / "ssh_driver.py",
    "tmux.conf": IMAGE_FOLDER / "tmux.conf",
    "shell.bashrc": IMAGE_FOLDER / "wt-shell.bashrc",
}
"""What is copied to the host: the image's driver and the runtime it imports, its configuration
and prompt hook, and the shim."""
MIN_PYTHON = (3, 9)
"""The driver needs os.pidfd_open and os.waitstatus_to_exitcode."""

VERSION_PROBE = (
    'printf "os=%s\\n" "$(. /etc/os-release 2>/dev/null && printf %s "$PRETTY_NAME")"; '
    'printf "kernel=%s\\n" "$(uname -sr)"; '
    'printf "bash=%s\\n" "$(bash -c \'printf %s "$BASH_VERSION"\')"; '
    'printf "tmux=%s\\n" "$(tmux -V 2>/dev/null)"; '
    'printf "python3=%s\\n" "$(python3 -c \'import sys; print("%d.%d.%d" % sys.version_info[:3])\' '
    '2>/dev/null)"'
)
"""Prints what the host runs, one ``name=value`` a line (empty when a program is missing)."""
_IMAGE_HOME = re.compile(re.escape(HOME) + r"(?![\w.-])")

logger = logging.getLogger(__name__)


class SshTerminalEnvironment(TerminalEnvironment):
    """bash in tmux on an SSH host: the terminal environment with the host as its sandbox."""

    def __init__(self, config: TerminalConfig, labels: dict[str, str] | None = None) -> None:
        if config.ssh is None:
            raise ValueError("SshTerminalEnvironment needs a config with an ssh host")
        super().__init__(config, labels)
        self.host = SshHost(config.ssh)
        self._uploaded: dict[str, str] | None = None
        self._run_dir: str | None = None
        self._versions: dict[str, str] | None = None

    # --- episode --------------------------------------------------------------------------

    def reset(self, seed: int, task: TerminalTask | None) -> RawObservation:
        """Start the episode fresh on the host, run the task's setup there, start the shell."""
        self._end_episode()
        self._unusable = False
        host = self.host.connect()
        if self._uploaded is None:
            self._uploaded = host.upload(
                {name: path.read_bytes() for name, path in DRIVER_FILES.items()}
            )
        account = host.begin_episode()
        self._run_dir = posixpath.join(host.workdir, f"run-{secrets.token_hex(6)}")
        setup, task_name = (task.setup, task.name) if task is not None else ((), "")
        for command in setup:
            result = host.run(
                on_host(command, account.home),
                timeout=self.config.setup_timeout_s,
                account=account,
                workdir=account.home,
            )
            if result.exit_code != 0:
                raise TaskSetupError(
                    f"setup command {command!r} of task {task_name!r} exited "
                    f"{result.exit_code} on {host.address}: "
                    f"{result.stderr.decode(errors='replace').strip()[-500:]}"
                )
        self._open_driver()
        self._last = self._request(
            {
                "op": "start",
                "width": self.config.width,
                "height": self.config.height,
                "cwd": account.home,
            },
            timeout_s=20,
        )
        if not self._last.get("prompt"):
            raise SandboxError(f"the shell on {host.address} did not show a prompt after start")
        return self._last

    def _driver_argv(self, *extra: str) -> list[str]:
        """The command line of the driver shim for this episode's account."""
        account = self._account()
        if self._uploaded is None or self._run_dir is None:
            raise SandboxError("the terminal environment has no episode; call reset() first")
        argv = ["python3", self._uploaded["ssh_driver.py"], "--run-dir", self._run_dir, *extra]
        if account.fresh:
            return self.host.privileged([*argv, "--user", account.name])
        return argv

    def _account(self) -> Account:
        account = self.host.account
        if account is None:
            raise SandboxError("the terminal environment has no episode; call reset() first")
        return account

    def _open_driver(self) -> DriverChannel:
        """Start the driver on the host over one SSH exec channel."""
        self._driver = DriverChannel(
            self.host.open_stream(self._driver_argv()), f"terminal driver on {self.host.address}"
        )
        return self._driver

    # --- what a lost step sees -------------------------------------------------------------

    def _removed_from_outside(self) -> bool:
        """Never: a dropped connection or a host that stopped answering ends the step."""
        return False

    def _lost_reason(self, error: SandboxError) -> str:
        """Why the step lost its terminal: the connection dropped, or the driver stopped."""
        return self.host.lost_reason(error)

    def _last_look(self) -> RawObservation | None:
        """A fresh observation from a second driver process, if the connection still works."""
        if self._run_dir is None or self.host.account is None or not self.host.connected():
            return None
        try:
            result = self.host.run(self._driver_argv("--observe"), timeout=LAST_LOOK_TIMEOUT_S)
        except SandboxError:
            return None
        if result.exit_code != 0:
            return None
        observation = json_object(result.text.strip().rsplit("\n", 1)[-1])
        if observation is None or not isinstance(observation.get(self.state_field), str):
            return None
        return observation

    def _process_limit_outcome(
        self, observation: RawObservation, started: float, limits: Limits
    ) -> StepOutcome | None:
        """End the episode if the host refused new processes during the step.

        The limit is the host's own (the container ``limits`` do not apply here), seen where
        the driver can see it (a pids cgroup over its processes).
        """
        refused = observation.get("forks_refused") or 0
        if not refused:
            return None
        self._unusable = True
        error = (
            f"{self.host.address} reached its process limit: {refused} new processes were refused"
        )
        return self._outcome(observation, started, error=error, truncated=True)

    # --- after the episode ----------------------------------------------------------------

    def evaluate(self, task: TerminalTask | None) -> float | None:
        """Run the task's check as the episode's account: 1.0 if it exits 0, else 0.0.

        None when there is nothing to check with: no check, no connection, or a terminal the
        episode's actions left unanswering.
        """
        check = task.check if task else None
        account = self.host.account
        if not check or account is None or self._unusable or not self.host.connected():
            return None
        try:
            result = self.host.run(
                on_host(check, account.home),
                timeout=self.config.setup_timeout_s,
                account=account,
                workdir=account.home,
            )
        except SandboxError:
            return None
        return 1.0 if result.exit_code == 0 else 0.0

    def describe(self) -> EnvironmentRef:
        """The host (no secrets), its host key, OS, kernel, bash, tmux and python3, the reset."""
        versions = self.host_versions()
        components = {
            "host": f"ssh://{self.host.address}",
            "host_key": self.host.host_key,
            **versions,
            "reset": self.host.config.reset,
        }
        digest = hashlib.sha256(json.dumps(components, sort_keys=True).encode()).hexdigest()
        return EnvironmentRef(
            name="terminal/bash-tmux-ssh",
            version=f"ssh-{digest[:16]}",
            components=components,
            config_hash=self.config.config_hash(),
        )

    def host_versions(self) -> dict[str, str]:
        """What the host runs (os, kernel, bash, tmux, python3), asked once per connection."""
        if self._versions is None:
            result = self.host.connect().run(VERSION_PROBE, timeout=30)
            if result.exit_code != 0:
                raise SandboxError(
                    f"the version probe failed on {self.host.address} (exit {result.exit_code}): "
                    f"{result.stderr.decode(errors='replace').strip()[-300:]}"
                )
            self._versions = dict(
                line.split("=", 1) for line in result.text.splitlines() if "=" in line
            )
        return dict(self._versions)

    def check_host(self) -> None:
        """Fail fast unless the host can run episodes: tmux and a python3 >= 3.9, and the reset.

        Raises the connection's own errors (host key, refused key, unreachable) first.
        """
        versions = self.host_versions()
        missing = [name for name in ("tmux", "python3", "bash") if not versions.get(name)]
        if missing:
            raise SandboxError(
                f"{self.host.address} lacks {', '.join(missing)}: a terminal there needs bash, "
                "tmux and python3 (Debian: apt-get install tmux python3)"
            )
        found = tuple(int(part) for part in versions["python3"].split(".")[:2])
        if found < MIN_PYTHON:
            raise SandboxError(
                f"{self.host.address} has python3 {versions['python3']}; the tmux driver needs "
                f"{MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer"
            )
        if self.host.config.reset == "fresh_user":
            self.host.require_privilege()

    def _end_episode(self) -> None:
        """Stop the driver and the episode's tmux server, and remove a fresh account.

        A connection that dropped during the episode is made again for this; when that fails
        too, what is left on the host is named in a warning.
        """
        if self._driver is not None:
            self._driver.close()
            self._driver = None
        run_dir, self._run_dir = self._run_dir, None
        account = self.host.account
        if run_dir is None or account is None:
            return
        stop = 'tmux -S "$1/tmux" kill-server 2>/dev/null; rm -rf -- "$1"'
        argv = ["sh", "-c", stop, "sh", run_dir]
        try:
            self.host.connect()
            if account.fresh:
                self.host.end_episode()
                self.host.run(self.host.privileged(argv), timeout=30)
            else:
                self.host.run(argv, timeout=30)
        except SandboxError as error:
            logger.warning(
                "could not end the episode on %s (tmux server of %s, account %s): %s",
                self.host.address,
                run_dir,
                account.name,
                error,
            )

    def close(self) -> None:
        """End the episode on the host, remove what was copied there, and disconnect."""
        self._end_episode()
        self.host.close()
        self._uploaded = None
        self._versions = None


def on_host(command: str, home: str) -> str:
    """A task command written for the image, with its home ``/home/user`` as ``home``."""
    return _IMAGE_HOME.sub(lambda _: home, command)


__all__ = ["SshTerminalEnvironment", "on_host"]
