"""Synthesized swe tasks: the checked-in task files, their patches against the real test suites,
a synthesis run in a real container, the instruction's wording, and task-file errors.

Tests that run tests share one toolz container (``toolz``), reset between tests with
``git checkout -- . && git clean -fdq``.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from worldtrace.collectors.swe.mutations import MUTATION_KINDS, find_mutations
from worldtrace.collectors.swe.repos import (
    REPOS,
    REPOSITORY_PATH,
    RUN_TESTS,
    image_definition,
)
from worldtrace.collectors.swe.synthesis import (
    MAX_TASKS_PER_FUNCTION,
    failure_excerpts,
    ordered_candidates,
    synthesize,
    write_instruction,
)
from worldtrace.collectors.swe.tasks import (
    GENERATOR_VERSION,
    PASSING_TESTS_CAP,
    TASK_DATA,
    SweTask,
    TaskFileError,
    load_tasks,
    read_task_file,
    write_task_file,
)
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.images import ensure_image
from worldtrace.sandboxes.limits import Limits

NO_BYTE_CODE = {"PYTHONDONTWRITEBYTECODE": "1"}


# --- the checked-in task files -----------------------------------------------------------------


@pytest.mark.parametrize("repo", sorted(REPOS))
def test_checked_in_tasks_load_and_are_spread(repo: str) -> None:
    tasks = load_tasks(repo)
    assert len(tasks) >= 20
    assert all(task.generator_version == GENERATOR_VERSION for task in tasks)
    assert all(task.repo == repo and task.repo_version == REPOS[repo].version for task in tasks)
    assert len({task.name for task in tasks}) == len(tasks)
    for task in tasks:
        assert task.failing_tests, task.name
        assert not set(task.failing_tests) & set(task.passing_tests), task.name
        assert len(task.passing_tests) <= PASSING_TESTS_CAP
        assert task.category in MUTATION_KINDS
        assert_no_leak(task)
    per_function = Counter((task.file, task.function) for task in tasks)
    assert max(per_function.values()) <= MAX_TASKS_PER_FUNCTION
    assert len(per_function) >= len(tasks) // 2
    assert len({task.category for task in tasks}) >= 5


def assert_no_leak(task: SweTask) -> None:
    """The instruction names neither the changed module nor any line of the change."""
    assert task.file not in task.instruction
    assert not re.search(rf"(?<![\w.-]){re.escape(Path(task.file).name)}\b", task.instruction)
    for line in task.bug_patch.splitlines():
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            changed = line[1:].strip()
            assert len(changed) < 4 or changed not in task.instruction, (task.name, changed)


def test_every_task_has_the_generator_version_of_its_file() -> None:
    paths = sorted(TASK_DATA.glob("*.json"))
    # One task file per shipped repository: an empty or misplaced folder is a failure here,
    # not a loop over nothing.
    assert {path.stem for path in paths} == set(REPOS), (TASK_DATA, paths)
    for path in paths:
        data = json.loads(path.read_text(encoding="utf-8"))
        assert data["generator"] == "worldtrace-swe-synth"
        assert data["generator_version"] == GENERATOR_VERSION
        assert {task["generator_version"] for task in data["tasks"]} == {GENERATOR_VERSION}


# --- patches against real repositories ---------------------------------------------------------


@pytest.fixture(scope="module")
def toolz() -> Iterator[DockerSandbox]:
    """One toolz sandbox shared by the tests of this module that run tests."""
    definition = image_definition("toolz")
    ensure_image(definition)
    with DockerSandbox(definition.tag, limits=Limits(cpus=2, memory_mb=2048)) as sandbox:
        yield sandbox


@pytest.fixture
def clean_toolz(toolz: DockerSandbox) -> Iterator[DockerSandbox]:
    yield toolz
    shell(toolz, "git checkout -q -- . && git clean -fdq")


def shell(sandbox: DockerSandbox, command: str) -> str:
    result = sandbox.exec(command, workdir=REPOSITORY_PATH, user="user", env=NO_BYTE_CODE)
    assert result.exit_code == 0, (command, result.text, result.stderr)
    return result.text


def put_patches(sandbox: DockerSandbox, patches: dict[str, str]) -> None:
    """Copy ``{name: diff}`` into /tmp/patches/ in one archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, text in patches.items():
            data = text.encode()
            info = tarfile.TarInfo(f"patches/{name}")
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    assert sandbox.container.put_archive("/tmp", buffer.getvalue())


def run_tests(sandbox: DockerSandbox, tests: tuple[str, ...]) -> dict[str, list[str]]:
    result = sandbox.exec(
        [*RUN_TESTS, "--json", *tests],
        timeout=120,
        workdir=REPOSITORY_PATH,
        user="user",
        env=NO_BYTE_CODE,
    )
    return json.loads(result.text.strip().splitlines()[-1])


@pytest.mark.docker
def test_a_checked_in_task_fails_with_its_bug_and_passes_after_its_gold_patch(
    clean_toolz: DockerSandbox,
) -> None:
    tasks = load_tasks("toolz")
    # Two tasks of different kinds, one with many failing tests if there is one.
    chosen = [max(tasks, key=lambda task: len(task.failing_tests))]
    chosen += [next(task for task in tasks if task.category != chosen[0].category)]
    for index, task in enumerate(chosen):
        put_patches(clean_toolz, {f"bug{index}": task.bug_patch, f"gold{index}": task.gold_patch})
        shell(clean_toolz, f"git apply /tmp/patches/bug{index}")
        assert shell(clean_toolz, "git status --porcelain").strip() == f"M {task.file}"
        with_bug = run_tests(clean_toolz, task.failing_tests + task.passing_tests)
        assert sorted(with_bug["failed"] + with_bug["errors"]) == sorted(task.failing_tests)
        assert sorted(with_bug["passed"]) == sorted(task.passing_tests)
        shell(clean_toolz, f"git apply /tmp/patches/gold{index}")
        fixed = run_tests(clean_toolz, task.failing_tests + task.passing_tests)
        assert sorted(fixed["passed"]) == sorted(task.failing_tests + task.passing_tests)
        assert not fixed["failed"] and not fixed["errors"]
        assert shell(clean_toolz, "git status --porcelain") == ""


@pytest.mark.docker
@pytest.mark.parametrize("repo", sorted(REPOS))
def test_bug_and_gold_patches_are_inverse(repo: str) -> None:
    """Every task's bug applies to the clean repository and its gold patch undoes it exactly."""
    definition = image_definition(repo)
    ensure_image(definition)
    tasks = load_tasks(repo)
    with DockerSandbox(definition.tag, limits=Limits(cpus=1, memory_mb=512)) as sandbox:
        patches = {}
        for index, task in enumerate(tasks):
            patches[f"{index}.bug"], patches[f"{index}.gold"] = task.bug_patch, task.gold_patch
        put_patches(sandbox, patches)
        script = (
            f"for i in $(seq 0 {len(tasks) - 1}); do "
            'git apply /tmp/patches/$i.bug || { echo "bug $i"; exit 1; }; '
            'test -n "$(git status --porcelain)" || { echo "no change $i"; exit 1; }; '
            'git apply /tmp/patches/$i.gold || { echo "gold $i"; exit 1; }; '
            'test -z "$(git status --porcelain)" || { echo "not clean $i"; exit 1; }; '
            "done"
        )
        assert shell(sandbox, script) == ""


@pytest.mark.docker
def test_synthesize_returns_validated_tasks(clean_toolz: DockerSandbox) -> None:
    seen = []
    tasks = synthesize(
        "toolz", count=2, seed=11, progress=seen.append, files=["toolz/dicttoolz.py"]
    )  # (the order of the candidates is deterministic: see test_candidates_take_kinds_in_turn)
    assert len(tasks) == 2 and seen[-1].validated == 2
    assert seen[-1].tried >= 2 and 0 < seen[-1].acceptance_rate <= 1
    for task in tasks:
        assert task.file == "toolz/dicttoolz.py" and task.repo == "toolz"
        assert task.failing_tests and task.category in MUTATION_KINDS
        assert_no_leak(task)
    # And they hold in a sandbox of their own: the bug fails its tests, the gold patch fixes it.
    task = tasks[0]
    put_patches(clean_toolz, {"bug": task.bug_patch, "gold": task.gold_patch})
    shell(clean_toolz, "git apply /tmp/patches/bug")
    with_bug = run_tests(clean_toolz, task.failing_tests)
    assert sorted(with_bug["failed"] + with_bug["errors"]) == sorted(task.failing_tests)
    shell(clean_toolz, "git apply /tmp/patches/gold")
    assert not run_tests(clean_toolz, task.failing_tests + task.passing_tests)["failed"]


def test_candidates_take_kinds_in_turn() -> None:
    source = (Path(__file__).parent / "test_swe_mutations.py").read_text(encoding="utf-8")
    mutations = find_mutations(source, "tests/swe/test_swe_mutations.py")
    order = list(ordered_candidates(mutations, seed=5))
    assert order == list(ordered_candidates(mutations, seed=5))
    assert order != list(ordered_candidates(mutations, seed=6))
    assert sorted(order, key=mutations.index) == mutations
    kinds = {m.kind for m in mutations}
    assert {m.kind for m in order[: len(kinds)]} == kinds  # each kind before any twice


# --- the instruction ---------------------------------------------------------------------------

PYTEST_OUTPUT = """\
=================================== FAILURES ===================================
_____________________________ test_sliding_window ______________________________
toolz/tests/test_itertoolz.py:325: in test_sliding_window
    assert list(sliding_window(2, [1, 2, 3, 4])) == [(1, 2), (2, 3), (3, 4)]
toolz/itertoolz.py:676: in sliding_window
    return zip(*(collections.deque(0, itertools.islice(it, i)) or it
E   TypeError: an integer is required
____________________________ TestWindow.test_short _____________________________
toolz/tests/test_itertoolz.py:330: in test_short
    assert list(sliding_window(3, [1, 2])) == []
E   AssertionError: raised in /home/user/repo/toolz/itertoolz.py
E   assert [1] == []
=========================== short test summary info ============================
FAILED toolz/tests/test_itertoolz.py::test_sliding_window - TypeError: an int...
"""
FAILING = (
    "toolz/tests/test_itertoolz.py::test_sliding_window",
    "toolz/tests/test_itertoolz.py::TestWindow::test_short",
)
CHANGED = ["return zip(*(collections.deque(0, itertools.islice(it, i)) or it"]


def test_failure_excerpts_quote_the_test_frame_and_errors_only() -> None:
    excerpts = failure_excerpts(PYTEST_OUTPUT, FAILING)
    assert excerpts[FAILING[0]] == [
        "toolz/tests/test_itertoolz.py:325: in test_sliding_window",
        "    assert list(sliding_window(2, [1, 2, 3, 4])) == [(1, 2), (2, 3), (3, 4)]",
        "E   TypeError: an integer is required",
    ]  # the library's frame (the mutated line) is not quoted
    assert excerpts[FAILING[1]][-1] == "E   assert [1] == []"


def test_the_instruction_tells_the_failure_not_the_change() -> None:
    text = write_instruction(PYTEST_OUTPUT, FAILING, "toolz/itertoolz.py", CHANGED, 0, "x")
    assert "TypeError: an integer is required" in text and FAILING[1] in text
    assert "collections.deque" not in text
    assert "/itertoolz.py" not in text and "raised in" not in text
    assert "test_itertoolz.py" in text  # the test file may be named
    # Deterministic for a seed, and the wording varies with it.
    assert text == write_instruction(PYTEST_OUTPUT, FAILING, "toolz/itertoolz.py", CHANGED, 0, "x")
    wordings = {
        write_instruction(PYTEST_OUTPUT, FAILING, "toolz/itertoolz.py", CHANGED, seed, "x")
        for seed in range(8)
    }
    assert len(wordings) >= 4


# --- task files --------------------------------------------------------------------------------


def a_task(**changes: object) -> SweTask:
    task = SweTask(
        name="toolz-0123456789",
        instruction="test_x fails",
        category="flip-comparison",
        repo="toolz",
        repo_version="1.0.0",
        file="toolz/itertoolz.py",
        function="unique",
        failing_tests=("toolz/tests/test_itertoolz.py::test_unique",),
        passing_tests=("toolz/tests/test_itertoolz.py::test_merge_sorted",),
        bug_patch="--- a/x\n+++ b/x\n",
        gold_patch="--- b/x\n+++ a/x\n",
    )
    return replace(task, **changes)


def test_a_task_file_round_trips(tmp_path: Path) -> None:
    tasks = [a_task(), a_task(name="toolz-abcdef0123", category="off-by-one")]
    path = write_task_file("toolz", "1.0.0", tasks, folder=tmp_path)
    assert path == tmp_path / "toolz.json"
    assert load_tasks("toolz", folder=tmp_path) == tasks
    assert load_tasks(folder=tmp_path) == tasks


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        ("[]", "file: Input should be a valid dictionary"),
        (
            {
                "generator": "worldtrace-swe-synth",
                "generator_version": "1",
                "repo": "toolz",
                "repo_version": "1.0.0",
                "tasks": [{"name": "t"}],
            },
            "tasks.0.instruction: Field required",
        ),
        ("task:failing_tests=[]", "tasks.0.failing_tests: Tuple should have at least 1 item"),
        ("task:category=rename-variable", "tasks.0.category: unknown mutation kind"),
        ("task:repo_version=0.9", "is for toolz 0.9"),
        ("file:repo=sqlparse", "holds tasks of 'sqlparse', not 'toolz'"),
        ("file:generator=someone-else", "generator: Input should be 'worldtrace-swe-synth'"),
    ],
)
def test_a_malformed_task_file_is_a_clear_error(
    tmp_path: Path, content: object, message: str
) -> None:
    good = {
        "generator": "worldtrace-swe-synth",
        "generator_version": GENERATOR_VERSION,
        "repo": "toolz",
        "repo_version": "1.0.0",
        "tasks": [json.loads(json.dumps(a_task().__dict__))],
    }
    if isinstance(content, str) and content.startswith(("task:", "file:")):
        where, _, assignment = content.partition(":")
        key, _, value = assignment.partition("=")
        target = good["tasks"][0] if where == "task" else good
        target[key] = json.loads(value) if value.startswith("[") else value
        if key == "repo":
            for task in good["tasks"]:
                task["repo"] = value
        text = json.dumps(good)
    else:
        text = content if isinstance(content, str) else json.dumps(content)
    path = tmp_path / "toolz.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskFileError, match=re.escape(message)) as caught:
        read_task_file(path)
    assert str(path) in str(caught.value)


def test_a_repository_without_a_task_file_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="worldtrace tasks swe synthesize --repo toolz"):
        load_tasks("toolz", folder=tmp_path)
