"""`worldtrace doctor`'s Android lines: the devices the adb server sees, and their uiautomator.

Informational: a machine with no device attached is not broken (devices are borrowed when a
collection runs), so the check passes whenever adb itself works, and lists what it sees.
"""

from __future__ import annotations

import os
import shutil

from worldtrace.collectors.requirements import Check


def doctor_adb_server() -> str:
    """The adb server doctor asks: the one adb's own client uses (``ANDROID_ADB_SERVER_PORT``)."""
    return f"127.0.0.1:{os.environ.get('ANDROID_ADB_SERVER_PORT', '5037')}"


def devices_check() -> Check:
    """The devices on the adb server, each with its state and whether uiautomator answers."""
    from worldtrace.collectors.android.device import (
        DEVICE_ERRORS,
        NoAdbServer,
        adb_client,
        uiautomator_answers,
    )

    name = "android devices"
    server = doctor_adb_server()
    if shutil.which("adb") is None:
        return Check(name, False, "adb is not installed", "make setup WORLDTRACE_DOMAINS=android")
    try:
        devices = adb_client(server).list()
    except NoAdbServer as error:
        return Check(name, True, str(error), None)
    except DEVICE_ERRORS as error:
        return Check(name, True, f"the adb server at {server} did not answer: {error}", None)
    if not devices:
        detail = f"none on the adb server at {server} (`adb connect HOST:PORT` adds one)"
        return Check(name, True, detail, None)
    lines = []
    for device in devices:
        line = f"{device.serial} ({device.state}"
        if device.state == "device":
            answers = uiautomator_answers(server, device.serial)
            line += (
                ", uiautomator answers"
                if answers
                else ", uiautomator not running (starts on first use)"
            )
        lines.append(line + ")")
    return Check(name, True, "; ".join(lines), None)
