"""bash in a Docker sandbox, driven through tmux by the in-container driver.

One fresh container per episode. The host speaks to ``/opt/worldtrace/tmux_driver.py`` over a
single exec stream (one JSON line each way per step), so a step costs one round trip. The raw
observation is the driver's reply: the screen with its escape sequences, the scrollback that
appeared since the last step, the cursor, whether the prompt came back with which exit status
and working directory, and the program in the foreground.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from collectors.base import Environment, RawObservation, StepOutcome, Task
from sandboxes.docker import DockerSandbox, ExecStream, Limits, SandboxDied, SandboxError
from schemas import Action, EnvironmentRef

DRIVER = ["python3", "/opt/worldtrace/tmux_driver.py"]
# How long past the step timeout we wait for the driver before calling the sandbox broken.
DRIVER_GRACE_S = 15.0

_versions_by_image: dict[str, dict[str, str]] = {}
_versions_lock = threading.Lock()


class TerminalConfig(BaseModel):
    """Configuration of the terminal environment."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field(default="worldtrace/terminal:latest", description="sandbox image")
    limits: Limits = Field(default_factory=Limits)
    width: int = Field(default=160, ge=20, le=500, description="tmux pane columns")
    height: int = Field(default=40, ge=5, le=200, description="tmux pane rows")
    quiet_s: float = Field(
        default=0.5,
        gt=0,
        description="a step with no prompt ends after this long without screen change or CPU use",
    )
    setup_timeout_s: float = Field(default=60, gt=0, description="limit for each setup command")

    def config_hash(self) -> str:
        """Return a short hash identifying this configuration."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


class TaskSetupError(RuntimeError):
    """A task's setup command failed: the task is broken, retrying will not help."""


class TerminalEnvironment(Environment):
    """A bash shell in a fresh container per episode, seen as a 160x40 tmux screen."""

    domain = "terminal"

    def __init__(self, config: TerminalConfig | None = None, labels: dict[str, str] | None = None):
        self.config = config or TerminalConfig()
        self._labels = {"worldtrace.domain": "terminal", **(labels or {})}
        self._sandbox: DockerSandbox | None = None
        self._driver: ExecStream | None = None
        self._last: RawObservation | None = None

    @property
    def sandbox(self) -> DockerSandbox:
        """The sandbox of the current episode."""
        if self._sandbox is None:
            raise SandboxError("the terminal environment has no episode; call reset() first")
        return self._sandbox

    def reset(self, seed: int, task: Task | None) -> RawObservation:
        """Start a fresh container, run the task's setup, start the shell, return the screen."""
        self.close()
        self._sandbox = DockerSandbox(
            self.config.image, limits=self.config.limits, network="none", labels=self._labels
        ).start()
        for command in getattr(task, "setup", ()):
            result = self._sandbox.exec(
                command, timeout=self.config.setup_timeout_s, workdir="/root"
            )
            if result.exit_code != 0:
                raise TaskSetupError(
                    f"setup command {command!r} of task {getattr(task, 'name', '?')!r} exited "
                    f"{result.exit_code}: {result.stderr.decode(errors='replace').strip()[-500:]}"
                )
        self._driver = self._sandbox.open_stream(DRIVER)
        self._last = self._request(
            {
                "op": "start",
                "width": self.config.width,
                "height": self.config.height,
                "cwd": "/root",
            },
            timeout_s=20,
        )
        if not self._last.get("prompt"):
            raise SandboxError("the shell did not show a prompt after start")
        return self._last

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Send keys (or wait) and return the screen once the shell or program is idle."""
        started = time.monotonic()
        problem = _invalid_action(action)
        if problem is not None:
            # Nothing was sent: the next state is the current one, re-read from the screen.
            observation = self._request({"op": "observe"}, timeout_s=10)
            return self._outcome(observation, started, error=problem)
        if action.name == "wait":
            seconds = min(float(action.arguments["seconds"]), timeout_s)
            request = {
                "op": "step",
                "keys": [],
                "min_wait": seconds,
                "timeout": seconds,
                "quiet": self.config.quiet_s,
            }
        else:
            request = {
                "op": "step",
                "keys": action.arguments["keys"],
                "timeout": timeout_s,
                "quiet": self.config.quiet_s,
            }
        observation = self._request(request, timeout_s=timeout_s)
        return self._outcome(observation, started, error=_action_error(action, observation))

    def _outcome(
        self, observation: RawObservation, started: float, error: str | None
    ) -> StepOutcome:
        self._last = observation
        return StepOutcome(
            observation=observation,
            latency_s=time.monotonic() - started,
            terminated=bool(observation.get("exited")),
            error=error,
        )

    def _request(self, request: dict[str, Any], timeout_s: float) -> RawObservation:
        if self._driver is None:
            raise SandboxError("the terminal environment has no episode; call reset() first")
        self._driver.send_line(json.dumps(request))
        try:
            reply = json.loads(self._driver.read_line(timeout_s + DRIVER_GRACE_S))
        except TimeoutError:
            raise SandboxDied(f"the tmux driver did not answer within {timeout_s:.0f}s") from None
        if "error" in reply:
            raise SandboxError(f"the tmux driver failed: {reply['error']}")
        return reply

    def evaluate(self, task: Task | None) -> float | None:
        """Run the task's check in the sandbox: 1.0 if it exits 0, else 0.0."""
        check = getattr(task, "check", None)
        if not check or self._sandbox is None or not self._sandbox.is_running():
            return None
        result = self._sandbox.exec(check, timeout=self.config.setup_timeout_s, workdir="/root")
        return 1.0 if result.exit_code == 0 else 0.0

    def describe(self) -> EnvironmentRef:
        """Return the image id and the versions of bash, tmux, python3 and Debian in it."""
        image_id = self.sandbox.image_id
        return EnvironmentRef(
            name="terminal/bash-tmux",
            version=image_id,
            components={"image": self.config.image, **self._component_versions(image_id)},
            config_hash=self.config.config_hash(),
        )

    def _component_versions(self, image_id: str) -> dict[str, str]:
        with _versions_lock:
            if image_id in _versions_by_image:
                return _versions_by_image[image_id]
        probe = (
            'printf "bash=%s\\n" "$BASH_VERSION"; '
            'printf "tmux=%s\\n" "$(tmux -V)"; '
            'printf "python3=%s\\n" "$(python3 --version)"; '
            'printf "debian=%s\\n" "$(cat /etc/debian_version)"'
        )
        result = self.sandbox.exec(["bash", "-c", probe], timeout=20)
        versions = dict(line.split("=", 1) for line in result.text.splitlines() if "=" in line)
        with _versions_lock:
            _versions_by_image[image_id] = versions
        return versions

    def close(self) -> None:
        """Stop the driver and remove the container."""
        if self._driver is not None:
            self._driver.close()
            self._driver = None
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


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
        valid = isinstance(seconds, int | float) and not isinstance(seconds, bool)
        if not valid or not math.isfinite(seconds) or seconds <= 0:
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
