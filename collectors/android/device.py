"""One Android device, borrowed for an episode: reached through adb and uiautomator2.

A device is a sandbox that is not created but borrowed: a phone on USB (its serial), an
emulator (``emulator-5554``) or a device reached over the network (``host:port``, connected
with ``adb connect`` first), always through an adb server (``adb_server``, 127.0.0.1:5037 by
default, Debian's ``adb``). On it, uiautomator2 pushes and starts its own server
(``u2.jar``, device port 9008) the first time it is used and talks to it through adb.

Every call that fails because the device went away (unplugged, the network gone, adbd or the
uiautomator server killed) raises :class:`DeviceLost`: the episode ends with that reason and
the pool sets the device aside (:mod:`~worldtrace.collectors.android.pool`).
"""

from __future__ import annotations

import base64
import io
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import adbutils
import requests
import uiautomator2 as u2
from uiautomator2.exceptions import DeviceError

from worldtrace.sandboxes.errors import SandboxError

CONNECT_TIMEOUT_S = 30.0
"""How long a device may take to be listed as ``device`` after ``adb connect``."""

FOCUS = re.compile(r"mCurrentFocus=Window\{[^}]*?\s(?P<package>[^\s/}]+)/(?P<activity>[^\s}]+)\}")
TRANSITION_RUNNING = re.compile(r"mAppTransitionState=APP_STATE_(RUNNING|READY)")
INPUT_SHOWN = re.compile(r"mInputShown=true")

LOOK_COMMAND = "dumpsys window windows; dumpsys input_method"
"""One shell call that tells the focused window, a running transition and the keyboard."""

DEMO_MODE = "com.android.systemui.demo"
"""The broadcast SystemUI's demo mode listens to (the status bar screenshots use)."""

SWIPE_FRACTION = 0.3
"""A scroll or swipe moves the finger across this share of the target (from its middle)."""


class DeviceLost(SandboxError):
    """The device stopped answering (unplugged, offline, its adbd or uiautomator gone)."""


DEVICE_ERRORS = (
    adbutils.AdbError,
    DeviceError,
    requests.RequestException,
    ConnectionError,
    OSError,
)
"""What uiautomator2 and adbutils raise when the device is gone."""


@dataclass(frozen=True)
class Look:
    """What one look at the device saw."""

    hierarchy: str
    package: str
    activity: str
    keyboard_shown: bool
    in_transition: bool
    orientation: int


class NoAdbServer(SandboxError):
    """Nothing listens where the adb server should."""


def adb_client(adb_server: str) -> adbutils.AdbClient:
    """A client of the adb server at ``host:port`` (:class:`NoAdbServer` if none listens).

    adbutils would start a server of its own (its bundled adb) when it finds none; the server
    is the user's to run, so that the devices it knows are the ones they connected.
    """
    host, _, port = adb_server.rpartition(":")
    host = host or "127.0.0.1"
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as error:
        raise NoAdbServer(
            f"no adb server at {adb_server} ({error}): start one with `adb start-server` "
            "(or `adb -P PORT start-server`)"
        ) from None
    return adbutils.AdbClient(host=host, port=int(port))


def uiautomator_answers(adb_server: str, serial: str, port: int = 9008) -> bool:
    """Whether a uiautomator server answers ``/ping`` on the device (without starting one)."""
    try:
        connection = (
            adb_client(adb_server).device(serial).create_connection(adbutils.Network.TCP, port)
        )
    except DEVICE_ERRORS:
        return False
    try:
        connection.settimeout(5)
        connection.sendall(b"GET /ping HTTP/1.0\r\nHost: localhost\r\n\r\n")
        answer = b""
        while chunk := connection.recv(4096):
            answer += chunk
        return answer.endswith(b"pong")
    except OSError:
        return False
    finally:
        connection.close()


class AndroidDevice:
    """A connected device: its adb handle and its uiautomator2 client."""

    def __init__(self, serial: str, adb_server: str) -> None:
        self.serial = serial
        self.adb_server = adb_server
        try:
            client = adb_client(adb_server)
            if ":" in serial:
                client.connect(serial, timeout=CONNECT_TIMEOUT_S)
            self._wait_listed(client)
            self.adb = client.device(serial)
            self.ui = u2.Device(self.adb)
        except DEVICE_ERRORS as error:
            raise DeviceLost(f"cannot reach the Android device {serial}: {error}") from None

    def _wait_listed(self, client: adbutils.AdbClient) -> None:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            states = {device.serial: device.state for device in client.list()}
            state = states.get(self.serial)
            if state == "device":
                return
            if time.monotonic() > deadline:
                seen = ", ".join(f"{s} ({st})" for s, st in states.items()) or "none"
                raise DeviceLost(
                    f"the Android device {self.serial} is {state or 'not listed'} on the adb "
                    f"server at {self.adb_server} (devices: {seen})"
                )
            time.sleep(0.2)

    def call(self, what: str, function: Any, *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)``, with a lost device as :class:`DeviceLost`."""
        try:
            return function(*args, **kwargs)
        except DEVICE_ERRORS as error:
            raise DeviceLost(
                f"the Android device {self.serial} stopped answering ({what}): {error}"
            ) from None

    def shell(self, command: str | list[str]) -> adbutils.ShellReturn:
        """Run a shell command; its output and exit code."""
        result: adbutils.ShellReturn = self.call(f"shell {command}", self.adb.shell2, command)
        return result

    def look(self) -> Look:
        """The hierarchy, the app in front, the keyboard and whether a transition runs."""
        hierarchy = str(self.call("dumpWindowHierarchy", self.ui.dump_hierarchy))
        windows = self.shell(LOOK_COMMAND).output
        focus = FOCUS.search(windows)
        rotation = re.search(r'<hierarchy rotation="(\d)"', hierarchy)
        return Look(
            hierarchy=hierarchy,
            package=focus["package"] if focus else "",
            activity=_short_activity(focus["package"], focus["activity"]) if focus else "",
            keyboard_shown=bool(INPUT_SHOWN.search(windows)),
            in_transition=bool(TRANSITION_RUNNING.search(windows)),
            orientation=int(rotation[1]) if rotation else 0,
        )

    def screenshot(self) -> dict[str, str]:
        """The screen as the device gives it, base64.

        ``{"jpeg": …}`` from uiautomator's ``takeScreenshot``, or ``{"png": …}`` from
        ``screencap`` where that returns none. Kept as sent: turning the JPEG into the PNG a
        record holds is the renderer's work (at normalization), not the step's.
        """
        jpeg = self.call("takeScreenshot", self.ui.jsonrpc.takeScreenshot, 1, 80)
        if jpeg:
            return {"jpeg": str(jpeg)}
        image = self.call("screencap", self.adb.screenshot)
        out = io.BytesIO()
        image.save(out, format="PNG", compress_level=1)
        return {"png": base64.b64encode(out.getvalue()).decode()}

    def tap(self, x: int, y: int) -> None:
        """A tap."""
        self.call("click", self.ui.click, x, y)

    def double_tap(self, x: int, y: int) -> None:
        """Two taps."""
        self.call("double_click", self.ui.double_click, x, y)

    def long_press(self, x: int, y: int) -> None:
        """A press held for a second."""
        self.call("long_click", self.ui.long_click, x, y, 1.0)

    def swipe(self, start: tuple[int, int], end: tuple[int, int]) -> None:
        """A finger moved from ``start`` to ``end``."""
        self.call("swipe", self.ui.swipe, *start, *end, 0.3)

    def key(self, name: str) -> None:
        """A key press (``back``, ``home``, ``enter``)."""
        self.call(f"pressKey {name}", self.ui.press, name)

    def type_text(self, text: str) -> None:
        """Text into the focused field, pasted (uiautomator2's way, without an input method)."""
        self.call("setClipboard", self.ui.jsonrpc.setClipboard, None, text)
        self.call("pasteClipboard", self.ui.jsonrpc.pasteClipboard)

    def launch(self, package: str) -> None:
        """Start an app by its launcher activity."""
        self.call(f"start {package}", self.adb.app_start, package)

    def clear(self, package: str) -> str:
        """``pm clear`` one package; its answer."""
        return self.shell(["pm", "clear", package]).output.strip()

    def push(self, content: bytes, path: str) -> None:
        """Write a file on the device."""
        self.call(f"push {path}", self.adb.sync.push, content, path, check=True)

    def freeze_status_bar(self, hhmm: str) -> str:
        """Put the status bar into SystemUI's demo mode; the answers of the broadcasts.

        Its clock at ``hhmm``, the battery full and unplugged, no notification icons.
        :class:`SandboxError` if SystemUI did not take them (a device without demo mode).
        """
        demo = f"am broadcast -a {DEMO_MODE} -e command"
        commands = (
            "settings put global sysui_demo_allowed 1",
            f"{demo} enter",
            f"{demo} clock -e hhmm {hhmm}",
            f"{demo} battery -e level 100 -e plugged false",
            f"{demo} notifications -e visible false",
        )
        answer = self.shell("; ".join(commands)).output
        if answer.count("Broadcast completed") != len(commands) - 1:
            raise SandboxError(
                f"the status bar of {self.serial} did not enter SystemUI's demo mode: "
                f"{answer.strip() or 'no answer'} (set demo_status_bar: false to keep it live)"
            )
        return answer.strip()

    def thaw_status_bar(self) -> None:
        """Leave SystemUI's demo mode: the status bar shows the device's own state again."""
        self.shell(f"am broadcast -a {DEMO_MODE} -e command exit")

    def load_snapshot(self, name: str) -> str:
        """Load an emulator's snapshot (``adb emu avd snapshot load``); the console's answer."""
        if not self.serial.startswith("emulator-"):
            raise SandboxError(
                f"snapshot reset needs an emulator (emulator-NNNN), not {self.serial}; "
                "use reset: apps for other devices"
            )
        host, _, port = self.adb_server.rpartition(":")
        answer = subprocess.run(
            ["adb", "-H", host or "127.0.0.1", "-P", port, "-s", self.serial, "emu", "avd",
             "snapshot", "load", name],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        if answer.returncode != 0 or "KO" in answer.stdout:
            raise SandboxError(f"loading snapshot {name!r} failed: {answer.stdout}{answer.stderr}")
        return answer.stdout.strip()

    def identity(self, packages: tuple[str, ...]) -> dict[str, Any]:
        """What the environment identity records of the device and the apps in use."""
        props = self.adb.prop
        size = self.shell("wm size").output
        density = self.shell("wm density").output
        apps = {}
        for package in packages:
            info = self.call(f"app_info {package}", self.adb.app_info, package)
            apps[package] = info.version_code if info else None
        return {
            "model": props.model,
            "android_version": self.adb.getprop("ro.build.version.release"),
            "sdk": self.adb.getprop("ro.build.version.sdk"),
            "fingerprint": self.adb.getprop("ro.build.fingerprint"),
            "uiautomator2": metadata.version("uiautomator2"),
            "screen_size": _last_number_pair(size),
            "density": _last_number(density),
            "apps": apps,
        }


def _short_activity(package: str, activity: str) -> str:
    """``com.android.settings.Settings`` in ``com.android.settings`` as ``.Settings``."""
    return activity[len(package) :] if activity.startswith(package + ".") else activity


def _last_number_pair(text: str) -> list[int] | None:
    pairs = re.findall(r"(\d+)x(\d+)", text)
    return [int(pairs[-1][0]), int(pairs[-1][1])] if pairs else None


def _last_number(text: str) -> int | None:
    numbers = re.findall(r"\d+", text)
    return int(numbers[-1]) if numbers else None
