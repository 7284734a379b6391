"""The scripted terminal task library: shape checks, and its tasks played in a real sandbox.

Every task's shape is checked; in a sandbox the suite plays one task per category
(:data:`SAMPLE`), and ``WORLDTRACE_FULL_TASKS=1`` plays the whole library (about three
minutes).
"""

from __future__ import annotations

import re
import subprocess
from importlib import import_module

import pytest

from tests.full_run import FULL
from worldtrace.collectors.terminal import tasks
from worldtrace.collectors.terminal.actions import is_key_name
from worldtrace.collectors.terminal.tasks import CATEGORIES, TASKS, TerminalTask, task_by_name
from worldtrace.schemas import Action

KEBAB = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")

SAMPLE = (
    "rename-photos-batch",
    "jq-failing-services",
    "git-resolve-merge-conflict",
    "python-repl-inspect-config",
    "git-commit-message-in-vim",
    "less-search-server-log",
    "heredoc-service-config",
    "tar-backup-and-restore",
    "kill-runaway-process",
    "dotenv-load-and-run",
    "deploy-permission-and-missing-config",
    "interrupt-mistyped-sleep",
)
"""Tasks played in a sandbox by default: one per category, each the one that exercises the
most (a REPL, an editor, a pager, a merge conflict, a heredoc, an interrupted command)."""

INTERRUPTED_STEP_TIMEOUT_S = 3.0
"""The limit of a step whose command the task interrupts next: such a step always runs to its
limit (the command is still at work), so a short one spares the suite its wait."""


def typed_lines(task: TerminalTask) -> list[str]:
    """Every piece of literal text the task types, in order."""
    return [
        item
        for step in task.steps
        if step.name == "keys"
        for item in step.arguments["keys"]
        if not is_key_name(item)
    ]


def pressed_keys(task: TerminalTask) -> list[str]:
    return [
        item
        for step in task.steps
        if step.name == "keys"
        for item in step.arguments["keys"]
        if is_key_name(item)
    ]


def test_library_is_large_enough() -> None:
    assert len(TASKS) >= 34


def test_names_are_unique_kebab_case() -> None:
    names = [task.name for task in TASKS]
    assert len(names) == len(set(names))
    assert all(KEBAB.match(name) for name in names), [n for n in names if not KEBAB.match(n)]


def test_every_category_is_covered_and_known() -> None:
    used = {task.category for task in TASKS}
    assert set(CATEGORIES) <= used
    assert used <= set(CATEGORIES)
    for category in CATEGORIES:
        assert sum(task.category == category for task in TASKS) >= 2, category


def test_each_category_has_its_own_module_in_library_order() -> None:
    modules = [import_module(f"{tasks.__name__}.{category}") for category in CATEGORIES]
    for category, module in zip(CATEGORIES, modules, strict=True):
        assert module.TASKS, category
        assert {task.category for task in module.TASKS} == {category}, module.__name__
    assert tuple(task for module in modules for task in module.TASKS) == TASKS


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_task_shape(task: TerminalTask) -> None:
    assert task.instruction.strip()
    assert 3 <= len(task.steps) <= 12
    assert all(isinstance(step, Action) and step.name in ("keys", "wait") for step in task.steps)
    assert task.check and task.check.strip()
    assert task.setup and all(isinstance(command, str) and command for command in task.setup)
    assert task_by_name(task.name) is task


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_setup_and_check_are_valid_sh(task: TerminalTask) -> None:
    # Syntax only (sh -n executes nothing): catches quoting mistakes without a sandbox.
    for script in (*task.setup, task.check):
        done = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, f"{script!r}: {done.stderr}"


def test_interactive_programs_and_tools_are_exercised() -> None:
    def uses(predicate) -> list[str]:
        return [task.name for task in TASKS if predicate(task)]

    assert uses(lambda t: any(line.startswith("vim ") for line in typed_lines(t)))
    assert uses(lambda t: ":wq" in typed_lines(t) and "Escape" in pressed_keys(t))
    assert uses(lambda t: any(line.startswith("less ") for line in typed_lines(t)))
    assert uses(lambda t: "python3" in typed_lines(t) and "exit()" in typed_lines(t))
    assert uses(lambda t: "C-c" in pressed_keys(t))
    assert uses(lambda t: any(line.startswith("sleep 1000") for line in typed_lines(t)))
    assert uses(lambda t: any(step.name == "wait" for step in t.steps))
    for tool in ("git init", "git commit", "git merge", "git stash", "git log", "git diff"):
        assert uses(lambda t, tool=tool: any(tool in line for line in typed_lines(t))), tool
    for tool in ("grep", "sed", "awk", "sort", "uniq", "cut", "wc", "tee", "tar", "zip", "kill"):
        assert uses(lambda t, tool=tool: any(tool in line for line in typed_lines(t))), tool
    for redirect in (" > ", " >> ", " 2> ", " | ", "<<"):
        assert uses(lambda t, r=redirect: any(r in line for line in typed_lines(t))), redirect


def test_unknown_task_name_lists_the_known_ones() -> None:
    with pytest.raises(KeyError, match="organize-downloads"):
        task_by_name("no-such-task")


def test_the_sample_has_one_task_of_every_category() -> None:
    sampled = [task_by_name(name) for name in SAMPLE]
    assert sorted(task.category for task in sampled) == sorted(CATEGORIES)


@pytest.mark.docker
@pytest.mark.parametrize(
    "task",
    TASKS if FULL else [task_by_name(name) for name in SAMPLE],
    ids=lambda task: task.name,
)
def test_task_passes_its_check_in_a_real_sandbox(task: TerminalTask, terminal_image: str) -> None:
    from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment

    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        env.reset(0, task)
        # A check that already passes before the steps would not tell success from nothing.
        assert env.evaluate(task) == 0.0, "the check passes before any step ran"
        for position, action in enumerate(task.steps):
            # A command the task interrupts next (C-c, C-z) is still at work, however silent:
            # its step runs to the timeout (issue 23: a step ends when the command is done or
            # waits for input, not when it is quiet). Every other step must finish.
            following = task.steps[position + 1] if position + 1 < len(task.steps) else None
            interrupted = following is not None and following.text in ("<C-c>", "<C-z>")
            timeout_s = INTERRUPTED_STEP_TIMEOUT_S if interrupted else 20
            outcome = env.step(action, timeout_s=timeout_s)
            if not interrupted:
                assert not outcome.observation.get("timed_out"), f"{action.text!r} timed out"
        assert env.evaluate(task) == 1.0
    finally:
        env.close()
