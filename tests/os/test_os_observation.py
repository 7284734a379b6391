"""What a person sees reaches the os observation's text (issue 23), on the real desktop.

Each test resets real episodes of ``worldtrace/os`` through :class:`OsEnvironment` and renders
them with the domain's renderer: a terminal's screen (lxterminal, whose text AT-SPI reads;
the xterm of before had no tree, so a command and its output never reached the text), the
windows in stacking order with the hidden ones said hidden, the caret and the selection of the
focused editor, a save in the window title, an open GTK 2 menu (whose items AT-SPI never calls
showing) as a popup line, and the same text for the same desktop on two runs.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from worldtrace.collectors.os.actions import click, hotkey, press, write
from worldtrace.collectors.os.environment import OBSERVATION_VERSION, OsEnvironment
from worldtrace.collectors.os.render import TABLE, OsRenderer, walk

pytestmark = pytest.mark.docker

RENDER = OsRenderer()
NOTES = "/home/user/Documents/notes.txt"


def launching(*argv: tuple[str, ...]) -> Any:
    """A task stand-in that only says what to start (reset reads nothing else of it)."""
    return SimpleNamespace(launch=argv)


def text_of(observation: dict[str, Any]) -> str:
    """The observation's canonical text."""
    return RENDER.observation(observation).text


def test_a_terminal_shows_the_command_and_its_output(os_env: OsEnvironment) -> None:
    first = os_env.reset(0, launching(("lxterminal", "--no-remote")))
    before = text_of(first)
    assert "[focus] terminal" in before
    ran = os_env.step(write("echo issue-$((20 + 3))\n"), 30)
    after = text_of(ran.observation)
    assert ran.error is None and after != before
    # The typed command and what it printed, as the screen shows them.
    assert "echo issue-$((20 + 3))" in after and "\nissue-23\n" in after
    identity = os_env.describe()
    assert identity.components["observation"] == OBSERVATION_VERSION == "2"
    assert identity.components["rows"] == TABLE and identity.components["lxterminal"]


def test_windows_are_listed_topmost_first_and_a_covered_one_is_hidden(
    os_env: OsEnvironment,
) -> None:
    # galculator starts first, then mousepad opens maximized over it.
    first = os_env.reset(0, launching(("galculator",), ("mousepad", NOTES)))
    lines = text_of(first).splitlines()
    windows = [line for line in lines if line.startswith("[window ")]
    assert len(windows) == 3, windows
    by_app = {line.split()[2]: line for line in windows}
    assert by_app["mousepad"].endswith(" in view, active")
    assert by_app["galculator"].endswith(" hidden")
    assert windows.index(by_app["mousepad"]) < windows.index(by_app["galculator"])
    assert by_app["launcher"].endswith(" in view")
    # The same desktop gives the same text on another run (rows and windows in one order).
    again = os_env.reset(0, launching(("galculator",), ("mousepad", NOTES)))
    assert text_of(again) == text_of(first)


def test_caret_selection_typing_and_saving_change_the_text(os_env: OsEnvironment) -> None:
    first = os_env.reset(0, launching(("mousepad", NOTES)))
    texts = [text_of(first)]
    assert '[focus] text "" in mousepad: caret at line 1, column 1' in texts[0]
    steps = [
        press("right"),  # the caret moves
        hotkey("shift", "end"),  # the rest of the line is selected
        write("Minutes"),  # typing replaces the selection
        hotkey("ctrl", "s"),  # saving changes the title
    ]
    for action in steps:
        outcome = os_env.step(action, 30)
        assert outcome.error is None
        texts.append(text_of(outcome.observation))
    assert all(texts[i] != texts[i + 1] for i in range(len(steps))), "a step left the text as is"
    assert "caret at line 1, column 2" in texts[1]
    assert (
        'selection "eeting notes, 12 March" from line 1, column 2 to line 1, column 24'
        in (texts[2])
    )
    assert "\ntext\t\tMMinutes\n" in texts[3] and "selection" not in texts[3].splitlines()[2]
    assert '"*~/Documents/notes.txt - Mousepad"' in texts[3]
    assert '"~/Documents/notes.txt - Mousepad"' in texts[4]


def test_an_open_gtk2_menu_is_in_the_text_and_leaves_it_when_closed(
    os_env: OsEnvironment,
) -> None:
    # pcmanfm's menus (GTK 2) never say their items are showing: no row lists them.
    first = os_env.reset(0, launching(("pcmanfm", "/home/user")))
    go = next(
        node
        for node in walk(first["tree"])
        if node.get("app") == "pcmanfm" and node.get("role") == "menu" and node["name"] == "Go"
    )
    centre = (go["x"] + go["width"] // 2, go["y"] + go["height"] // 2)
    opened = os_env.step(click(*centre), 30).observation
    popups = [line for line in text_of(opened).splitlines() if line.startswith("[popup ")]
    assert len(popups) == 1 and popups[0].startswith("[popup 1] pcmanfm ("), popups
    assert '"Previous Folder" (disabled)' in popups[0] and '"Home Folder"' in popups[0]
    closed = os_env.step(press("escape"), 30).observation
    assert "[popup " not in text_of(closed)
    assert text_of(closed) != text_of(opened)
