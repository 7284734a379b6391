"""A stand-in Android device for the tests: a test double, named as such.

No Android can run on these machines (no system image can be downloaded, and the kernel has
no binder), so the android domain's tests collect from this process instead. It speaks the
protocols a real device speaks, so that Debian's real ``adb`` server connects to it (``adb
connect 127.0.0.1:PORT``) and unmodified ``uiautomator2`` drives it through that server: the
ADB transport (:mod:`~tests.android.standin.adb`), the ``shell:``, ``sync:`` and ``tcp:``
services (:mod:`~tests.android.standin.services`), a shell with the commands Android's tools
answer (:mod:`~tests.android.standin.shell`) and, behind the forwarded device port, the
uiautomator server's HTTP JSON-RPC (:mod:`~tests.android.standin.uiautomator`) over a small
model of a phone with state (:mod:`~tests.android.standin.device`, screens in
:mod:`~tests.android.standin.screens`).

A stand-in emulator (:mod:`~tests.android.standin.console`) adds the emulator's console, for
``reset: snapshot``. ``.venv/bin/python -m tests.android.standin --port PORT`` runs a device in
the foreground.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.android.standin.adb import AdbListener, Service
from tests.android.standin.device import PROPERTIES, StandinDevice
from tests.android.standin.services import device_services
from tests.android.standin.shell import StandinShell
from tests.android.standin.uiautomator import UiautomatorServers

FEATURES = "cmd"
"""What the banner offers the host: no ``shell_v2`` (see the services module), no ``stat_v2``
(the sync service answers the first version's STAT and LIST)."""


class StandinPhone:
    """One stand-in device listening for adb on ``port`` (0: a free one) of loopback.

    Its serial is ``127.0.0.1:PORT`` (what ``adb connect`` lists) unless named.
    """

    def __init__(self, port: int = 0, serial: str | None = None) -> None:
        self._listener = AdbListener(port, _banner(), self._open_service)
        self.port = self._listener.port
        self.serial = serial or f"127.0.0.1:{self.port}"
        self.device = StandinDevice(self.serial)
        self.uiautomator = UiautomatorServers(self.device)
        self._services = device_services(StandinShell(self.device), self.device, self.uiautomator)
        self._thread: threading.Thread | None = None

    def _open_service(self, name: str) -> Service | None:
        return self._services(name)

    def start(self) -> StandinPhone:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self._listener.serve_forever, name="standin-adb", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until stopped."""
        self._listener.serve_forever()

    def disconnect(self) -> None:
        """Cut the host's connections, as a pulled cable; the device still listens."""
        self._listener.drop_connections()

    def stop(self) -> None:
        """Stop listening, cut every connection, stop the uiautomator servers."""
        self._listener.stop()
        self.uiautomator.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)


REPO = Path(__file__).resolve().parents[3]


@contextmanager
def standin_process(port: int) -> Iterator[str]:
    """``python -m tests.android.standin --port PORT`` in a process of its own, as a person
    starts it; its serial once it listens. Stopped at the end."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.android.standin", "--port", str(port)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"adb connect 127.0.0.1:{port}" in line, line
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _banner() -> str:
    keys = ("ro.product.name", "ro.product.model", "ro.product.device")
    properties = "".join(f"{key}={PROPERTIES[key]};" for key in keys)
    return f"device::{properties}features={FEATURES}"
