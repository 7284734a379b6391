"""The swe domain's scripted policy: an oracle that fixes a synthesized bug like an agent would.

It knows the task's gold patch but works the way an engineer does, one tool call at a time:
reproduce the failure by running the failing tests, localize it (from the traceback when the
tests' output names a line of the package, else by searching for the function), read the
relevant lines, sometimes make a wrong edit first and revert it, apply the fix with
``str_replace``, and run the tests again. Every choice that varies (reading the test first,
listing folders, running the whole test file, a wrong first edit, a closing ``git diff``) is
drawn from a generator seeded by the episode's seed, so an episode is reproducible.
"""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from worldtrace.collectors.base import HistoryItem, Policy
from worldtrace.collectors.swe.tasks import SweTask
from worldtrace.collectors.swe.tools import tool_call
from worldtrace.schemas import Action
from worldtrace.schemas.raw import RawObservation

# Lines of a pytest traceback that name a place in a file: "path/to/mod.py:123: in func" (long
# format) or "path/to/mod.py:123: AssertionError" (short format).
_TRACEBACK_LINE = re.compile(r"^(?P<path>[\w./-]+\.py):(?P<line>\d+): ", re.MULTILINE)
_HUNK_HEADER = re.compile(r"^@@ -(?P<start>\d+)(?:,\d+)? \+\d+(?:,\d+)? @@")
# How many lines around a place the oracle reads.
_READ_MARGIN = 12


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff: where it starts in the old file and both sides' text."""

    old_start: int
    old_text: str
    new_text: str


def patch_hunks(patch: str) -> list[Hunk]:
    """Return the hunks of a one-file unified diff (``---``/``+++`` headers skipped)."""
    hunks: list[Hunk] = []
    start: int | None = None
    old: list[str] = []
    new: list[str] = []

    def close() -> None:
        if start is not None:
            hunks.append(Hunk(start, "".join(old), "".join(new)))

    for line in patch.splitlines(keepends=True):
        header = _HUNK_HEADER.match(line)
        if header:
            close()
            start, old, new = int(header["start"]), [], []
        elif start is None or line.startswith(("---", "+++", "\\")):
            continue
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith(" ") or line in ("\n", ""):
            old.append(line[1:] if line.startswith(" ") else line)
            new.append(line[1:] if line.startswith(" ") else line)
    close()
    if not hunks:
        raise ValueError("the gold patch holds no hunk")
    return hunks


class SweOraclePolicy(Policy[SweTask]):
    """Reproduces, localizes, reads, fixes with the gold patch and re-runs the tests."""

    kind = "script"
    name = "swe-oracle"
    version = "1"

    def __init__(self, wrong_edit_rate: float = 0.25) -> None:
        if not 0 <= wrong_edit_rate <= 1:
            raise ValueError(f"wrong_edit_rate must be within 0..1, got {wrong_edit_rate}")
        self.wrong_edit_rate = wrong_edit_rate
        self._task: SweTask | None = None
        self._random = random.Random(0)
        self._plan: list[Action] = []
        self._localized = False

    def reset(self, seed: int, task: SweTask | None) -> None:
        """Plan the opening steps of ``task``; the rest follows what the tests print."""
        if task is None or not task.failing_tests or not task.gold_patch:
            raise ValueError(f"the swe oracle needs a synthesized task, got {task!r}")
        self._task = task
        self._random = random.Random(seed)
        self._localized = False
        failing = task.failing_tests
        opening: list[Action] = []
        if self._random.random() < 0.3:
            opening.append(tool_call("list_dir", path="."))
        if self._random.random() < 0.4:
            test_file = failing[0].split("::", 1)[0]
            opening.append(tool_call("read_file", path=test_file))
        # Reproduce: one failing test, all of them, or their whole file.
        choice = self._random.random()
        if choice < 0.5 or len(failing) == 1:
            selector = " ".join(failing[:3])
        else:
            selector = failing[0].split("::", 1)[0]
        opening.append(tool_call("run_tests", selector=selector))
        self._plan = opening

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next planned step, planning the fix once the failure was reproduced."""
        if self._task is None:
            raise RuntimeError("reset() the oracle before acting")
        if not self._plan and not self._localized:
            self._localized = True
            self._plan = self._fix_steps(observation)
        return self._plan.pop(0) if self._plan else None

    def _fix_steps(self, failure: RawObservation) -> list[Action]:
        """Localize from the failing run's output, read, (mis)edit, fix, verify."""
        task = self._task
        assert task is not None  # act() checked it
        hunks = patch_hunks(task.gold_patch)
        # The gold patch goes from the buggy file (its old side) to the fixed one (its new side).
        first = hunks[0]
        steps: list[Action] = []
        place = _package_frame(str(failure.get("output") or ""), task.file)
        if place is None:
            pattern = rf"def {re.escape(task.function.rsplit('.', 1)[-1])}\b"
            steps.append(tool_call("search", pattern=pattern, path=".", glob="*.py"))
            place = first.old_start
        start = max(1, min(place, first.old_start) - _READ_MARGIN)
        end = max(place, first.old_start + first.old_text.count("\n")) + _READ_MARGIN
        steps.append(tool_call("read_file", path=task.file, start_line=start, end_line=end))
        if self._random.random() < self.wrong_edit_rate:
            steps.extend(self._wrong_edit(task.file, first))
        steps.extend(
            tool_call("str_replace", path=task.file, old=hunk.old_text, new=hunk.new_text)
            for hunk in hunks
        )
        steps.append(tool_call("run_tests", selector=_selector(task.failing_tests[:3])))
        if self._random.random() < 0.5:
            steps.append(tool_call("run_tests", selector=task.failing_tests[0].split("::")[0]))
        if self._random.random() < 0.5:
            steps.append(tool_call("run_shell_command", command="git diff", timeout=30))
        return steps

    def _wrong_edit(self, path: str, hunk: Hunk) -> list[Action]:
        """An edit that does not fix the bug, the tests that say so, and its revert."""
        # The hunk's whole old side is unique in the file (the fix replaces it too), so the
        # mark goes on one of its lines and the edit replaces the whole side.
        lines = hunk.old_text.splitlines(keepends=True)
        markable = [i for i, line in enumerate(lines) if line.strip() and line.rstrip()[-1] != "\\"]
        if not markable:
            return []
        marked = self._random.choice(markable)
        lines[marked] = lines[marked].rstrip("\n") + "  # FIXME: is this the bug?\n"
        wrong = "".join(lines)
        steps = [tool_call("str_replace", path=path, old=hunk.old_text, new=wrong)]
        steps.append(tool_call("run_tests", selector=_selector(self._failing_sample())))
        if self._random.random() < 0.5:
            steps.append(tool_call("str_replace", path=path, old=wrong, new=hunk.old_text))
        else:
            steps.append(tool_call("run_shell_command", command=f"git checkout -- {path}"))
        return steps

    def _failing_sample(self) -> tuple[str, ...]:
        assert self._task is not None
        return self._task.failing_tests[:3]


def _selector(tests: Sequence[str]) -> str:
    """One ``run_tests`` selector naming several tests (shell words, as the tool splits it)."""
    return shlex.join(tests)


def _package_frame(output: str, source_file: str) -> int | None:
    """The last traceback line inside ``source_file`` in a test run's output, if any."""
    lines = [
        int(match["line"])
        for match in _TRACEBACK_LINE.finditer(output)
        if source_file.endswith(match["path"]) or match["path"].endswith(source_file)
    ]
    return lines[-1] if lines else None


__all__ = ["Hunk", "SweOraclePolicy", "patch_hunks"]
