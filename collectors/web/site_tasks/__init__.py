"""The scripted task library: at least ten tasks per site, one module per site."""

from __future__ import annotations

from worldtrace.collectors.web.site_tasks.datasette import TASKS as DATASETTE_TASKS
from worldtrace.collectors.web.site_tasks.tiddlywiki import TASKS as TIDDLYWIKI_TASKS
from worldtrace.collectors.web.site_tasks.trac import TASKS as TRAC_TASKS
from worldtrace.collectors.web.tasks import WebTask

TASKS: tuple[WebTask, ...] = (*TRAC_TASKS, *DATASETTE_TASKS, *TIDDLYWIKI_TASKS)
"""Every web task, all sites."""

_BY_NAME = {task.name: task for task in TASKS}


def task_by_name(name: str) -> WebTask:
    """Return the task called ``name``; LookupError lists close names if there is none."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise LookupError(f"unknown web task {name!r}; see `worldtrace tasks web`") from None


def tasks_for_site(site: str) -> list[WebTask]:
    """The tasks of one site, in library order."""
    return [task for task in TASKS if task.site == site]
