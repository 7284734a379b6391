"""The scripted web task library, played on the real sites.

For a played task: its check fails on a freshly reset site (so a check can tell done from not
done), and its script, played by ``WebScriptPolicy`` on that fresh site, finds every element
it names, runs without action errors and makes the check pass. The suite plays a sample with
every category and each site's kinds of check (:data:`SAMPLE`, 6 of 40);
``WORLDTRACE_FULL_TASKS=1`` plays them all (about six minutes: each needs a fresh site).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.full_run import FULL
from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.site_tasks import TASKS, task_by_name, tasks_for_site
from worldtrace.collectors.web.tasks import CATEGORIES, DataCheck, WebScriptPolicy, WebTask

SITES = ("trac", "datasette", "tiddlywiki")

SAMPLE = (
    "trac-create-ticket",
    "trac-search-wiki-only",
    "datasette-return-overdue-loan",
    "datasette-form-sql-open-loans",
    "tiddlywiki-form-plant",
    "tiddlywiki-navigate-tasks",
)
"""Tasks played by default: each site's two kinds of check (its data, its page) once, and
every category once, each the longest or the one with the most kinds of action of its kind (a
ticket form with selects, a SQL query, a multi-field form, a search then a click on a result).
The other tasks' scripts are the same policy on the same sites; a full run plays them too."""


def test_each_site_has_ten_tasks_unique_names_and_all_categories_overall() -> None:
    names = [task.name for task in TASKS]
    assert [name for name, count in Counter(names).items() if count > 1] == []
    for site in SITES:
        tasks = tasks_for_site(site)
        assert len(tasks) >= 10, site
        assert all(task.name.startswith(f"{site}-") for task in tasks)
        assert len({task.category for task in tasks}) >= 3, site
    assert {task.category for task in TASKS} == set(CATEGORIES)
    for task in TASKS:
        assert task.site in SITES and task.category in CATEGORIES, task.name
        assert task.instruction and task.steps and task.check is not None, task.name
        # data-changing categories are checked on the data, not on what the page says
        if task.category in ("create", "edit"):
            assert isinstance(task.check, DataCheck), task.name


@pytest.fixture
def env(site_images: None, name: str) -> Iterator[WebEnvironment]:
    """A web environment for the site of task ``name`` (the test's parameter), not yet reset."""
    from worldtrace.collectors.web.browser import chromium_path

    # `make setup` installs Chromium: without it this is an error naming the command (a skip
    # would make a broken setup read as a passing run).
    chromium_path()
    task = task_by_name(name)
    # No screenshots: the checks read trees and data, and a PNG per step costs time.
    environment = WebEnvironment(WebConfig(site=task.site, screenshot=False))
    yield environment
    environment.close()


def check_passes_now(env: WebEnvironment, task: WebTask) -> bool:
    """The task's check, asked once (evaluate() would keep asking a failing data check)."""
    if isinstance(task.check, DataCheck):
        return task.check.passes(env.site.read_data(task.check.query))  # type: ignore[union-attr]
    return env.evaluate(task) == 1.0


def test_the_sample_has_every_category_and_each_site_s_kinds_of_check() -> None:
    sampled = [task_by_name(name) for name in SAMPLE]
    assert {task.category for task in sampled} == set(CATEGORIES)
    every = {(task.site, type(task.check)) for task in TASKS}
    assert {(task.site, type(task.check)) for task in sampled} == every


@pytest.mark.docker
@pytest.mark.parametrize("name", [task.name for task in TASKS] if FULL else list(SAMPLE))
def test_the_task_fails_before_and_its_script_completes_it(env: WebEnvironment, name: str) -> None:
    task = task_by_name(name)
    observation = env.reset(seed=0, task=task)
    assert not check_passes_now(env, task), "the check passes before the task is done"

    policy = WebScriptPolicy()
    policy.reset(0, task)
    history: list[HistoryItem] = []
    while (action := policy.act(observation, history)) is not None:
        assert action.name != "report_infeasible", (
            f"{action.arguments['reason']} at step {len(history)}:\n"
            f"{flatten_axtree(observation['axtree'])}"
        )
        outcome = env.step(action, timeout_s=30)
        assert outcome.error is None, f"{action.text}: {outcome.error}"
        history.append(HistoryItem(action, outcome.observation, outcome.error))
        observation = outcome.observation
    assert len(history) == len(task.steps)
    assert env.evaluate(task) == 1.0, (
        f"check failed; last page {observation['url']}:\n{flatten_axtree(observation['axtree'])}"
    )
