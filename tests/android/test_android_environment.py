"""The android environment through real adb and unmodified uiautomator2, on stand-in devices.

Each test borrows stand-in devices (tests/android/standin) connected to the session's own adb
server (tests/android/conftest.py); the environment talks to them as to any device.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.android.conftest import AdbServer
from tests.android.standin import StandinPhone
from worldtrace.collectors.android import AndroidCollector
from worldtrace.collectors.android.actions import make_action
from worldtrace.collectors.android.environment import AndroidConfig, AndroidEnvironment
from worldtrace.collectors.android.render import screen_text
from worldtrace.collectors.android.tasks import AndroidTask, load_tasks

LAUNCHER = "\n".join(
    (
        "[app] com.android.launcher3/.uioverride.QuickstepLauncher",
        "[keyboard] hidden",
        "[focus] none",
        '[ 0] | android.view.View | res="com.android.launcher3:id/workspace" '
        "| bounds=[0,118][1080,2400] | scrollable",
        '[ 1] | android.widget.TextView | text="Settings" desc="Settings" '
        "| bounds=[30,1900][270,2160] | clickable, long-clickable, focusable",
        '[ 2] | android.widget.TextView | text="Contacts" desc="Contacts" '
        "| bounds=[290,1900][530,2160] | clickable, long-clickable, focusable",
        '[ 3] | android.widget.TextView | text="Clock" desc="Clock" '
        "| bounds=[550,1900][790,2160] | clickable, long-clickable, focusable",
        '[ 4] | android.widget.TextView | text="Files" desc="Files" '
        "| bounds=[810,1900][1050,2160] | clickable, long-clickable, focusable",
        '[ 5] | android.widget.FrameLayout | res="com.android.systemui:id/status_bar" '
        "| bounds=[0,0][1080,118]",
        '[ 6] | android.widget.TextView | text="09:00" desc="09:00" '
        'res="com.android.systemui:id/clock" | bounds=[48,30][200,90]',
        '[ 7] | android.widget.LinearLayout | desc="Battery 100 percent." '
        'res="com.android.systemui:id/battery" | bounds=[940,30][1032,90]',
    )
)


def environment(
    adb_server: AdbServer, *phones: StandinPhone, **fields: object
) -> AndroidEnvironment:
    """An environment over ``phones``, through the session's adb server."""
    config = AndroidConfig(
        devices=[phone.serial for phone in phones],
        adb_server=f"127.0.0.1:{adb_server.port}",
        **fields,  # type: ignore[arg-type]
    )
    return AndroidEnvironment(config)


def task(name: str) -> AndroidTask:
    return next(task for task in load_tasks() if task.name == name)


def test_the_launcher_is_an_indexed_element_list(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    env = environment(adb_server, phone)
    try:
        first = env.reset(0, None)
    finally:
        env.close()
    assert screen_text(first) == LAUNCHER
    assert first["package"] == "com.android.launcher3" and first["keyboard_shown"] is False
    assert first["reset"]["mode"] == "apps" and first["reset"]["device"] == phone.serial
    assert first["settle"]["settled"] is True
    observation = AndroidCollector().renderer().observation(first)
    assert observation.format == "uia-elements" and observation.screenshot is not None
    assert observation.screenshot.startswith(b"\x89PNG")


def test_the_status_bar_shows_demo_mode_not_the_collection_time_and_is_given_back_live(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    phone.device.state.battery = 41
    live_clock = f'text="{time.strftime("%H:%M")}"'
    demo = "0730" if time.strftime("%H") != "07" else "1930"  # never the device's own hour
    env = environment(adb_server, phone, status_bar_clock=demo)
    try:
        frozen = screen_text(env.reset(0, None))
        assert env.describe().components["status_bar"] == f"demo {demo}"
    finally:
        env.close()
    assert f'text="{demo[:2]}:{demo[2:]}"' in frozen and "Battery 100 percent." in frozen, frozen
    assert live_clock not in frozen and "Battery 41" not in frozen
    assert phone.device.state.demo is None  # demo mode left with the device
    live = environment(adb_server, phone, demo_status_bar=False)
    try:
        seen = screen_text(live.reset(0, None))
        assert live.describe().components["status_bar"] == "live"
    finally:
        live.close()
    assert "Battery 41 percent." in seen and f'text="{demo[:2]}:' not in seen, seen


def test_no_task_holds_before_it_is_done(adb_server: AdbServer, phone: StandinPhone) -> None:
    # the checks can fail: at each task's start (its apps cleared, its setup run) none holds
    tasks = load_tasks()
    assert {task.category for task in tasks} == {"settings", "contacts", "clock", "files"}
    env = environment(adb_server, phone)
    try:
        for each in tasks:
            first = env.reset(0, each)
            assert env.evaluate(each) == 0.0, each.name
            assert first["package"] == each.start_app, each.name
    finally:
        env.close()


def test_a_click_on_a_toggle_changes_the_next_state_and_the_device(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    env = environment(adb_server, phone)
    wifi_off = task("settings-wifi-off")
    try:
        first = env.reset(0, wifi_off)
        assert first["package"] == "com.android.settings"
        assert env.evaluate(wifi_off) == 0.0
        (row,) = [line for line in screen_text(first).splitlines() if '"Wi-Fi"' in line]
        index = int(row[1:3])
        switch = screen_text(first).splitlines()[3 + index + 1]
        assert "checked" in switch.split("|")[-1]
        outcome = env.step(make_action("click", index=index), 30)
        assert outcome.error is None
        after = screen_text(outcome.observation).splitlines()[3 + index + 1]
        assert "android.widget.Switch" in after and "checked" not in after.split("|")[-1]
        assert env.evaluate(wifi_off) == 1.0
    finally:
        env.close()


def test_input_text_goes_into_the_field_it_names(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    env = environment(adb_server, phone)
    try:
        first = env.reset(0, task("contacts-add"))
        create = next(line for line in screen_text(first).splitlines() if "Create contact" in line)
        editor = env.step(make_action("click", index=int(create[1:3])), 30).observation
        name = next(line for line in screen_text(editor).splitlines() if 'hint="Name"' in line)
        typed = env.step(make_action("input_text", text="Grace Hopper", index=int(name[1:3])), 30)
        text = screen_text(typed.observation)
        assert 'text="Grace Hopper" hint="Name"' in text
        assert (
            "[keyboard] shown" in text
            and "[focus]" in text
            and 'hint="Name"' in text.splitlines()[2]
        )
    finally:
        env.close()


def test_an_index_the_screen_lacks_is_an_error_and_changes_nothing(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    env = environment(adb_server, phone)
    try:
        first = env.reset(0, None)
        outcome = env.step(make_action("click", index=42), 30)
    finally:
        env.close()
    assert outcome.error == "no element 42 on this screen (elements 0 to 7)"
    assert screen_text(outcome.observation) == screen_text(first)
    assert outcome.observation["hierarchy"] == first["hierarchy"]


def test_a_device_that_goes_away_ends_the_episode_and_the_next_takes_the_next_device(
    adb_server: AdbServer, phones: Callable[[], StandinPhone]
) -> None:
    first_phone, second_phone = phones(), phones()
    env = environment(adb_server, first_phone, second_phone, lost_retry_s=600)
    try:
        env.reset(0, None)
        used = env.device.serial
        lost_phone = first_phone if used == first_phone.serial else second_phone
        lost_phone.stop()
        outcome = env.step(make_action("navigate_home"), 30)
        assert outcome.truncated and outcome.observation["device_lost"] is True
        assert outcome.error is not None and used in outcome.error
        env.reset(1, None)
        assert env.device.serial != used
        assert env.step(make_action("wait"), 30).error is None
    finally:
        env.close()


def test_the_exploring_policy_walks_real_screens_with_actions_that_all_apply(
    adb_server: AdbServer, phone: StandinPhone
) -> None:
    from worldtrace.collectors.android.explore import AndroidExplorePolicy

    env = environment(adb_server, phone)
    policy = AndroidExplorePolicy()
    policy.reset(7, None)
    observation = env.reset(7, None)
    kinds, screens = set(), set()
    try:
        for _ in range(25):
            action = policy.act(observation, [])
            assert action is not None
            outcome = env.step(action, 30)
            assert outcome.error is None, (action, outcome.error)
            kinds.add(action.name)
            observation = outcome.observation
            screens.add((observation["package"], observation["activity"]))
    finally:
        env.close()
    assert {"click", "navigate_back"} <= kinds
    assert len(screens) >= 3, screens  # it left the launcher for more than one screen
