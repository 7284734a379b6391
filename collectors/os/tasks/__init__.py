"""Scripted desktop tasks: edit, compute and file things with real applications.

A task names the applications open at reset (``launch``: argv lists run in ``/home/user``,
e.g. ``("mousepad", "/home/user/Documents/notes.txt")``), the pyautogui actions an engineer
would take (``steps``: keyboard shortcuts first, coordinates only inside the launched window's
fixed geometry: openbox opens normal windows maximized right of the 140-pixel launcher dock),
and a check that holds only when the work was done:

- ``check_command``: a shell command run as ``user`` in the container after the episode; the
  task is solved when it exits 0 (a file's content, a file moved, ``ssconvert`` reading a
  saved spreadsheet back);
- ``check_tree``: ``(application, role, text)``: a node of that application in the final
  accessibility tree has that role and that text or name (the calculator's display). Only an
  application the environment launched at reset counts (its process and executable, from the
  driver: :func:`launched_tree`); another program calling itself by the application's name
  (GLib's prgname, its AT-SPI name) does not.

One module per application (``mousepad``, ``gnumeric``, ``pcmanfm``, ``galculator``), each
with ``TASKS``; :func:`load_tasks` returns them all in that order.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worldtrace.collectors.base import ScriptedTask
from worldtrace.collectors.os.actions import action_calls

APPLICATIONS = ("mousepad", "gnumeric", "pcmanfm", "galculator")
"""The applications with a task module, in library order."""

HOME = "/home/user"
DEFAULT_SCREEN = (1280, 800)
"""The screen the scripts' coordinates were read on."""
POINTER_FUNCTIONS = frozenset(
    {"click", "doubleClick", "rightClick", "moveTo", "dragTo", "mouseDown", "mouseUp", "scroll"}
)
DOCUMENTS = f"{HOME}/Documents"


@dataclass(frozen=True)
class OsTask(ScriptedTask):
    """A desktop task: what is open at reset, the script, and how success is checked."""

    application: str = ""
    launch: tuple[tuple[str, ...], ...] = ()
    """The argv of each application started at reset, in order."""
    check_command: str = ""
    """Shell command (as ``user``, in /home/user) that exits 0 exactly when the task is done."""
    check_tree: tuple[str, str, str] | None = None
    """``(application, role, text)`` a node of the final tree must have (text or name)."""

    def __post_init__(self) -> None:
        problems = []
        if self.application not in APPLICATIONS:
            problems.append(f"unknown application {self.application!r}")
        if not self.steps:
            problems.append("it has no steps")
        if not self.check_command and self.check_tree is None:
            problems.append("it has no check")
        if any(not argv for argv in self.launch):
            problems.append("an empty launch argv")
        if problems:
            raise ValueError(f"os task {self.name!r}: " + "; ".join(problems))


def tree_has(tree: Mapping[str, Any] | None, application: str, role: str, text: str) -> bool:
    """Whether a node of ``application`` has ``role`` and ``text`` as its text or name."""
    stack = [tree] if tree else []
    while stack:
        node = stack.pop()
        if node.get("app") == application and node.get("role") == role:
            values = {str(node.get("text") or "").strip(), str(node.get("name") or "").strip()}
            if text in values:
                return True
        stack.extend(node.get("children") or ())
    return False


def launched_tree(
    tree: Mapping[str, Any], identities: Sequence[Mapping[str, Any]], task: OsTask
) -> dict[str, Any]:
    """The tree with only the applications the environment launched at reset for ``task``.

    ``identities`` are the driver's, one per application of ``tree`` in order (``observe``
    with ``identify``): an application is kept when its process is one of a program of
    ``task.launch`` and runs that program's executable (``launched`` names the program). The
    name an application shows (GLib's prgname) is its own choice, so it decides nothing.
    """
    programs = {argv[0] for argv in task.launch}
    children = list(tree.get("children") or ())
    if len(identities) != len(children):
        return {**tree, "children": []}  # not the tree the identities describe: trust none
    kept = [
        child
        for child, identity in zip(children, identities, strict=True)
        if identity.get("launched") in programs and identity.get("name") == child.get("name")
    ]
    return {**tree, "children": kept}


def uses_pointer(task: OsTask) -> bool:
    """Whether the task's script uses the pointer (coordinates of the default screen)."""
    return any(
        call["function"] in POINTER_FUNCTIONS for step in task.steps for call in action_calls(step)
    )


def load_tasks(application: str | None = None) -> tuple[OsTask, ...]:
    """The task library (of one application when given)."""
    names = APPLICATIONS if application is None else (application,)
    unknown = [name for name in names if name not in APPLICATIONS]
    if unknown:
        raise ValueError(f"unknown os application {unknown[0]!r} (expected one of {APPLICATIONS})")
    tasks: list[OsTask] = []
    for name in names:
        module = importlib.import_module(f"worldtrace.collectors.os.tasks.{name}")
        tasks.extend(module.TASKS)
    return tuple(tasks)


__all__ = [
    "APPLICATIONS",
    "DEFAULT_SCREEN",
    "DOCUMENTS",
    "HOME",
    "OsTask",
    "launched_tree",
    "load_tasks",
    "tree_has",
    "uses_pointer",
]
