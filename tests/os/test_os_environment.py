"""The desktop environment against the real desktop of ``worldtrace/os``.

Each test resets real episodes (a fresh container, Xvfb, the AT-SPI bus, openbox, the launcher
and the task's applications) and checks what the host records: the launched application in the
first tree, a menu opened by a click, errors that change nothing, a home folder restored by a
reset, and how an episode ends when the driver is lost. The tests that leave the desktop as they
found it (the first observation, refused actions) share one desktop reset once for the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from worldtrace.collectors.base import StepOutcome
from worldtrace.collectors.os.actions import click, hotkey, parse_action, write
from worldtrace.collectors.os.environment import OsEnvironment
from worldtrace.collectors.os.render import OsRenderer
from worldtrace.collectors.os.tasks import load_tasks
from worldtrace.schemas import Action
from worldtrace.schemas.raw import RawObservation

pytestmark = pytest.mark.docker

RENDER = OsRenderer()
LIBRARY = {task.name: task for task in load_tasks()}
TODO_TASK = LIBRARY["mousepad-append-todo-item"]
TODO = "/home/user/Documents/todo.txt"


def find(tree: dict[str, Any] | None, role: str, name: str) -> dict[str, Any] | None:
    """The first node with ``role`` whose name (stripped) is ``name``."""
    stack = [tree] if tree else []
    while stack:
        node = stack.pop()
        if node.get("role") == role and str(node.get("name") or "").strip() == name:
            return node
        stack.extend(reversed(node.get("children") or []))
    return None


@dataclass
class SharedDesktop:
    """A desktop reset once, with its first observation and the latest one it returned."""

    env: OsEnvironment
    first: RawObservation
    last: RawObservation

    def step(self, action: Action) -> StepOutcome:
        """One step on the shared desktop; its observation becomes the latest."""
        outcome = self.env.step(action, 30)
        self.last = outcome.observation
        return outcome


@pytest.fixture(scope="module")
def shared_desktop(os_image: str) -> Iterator[SharedDesktop]:
    """The todo task's desktop, reset once, for the tests that leave it as they found it.

    It is an environment of its own, so the tests that reset ``os_env`` never touch it.
    """
    # Shared: its tests only read the first observation or step refused actions (nothing
    # changes), so one reset (a container and a desktop session, seconds) serves them all.
    environment = OsEnvironment()
    try:
        first = environment.reset(0, TODO_TASK)
        yield SharedDesktop(environment, first, first)
    finally:
        environment.close()


def test_reset_shows_the_launched_editor_and_names_every_version(
    shared_desktop: SharedDesktop, os_image: str
) -> None:
    first = shared_desktop.first
    assert first["focused"] == {"app": "mousepad", "window": "~/Documents/todo.txt - Mousepad"}
    frame = find(first["tree"], "frame", "~/Documents/todo.txt - Mousepad")
    assert frame is not None and "showing" in frame["states"]
    editor = [n for n in (find(first["tree"], "menu", "File"),) if n]
    assert editor and editor[0]["app"] == "mousepad"
    text = RENDER.observation(first).text
    assert "menu\tFile\t" in text and "push-button\tText Editor\t" in text
    assert "Buy milk" in text  # the document's text is the text view's row
    assert first["screenshot_png"] and first["screen"] == {"width": 1280, "height": 800}
    identity = shared_desktop.env.describe()
    assert identity.name == "os/desktop"
    assert identity.version == identity.components["image_digest"] == os_image
    for part in ("mousepad", "gnumeric", "pcmanfm", "galculator", "xvfb", "openbox", "pyautogui"):
        assert identity.components[part], part


def test_a_click_on_a_menu_opens_it_in_the_next_tree(os_env: OsEnvironment) -> None:
    first = os_env.reset(0, TODO_TASK)
    menu = find(first["tree"], "menu", "File")
    assert menu is not None
    save = find(menu, "menu item", "Save As...")
    assert save is not None and "showing" not in save["states"]
    x, y = menu["x"] + menu["width"] // 2, menu["y"] + menu["height"] // 2
    opened = os_env.step(click(x, y), 30)
    assert opened.error is None and not opened.observation["unchanged"]
    shown = find(opened.observation["tree"], "menu item", "Save As...")
    assert shown is not None and "showing" in shown["states"]
    assert "menu-item\tSave As..." in RENDER.observation(opened.observation).text
    timing = opened.observation["timing"]
    assert {"action_s", "settle_s", "tree_s", "screenshot_s"} <= set(timing)


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (Action(name="x", arguments={}, text="import os"), "not Import"),
        (parse_action("pyautogui.click(5000, 5000)"), "off"),
        (parse_action("pyautogui.press('nosuchkey')"), "nosuchkey"),
        (parse_action("pyautogui.click(1, 2, button='up')"), "button"),
    ],
)
def test_an_invalid_action_is_an_error_and_changes_nothing(
    shared_desktop: SharedDesktop, action: Action, error: str
) -> None:
    before = shared_desktop.last  # the desktop just before this step (reset or a refused one)
    outcome = shared_desktop.step(action)
    assert outcome.error and error in outcome.error
    assert not outcome.truncated and not outcome.terminated
    assert outcome.observation["tree_digest"] == before["tree_digest"]
    assert outcome.observation["unchanged"] is True
    assert RENDER.observation(outcome.observation).text == RENDER.observation(before).text


def test_a_bad_statement_stops_the_script_there(os_env: OsEnvironment) -> None:
    os_env.reset(0, TODO_TASK)
    code = "pyautogui.hotkey('ctrl', 'End')\npyautogui.press('nosuchkey')\npyautogui.write('x')"
    outcome = os_env.step(parse_action(code), 30)
    assert outcome.error is not None and outcome.error.startswith("statement 2: ")
    assert [call["error"] is None for call in outcome.observation["calls"]] == [True, False]
    assert "x" not in os_env.sandbox.exec(["tail", "-c", "2", TODO]).text


def test_a_reset_restores_the_seeded_home_folder(os_env: OsEnvironment) -> None:
    os_env.reset(0, TODO_TASK)
    seeded = os_env.sandbox.exec(["cat", TODO]).text
    for action in (hotkey("ctrl", "End"), write("changed\n"), hotkey("ctrl", "s")):
        assert os_env.step(action, 30).error is None
    assert os_env.sandbox.exec(["cat", TODO]).text == seeded + "changed\n"
    os_env.reset(1, TODO_TASK)
    assert os_env.sandbox.exec(["cat", TODO]).text == seeded
    assert os_env.evaluate(TODO_TASK) == 0.0


KILL_DRIVER = (
    "import os\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        line = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
    "    except OSError:\n"
    "        continue\n"
    "    if b'desktop_driver.py\\0' in line and int(pid) != os.getpid():\n"
    "        os.kill(int(pid), 9)\n"
)


def test_a_killed_driver_ends_the_episode_with_a_last_look(os_env: OsEnvironment) -> None:
    os_env.reset(0, TODO_TASK)
    killed = os_env.sandbox.exec(["python3", "-c", KILL_DRIVER])
    assert killed.exit_code == 0, killed.stderr
    after = os_env.step(click(640, 400), 30)
    assert after.truncated and after.error
    assert after.observation["sandbox_lost"] is True
    rendered = RENDER.observation(after.observation)
    assert rendered.meta["sandbox_lost"] is True
    assert "\ntag\tname\ttext\tclass\tdescription\t" in rendered.text
    # The session outlived its driver: a second driver process (--observe) read the desktop.
    assert after.observation["state_stale"] is False
    assert find(after.observation["tree"], "frame", "~/Documents/todo.txt - Mousepad")
    assert os_env.evaluate(TODO_TASK) in (0.0, None)
