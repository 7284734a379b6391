"""``reset: snapshot`` through real adb's ``emu`` command, on a stand-in emulator's console.

The stand-in emulator (tests/android/standin/console.py) registers with the session's adb
server as an emulator does (``emulator-N``) and answers ``adb emu`` on its console port, with
the authentication a real emulator asks for (the token in ``~/.emulator_console_auth_token``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.android.conftest import CONNECT_TIMEOUT_S, AdbServer
from tests.android.standin.console import StandinEmulator
from worldtrace.collectors.android.actions import make_action
from worldtrace.collectors.android.environment import AndroidConfig, AndroidEnvironment
from worldtrace.collectors.android.render import screen_text
from worldtrace.collectors.android.tasks import load_tasks
from worldtrace.sandboxes.errors import SandboxError

TOKEN = "stand-in-console-token"


def _listed(adb_server: AdbServer, serial: str) -> str | None:
    return next((d.state for d in adb_server.client.list() if d.serial == serial), None)


@pytest.fixture
def emulator(
    adb_server: AdbServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StandinEmulator]:
    """A stand-in emulator the adb server lists as ``emulator-N``; the console token in a
    home of the test's own. The server has forgotten it at the end."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".emulator_console_auth_token").write_text(TOKEN)
    emulator = StandinEmulator(TOKEN).start()
    try:
        emulator.announce(adb_server.port)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while _listed(adb_server, emulator.serial) != "device":
            assert time.monotonic() < deadline, adb_server.command("devices").stdout
            time.sleep(0.1)
        yield emulator
    finally:
        emulator.stop()
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while _listed(adb_server, emulator.serial) is not None:
        assert time.monotonic() < deadline, adb_server.command("devices").stdout
        time.sleep(0.1)


def _environment(adb_server: AdbServer, serial: str, snapshot: str) -> AndroidEnvironment:
    return AndroidEnvironment(
        AndroidConfig(
            device=serial,
            adb_server=f"127.0.0.1:{adb_server.port}",
            reset="snapshot",
            snapshot=snapshot,
        )
    )


def test_a_snapshot_reset_puts_the_emulator_back_as_it_was_saved(
    adb_server: AdbServer, emulator: StandinEmulator
) -> None:
    saved = adb_server.command("-s", emulator.serial, "emu", "avd", "snapshot", "save", "wt")
    assert saved.returncode == 0 and saved.stdout.strip() == "OK", saved
    wifi_off = next(task for task in load_tasks() if task.name == "settings-wifi-off")
    env = _environment(adb_server, emulator.serial, "wt")
    try:
        first = env.reset(0, wifi_off)
        assert first["reset"]["mode"] == "snapshot" and first["reset"]["snapshot"] == "wt"
        assert first["reset"]["answer"] == "OK"
        assert env.describe().components["snapshot"] == "wt"
        (row,) = [line for line in screen_text(first).splitlines() if '"Airplane mode"' in line]
        outcome = env.step(make_action("click", index=int(row[1:3])), 30)
        assert outcome.error is None
        assert emulator.device.state.setting("global", "airplane_mode_on") == "1"
        emulator.device.state.save_contacts([{"name": "Left Over", "phone": "1"}])
        again = env.reset(1, wifi_off)  # the snapshot knows neither change
    finally:
        env.close()
    assert again["reset"]["answer"] == "OK"
    assert emulator.device.state.setting("global", "airplane_mode_on") is None
    assert emulator.device.state.contacts() == []
    assert screen_text(again) == screen_text(first)


def test_a_missing_snapshot_or_a_wrong_console_token_is_a_clear_error(
    adb_server: AdbServer, emulator: StandinEmulator, tmp_path: Path
) -> None:
    env = _environment(adb_server, emulator.serial, "never-saved")
    with pytest.raises(SandboxError, match="loading snapshot 'never-saved' failed: KO: snap"):
        env.reset(0, None)
    env.close()
    emulator.console.snapshots["wt"] = emulator.device.saved_state()
    (tmp_path / ".emulator_console_auth_token").write_text("another-token")
    env = _environment(adb_server, emulator.serial, "wt")
    with pytest.raises(SandboxError, match="authentication token does not match"):
        env.reset(0, None)
    env.close()
