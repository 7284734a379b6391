"""bash in a Docker sandbox, driven through tmux by the in-container driver.

One fresh container per episode. The host speaks to ``/opt/worldtrace/tmux_driver.py`` over a
single exec stream (one JSON line each way per step), so a step costs one round trip. The raw
observation is the driver's reply: the screen with its escape sequences, the scrollback that
appeared since the last step, the cursor and pane size, whether the prompt came back with
which exit status and working directory, and the program in the foreground.

The shell, the task's setup and its check run as the unprivileged ``user`` (home
``/home/user``); the driver runs as root where nothing the agent starts can reach it. Each
request carries an id (a per-episode random token and a sequence number) that the driver
echoes: a line on the channel that is not the reply to the pending request is skipped and
counted in the observation (``skipped_replies``), so a step is never paired with another
step's screen.

A sandbox that stops answering during an action (the agent killing its tmux server or the
driver, a fork bomb that leaves the driver no process) or reaches its wall-clock limit is the
action's doing: the step returns the error with the best screen there is (a fresh capture if
the container still runs commands, else the last one; ``sandbox_lost`` and ``screen_stale``
say which) and ends the episode (``truncated``). So does a step during which the container's
process limit refused new processes, even if the driver still answered: nothing more can be
trusted to run. A container gone before its clock ran out was removed from outside (nothing
inside the sandbox can stop it): that is a ``SandboxError``, and the episode is retried.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

from pydantic import Field, model_validator

from worldtrace.collectors.base import StepOutcome, TaskSetupError
from worldtrace.collectors.driven import (
    DriverEnvironment,
    LostSandbox,
    SandboxConfig,
    SandboxLimits,
)
from worldtrace.collectors.terminal.tasks.helpers import HOME, TerminalTask
from worldtrace.sandboxes import view
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.sandboxes.ssh import SshHostConfig
from worldtrace.schemas import Action, EnvironmentRef
from worldtrace.schemas.raw import RawObservation

DRIVER = ["python3", "/opt/worldtrace/tmux_driver.py"]
USER = "user"
"""The unprivileged account the agent's shell, task setup and checks run as."""

VERSION_PROBE = [
    "bash",
    "-c",
    'printf "bash=%s\\n" "$BASH_VERSION"; printf "tmux=%s\\n" "$(tmux -V)"; '
    'printf "python3=%s\\n" "$(python3 --version)"; '
    'printf "debian=%s\\n" "$(cat /etc/debian_version)"',
]
"""Prints the versions of bash, tmux, python3 and Debian in the image, one ``name=v`` a line."""


IMAGE_TAG = "worldtrace/terminal:latest"


class TerminalConfig(SandboxConfig):
    """Configuration of the terminal environment."""

    default_image = IMAGE_TAG
    image: str = Field(default=IMAGE_TAG, description="sandbox image")
    limits: SandboxLimits = Field(default_factory=Limits)
    width: int = Field(default=160, ge=20, le=500, description="tmux pane columns")
    height: int = Field(default=40, ge=5, le=200, description="tmux pane rows")
    quiet_s: float = Field(
        default=0.5,
        gt=0,
        description="a step whose foreground job cannot be inspected (a set-user-id program) "
        "ends after this long without screen change, new output or CPU use by the job",
    )
    input_settle_s: float = Field(
        default=0.1,
        gt=0,
        description="a step whose foreground job waits for terminal input (an editor, a pager, "
        "a prompt) ends once the screen has not changed for this long; a job that is still at "
        "work, silent or not, runs on to the step's timeout",
    )
    setup_timeout_s: float = Field(default=60, gt=0, description="limit for each setup command")
    ssh: SshHostConfig | None = Field(
        default=None,
        description="run on an existing machine reached over SSH instead of in a container "
        "(see collectors/terminal/ssh.py); image and limits then do not apply",
    )

    @model_validator(mode="after")
    def _container_fields_without_ssh(self) -> TerminalConfig:
        given = sorted({"image", "limits"} & self.model_fields_set)
        if self.ssh is not None and given:
            raise ValueError(
                f"{' and '.join(given)} apply to containers; an SSH host runs the shell as it is "
                "(with its own limits): leave them out, or leave out ssh"
            )
        return self

    def config_hash(self) -> str:
        """A short hash of this configuration; a container's is what it was before ``ssh``."""
        exclude = {"ssh"} if self.ssh is None else None
        return hashlib.sha256(self.model_dump_json(exclude=exclude).encode()).hexdigest()[:16]


class TerminalEnvironment(DriverEnvironment[TerminalConfig, TerminalTask]):
    """A bash shell in a fresh container per episode, seen as a 160x40 tmux screen."""

    domain = "terminal"
    driver = DRIVER
    state_field = "screen"
    driver_error_field = "error"
    stale_field = "screen_stale"

    def __init__(self, config: TerminalConfig | None = None, labels: dict[str, str] | None = None):
        super().__init__(config or TerminalConfig(), labels)

    def reset(self, seed: int, task: TerminalTask | None) -> RawObservation:
        """Start a fresh container, run the task's setup, start the shell, return the screen."""
        if self.config.ssh is not None:
            raise ValueError(
                "this config names an SSH host: use SshTerminalEnvironment (collectors/terminal/"
                "ssh.py), which TerminalCollector.make_environment chooses for it"
            )
        sandbox = self._start_sandbox(self.config.image, self.config.limits)
        setup, task_name = (task.setup, task.name) if task is not None else ((), "")
        for command in setup:
            result = sandbox.exec(
                command, timeout=self.config.setup_timeout_s, workdir=HOME, user=USER
            )
            if result.exit_code != 0:
                raise TaskSetupError(
                    f"setup command {command!r} of task {task_name!r} exited "
                    f"{result.exit_code}: {result.stderr.decode(errors='replace').strip()[-500:]}"
                )
        self._open_driver()
        self._last = self._request(
            {
                "op": "start",
                "width": self.config.width,
                "height": self.config.height,
                "cwd": HOME,
            },
            timeout_s=20,
        )
        if not self._last.get("prompt"):
            raise SandboxError("the shell did not show a prompt after start")
        return self._last

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Send keys (or wait) and return the screen once the shell or program is idle.

        A sandbox that stops answering meanwhile, or reaches its wall-clock limit, ends the
        episode (``truncated``) with the error and the best screen there is. A container
        that vanished otherwise was removed from outside: that raises ``SandboxError``.
        """
        if self._driver is None:
            raise SandboxError("the terminal environment has no episode; call reset() first")
        started = time.monotonic()
        problem = _invalid_action(action)
        try:
            if problem is not None:
                # Nothing was sent: the next state is the current one, re-read from the screen.
                observation = self._request({"op": "observe"}, timeout_s=10)
            else:
                observation = self._request(
                    _step_request(
                        action, timeout_s, self.config.quiet_s, self.config.input_settle_s
                    ),
                    timeout_s=timeout_s,
                )
        except SandboxError as lost:
            if self._removed_from_outside():
                # No action caused this, so the episode is tried again.
                raise
            return self._lost_outcome(lost, started)
        limited = self._process_limit_outcome(observation, started, self.config.limits)
        if limited is not None:
            return limited
        error = problem if problem is not None else _action_error(action, observation)
        exited = bool(observation.get("exited"))
        return self._outcome(observation, started, error=error, terminated=exited)

    def _lost_observation(self, lost: LostSandbox) -> RawObservation:
        """The last look's screen, else the one before: nothing new scrolled, nothing completed."""
        observation = lost.look
        if observation is None:
            observation = {
                **(self._last or {}),
                "scrollback": "",
                "prompt": False,
                "completed": False,
                "timed_out": False,
                "exit_code": None,
                "foreground": None,
                "timings": {},
            }
        observation.update(lost.marks())
        return observation

    def evaluate(self, task: TerminalTask | None) -> float | None:
        """Run the task's check as the user: 1.0 if it exits 0, else 0.0.

        None when there is nothing to check with: no check, or a sandbox the episode's
        actions left dead or unanswering (its steps stand; only the reward is unknown).
        """
        check = task.check if task else None
        if not check or self._sandbox is None or self._unusable or not self._sandbox.is_running():
            return None
        try:
            result = self._sandbox.exec(
                check, timeout=self.config.setup_timeout_s, workdir=HOME, user=USER
            )
        except SandboxError:
            return None
        return 1.0 if result.exit_code == 0 else 0.0

    def describe(self) -> EnvironmentRef:
        """Return the image id and the versions of bash, tmux, python3 and Debian in it."""
        image_id = self.sandbox.image_id
        return EnvironmentRef(
            name="terminal/bash-tmux",
            version=image_id,
            components={
                "image": self.config.image,
                **self.sandbox.image_versions(VERSION_PROBE),
                # What the agent's view shows, beyond the image (sandboxes/view.py).
                "view": view.VERSION,
                # The agent's processes run without address-space randomization (the driver's
                # setarch -R, sandboxes/seccomp.py): ps shows the same RSS in every run.
                "address_randomization": "off",
            },
            config_hash=self.config.config_hash(),
        )


def _step_request(
    action: Action, timeout_s: float, quiet_s: float, settle_s: float
) -> dict[str, Any]:
    """The driver request for a valid ``keys`` or ``wait`` action."""
    common = {"op": "step", "quiet": quiet_s, "settle": settle_s}
    if action.name == "wait":
        seconds = min(float(action.arguments["seconds"]), timeout_s)
        return {**common, "keys": [], "min_wait": seconds, "timeout": seconds}
    return {**common, "keys": action.arguments["keys"], "timeout": timeout_s}


def _invalid_action(action: Action) -> str | None:
    """Return why ``action`` is not a terminal action, or None if it is one."""
    if action.name == "keys":
        items = action.arguments.get("keys")
        if not isinstance(items, list) or not items or not all(isinstance(k, str) for k in items):
            return "keys needs a non-empty list of strings"
        if any(item == "" for item in items):
            return "keys contains an empty string"
        return None
    if action.name == "wait":
        seconds = action.arguments.get("seconds")
        if (
            not isinstance(seconds, int | float)
            or isinstance(seconds, bool)
            or not math.isfinite(seconds)
            or seconds <= 0
        ):
            return "wait needs a positive, finite number of seconds"
        return None
    return f"unknown terminal action {action.name!r} (expected 'keys' or 'wait')"


def _action_error(action: Action, observation: RawObservation) -> str | None:
    """Describe how the action failed: a non-zero exit, a timeout, or the shell exiting."""
    if observation.get("timed_out"):
        running = observation.get("foreground") or "a program"
        return f"timed out: no prompt and {running} still busy"
    if observation.get("completed") and observation.get("exit_code") not in (None, 0):
        return f"exit status {observation['exit_code']}"
    return None


__all__ = ["TaskSetupError", "TerminalConfig", "TerminalEnvironment"]
