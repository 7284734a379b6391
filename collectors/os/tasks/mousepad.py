"""Mousepad tasks: edit a text document with the keyboard and save it (ctrl+s)."""

from __future__ import annotations

from worldtrace.collectors.os.actions import hotkey, press, write
from worldtrace.collectors.os.tasks import DOCUMENTS, OsTask

NOTES = f"{DOCUMENTS}/notes.txt"
TODO = f"{DOCUMENTS}/todo.txt"


def _task(name: str, instruction: str, path: str, steps: tuple, check: str) -> OsTask:
    return OsTask(
        name=f"mousepad-{name}",
        instruction=instruction,
        category="mousepad",
        application="mousepad",
        launch=(("mousepad", path),),
        steps=(*steps, hotkey("ctrl", "s")),
        check_command=check,
    )


TASKS = (
    _task(
        "append-todo-item",
        "Add the item '5. Pay the rent' at the end of the to-do list in the open editor and "
        "save the file.",
        TODO,
        (hotkey("ctrl", "End"), write("5. Pay the rent\n")),
        f"tail -n 1 {TODO} | grep -qx '5. Pay the rent'",
    ),
    _task(
        "append-note-line",
        "Append the line '- Carol books the meeting room.' to the meeting notes and save them.",
        NOTES,
        (hotkey("ctrl", "End"), write("- Carol books the meeting room.\n")),
        f"tail -n 1 {NOTES} | grep -qx -- '- Carol books the meeting room.'",
    ),
    _task(
        "rename-todo-title",
        "Change the first line of the to-do list from 'TODO' to 'Weekend chores' and save.",
        TODO,
        (hotkey("ctrl", "Home"), hotkey("shift", "End"), write("Weekend chores")),
        f"head -n 1 {TODO} | grep -qx 'Weekend chores' && grep -q 'Buy milk' {TODO}",
    ),
    _task(
        "delete-first-todo-item",
        "Delete the line '1. Buy milk' from the to-do list and save it.",
        TODO,
        (hotkey("ctrl", "Home"), press("down"), hotkey("shift", "down"), press("delete")),
        f"! grep -q 'Buy milk' {TODO} && grep -q 'Call the dentist' {TODO} "
        f"&& [ $(wc -l < {TODO}) -eq 4 ]",
    ),
    _task(
        "insert-draft-header",
        "Insert a first line 'DRAFT' above the meeting notes and save the file.",
        NOTES,
        (hotkey("ctrl", "Home"), write("DRAFT\n")),
        f"head -n 1 {NOTES} | grep -qx DRAFT && sed -n 2p {NOTES} | grep -q '^Meeting notes'",
    ),
    _task(
        "uppercase-notes-title",
        "Write the title line of the meeting notes in capitals ('MEETING NOTES, 12 MARCH') and "
        "save.",
        NOTES,
        (hotkey("ctrl", "Home"), hotkey("shift", "End"), write("MEETING NOTES, 12 MARCH")),
        f"head -n 1 {NOTES} | grep -qx 'MEETING NOTES, 12 MARCH'",
    ),
)
