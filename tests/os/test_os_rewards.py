"""Rewards an agent cannot fake on the real desktop (issue 24).

A task's tree check once trusted the accessibility name: a GTK window the agent started with
``GLib.set_prgname("galculator")`` and an entry reading 84 earned 1.0 on
``galculator-multiply-typed``. The agent here does it the way an agent would, through its own
actions: it opens the dock's terminal and types the program. The check must now read only the
galculator the environment launched (its process and executable), so the attack scores 0.0
while the genuine task still scores 1.0.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from worldtrace.collectors.os.actions import click, special, write
from worldtrace.collectors.os.environment import OsEnvironment
from worldtrace.collectors.os.tasks import load_tasks, tree_has

pytestmark = pytest.mark.docker

TASK = next(task for task in load_tasks("galculator") if task.name == "galculator-multiply-typed")

IMPOSTOR = (
    'python3 -c \'import gi; gi.require_version("Gtk", "3.0"); '
    'from gi.repository import GLib, Gtk; GLib.set_prgname("galculator"); '
    'w = Gtk.Window(title="galculator"); e = Gtk.Entry(); e.set_text("84"); '
    "w.add(e); w.show_all(); Gtk.main()' &\n"
)
"""What the agent types into the desktop's terminal: a window that calls itself galculator."""
IMPOSTOR_START_TIMEOUT_S = 120
"""Seconds the impostor's window may take to appear: a readiness wait, not a measure."""


def galculators(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The desktop's applications called galculator (the real one, and any impostor)."""
    return [app for app in tree["children"] if app["name"] == "galculator"]


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a tree, depth first."""
    yield node
    for child in node.get("children") or ():
        yield from nodes(child)


def dock_button(tree: dict[str, Any], name: str) -> tuple[int, int]:
    """The centre of the launcher dock's button called ``name``."""
    (button,) = [
        node
        for node in nodes(tree)
        if node.get("app") == "launcher"
        and node.get("role") == "push button"
        and node.get("name") == name
    ]
    return button["x"] + button["width"] // 2, button["y"] + button["height"] // 2


def test_a_window_calling_itself_galculator_earns_nothing(os_env: OsEnvironment) -> None:
    started = os_env.reset(0, TASK)
    assert os_env.evaluate(TASK) == 0.0
    opened = os_env.step(click(*dock_button(started["tree"], "Terminal")), 60)
    assert opened.error is None and opened.observation["focused"]["app"] == "lxterminal"
    typed = os_env.step(write(IMPOSTOR), 60)
    assert typed.error is None
    # The impostor's Python imports GTK before its window maps: seconds, and more than one
    # step's settling on a loaded machine (four test workers on two cores), so the agent looks
    # again until the window is there, as an agent would.
    deadline = time.monotonic() + IMPOSTOR_START_TIMEOUT_S
    while len(galculators(typed.observation["tree"])) < 2:
        assert time.monotonic() < deadline, [
            a["name"] for a in typed.observation["tree"]["children"]
        ]
        typed = os_env.step(special("WAIT"), 60)
        assert typed.error is None
    # The attack took: an application named galculator shows 84 (galculator itself shows 0),
    # which is what the check read before.
    tree = typed.observation["tree"]
    assert tree_has(tree, *TASK.check_tree)
    assert os_env.final_tree() is not None and tree_has(os_env.final_tree(), *TASK.check_tree)
    # The check reads only the galculator the environment launched.
    assert os_env.evaluate(TASK) == 0.0


def test_the_genuine_calculation_still_earns_the_reward(os_env: OsEnvironment) -> None:
    os_env.reset(0, TASK)
    assert os_env.evaluate(TASK) == 0.0
    for action in TASK.steps:
        assert os_env.step(action, 60).error is None
    assert os_env.evaluate(TASK) == 1.0


OVERWRITE = (
    "for f in /dev/shm/desktop-session/session.json /tmp/worldtrace-session/session.json; "
    'do mkdir -p ${f%/*}; echo \'{"display": ":9", "bus_address": "unix:path=/tmp/x"}\' '
    "> $f; done; for fd in /proc/[0-9]*/fd/*; do case $(readlink $fd) in *desktop-session*) "
    "echo '{}' > ${fd%/fd/*}/root/dev/shm/desktop-session/session.json;; esac; done "
    "2>/dev/null; echo tried\n"
)
"""What the agent types to replace the session file the host's last look reads: where it once
was, where the driver keeps it now (the agent's /dev/shm is its own), and through the roots of
the session's processes whose files are there."""


def test_the_agent_cannot_replace_what_the_last_look_reads(os_env: OsEnvironment) -> None:
    started = os_env.reset(0, TASK)
    opened = os_env.step(click(*dock_button(started["tree"], "Terminal")), 60)
    assert opened.observation["focused"]["app"] == "lxterminal"
    typed = os_env.step(write(OVERWRITE), 60)
    assert typed.error is None
    # The driver's session file (outside the agent's view) is the one the driver wrote.
    real = os_env.sandbox.exec(["cat", "/dev/shm/desktop-session/session.json"]).text
    assert '"display": ":0"' in real and "/tmp/x" not in real, real
    # The host's last look (a second driver process, as after a lost driver) still reads the
    # real desktop: the terminal and galculator are in its tree.
    look = os_env._last_look()
    assert look is not None and look["tree"] is not None, look
    assert {"galculator", "lxterminal"} <= {app["name"] for app in look["tree"]["children"]}


SET_BUS_PROPERTY = """
import sys
from Xlib import X, display
screen = display.Display(":0")
atom = screen.intern_atom("AT_SPI_BUS")
screen.screen().root.change_property(atom, screen.intern_atom("STRING"), 8, sys.argv[1].encode())
screen.sync()
"""
"""Set the root window's AT_SPI_BUS, as any X client of the desktop can."""
A11Y_SOCKET = "/tmp/runtime-user/at-spi/bus_0"


def as_agent(env: OsEnvironment, argv: list[str]) -> str:
    """Run ``argv`` as the session's user (the agent's): same uid, /tmp and X server."""
    done = env.sandbox.exec(argv, user="user", env={"DISPLAY": ":0"}, timeout=30)
    assert done.exit_code == 0, done.stderr.decode(errors="replace")
    return done.text.strip()


def test_the_last_look_reads_only_the_sessions_own_servers(os_env: OsEnvironment) -> None:
    os_env.reset(0, TASK)
    real = os_env._last_look()
    assert real is not None and real["tree"] is not None
    apps = {app["name"] for app in real["tree"]["children"]}
    # A bus of the agent's, with nothing registered on it.
    fake = as_agent(
        os_env,
        ["dbus-daemon", "--session", "--fork", "--print-address=1", "--address=unix:path=/tmp/a"],
    )
    # The root window's property names the agent's bus: the last look keeps to the session's.
    as_agent(os_env, ["python3", "-c", SET_BUS_PROPERTY, fake])
    look = os_env._last_look()
    assert look is not None and look["tree"] is not None, look and look["tree_error"]
    assert {app["name"] for app in look["tree"]["children"]} == apps
    # The agent's socket where the session's bus has its own: the last look refuses it.
    as_agent(os_env, ["mv", A11Y_SOCKET, "/tmp/session-bus"])
    as_agent(os_env, ["mv", "/tmp/a", A11Y_SOCKET])
    look = os_env._last_look()
    assert look is not None and look["tree"] is None
    assert "not by the session's" in look["tree_error"], look["tree_error"]
    # Put back, the session's bus is read again; the driver itself never left it.
    as_agent(os_env, ["mv", "/tmp/session-bus", A11Y_SOCKET])
    look = os_env._last_look()
    assert look is not None and {app["name"] for app in look["tree"]["children"]} == apps
    assert os_env.step(write("12"), 60).observation["tree"] is not None
