"""A real Android device or emulator, borrowed per episode, driven by AndroidWorld's actions.

At reset the environment borrows a device of the pool (:mod:`~worldtrace.collectors.android.
pool`), connects through adb and uiautomator2 (:mod:`~worldtrace.collectors.android.device`),
and brings it to the task's starting state as the config says (``reset``):

- ``apps``: ``pm clear`` every app the task uses (without a task, ``reset_packages``), run
  its setup commands, go home, open its start app;
- ``snapshot``: load the emulator snapshot ``snapshot`` (``adb emu avd snapshot load``), then
  go home and open the start app.

Unless ``demo_status_bar`` is off, the status bar is frozen with SystemUI's demo mode (its
clock at ``status_bar_clock``, the battery full, no notification icons) so that the time of
collection and the device's own life do not reach the element list or the screenshot; demo
mode is left when the device is given back. The first observation records all this
(``reset``). A step performs the action on the element
list of the observation before it (an ``index`` is resolved to the element's centre), then
waits until the screen settles: two hierarchy dumps in a row agree and no window transition
runs, checked every ``settle_poll_s`` for at most ``settle_timeout_s``. An index the screen
does not have is the step's error and touches nothing (the observation is the one before). A
device that stops answering ends the episode with the reason (the observation is the last
one seen, marked ``device_lost``), and the pool sets the device aside, so the next episode
takes the next device.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import AwareDatetime, Field

from worldtrace.collectors.android.actions import READ_ONLY
from worldtrace.collectors.android.device import (
    SWIPE_FRACTION,
    AndroidDevice,
    DeviceLost,
    adb_client,
)
from worldtrace.collectors.android.elements import Element, HierarchyError, parse_hierarchy
from worldtrace.collectors.android.pool import POOL
from worldtrace.collectors.android.tasks import AndroidTask
from worldtrace.collectors.base import Environment, EnvironmentConfig, StepOutcome, TaskSetupError
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.schemas import Action, EnvironmentRef
from worldtrace.schemas.raw import RawObservation

DEFAULT_APPS = {
    "Settings": "com.android.settings",
    "Contacts": "com.android.contacts",
    "Clock": "com.android.deskclock",
    "Files": "com.android.documentsui",
}
"""What ``open_app`` names mean by default: the stock apps of an emulator image."""


class AndroidConfig(EnvironmentConfig):
    """Configuration of the Android environment (every field has a default)."""

    clock_start: AwareDatetime | None = Field(
        default=None,
        description="not settable here: a device keeps its own clock (null)",
    )
    device: str | None = Field(
        default=None,
        description="one device: a serial (USB, emulator-5554) or host:port (connected with "
        "`adb connect`); shorthand for a pool of one",
    )
    devices: list[str] = Field(
        default_factory=list,
        description="a pool of devices, one episode on each at a time; empty (and no "
        "`device`): every device the adb server lists",
    )
    adb_server: str = Field(
        default="127.0.0.1:5037",
        pattern=r"^[^:\s]*:\d+$",
        description="the adb server (host:port) the devices are reached through",
    )
    reset: Literal["apps", "snapshot"] = Field(
        default="apps",
        description="how an episode starts: `apps` clears the task's apps and seeds them; "
        "`snapshot` loads an emulator snapshot",
    )
    snapshot: str = Field(
        default="worldtrace",
        min_length=1,
        description="the emulator snapshot `reset: snapshot` loads",
    )
    reset_packages: list[str] = Field(
        default_factory=lambda: [*DEFAULT_APPS.values(), "com.android.providers.contacts"],
        description="what an `apps` reset clears when the episode has no task (a task names "
        "its own); settings the system keeps (Wi-Fi, Bluetooth) stay as they were",
    )
    apps: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_APPS),
        description="the app names `open_app` knows, each with its package",
    )
    screenshot: bool = Field(default=True, description="record a screenshot with each observation")
    demo_status_bar: bool = Field(
        default=True,
        description="freeze the status bar with SystemUI's demo mode for each episode (clock "
        "at `status_bar_clock`, battery full, no notification icons), so neither the "
        "collection's time nor the device's battery and notifications reach the rows (demo "
        "mode is left when the device is given back); false: the status bar as it is",
    )
    status_bar_clock: str = Field(
        default="0900",
        pattern=r"^([01]\d|2[0-3])[0-5]\d$",
        description="the time the frozen status bar shows (hhmm, 24-hour)",
    )
    settle_timeout_s: float = Field(
        default=5, gt=0, description="longest wait for the screen to settle after an action"
    )
    settle_poll_s: float = Field(default=0.2, gt=0, description="pause between two looks")
    wait_s: float = Field(default=1.0, ge=0, description="how long the `wait` action waits")
    borrow_timeout_s: float = Field(
        default=600, gt=0, description="longest wait for a device of the pool to be free"
    )
    lost_retry_s: float = Field(
        default=60, ge=0, description="how long a lost device is set aside before it is tried again"
    )

    def pool(self) -> list[str]:
        """The devices episodes may use (every device the adb server lists, if none is named)."""
        if self.devices:
            return list(self.devices)
        if self.device:
            return [self.device]
        listed = [d.serial for d in adb_client(self.adb_server).list() if d.state == "device"]
        if not listed:
            raise SandboxError(
                f"no Android device on the adb server at {self.adb_server}: connect one "
                "(`adb devices`), or name one with --env device=HOST:PORT"
            )
        return listed


class AndroidEnvironment(Environment[AndroidConfig, AndroidTask]):
    """One borrowed device per episode."""

    def __init__(self, config: AndroidConfig | None = None) -> None:
        self.config = config or AndroidConfig()
        self._device: AndroidDevice | None = None
        self._serial: str | None = None
        self._last: RawObservation | None = None
        self._elements: list[Element] = []
        self._task: AndroidTask | None = None

    @property
    def device(self) -> AndroidDevice:
        """The device of the current episode."""
        if self._device is None:
            raise SandboxError("the android environment has no episode; call reset() first")
        return self._device

    def reset(self, seed: int, task: AndroidTask | None) -> RawObservation:
        """Borrow a device, bring it to the task's starting state, and look at it."""
        self.close()
        config = self.config
        self._serial = POOL.borrow(config.pool(), config.borrow_timeout_s, config.lost_retry_s)
        self._task = task
        try:
            self._device = AndroidDevice(self._serial, config.adb_server)
            reset = self._bring_to_start(task)
            observation = self._observe()
        except DeviceLost as lost:
            self._give_back(lost=str(lost))
            raise
        observation["reset"] = reset
        return observation

    def _bring_to_start(self, task: AndroidTask | None) -> dict[str, Any]:
        device = self.device
        record: dict[str, Any] = {"mode": self.config.reset, "device": self._serial}
        if self.config.reset == "snapshot":
            record["snapshot"] = self.config.snapshot
            record["answer"] = device.load_snapshot(self.config.snapshot)
        else:
            packages = task.apps if task is not None else self.config.reset_packages
            record["cleared"] = {package: device.clear(package) for package in packages}
        setup = task.setup if task is not None else ()
        for command in setup:
            result = device.shell(command)
            if result.returncode != 0:
                raise TaskSetupError(f"`{command}` failed: {result.output}")
        record["setup"] = list(setup)
        if self.config.demo_status_bar:
            device.freeze_status_bar(self.config.status_bar_clock)
        record["status_bar"] = self._status_bar()
        device.key("home")
        if task is not None and task.start_app:
            device.launch(task.start_app)
        return record

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Perform one action; return the settled screen after it."""
        started = time.monotonic()
        if self._last is None:
            raise SandboxError("the android environment has no episode; call reset() first")
        try:
            error = self._perform(action)
            if error is not None:
                return self._outcome({**self._last, "error": error}, started, error=error)
            observation = self._observe()
        except DeviceLost as lost:
            self._give_back(lost=str(lost))
            observation = {**self._last, "error": str(lost), "device_lost": True}
            return self._outcome(observation, started, error=str(lost), truncated=True)
        terminated = action.name == "status"
        return self._outcome(observation, started, error=None, terminated=terminated)

    def _perform(self, action: Action) -> str | None:
        """Do ``action`` on the device; the step's error if it cannot be done."""
        arguments = action.arguments
        device = self.device
        kind = action.name
        point = self._point(arguments)
        if isinstance(point, str):
            return point
        if kind in READ_ONLY or kind == "status":
            if kind == "wait":
                time.sleep(self.config.wait_s)
            return None
        if kind == "click":
            device.tap(*_needed(point))
        elif kind == "double_tap":
            device.double_tap(*_needed(point))
        elif kind == "long_press":
            device.long_press(*_needed(point))
        elif kind == "input_text":
            if point is not None:
                device.tap(*point)
            device.type_text(str(arguments["text"]))
        elif kind == "keyboard_enter":
            device.key("enter")
        elif kind in {"scroll", "swipe"}:
            device.swipe(*self._stroke(kind, str(arguments["direction"]), arguments))
        elif kind == "navigate_back":
            device.key("back")
        elif kind == "navigate_home":
            device.key("home")
        elif kind == "open_app":
            name = str(arguments["app_name"])
            package = self.config.apps.get(name) or (name if "." in name else None)
            if package is None:
                return f"unknown app {name!r} (the apps: {', '.join(self.config.apps)})"
            device.launch(package)
        else:
            return f"unknown action {kind!r}"
        return None

    def _point(self, arguments: Mapping[str, Any]) -> tuple[int, int] | str | None:
        """The point an action targets: an element's centre, a point, or None.

        The error text instead when the index names no element of the screen.
        """
        if "index" in arguments:
            index = arguments["index"]
            if not isinstance(index, int) or not 0 <= index < len(self._elements):
                last = len(self._elements) - 1
                return f"no element {index!r} on this screen (elements 0 to {last})"
            return self._elements[index].center
        if "x" in arguments and "y" in arguments:
            return int(arguments["x"]), int(arguments["y"])
        return None

    def _stroke(
        self, kind: str, direction: str, arguments: Mapping[str, Any]
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        """Where the finger goes for a scroll (the view moves ``direction``) or a swipe."""
        width, height = self._screen_size()
        left, top, right, bottom = (0, 0, width, height)
        if isinstance(arguments.get("index"), int):
            left, top, right, bottom = self._elements[arguments["index"]].bbox
        x, y = (left + right) // 2, (top + bottom) // 2
        dx = int((right - left) * SWIPE_FRACTION)
        dy = int((bottom - top) * SWIPE_FRACTION)
        finger = {"up": (0, -dy), "down": (0, dy), "left": (-dx, 0), "right": (dx, 0)}[direction]
        if kind == "scroll":  # the view moves down when the finger moves up
            finger = (-finger[0], -finger[1])
        return (x - finger[0], y - finger[1]), (x + finger[0], y + finger[1])

    def _screen_size(self) -> tuple[int, int]:
        hierarchy = str((self._last or {}).get("hierarchy") or "")
        right = [int(value) for value in re.findall(r"\]\[(\d+),\d+\]", hierarchy)]
        bottom = [int(value) for value in re.findall(r"\]\[\d+,(\d+)\]", hierarchy)]
        return (max(right, default=1080), max(bottom, default=1920))

    def _observe(self) -> RawObservation:
        """Look until the screen settles; the observation of what it shows then."""
        config = self.config
        started = time.monotonic()
        looks = 1
        look = self.device.look()
        settled = False
        while time.monotonic() - started < config.settle_timeout_s:
            time.sleep(config.settle_poll_s)
            again = self.device.look()
            looks += 1
            stable = again.hierarchy == look.hierarchy and not again.in_transition
            look = again
            if stable:
                settled = True
                break
        try:
            self._elements = parse_hierarchy(look.hierarchy)
        except HierarchyError:
            self._elements = []
        observation: RawObservation = {
            "hierarchy": look.hierarchy,
            "package": look.package,
            "activity": look.activity,
            "keyboard_shown": look.keyboard_shown,
            "orientation": look.orientation,
            "settle": {
                "looks": looks,
                "settled": settled,
                "seconds": round(time.monotonic() - started, 3),
            },
            "screenshot": self.device.screenshot() if config.screenshot else None,
        }
        self._last = observation
        return observation

    def evaluate(self, task: AndroidTask | None) -> float | None:
        """1.0 if the task's check holds on the device, 0.0 if not.

        None without a check, or without a device to ask.
        """
        if task is None or not task.check_command or self._device is None:
            return None
        try:
            output = self._device.shell(task.check_command).output
        except DeviceLost:
            return None
        return 1.0 if re.search(task.check_pattern, output, re.MULTILINE) else 0.0

    def describe(self) -> EnvironmentRef:
        """The device (model, Android, build), uiautomator2, the screen and the task's apps."""
        packages = tuple(self._task.apps) if self._task is not None else ()
        identity = self.device.identity(packages)
        components = {**identity, "reset": self.config.reset, "status_bar": self._status_bar()}
        if self.config.reset == "snapshot":
            components["snapshot"] = self.config.snapshot
        return EnvironmentRef(
            name="android/device",
            version=str(identity.get("fingerprint") or ""),
            components=components,
            config_hash=self.config.config_hash(),
        )

    def _status_bar(self) -> str:
        """What the status bar shows: ``demo hhmm`` (frozen) or ``live``."""
        return f"demo {self.config.status_bar_clock}" if self.config.demo_status_bar else "live"

    def _give_back(self, lost: str | None = None) -> None:
        if self._device is not None and lost is None and self.config.demo_status_bar:
            # a device gone takes its demo mode with it; the next borrow finds it lost
            with contextlib.suppress(DeviceLost):
                self._device.thaw_status_bar()
        if self._serial is not None:
            POOL.give_back(self._serial, lost=lost)
        self._serial = None
        self._device = None

    def close(self) -> None:
        """Give the device back to the pool."""
        self._give_back()


def _needed(point: tuple[int, int] | None) -> tuple[int, int]:
    if point is None:
        raise ValueError("a targeted action without a target passed validation")
    return point
