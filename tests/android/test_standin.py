"""The stand-in device speaks what real clients speak: Debian's adb and unmodified uiautomator2.

These check the test double itself, so that what the android collector's tests prove holds
for a client that knows nothing of it: the adb command line's shell, push and pull, and
uiautomator2's whole start (push ``u2.jar``, check its MD5, launch it with ``app_process``,
wait for ``/ping`` through a ``tcp:9008`` stream) and its calls.
"""

from __future__ import annotations

import hashlib
import io
import time
from pathlib import Path

import adbutils
import pytest
import uiautomator2 as u2
from PIL import Image

from tests.android.conftest import AdbServer
from tests.android.standin import StandinPhone
from tests.android.standin.device import UIAUTOMATOR_JAR

SETTLE_S = 1.0
"""Longer than the stand-in's window transitions (0.3 s)."""


def test_the_adb_command_line_runs_shell_commands_with_their_exit_codes(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    model = adb_server.command("-s", phone.serial, "shell", "getprop", "ro.product.model")
    assert model.returncode == 0 and model.stdout.strip() == "Stand-in Phone", model
    device = adb_server.client.device(phone.serial)
    assert device.shell2(["pm", "clear", "com.example.absent"]).returncode == 1
    assert device.shell2("settings get global wifi_on").output.strip() == "1"
    missing = device.shell2("no-such-tool --flag")
    assert missing.returncode == 127 and "not found" in missing.output


def test_push_and_pull_go_through_the_sync_service(
    adb_server: AdbServer, phone: StandinPhone, tmp_path: Path
) -> None:
    content = bytes(range(256)) * 1000  # several DATA chunks
    (tmp_path / "seed.bin").write_bytes(content)
    pushed = adb_server.command(
        "-s", phone.serial, "push", str(tmp_path / "seed.bin"), "/sdcard/seed.bin"
    )
    assert pushed.returncode == 0, pushed.stderr
    pulled = adb_server.command(
        "-s", phone.serial, "pull", "/sdcard/seed.bin", str(tmp_path / "back.bin")
    )
    assert pulled.returncode == 0, pulled.stderr
    assert (tmp_path / "back.bin").read_bytes() == content
    refused = adb_server.command(
        "-s", phone.serial, "push", str(tmp_path / "seed.bin"), "/system/x"
    )
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr + refused.stdout


def test_uiautomator2_starts_its_server_and_drives_the_screen(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    d = u2.Device(adb_server.client.device(phone.serial))
    # uiautomator2's own start: the jar pushed with its MD5 checked, the server launched.
    jar = phone.device.read(UIAUTOMATOR_JAR)
    assert jar is not None
    assert hashlib.md5(jar).hexdigest() in phone.device.md5(UIAUTOMATOR_JAR)  # type: ignore[operator]
    assert d.info["currentPackageName"] == "com.android.launcher3"
    assert 'text="Settings"' in d.dump_hierarchy()
    assert d.app_current()["package"] == "com.android.launcher3"

    d.click(180, 2030)  # the Settings icon
    time.sleep(SETTLE_S)
    screen = d.dump_hierarchy()
    assert 'text="Wi-Fi"' in screen and 'checked="true"' in screen
    d.click(540, 520)  # the Wi-Fi row
    assert d.shell("settings get global wifi_on").output.strip() == "0"
    assert 'text="Wi-Fi"' in d.dump_hierarchy() and 'checked="true"' not in d.dump_hierarchy()

    image = d.screenshot()
    assert image.size == (1080, 2400)
    png = adb_server.client.device(phone.serial).shell("screencap -p", encoding=None)
    assert Image.open(io.BytesIO(png)).format == "PNG"

    d.press("back")
    time.sleep(SETTLE_S)
    assert d.app_current()["package"] == "com.android.launcher3"


def test_text_goes_in_through_the_clipboard_into_the_focused_field(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    d = u2.Device(adb_server.client.device(phone.serial))
    d.app_start("com.android.contacts")
    time.sleep(SETTLE_S)
    d.click(940, 2200)  # Create contact
    time.sleep(SETTLE_S)
    d.click(540, 520)  # the Name field
    d.send_keys("Ada Lovelace")
    screen = d.dump_hierarchy()
    assert 'text="Ada Lovelace"' in screen and "com.android.inputmethod.latin" in screen


def test_a_device_cut_off_fails_the_next_call(adb_server: AdbServer, phone: StandinPhone) -> None:
    d = u2.Device(adb_server.client.device(phone.serial))
    assert d.info["screenOn"] is True
    phone.stop()
    with pytest.raises(adbutils.AdbError, match="offline"):
        d.jsonrpc.deviceInfo(http_timeout=5)
