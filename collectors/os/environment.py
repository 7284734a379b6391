"""A real X11 desktop with real applications in a Docker sandbox, driven by pyautogui code.

One fresh container per episode from ``worldtrace/os`` (network ``none``; the session's user
writes only ``/tmp`` and ``/home/user``, which starts as the image's seeded home), so a new
container is the reset. The host speaks to ``/opt/worldtrace/desktop_driver.py`` over one exec
stream (one JSON line each way; the protocol is the driver's docstring):

- reset: ``start`` with the screen size and the task's ``launch`` argv lists (the driver waits
  for their windows), whose observation is the first one;
- step: the action's calls (:mod:`~worldtrace.collectors.os.actions`, one per statement), each
  an ``act`` request in order with the settle parameters; the step's observation is the last
  reply. A statement the driver refuses or that fails stops the action there: the step's error
  is the driver's error, and a refused call changed nothing (the driver checks before any
  input). Code the parser refuses is sent nowhere: the error is the parser's, and the
  observation is an ``observe`` of the unchanged desktop. ``DONE`` and ``FAIL`` end the episode.
- a step whose observation has no tree (the driver found the AT-SPI bus lost: the running
  applications cannot register again) is recorded and ends the episode (``truncated``, the
  tree error as the step's error); an application that crashed or hung is not an end: the
  next tree lacks it (``exited`` names it) or names it in ``tree_error``;
- a sandbox that stops answering during an action: the step is recorded with what a second
  driver process (``--observe``) still sees and the episode ends (``truncated``); a container
  removed from outside raises ``SandboxError`` (retried).

Every observation carries ``max_rows`` (the renderer's row cap), ``table`` (the rows' table,
:data:`~worldtrace.collectors.os.render.TABLE`: OSWorld's, so the renderer tells it from the
older records that name none), ``unchanged`` (whether the
tree is the one before the step: its digest did not change) and, for a step, ``calls`` with
each statement's own error and timing.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from worldtrace.collectors.base import StepOutcome
from worldtrace.collectors.driven import (
    DriverEnvironment,
    LostSandbox,
    SandboxConfig,
    SandboxImage,
    SandboxLimits,
)
from worldtrace.collectors.os.actions import ActionSyntaxError, action_calls
from worldtrace.collectors.os.image_definition import DRIVER, HOME, IMAGE_TAG, VERSIONS_JSON
from worldtrace.collectors.os.render import DEFAULT_MAX_ROWS, TABLE
from worldtrace.collectors.os.tasks import OsTask, launched_tree, tree_has
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.sandboxes.view import VIEW_LABEL
from worldtrace.schemas import Action, EnvironmentRef
from worldtrace.schemas.raw import RawObservation

OBSERVATION_VERSION = "2"
"""What the observation text holds; recorded in the environment identity (``describe()``)."""
SETTLE_VERSION = "4"
"""When the driver reads a step's observation (its settling rules); in the identity too.

2: a program the input started is waited for until its AT-SPI frame shows and is filled, the
pointer's tooltip delay (HOVER_S) and a first reaction (REACTION_S) are waited for, and the
dock shows no tooltips (desktop_driver.py). Runs recorded before carry no such field.
3: a normal or dialog window the input made the window manager manage is waited for until
openbox focused it or marked it as demanding attention.
"""


REPLY_MARGIN_S = 1.0
"""Of a statement's time, what the driver leaves for its reply to reach the host."""
ACTION_TIMING_VERSION = "1"
"""How an action is held to its step's time; in the identity (``timing``). 1: the driver gets
a budget per statement and refuses or stops input that would outlast it (issue 24); runs
recorded before carry no such field."""


KEYS_VERSION = "1"
"""How characters are typed (the driver's fix_character_keys); in the identity (``keys``)."""


def default_limits() -> Limits:
    """Limits that fit a desktop with a few GTK applications (about 300 MB in use)."""
    return Limits(cpus=2, memory_mb=1536, pids=512, disk_mb=256)


class OsConfig(SandboxConfig):
    """Configuration of the desktop environment (every field has a default)."""

    default_image = IMAGE_TAG
    image: SandboxImage = Field(default=None, description=f"sandbox image; default {IMAGE_TAG}")
    limits: SandboxLimits = Field(default_factory=default_limits)
    width: int = Field(default=1280, ge=640, le=3840, description="screen width in pixels")
    height: int = Field(default=800, ge=480, le=2160, description="screen height in pixels")
    quiet_s: float = Field(
        default=0.3,
        gt=0,
        le=5,
        description="the desktop is settled after this long without an AT-SPI event or a "
        "screen change",
    )
    settle_cap_s: float = Field(
        default=3.0, gt=0, le=60, description="longest wait for the desktop to settle"
    )
    max_nodes: int = Field(
        default=5000, ge=10, description="nodes of the accessibility tree read per observation"
    )
    max_rows: int = Field(
        default=DEFAULT_MAX_ROWS,
        ge=10,
        description="rows of the linearized tree an observation's text shows (the raw record "
        "keeps the whole tree)",
    )
    start_timeout_s: float = Field(
        default=90, gt=0, description="limit for the session and the launched windows to start"
    )
    call_timeout_s: float = Field(
        default=30,
        gt=0,
        description="limit for one pyautogui call with its settling and observation (the step "
        "timeout caps it too)",
    )
    check_timeout_s: float = Field(default=60, gt=0, description="limit for a task's check")


class OsEnvironment(DriverEnvironment[OsConfig, OsTask]):
    """The desktop, its applications and the seeded home in a fresh container per episode."""

    domain = "os"
    driver = DRIVER
    state_field = "tree_digest"

    def __init__(
        self, config: OsConfig | None = None, labels: dict[str, str] | None = None
    ) -> None:
        super().__init__(config or OsConfig(), labels)
        self._versions: dict[str, Any] = {}

    def reset(self, seed: int, task: OsTask | None) -> RawObservation:
        """Start a fresh container and the desktop session with the task's applications.

        The desktop does not depend on the seed.
        """
        self._start_sandbox(self.config.image_tag, self.config.limits, network="none")
        self._open_driver()
        launch = [list(argv) for argv in (task.launch if task else ())]
        request = {
            "op": "start",
            "width": self.config.width,
            "height": self.config.height,
            "launch": launch,
            "max_nodes": self.config.max_nodes,
        }
        reply = self._request(request, timeout_s=self.config.start_timeout_s)
        self._versions = dict(reply.get("versions") or {})
        observation = {
            **reply,
            "max_rows": self.config.max_rows,
            "table": TABLE,
            "unchanged": False,
        }
        self._last = observation
        return observation

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Run the action's statements in order; return the desktop after the last one run."""
        if self._driver is None:
            raise SandboxError("the os environment has no episode; call reset() first")
        started = time.monotonic()
        try:
            calls = action_calls(action)
        except ActionSyntaxError as problem:
            return self._refused(str(problem), started)
        deadline = started + float(timeout_s)
        reply: dict[str, Any] = {}
        done: list[dict[str, Any]] = []
        error: str | None = None
        for index, call in enumerate(calls):
            # Each statement gets what is left of the step's time (and at most the call
            # limit); the driver ends its input and settling early enough to observe within
            # it, less a margin for the reply's way back (issue 24: a click with clicks=100,
            # interval=1 ran 36.7 s past a shorter step timeout).
            limit = min(deadline - time.monotonic(), self.config.call_timeout_s)
            if index and limit <= REPLY_MARGIN_S:
                error = f"statement {index + 1}: not run: the step's time ran out"
                break
            limit = max(limit, REPLY_MARGIN_S + 0.5)
            request = {
                "op": "act",
                "call": call,
                "quiet_s": self.config.quiet_s,
                "settle_cap_s": self.config.settle_cap_s,
                "max_nodes": self.config.max_nodes,
                "budget_s": round(limit - REPLY_MARGIN_S, 3),
            }
            try:
                reply = self._request(request, timeout_s=limit, raise_driver_error=False)
            except SandboxError as lost:
                if self._removed_from_outside():
                    raise
                return self._lost_outcome(lost, started, done)
            if "driver_error" in reply:
                reply["error"] = f"the desktop driver could not run it: {reply['driver_error']}"
            done.append(
                {"code_index": index, "error": reply.get("error"), "timing": reply.get("timing")}
            )
            if reply.get("error"):
                where = f"statement {index + 1}: " if len(calls) > 1 else ""
                error = where + str(reply["error"])
                break
        if "tree_digest" not in reply:
            # A driver_error reply has no observation: look at the desktop as it is now.
            reply = {**self._observe(), "error": reply.get("error")}
        observation = self._observation(reply, done)
        terminated = error is None and calls[-1]["function"] in ("DONE", "FAIL")
        return self._outcome(observation, started, error=error, terminated=terminated)

    def _observation(self, reply: dict[str, Any], calls: list[dict[str, Any]]) -> RawObservation:
        previous = (self._last or {}).get("tree_digest")
        return {
            **reply,
            "calls": calls,
            "max_rows": self.config.max_rows,
            "table": TABLE,
            "unchanged": reply.get("tree_digest") == previous,
        }

    def _outcome(
        self,
        observation: RawObservation,
        started: float,
        error: str | None,
        truncated: bool = False,
        terminated: bool = False,
    ) -> StepOutcome:
        if observation.get("tree") is None and not (truncated or terminated):
            error = error or str(observation.get("tree_error") or "no accessibility tree")
            truncated = True
        return super()._outcome(observation, started, error, truncated, terminated)

    def _observe(self) -> dict[str, Any]:
        return self._request(
            {"op": "observe", "max_nodes": self.config.max_nodes},
            timeout_s=self.config.call_timeout_s,
        )

    def _refused(self, error: str, started: float) -> StepOutcome:
        """Code the parser refused: nothing was sent; the desktop as it is, unchanged."""
        try:
            reply = self._observe()
        except SandboxError as lost:
            if self._removed_from_outside():
                raise
            return self._lost_outcome(lost, started, [])
        observation = self._observation({**reply, "error": error}, [])
        return self._outcome(observation, started, error=error)

    def _lost_observation(self, lost: LostSandbox, calls: list[dict[str, Any]]) -> RawObservation:
        """The last look's desktop, else the tree seen before, with the calls run so far."""
        look = lost.look
        last = self._last or {}
        base: dict[str, Any] = (
            dict(look)
            if look is not None
            else {
                key: last.get(key)
                for key in ("tree", "nodes", "truncated", "screen", "tree_digest")
            }
        )
        if look is None:
            base["tree_error"] = "the sandbox stopped answering; the tree is the one before"
        reply = {**base, "error": lost.reason, **lost.marks()}
        return self._observation(reply, calls)

    def final_tree(self) -> dict[str, Any] | None:
        """The accessibility tree now (None when it cannot be read: the sandbox was lost)."""
        looked = self._final_look()
        return None if looked is None else looked.get("tree")

    def _final_look(self) -> dict[str, Any] | None:
        """The tree now with who each of its applications is (the driver's ``identify``).

        None when the driver cannot be asked any more: a tree from a last look or from the
        record says nothing of which process drew each application, so no check trusts it.
        """
        if self._driver is None or self._unusable:
            return None
        try:
            return self._request(
                {"op": "observe", "max_nodes": self.config.max_nodes, "identify": True},
                timeout_s=self.config.call_timeout_s,
            )
        except SandboxError:
            return None

    def evaluate(self, task: OsTask | None) -> float | None:
        """1.0 when the task's checks hold in the container now, else 0.0.

        A tree check reads only the applications the environment launched at reset for the
        task (the process it started, running the executable it resolved: the driver's
        ``identify``), never an application by the name it gives itself. None without a task,
        or when the sandbox (for a tree check: the driver) cannot be asked any more.
        """
        if task is None or self._sandbox is None:
            return None
        if task.check_tree is not None:
            looked = self._final_look()
            if looked is None or looked.get("tree") is None:
                return None
            # Only what the environment launched for the task counts: an application's name
            # is its own choice (issue 24: a window of the agent's called itself galculator).
            tree = launched_tree(looked["tree"], looked.get("applications") or [], task)
            if not tree_has(tree, *task.check_tree):
                return 0.0
        if task.check_command:
            try:
                result = self.sandbox.exec(
                    ["sh", "-c", task.check_command],
                    timeout=self.config.check_timeout_s,
                    workdir=HOME,
                    user="user",
                )
            except SandboxError:
                return None
            if result.exit_code != 0:
                return 0.0
        return 1.0

    def describe(self) -> EnvironmentRef:
        """Return the image id and the version of every part of the desktop (versions.json)."""
        sandbox = self.sandbox
        image_id = sandbox.image_id
        versions = self._versions or sandbox.image_versions(["cat", VERSIONS_JSON])
        components = {
            **{str(key): str(value) for key, value in versions.items()},
            "image": self.config.image_tag,
            "image_digest": image_id,
            "screen": f"{self.config.width}x{self.config.height}",
            # What the text shows (issue 23): 2 = window and focus lines and OSWorld's rows;
            # runs recorded before carry neither field.
            "observation": OBSERVATION_VERSION,
            "rows": TABLE,
            # Whether the session runs in the agent's private view (sandboxes/view.py): what
            # the desktop's terminal shows of the machine (ps, mount, free...) differs; runs
            # recorded before carry no such field.
            "view": (sandbox.container.image.labels or {}).get(VIEW_LABEL, "none"),
            "settle": SETTLE_VERSION,
            "timing": ACTION_TIMING_VERSION,
            # 1: each character is typed on the key holding it at pyautogui's shift level
            # (before, "<" typed ">"; issue 23); runs recorded before carry no such field.
            "keys": KEYS_VERSION,
        }
        return EnvironmentRef(
            name="os/desktop",
            version=image_id,
            components=components,
            config_hash=self.config.config_hash(),
        )


__all__ = ["OsConfig", "OsEnvironment"]
