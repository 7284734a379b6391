"""PCManFM tasks: rename, move and copy files with the keyboard on a selected icon.

PCManFM opens maximized right of the launcher dock and shows a folder's files as icons in
name order, the first three at fixed places (``ICONS``): a click selects one, F2 opens the
rename dialog, ctrl+x / ctrl+c and ctrl+v cut, copy and paste; ctrl+l focuses the location bar
(a typed path and Enter goes there), and a click on the empty view gives the view the focus
back for ctrl+v.
"""

from __future__ import annotations

from worldtrace.collectors.os.actions import click, hotkey, press, write
from worldtrace.collectors.os.tasks import DOCUMENTS, HOME, OsTask
from worldtrace.schemas import Action

ICONS = ((346, 110), (440, 110), (534, 110))
"""Centres of the first three icons of a folder (name order) in PCManFM's maximized window."""
EMPTY_VIEW = (800, 500)
"""A point of the folder view with no icon."""
DOCUMENT_ICONS = {"budget.csv": ICONS[0], "notes.txt": ICONS[1], "todo.txt": ICONS[2]}
PICTURE_ICONS = {"forest.png": ICONS[0], "sunset.png": ICONS[1]}


def _rename(position: tuple[int, int], new_name: str) -> tuple[Action, ...]:
    return (click(*position), press("F2"), hotkey("ctrl", "a"), write(f"{new_name}\n"))


def _paste_into(folder: str, cut: bool, position: tuple[int, int]) -> tuple[Action, ...]:
    return (
        click(*position),
        hotkey("ctrl", "x" if cut else "c"),
        hotkey("ctrl", "l"),
        write(f"{folder}\n"),
        click(*EMPTY_VIEW),
        hotkey("ctrl", "v"),
    )


def _task(name: str, instruction: str, folder: str, steps: tuple, check: str) -> OsTask:
    return OsTask(
        name=f"pcmanfm-{name}",
        instruction=instruction,
        category="pcmanfm",
        application="pcmanfm",
        launch=(("pcmanfm", folder),),
        steps=steps,
        check_command=check,
    )


TASKS = (
    _task(
        "rename-todo",
        "In the file manager, rename Documents/todo.txt to tasks.txt.",
        DOCUMENTS,
        _rename(DOCUMENT_ICONS["todo.txt"], "tasks.txt"),
        f"[ -f {DOCUMENTS}/tasks.txt ] && [ ! -e {DOCUMENTS}/todo.txt ] "
        f"&& grep -q 'Buy milk' {DOCUMENTS}/tasks.txt",
    ),
    _task(
        "rename-budget",
        "In the file manager, rename Documents/budget.csv to budget-2026.csv.",
        DOCUMENTS,
        _rename(DOCUMENT_ICONS["budget.csv"], "budget-2026.csv"),
        f"[ -f {DOCUMENTS}/budget-2026.csv ] && [ ! -e {DOCUMENTS}/budget.csv ]",
    ),
    _task(
        "rename-picture",
        "In the file manager, rename Pictures/sunset.png to beach.png.",
        f"{HOME}/Pictures",
        _rename(PICTURE_ICONS["sunset.png"], "beach.png"),
        f"[ -f {HOME}/Pictures/beach.png ] && [ ! -e {HOME}/Pictures/sunset.png ]",
    ),
    _task(
        "move-notes-to-desktop",
        "In the file manager, move Documents/notes.txt to the Desktop folder.",
        DOCUMENTS,
        _paste_into(f"{HOME}/Desktop", True, DOCUMENT_ICONS["notes.txt"]),
        f"[ -f {HOME}/Desktop/notes.txt ] && [ ! -e {DOCUMENTS}/notes.txt ]",
    ),
    _task(
        "copy-budget-to-desktop",
        "In the file manager, copy Documents/budget.csv to the Desktop folder (keep the original).",
        DOCUMENTS,
        _paste_into(f"{HOME}/Desktop", False, DOCUMENT_ICONS["budget.csv"]),
        f"cmp -s {HOME}/Desktop/budget.csv {DOCUMENTS}/budget.csv",
    ),
    _task(
        "move-forest-to-documents",
        "In the file manager, move Pictures/forest.png into the Documents folder.",
        f"{HOME}/Pictures",
        _paste_into(DOCUMENTS, True, PICTURE_ICONS["forest.png"]),
        f"[ -f {DOCUMENTS}/forest.png ] && [ ! -e {HOME}/Pictures/forest.png ]",
    ),
)
