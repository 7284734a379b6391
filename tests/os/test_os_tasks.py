"""The scripted desktop task library: its shape without Docker, and its checks for real.

Every played task's check fails on a fresh reset and holds after its script, against the real
applications of ``worldtrace/os``: a sample (one task per application) by default, all of it
with ``WORLDTRACE_FULL_TASKS=1``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.full_run import FULL
from worldtrace.collectors.os import OsCollector
from worldtrace.collectors.os.actions import action_calls, click
from worldtrace.collectors.os.environment import OsConfig, OsEnvironment
from worldtrace.collectors.os.tasks import (
    APPLICATIONS,
    OsTask,
    launched_tree,
    load_tasks,
    tree_has,
    uses_pointer,
)

TASKS = load_tasks()
LIBRARY = {task.name: task for task in TASKS}
SAMPLE = (
    "mousepad-delete-first-todo-item",
    "gnumeric-total-row",
    "gnumeric-bold-header",
    "pcmanfm-move-notes-to-desktop",
    "galculator-add-buttons",
)
"""Tasks played by default: one per application, two for gnumeric (a formula saved and read
back by ssconvert, a format read from the saved XML, a cut and paste between folders,
on-screen buttons clicked)."""


def test_the_library_has_twenty_tasks_over_four_applications() -> None:
    assert len(TASKS) >= 20
    assert len(LIBRARY) == len(TASKS)
    counts = Counter(task.application for task in TASKS)
    assert set(counts) == set(APPLICATIONS) and all(n >= 4 for n in counts.values()), counts
    assert len({task.instruction for task in TASKS}) == len(TASKS)
    for task in TASKS:
        assert task.name.startswith(f"{task.application}-")
        assert task.launch and task.launch[0][0] == task.application
        for step in task.steps:
            assert action_calls(step)  # every step is allowed code
    assert list(OsCollector().task_library()) == list(TASKS)
    assert list(OsCollector().task_library(OsConfig())) == list(TASKS)


def test_another_screen_size_keeps_only_the_tasks_without_coordinates() -> None:
    kept = OsCollector().task_library(OsConfig(width=1920, height=1080))
    assert kept and all(not uses_pointer(task) for task in kept)
    assert {task.application for task in kept} == {"mousepad", "gnumeric", "galculator"}
    assert uses_pointer(LIBRARY["pcmanfm-rename-todo"])
    assert not uses_pointer(LIBRARY["mousepad-append-todo-item"])
    assert set(SAMPLE) <= set(LIBRARY)


def test_a_task_needs_steps_a_check_and_a_known_application() -> None:
    with pytest.raises(ValueError, match="unknown application 'vim'; it has no steps; it has no"):
        OsTask(name="t", instruction="i", application="vim")
    with pytest.raises(ValueError, match="an empty launch argv"):
        OsTask(
            name="t",
            instruction="i",
            application="mousepad",
            steps=(click(1, 2),),
            check_command="true",
            launch=((),),
        )
    with pytest.raises(ValueError, match="unknown os application 'vim'"):
        load_tasks("vim")


def test_tree_has_matches_role_text_or_name_of_one_application() -> None:
    def node(app: str, role: str, name: str, text: str | None) -> dict[str, Any]:
        return {"app": app, "role": role, "name": name, "text": text, "children": []}

    tree = {
        "app": None,
        "role": "desktop frame",
        "name": "main",
        "text": None,
        "children": [node("galculator", "text", "", " 84 "), node("other", "text", "", "5")],
    }
    assert tree_has(tree, "galculator", "text", "84")
    assert not tree_has(tree, "galculator", "text", "5")
    assert not tree_has(tree, "galculator", "label", "84")
    assert not tree_has(None, "galculator", "text", "84")


def test_launched_tree_keeps_only_what_the_environment_launched() -> None:
    def app(name: str, text: str) -> dict[str, Any]:
        return {"app": name, "role": "text", "name": name, "text": text, "children": []}

    task = LIBRARY["galculator-multiply-typed"]
    tree = {"role": "desktop frame", "children": [app("galculator", "84"), app("galculator", "0")]}
    impostor = {"name": "galculator", "pid": 90, "executable": "/usr/bin/python3.11"}
    genuine = {"name": "galculator", "pid": 40, "executable": "/usr/bin/galculator"}
    identities = [{**impostor, "launched": None}, {**genuine, "launched": "galculator"}]
    kept = launched_tree(tree, identities, task)
    assert [child["text"] for child in kept["children"]] == ["0"]
    assert not tree_has(kept, *task.check_tree)
    # Identities that do not describe this tree (another count) trust nothing.
    assert launched_tree(tree, identities[:1], task)["children"] == []


def _tasks() -> list[Any]:
    names = sorted(LIBRARY) if FULL else list(SAMPLE)
    return [pytest.param(name, id=name) for name in names]


@pytest.mark.docker
@pytest.mark.parametrize("name", _tasks())
def test_a_task_check_fails_before_its_script_and_holds_after_it(
    name: str, os_env: OsEnvironment
) -> None:
    task = LIBRARY[name]
    os_env.reset(0, task)
    assert os_env.evaluate(task) == 0.0
    for action in task.steps:
        outcome = os_env.step(action, 60)
        assert outcome.error is None, (action.text, outcome.error)
    assert os_env.evaluate(task) == 1.0
