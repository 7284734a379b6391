"""SWE tasks: a synthetic bug in a real repository, its failing tests, and the fix.

A task is made by :mod:`worldtrace.collectors.swe.synthesis` and shipped as data: one task file
per repository, ``collectors/swe/task_data/<repo>.json``::

    {"generator": "worldtrace-swe-synth", "generator_version": "1", "repo": "toolz",
     "repo_version": "1.0.0", "tasks": [{...}, ...]}

At reset the environment applies ``bug_patch`` to the clean repository (``git apply`` from the
repository root) and hides it in the repository's one commit; the agent sees ``instruction``.
The episode succeeds when every test of ``failing_tests`` and ``passing_tests`` passes, run in
a fresh sandbox of the image on the bug and the agent's change to the package source alone
(:mod:`~worldtrace.collectors.swe.evaluation`), so ``file`` must lie in a package of the
repository's ``source_root`` and not be a test file.

``failing_tests`` are the tests that passed at baseline and fail with the bug. ``passing_tests``
are the tests that must keep passing, at most :data:`PASSING_TESTS_CAP`: first every other
baseline-passing test of the test files that hold a failing test (the tests nearest the bug,
which a careless fix breaks first; a seeded sample of them if they are more than the cap),
then, in the room left, a seeded sample of the other tests synthesis ran (the test files that
mention the mutated module, function or class). All of them pass with the bug and after the
fix. The cap keeps an evaluation to a few seconds.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from worldtrace.collectors.base import Task
from worldtrace.collectors.swe.mutations import MUTATION_KINDS
from worldtrace.schemas.errors import InputError, validation_problems

GENERATOR = "worldtrace-swe-synth"
GENERATOR_VERSION = "1"
"""Version of the synthesis procedure; raise it when the tasks it makes would differ."""
TASK_DATA = Path(__file__).resolve().parent / "task_data"
"""The folder of the shipped task files, one ``<repo>.json`` per repository."""
PASSING_TESTS_CAP = 100
"""At most this many must-keep-passing tests per task (see the module docstring)."""


@dataclass(frozen=True)
class SweTask(Task):
    """A bug to fix in one repository: ``bug_patch`` makes it, ``gold_patch`` fixes it."""

    category: str = "misc"
    """The mutation kind that made the bug (one of ``MUTATION_KINDS``)."""
    repo: str = ""
    repo_version: str = ""
    file: str = ""
    """The mutated module, relative to the repository root (never shown to the agent)."""
    function: str = ""
    """Qualified name of the mutated function (never shown to the agent)."""
    failing_tests: tuple[str, ...] = ()
    """pytest node ids that passed at baseline and fail with the bug."""
    passing_tests: tuple[str, ...] = ()
    """pytest node ids that pass with and without the bug and must keep passing."""
    bug_patch: str = ""
    """Unified diff that introduces the bug (``git apply`` from the repository root)."""
    gold_patch: str = ""
    """Unified diff that fixes it: the reverse of ``bug_patch``."""
    generator_version: str = GENERATOR_VERSION


class TaskFileError(InputError, ValueError):
    """A task file that cannot be read: not JSON, a missing or bad field, a repo mismatch."""


class _TaskRecord(BaseModel):
    """One task as stored in a task file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    instruction: str = Field(min_length=1)
    category: str
    repo: str
    repo_version: str
    file: str = Field(min_length=1)
    function: str = Field(min_length=1)
    failing_tests: tuple[str, ...] = Field(min_length=1)
    passing_tests: tuple[str, ...]
    bug_patch: str = Field(min_length=1)
    gold_patch: str = Field(min_length=1)
    generator_version: str

    @field_validator("category")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if value not in MUTATION_KINDS:
            raise ValueError(f"unknown mutation kind {value!r} (expected one of {MUTATION_KINDS})")
        return value


class _TaskFile(BaseModel):
    """The task file of one repository."""

    model_config = ConfigDict(extra="forbid")

    generator: Literal["worldtrace-swe-synth"]
    generator_version: str
    repo: str = Field(min_length=1)
    repo_version: str = Field(min_length=1)
    tasks: list[_TaskRecord]

    @model_validator(mode="after")
    def _consistent(self) -> _TaskFile:
        names = [task.name for task in self.tasks]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"task names appear more than once: {', '.join(duplicates)}")
        for task in self.tasks:
            if (task.repo, task.repo_version, task.generator_version) != (
                self.repo,
                self.repo_version,
                self.generator_version,
            ):
                raise ValueError(
                    f"task {task.name!r} is for {task.repo} {task.repo_version} (generator "
                    f"{task.generator_version}), the file for {self.repo} {self.repo_version} "
                    f"(generator {self.generator_version})"
                )
        return self


def task_file(repo: str, folder: Path | None = None) -> Path:
    """The path of ``repo``'s task file (in the shipped folder unless ``folder`` is given)."""
    return (folder or TASK_DATA) / f"{repo}.json"


def read_task_file(path: Path) -> list[SweTask]:
    """Return the tasks in one task file; a malformed file is a :class:`TaskFileError`.

    A file is parsed once while it stays the same (its size and modification time): every
    scripted episode's plan asks for its repository's tasks.
    """
    try:
        stat = path.stat()
    except OSError as error:
        raise TaskFileError(f"cannot read the task file {path}: {error}") from None
    return list(_parsed_task_file(path, stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=32)
def _parsed_task_file(path: Path, mtime_ns: int, size: int) -> tuple[SweTask, ...]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise TaskFileError(f"cannot read the task file {path}: {error}") from None
    except json.JSONDecodeError as error:
        raise TaskFileError(f"the task file {path} is not JSON: {error}") from None
    try:
        parsed = _TaskFile.model_validate(data)
    except ValidationError as error:
        problems = "\n  ".join(validation_problems(error, "file"))
        raise TaskFileError(f"the task file {path} is malformed:\n  {problems}") from None
    if path.stem != parsed.repo:
        raise TaskFileError(
            f"the task file {path} holds tasks of {parsed.repo!r}, not {path.stem!r}"
        )
    return tuple(SweTask(**record.model_dump()) for record in parsed.tasks)


def load_tasks(repo: str | None = None, folder: Path | None = None) -> list[SweTask]:
    """Return the tasks of ``repo`` (every shipped repository's when None), in file order.

    A repository without a task file is a :class:`TaskFileError` naming the command that
    makes one.
    """
    folder = folder or TASK_DATA
    if repo is None:
        return [task for path in sorted(folder.glob("*.json")) for task in read_task_file(path)]
    path = task_file(repo, folder)
    if not path.exists():
        raise TaskFileError(
            f"no task file for {repo!r} ({path}); make one with "
            f"`worldtrace tasks swe synthesize --repo {repo} --count 20`"
        )
    return read_task_file(path)


def write_task_file(
    repo: str, repo_version: str, tasks: Sequence[SweTask], folder: Path | None = None
) -> Path:
    """Write ``tasks`` as the task file of ``repo`` at ``repo_version``; return its path.

    The file is replaced. The tasks are validated as they would be read back (each must be of
    this repository and version), so a file this writes always loads.
    """
    record = {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "repo": repo,
        "repo_version": repo_version,
        "tasks": [
            {field.name: _plain(getattr(task, field.name)) for field in fields(task)}
            for task in tasks
        ],
    }
    try:
        _TaskFile.model_validate(record)
    except ValidationError as error:
        problems = "\n  ".join(validation_problems(error, "file"))
        raise TaskFileError(f"refusing to write invalid tasks for {repo}:\n  {problems}") from None
    path = task_file(repo, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(path)
    return path


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value
