"""How the desktop environment records what goes wrong on a real desktop of ``worldtrace/os``.

An application that crashes, a modal dialog left open, a window that asks for a place off the
screen, a tree larger than ``max_nodes`` and a lost accessibility bus: each is a recorded
transition or a clean end of the episode with the reason, never a hung worker. (An application
that hangs is in ``test_desktop_driver.py``: it is skipped in the tree and named.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from worldtrace.collectors.base import StepOutcome
from worldtrace.collectors.os.actions import click, hotkey, move_to, press, special
from worldtrace.collectors.os.environment import OsConfig, OsEnvironment
from worldtrace.collectors.os.render import HEADER, OsRenderer
from worldtrace.collectors.os.tasks import load_tasks

pytestmark = pytest.mark.docker

RENDER = OsRenderer()
TODO_TASK = {task.name: task for task in load_tasks()}["mousepad-append-todo-item"]
MAIN_WINDOW = "~/Documents/todo.txt - Mousepad"
WIDTH, HEIGHT = 1280, 800

# A GTK dialog that asks to open at (2400, 1600), far off the 1280x800 screen; its one button
# ends the program.
FAR_WINDOW = """
import gi
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, Gtk
window = Gtk.Window(title="Far away")
window.set_type_hint(Gdk.WindowTypeHint.DIALOG)
button = Gtk.Button(label="Close me")
button.connect("clicked", Gtk.main_quit)
window.add(button)
window.set_default_size(300, 120)
window.move(2400, 1600)
window.show_all()
Gtk.main()
"""
SESSION_ENV = {
    "DISPLAY": ":0",
    "HOME": "/home/user",
    "XDG_RUNTIME_DIR": "/tmp/runtime-user",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/tmp/runtime-user/bus",
}


def nodes(tree: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """Every node of a tree, depth first."""
    stack = [tree] if tree else []
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.get("children") or []))


def find(tree: dict[str, Any] | None, role: str, name: str) -> dict[str, Any] | None:
    """The first node with ``role`` whose name (stripped) is ``name``."""
    return next(
        (n for n in nodes(tree) if n["role"] == role and str(n["name"] or "").strip() == name),
        None,
    )


def apps(outcome: StepOutcome) -> list[str]:
    """The names of the applications in the step's tree."""
    return [app["name"] for app in outcome.observation["tree"]["children"]]


def centre(node: dict[str, Any]) -> tuple[int, int]:
    """The middle of a node's extents."""
    return node["x"] + node["width"] // 2, node["y"] + node["height"] // 2


def step_until(env: OsEnvironment, seen: Any, tries: int = 20) -> StepOutcome:
    """Short WAIT steps until ``seen(outcome)`` holds (a new window takes a moment)."""
    for _ in range(tries):
        outcome = env.step(special("WAIT"), 30)
        if seen(outcome):
            return outcome
    raise AssertionError("the desktop never showed it")


def test_a_modal_dialog_is_in_the_tree_and_holds_the_input(os_env: OsEnvironment) -> None:
    first = os_env.reset(0, TODO_TASK)
    file_menu = find(first["tree"], "menu", "File")
    assert file_menu is not None
    opened = os_env.step(hotkey("ctrl", "o"), 30)
    assert opened.error is None and not opened.truncated
    dialog = find(opened.observation["tree"], "file chooser", "Open File")
    assert dialog is not None and {"modal", "showing"} <= set(dialog["states"])
    assert opened.observation["focused"] == {"app": "mousepad", "window": "Open File"}
    assert "push-button\tOpen" in RENDER.observation(opened.observation).text
    # A click on the main window's File menu does nothing while the dialog is up.
    blocked = os_env.step(click(file_menu["x"] + 5, file_menu["y"] + 5), 30)
    assert blocked.error is None and blocked.observation["unchanged"] is True
    save = find(find(blocked.observation["tree"], "menu", "File"), "menu item", "Save")
    assert save is not None and "showing" not in save["states"]
    # Left open at the end of the episode: the task is still checked against the files.
    assert os_env.evaluate(TODO_TASK) == 0.0
    closed = os_env.step(press("escape"), 30)
    assert find(closed.observation["tree"], "file chooser", "Open File") is None
    assert closed.observation["focused"]["window"] == MAIN_WINDOW


def test_a_crashed_application_is_a_recorded_transition_that_names_it(
    os_env: OsEnvironment,
) -> None:
    os_env.reset(0, TODO_TASK)
    ours = int(os_env.sandbox.exec(["pgrep", "-x", "mousepad"]).text.split()[0])
    # The session runs in the agent's view: "exited" names the pid the session knows (the
    # last of NSpid).
    status = os_env.sandbox.exec(["cat", f"/proc/{ours}/status"]).text
    pid = int(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[-1])
    assert pid != ours
    assert os_env.sandbox.exec(["kill", "-KILL", str(ours)]).exit_code == 0
    crashed = os_env.step(move_to(700, 400), 30)
    assert crashed.error is None and not (crashed.truncated or crashed.terminated)
    assert "mousepad" not in apps(crashed) and "launcher" in apps(crashed)
    assert crashed.observation["exited"] == [{"app": "mousepad", "pid": pid}]
    assert MAIN_WINDOW not in [window["title"] for window in crashed.observation["windows"]]
    assert RENDER.observation(crashed.observation).meta["exited"] == [
        {"app": "mousepad", "pid": pid}
    ]
    # The episode goes on: the launcher opens the editor again.
    button = find(crashed.observation["tree"], "push button", "Text Editor")
    assert button is not None
    reopened = os_env.step(click(*centre(button)), 30)
    if "mousepad" not in apps(reopened):
        reopened = step_until(os_env, lambda outcome: "mousepad" in apps(outcome))
    assert reopened.observation["exited"] == []
    assert os_env.evaluate(TODO_TASK) == 0.0


def test_a_window_asking_for_a_place_off_the_screen_opens_on_it(os_env: OsEnvironment) -> None:
    os_env.reset(0, TODO_TASK)
    started = os_env.sandbox.exec(
        ["sh", "-c", 'python3 -c "$0" >/dev/null 2>&1 &', FAR_WINDOW],
        user="1000",
        env=SESSION_ENV,
    )
    assert started.exit_code == 0, started.stderr
    shown = step_until(
        os_env, lambda outcome: find(outcome.observation["tree"], "frame", "Far away")
    )
    frame = find(shown.observation["tree"], "frame", "Far away")
    assert frame is not None
    assert frame["x"] >= 0 and frame["x"] + frame["width"] <= WIDTH
    assert frame["y"] >= 0 and frame["y"] + frame["height"] <= HEIGHT
    (window,) = [w for w in shown.observation["windows"] if w["title"] == "Far away"]
    assert window["x"] + window["width"] <= WIDTH and window["y"] + window["height"] <= HEIGHT
    assert "push-button\tClose me" in RENDER.observation(shown.observation).text
    # On the screen, so its button can be clicked: the program ends and is named.
    button = find(shown.observation["tree"], "push button", "Close me")
    assert button is not None
    closed = os_env.step(click(*centre(button)), 30)
    assert find(closed.observation["tree"], "frame", "Far away") is None
    assert [gone["app"] for gone in closed.observation["exited"]] == [frame["app"]]


def test_a_tree_over_max_nodes_is_cut_and_says_so(os_image: str) -> None:
    env = OsEnvironment(OsConfig(max_nodes=60))
    try:
        first = env.reset(0, TODO_TASK)
        assert first["truncated"] is True and first["nodes"] == 60
        stepped = env.step(press("down"), 30)
        assert stepped.error is None and stepped.observation["nodes"] == 60
        text = RENDER.observation(stepped.observation).text
        assert text.splitlines()[-1] == "[… accessibility tree cut at 60 nodes]"
    finally:
        env.close()


def test_a_lost_accessibility_bus_ends_the_episode_with_the_reason(
    os_env: OsEnvironment,
) -> None:
    os_env.reset(0, TODO_TASK)
    # The AT-SPI bus's own dbus-daemon; a new one may be started, but the running
    # applications stay connected to the dead one.
    killed = os_env.sandbox.exec(["pkill", "-KILL", "-f", "[a]t-spi2/accessibility.conf"])
    assert killed.exit_code == 0, killed.stderr
    lost = os_env.step(press("down"), 30)  # a hung driver would be a lost sandbox instead
    assert lost.truncated and not lost.terminated
    assert lost.error is not None
    assert lost.error.startswith("the accessibility tree is unavailable"), lost.error
    assert lost.observation["tree"] is None
    rendered = RENDER.observation(lost.observation)
    # The windows and focus lines (the window manager still answers), then the table's header
    # and the reason in place of the rows.
    lines = rendered.text.splitlines()
    assert lines[lines.index(HEADER) + 1].startswith("[no accessibility tree: ")
    assert rendered.screenshot is not None  # the screen is still there
