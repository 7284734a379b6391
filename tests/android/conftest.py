"""Fixtures of the android tests: a real adb server of the test's own, and stand-in devices.

The adb server is Debian's ``adb`` (``make setup WORLDTRACE_DOMAINS=android`` installs it), on
a free port of its own so that a developer's server (port 5037) and the devices it knows are
never touched; it is killed at the end. Devices are :class:`~tests.android.standin.StandinPhone`
processes' worth of threads in the test process, each connected with ``adb connect``.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import adbutils
import pytest

from tests.android.standin import StandinPhone
from tests.prefect_server import free_port

CONNECT_TIMEOUT_S = 60
"""Seconds a stand-in may take to be listed as ``device`` by the adb server."""


@dataclass(frozen=True)
class AdbServer:
    """A running adb server: where it listens, and a client of it."""

    port: int
    client: adbutils.AdbClient

    def command(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``adb -P PORT ARGS`` (Debian's adb client talking to this server)."""
        return subprocess.run(
            ["adb", "-P", str(self.port), *args], capture_output=True, text=True, timeout=60
        )

    def connect(self, phone: StandinPhone) -> str:
        """``adb connect`` the phone; its serial once the server lists it as a device."""
        answer = self.client.connect(phone.serial, timeout=30)
        assert "connected" in answer, answer
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while self._state(phone.serial) != "device":
            assert time.monotonic() < deadline, self.command("devices", "-l").stdout
            time.sleep(0.1)
        return phone.serial

    def _state(self, serial: str) -> str | None:
        return next((d.state for d in self.client.list() if d.serial == serial), None)


@pytest.fixture(scope="session")
def adb_server() -> Iterator[AdbServer]:
    """Debian's adb server on a free port, killed after the session."""
    if shutil.which("adb") is None:
        pytest.fail("adb is missing: run `make setup WORLDTRACE_DOMAINS=android`")
    port = free_port()
    started = subprocess.run(
        ["adb", "-P", str(port), "start-server"], capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr
    server = AdbServer(port, adbutils.AdbClient(host="127.0.0.1", port=port))
    try:
        yield server
    finally:
        server.command("kill-server")


@pytest.fixture
def phones(adb_server: AdbServer) -> Iterator[Callable[[], StandinPhone]]:
    """A maker of stand-in devices connected to the adb server, all stopped at the end."""
    made: list[StandinPhone] = []

    def make() -> StandinPhone:
        phone = StandinPhone().start()
        made.append(phone)
        adb_server.connect(phone)
        return phone

    try:
        yield make
    finally:
        for phone in made:
            adb_server.client.disconnect(phone.serial)
            phone.stop()


@pytest.fixture
def phone(phones: Callable[[], StandinPhone]) -> StandinPhone:
    """One stand-in device, connected."""
    return phones()
