"""`worldtrace doctor` lists the devices the adb server sees and whether uiautomator answers."""

from __future__ import annotations

import pytest
import uiautomator2 as u2
from typer.testing import CliRunner

from tests.android.conftest import AdbServer
from tests.android.standin import StandinPhone
from worldtrace.collectors.android.doctor import devices_check
from worldtrace.flows.cli import app


def test_doctor_lists_each_device_and_its_uiautomator(
    adb_server: AdbServer, phone: StandinPhone, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(adb_server.port))
    before = devices_check()
    assert before.ok and f"{phone.serial} (device, uiautomator not running" in before.detail
    started = u2.Device(adb_server.client.device(phone.serial)).info  # as a collection does
    assert started["screenOn"] is True
    after = devices_check()
    assert f"{phone.serial} (device, uiautomator answers)" in after.detail
    report = CliRunner().invoke(app, ["doctor"])
    assert "android devices" in report.output and phone.serial in report.output


def test_doctor_says_when_no_adb_server_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.prefect_server import free_port

    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", str(free_port()))
    check = devices_check()
    assert (
        check.ok
        and "no adb server at 127.0.0.1:" in check.detail
        and "start-server" in check.detail
    )
