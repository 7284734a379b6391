"""`worldtrace collect android --policy llm`: a model (the stand-in server) drives a device.

The stand-in model server (tests/llm_server.py) reads the screen it is sent, finds the Wi-Fi
row's index in the element list and answers AndroidWorld's JSON click on it, as a model
would; the stand-in device (tests/android/standin) really turns Wi-Fi off and the task's check
reads that from the device. What every domain's llm run shows is checked by
tests/llm_collecting.py; here, what the device did.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.android.conftest import AdbServer
from tests.android.standin import StandinPhone
from tests.collecting import episode_rewards
from tests.llm_collecting import assert_replies_kept, collect_completed, collect_invalid_replies
from worldtrace.collectors.android.prompt import SYSTEM
from worldtrace.collectors.android.tasks import load_tasks

TASK = next(task for task in load_tasks() if task.name == "settings-wifi-off")


def _device(adb_server: AdbServer, phone: StandinPhone) -> dict[str, Any]:
    return {"device": phone.serial, "adb_server": f"127.0.0.1:{adb_server.port}"}


def _click_wifi(body: dict[str, Any]) -> dict[str, Any]:
    """A model's reply to the screen in the request: a click on the Wi-Fi row."""
    screen = body["messages"][-1]["content"]
    (index,) = re.findall(
        r'^\[ *(\d+)\] \| android\.widget\.TextView \| text="Wi-Fi"', screen, re.M
    )
    return {"content": json.dumps({"action_type": "click", "index": int(index)})}


def test_a_model_turns_wifi_off_on_the_device_and_the_check_reads_it(
    tmp_path: Path, adb_server: AdbServer, phone: StandinPhone, prefect_server: str
) -> None:
    run = collect_completed(
        tmp_path, prefect_server, "android", [_click_wifi], [(1800, 14)],
        ({"content": "DONE"}, (1900, 1)), instruction=TASK.instruction, system=SYSTEM,
        tasks=[TASK.name], environment=_device(adb_server, phone), max_steps=4,
    )  # fmt: skip
    (row,) = run.rows
    assert row.action.name == "click" and row.action.arguments["index"] > 0
    # The device did it: the switch the model was shown on is off after, and on the device.
    assert '"Wi-Fi"' in row.observation.text
    assert phone.device.state.setting("global", "wifi_on") == "0"
    switch = row.action.arguments["index"] + 1  # the row's switch is the next element
    before = row.observation.text.splitlines()[3 + switch]
    after = row.next_observation.text.splitlines()[3 + switch]
    assert "checked" in before.rsplit("|", 1)[-1] and "checked" not in after.rsplit("|", 1)[-1]
    assert episode_rewards(run.run_dir) == [1.0]
    assert_replies_kept(run, [row.action.text])


def test_replies_that_are_no_action_leave_the_device_untouched_then_end_the_episode(
    tmp_path: Path, adb_server: AdbServer, phone: StandinPhone, prefect_server: str
) -> None:
    replies = ['{"action_type": "fly"}', "I would tap Wi-Fi now."]
    run = collect_invalid_replies(
        tmp_path, prefect_server, "android", replies, '{"action_type": "navigate_home"}',
        tasks=[TASK.name], environment=_device(adb_server, phone), max_steps=4,
    )  # fmt: skip
    assert "fly" in (run.rows[0].action_error or "")
    assert phone.device.state.setting("global", "wifi_on") == "1"  # as the task's setup left it
    assert all(row.observation.text.startswith("[app] com.android.settings/") for row in run.rows)
