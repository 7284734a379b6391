"""The scripted terminal task library, one module per category.

Each task prepares its sandbox with ``setup`` (shell commands run before the first
observation and never recorded), then plays ``steps`` (terminal actions), and is checked by
``check`` (a shell command run after the episode; exit status 0 means success).

Tasks work in ``~/work`` (``/home/user/work``) of the ``worldtrace/terminal`` image (Debian
bookworm, no network), as the unprivileged ``user`` that the shell runs as; setup and checks
run as that user in its home too. Setup content is fixed text generated here, so every run
starts from the same files; repositories made in setup commit with fixed dates, so their
hashes are stable too (:mod:`.helpers` builds those commands).
Checks are POSIX ``sh`` and test the end state, never the screen.
"""

from __future__ import annotations

from worldtrace.collectors.terminal.tasks import (
    archives,
    editor,
    environment,
    errors,
    files,
    git,
    interrupt,
    pager,
    pipes,
    processes,
    python,
    text,
)
from worldtrace.collectors.terminal.tasks.helpers import TerminalTask

CATEGORIES: tuple[str, ...] = (
    "files",
    "text",
    "git",
    "python",
    "editor",
    "pager",
    "pipes",
    "archives",
    "processes",
    "environment",
    "errors",
    "interrupt",
)
"""Every category the library covers; each has at least one task."""

TASKS: tuple[TerminalTask, ...] = (
    *files.TASKS,
    *text.TASKS,
    *git.TASKS,
    *python.TASKS,
    *editor.TASKS,
    *pager.TASKS,
    *pipes.TASKS,
    *archives.TASKS,
    *processes.TASKS,
    *environment.TASKS,
    *errors.TASKS,
    *interrupt.TASKS,
)
"""Every terminal task, category by category in the order of :data:`CATEGORIES`."""


def task_by_name(name: str) -> TerminalTask:
    """Return the task called ``name``; raise KeyError listing the known names."""
    for task in TASKS:
        if task.name == name:
            return task
    raise KeyError(f"unknown terminal task {name!r}; known: {', '.join(t.name for t in TASKS)}")


__all__ = ["CATEGORIES", "TASKS", "TerminalTask", "task_by_name"]
