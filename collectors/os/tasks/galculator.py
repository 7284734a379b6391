"""Galculator tasks: compute with the keyboard or the on-screen buttons; the display is checked.

Galculator drops a key typed again while its button still shows the last press (``100/4=``
reads ``2.5`` with 0.1 s between keys, ``25`` with 0.3 s), so typed input has a 0.3 s interval
between keys. Galculator opens maximized right of
the launcher dock (x 140..1280, y 19..800); its buttons' centres at that size were read from
its accessibility tree (``BUTTONS``).
"""

from __future__ import annotations

from worldtrace.collectors.os.actions import click, press, write
from worldtrace.collectors.os.tasks import OsTask

BUTTONS = {
    "7": (256, 351),
    "8": (483, 351),
    "9": (710, 351),
    "4": (256, 479),
    "5": (483, 479),
    "6": (710, 479),
    "1": (256, 606),
    "2": (483, 606),
    "3": (710, 606),
    "0": (256, 733),
    "*": (937, 479),
    "/": (937, 351),
    "-": (937, 606),
    "+": (937, 733),
    "=": (1164, 670),
}
"""Centres of galculator's buttons in its maximized window."""


TYPING_INTERVAL_S = 0.3
"""Pause between typed keys (see the module docstring)."""


def _task(name: str, instruction: str, steps: tuple, result: str) -> OsTask:
    return OsTask(
        name=f"galculator-{name}",
        instruction=instruction,
        category="galculator",
        application="galculator",
        launch=(("galculator",),),
        steps=steps,
        check_tree=("galculator", "text", result),
    )


def _buttons(keys: str) -> tuple:
    return tuple(click(*BUTTONS[key]) for key in keys)


TASKS = (
    _task(
        "multiply-typed",
        "Use the calculator to compute 12 x 7.",
        (write("12*7=", interval=TYPING_INTERVAL_S),),
        "84",
    ),
    _task(
        "divide-typed",
        "Use the calculator to compute 100 / 4.",
        (write("100/4=", interval=TYPING_INTERVAL_S),),
        "25",
    ),
    _task(
        "subtract-negative",
        "Use the calculator to compute 9 - 15.",
        (write("9-15", interval=TYPING_INTERVAL_S), press("enter")),
        "-6",
    ),
    _task(
        "sum-typed",
        "Use the calculator to compute 1234 + 4321.",
        (write("1234+4321=", interval=TYPING_INTERVAL_S),),
        "5555",
    ),
    _task(
        "multiply-buttons",
        "Compute 7 x 8 by clicking the calculator's buttons.",
        _buttons("7*8="),
        "56",
    ),
    _task(
        "add-buttons",
        "Compute 25 + 17 by clicking the calculator's buttons.",
        _buttons("25+17="),
        "42",
    ),
)
