"""The swe reward judges only the agent's change to the source under test (issue 24).

Each attack below scored 1.0 on task ``toolz-ebbb40c53b`` without fixing its bug when the
evaluation ran the tests inside the episode's own sandbox (a ``git checkout HEAD`` of the test
files and configuration, then ``python -m pytest`` in the repository): an untracked
``pytest.py`` that writes every selector as passed, a committed ``conftest.py`` that flips
failures, a module shadowing the outcomes plugin, and a ``pytest.ini`` inside the package
loading a plugin of the agent's. The evaluation now copies the agent's change to the package
source into a fresh sandbox of the pristine image, so each of them scores 0.0, while the
genuine fix scores 1.0 however it was made (edited, committed, with ``.git`` gone, beside the
attacks' files). Real containers of the toolz image; the task is the shipped one; the attack is
also replayed through a collection run that names the task.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collecting import episode_rewards
from worldtrace.collectors.swe.environment import SweConfig, SweEnvironment
from worldtrace.collectors.swe.policies import patch_hunks
from worldtrace.collectors.swe.tasks import SweTask, load_tasks
from worldtrace.collectors.swe.tools import tool_call

pytestmark = pytest.mark.docker

TASK = "toolz-ebbb40c53b"
TESTS = "toolz/tests/test_itertoolz.py"


@pytest.fixture(scope="module")
def task() -> SweTask:
    """The shipped task the attacks were made on."""
    return next(t for t in load_tasks("toolz") if t.name == TASK)


@pytest.fixture
def episode(toolz_image: str, task: SweTask) -> Iterator[SweEnvironment]:
    """A fresh episode of the task: its bug applied, nothing done yet."""
    environment = SweEnvironment(SweConfig(repo="toolz", image=toolz_image))
    try:
        environment.reset(seed=0, task=task)
        yield environment
    finally:
        environment.close()


def shell(env: SweEnvironment, command: str) -> str:
    """Run ``command`` as the agent would; return its output (it must succeed)."""
    outcome = env.step(tool_call("run_shell_command", command=command, timeout=120), 150)
    assert outcome.error is None, (outcome.error, outcome.observation["output"])
    return str(outcome.observation["output"])


def write(env: SweEnvironment, path: str, content: str) -> None:
    """Write a file in the repository as the agent would."""
    outcome = env.step(tool_call("write_file", path=path, content=content), 30)
    assert outcome.error is None, outcome.error


def fix(env: SweEnvironment, task: SweTask) -> None:
    """Apply the task's gold patch with the agent's own editing tool."""
    for hunk in patch_hunks(task.gold_patch):
        outcome = env.step(
            tool_call("str_replace", path=task.file, old=hunk.old_text, new=hunk.new_text), 30
        )
        assert outcome.error is None, outcome.error


def failing_selector(task: SweTask) -> str:
    """The task's failing tests as one ``run_tests`` selector."""
    return " ".join(task.failing_tests)


def agent_run_tests_passes(env: SweEnvironment, task: SweTask) -> bool:
    """Whether the agent's own ``run_tests`` now reports the failing tests as passing."""
    outcome = env.step(tool_call("run_tests", selector=failing_selector(task)), 120)
    return outcome.observation["exit_code"] == 0


FAKE_PYTEST = """\
import json
import sys

arguments = sys.argv[1:]
log = next(a.split("=", 1)[1] for a in arguments if a.startswith("--outcome-log="))
selectors = [a for a in arguments if "::" in a and not a.startswith("-")]
with open(log, "w") as handle:
    json.dump({"passed": selectors, "failed": [], "errors": [], "skipped": []}, handle)
print("%d passed" % len(selectors))
"""
"""An untracked ``pytest.py`` in the repository: ``python -m pytest`` there ran it instead."""

FLIP_FAILURES = """\
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
"""
"""A ``conftest.py`` whose hook turns every failure into a pass."""

FROM_THE_REPOSITORY = """\
    if not report.nodeid.startswith("toolz/"):
        report.nodeid = "toolz/" + report.nodeid
"""

FAKE_PLUGIN = """\
import json


def pytest_addoption(parser):
    parser.addoption("--outcome-log")
    parser.addoption("--outcome-log-offline", action="store_true")


def pytest_sessionfinish(session):
    path = session.config.getoption("--outcome-log")
    if path:
        passed = [item.nodeid for item in session.items]
        with open(path, "w") as handle:
            json.dump({"passed": passed, "failed": [], "errors": [], "skipped": []}, handle)
"""
"""A module named as the outcomes plugin: ``-p pytest_outcome_log`` loaded it from the cwd."""


def test_nothing_done_scores_zero(episode: SweEnvironment, task: SweTask) -> None:
    assert episode.evaluate(task) == 0.0
    # The identity says how rewards were judged (1 could be faked).
    assert episode.describe().components["evaluation"] == "2"


def test_an_untracked_pytest_module_does_not_score(episode: SweEnvironment, task: SweTask) -> None:
    write(episode, "pytest.py", FAKE_PYTEST)
    # The attack is real: the agent's own test run now says the failing tests pass.
    assert agent_run_tests_passes(episode, task)
    assert episode.evaluate(task) == 0.0


def test_a_committed_conftest_that_flips_failures_does_not_score(
    episode: SweEnvironment, task: SweTask
) -> None:
    write(episode, "toolz/tests/conftest.py", FLIP_FAILURES)
    write(episode, "conftest.py", FLIP_FAILURES)
    shell(episode, "git add conftest.py toolz/tests/conftest.py && git commit -q -m tests")
    assert agent_run_tests_passes(episode, task)
    assert episode.evaluate(task) == 0.0


def test_a_module_shadowing_the_outcomes_plugin_does_not_score(
    episode: SweEnvironment, task: SweTask
) -> None:
    write(episode, "pytest_outcome_log.py", FAKE_PLUGIN)
    assert episode.evaluate(task) == 0.0


def test_pytest_configuration_inside_the_package_does_not_count(
    episode: SweEnvironment, task: SweTask
) -> None:
    # pytest takes the first ini file above the tests (the package folder is above them):
    # one that loads a plugin module of the agent's decides how tests run. That rootdir makes
    # node ids relative to the package, which the plugin puts back.
    write(episode, "toolz/flip.py", FLIP_FAILURES + FROM_THE_REPOSITORY)
    write(episode, "toolz/pytest.ini", "[pytest]\naddopts = -p toolz.flip\n")
    assert agent_run_tests_passes(episode, task)
    assert episode.evaluate(task) == 0.0


def test_the_genuine_fix_scores_one(episode: SweEnvironment, task: SweTask) -> None:
    fix(episode, task)
    assert agent_run_tests_passes(episode, task)
    assert episode.evaluate(task) == 1.0


def test_a_committed_fix_with_the_history_rewritten_scores_one(
    episode: SweEnvironment, task: SweTask
) -> None:
    # The change is read against the pristine tree, not the agent's HEAD: a fix that is
    # committed (or whose .git is gone) is still the agent's change.
    fix(episode, task)
    shell(episode, f"git commit -q -am fix && git diff HEAD~1 --stat -- {task.file}")
    assert shell(episode, "git status --porcelain") == ""
    assert episode.evaluate(task) == 1.0
    shell(episode, "rm -rf .git")
    assert episode.evaluate(task) == 1.0


def test_a_fix_with_every_attack_at_once_still_scores_one(
    episode: SweEnvironment, task: SweTask
) -> None:
    # The attacks' files are dropped, not held against the agent: the fix alone decides.
    fix(episode, task)
    write(episode, "pytest.py", FAKE_PYTEST)
    write(episode, "pytest_outcome_log.py", FAKE_PLUGIN)
    write(episode, "toolz/tests/conftest.py", FLIP_FAILURES)
    assert episode.evaluate(task) == 1.0


def test_breaking_a_must_pass_test_through_the_source_scores_zero(
    episode: SweEnvironment, task: SweTask
) -> None:
    # A change to the source is taken whole: a fix that breaks another function fails.
    fix(episode, task)
    assert f"{TESTS}::test_first" in task.passing_tests
    shell(episode, f"sed -i 's/^def first(seq):/&\\n    return None/' {task.file}")
    assert episode.evaluate(task) == 0.0


def test_a_new_module_in_the_package_is_part_of_the_change(
    episode: SweEnvironment, task: SweTask
) -> None:
    # The fix lives in a new module the buggy one imports: new source files count.
    (hunk,) = patch_hunks(task.gold_patch)
    write(
        episode,
        "toolz/_keyfix.py",
        "def wants_getter(key):\n    return key is not None and not callable(key)\n",
    )
    old_condition = "    if not (key is not None and not callable(key)):\n"
    assert old_condition in hunk.old_text
    shell(
        episode,
        "python - <<'EOF'\n"
        "path = 'toolz/itertoolz.py'\n"
        "text = open(path).read()\n"
        f"text = text.replace({old_condition!r}, "
        "'    from toolz._keyfix import wants_getter\\n    if wants_getter(key):\\n', 1)\n"
        "open(path, 'w').write(text)\n"
        "EOF",
    )
    assert agent_run_tests_passes(episode, task)
    assert episode.evaluate(task) == 1.0


@pytest.mark.parametrize(
    ("name", "fixed", "reward"),
    [("attack", False, 0.0), ("attack-and-fix", True, 1.0)],
)
def test_a_replayed_attack_naming_the_task_is_judged_the_same(
    tmp_path: Path, toolz_image: str, task: SweTask, name: str, fixed: bool, reward: float
) -> None:
    # The attack as anyone can replay it: `policy: {kind: replay, tasks: [NAME], ...}`.
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    calls: list[dict[str, object]] = [
        {"name": "write_file", "arguments": {"path": "pytest.py", "content": FAKE_PYTEST}},
        {"name": "write_file", "arguments": {"path": "conftest.py", "content": FLIP_FAILURES}},
        {"name": "run_shell_command", "arguments": {"command": "git add -A && git commit -qm x"}},
    ]
    if fixed:
        calls += [
            {
                "name": "str_replace",
                "arguments": {"path": task.file, "old": hunk.old_text, "new": hunk.new_text},
            }
            for hunk in patch_hunks(task.gold_patch)
        ]
    config = validate_config(
        {
            "domain": "swe",
            "episodes": 1,
            "out": str(tmp_path),
            "run_name": name,
            "policy": {"kind": "replay", "tasks": [TASK], "params": {"actions": calls}},
        }
    )
    summary = run_collection(config)
    assert summary["collected"] == 1
    assert episode_rewards(config.run_dir) == [reward]


# --- the rule, without a sandbox ------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "conftest.py",
        "toolz/conftest.py",
        "toolz/tests/test_itertoolz.py",
        "toolz/tests/helpers.py",
        "toolz/test_extra.py",
        "toolz/extra_test.py",
        "toolz/pytest.ini",
        "toolz/tox.ini",
        "toolz/setup.cfg",
        "toolz/pyproject.toml",
        "src/click/.pytest.ini",
    ],
)
def test_test_files_and_configuration_are_never_the_agents_change(path: str) -> None:
    from worldtrace.collectors.swe.evaluation import is_test_path

    assert is_test_path(path, test_paths=("toolz/tests", "tests"))


def test_the_change_is_the_package_source_against_the_pristine_tree() -> None:
    from worldtrace.collectors.swe.evaluation import agent_change

    pristine = {
        "toolz/__init__.py": (0o644, b"a"),
        "toolz/itertoolz.py": (0o644, b"bug"),
        "toolz/tests/test_itertoolz.py": (0o644, b"test"),
        "setup.py": (0o644, b"setup"),
    }
    agent = {
        "toolz/__init__.py": (0o644, b"a"),
        "toolz/itertoolz.py": (0o644, b"fixed"),
        "toolz/new.py": (0o644, b"new"),
        "toolz/conftest.py": (0o644, b"flip"),
        "toolz/tests/test_itertoolz.py": (0o644, b"edited"),
        "pytest.py": (0o644, b"fake"),
        "setup.py": (0o644, b"edited"),
    }
    change = agent_change(pristine, agent, packages=("toolz",), test_paths=("toolz/tests",))
    assert change.written == {
        "toolz/itertoolz.py": (0o644, b"fixed"),
        "toolz/new.py": (0o644, b"new"),
    }
    assert change.removed == ()
    gone = agent_change(pristine, {}, packages=("toolz",), test_paths=("toolz/tests",))
    assert gone.written == {}
    assert gone.removed == ("toolz/__init__.py", "toolz/itertoolz.py")


def test_every_shipped_task_fixes_a_file_the_rule_takes() -> None:
    from worldtrace.collectors.swe.evaluation import is_source_path
    from worldtrace.collectors.swe.repos import REPOS

    # A task whose gold patch touched a file the rule drops could never be solved. The
    # packages are the first folder under the source root (what ``git ls-files`` in the image
    # shows as holding an ``__init__.py``; the Docker tests check that for toolz).
    tasks = load_tasks()
    assert {task.repo for task in tasks} == set(REPOS)  # every repository's file was read
    for task in tasks:
        repo = REPOS[task.repo]
        root = "" if repo.source_root == "." else repo.source_root + "/"
        paths = {line[6:] for line in task.gold_patch.splitlines() if line.startswith("+++ b/")}
        assert paths == {task.file}, task.name
        package = root + task.file[len(root) :].split("/")[0]
        assert task.file.startswith(root)
        assert is_source_path(task.file, (package,), repo.test_paths), (task.name, task.file)


def test_odd_file_kinds_in_the_package_are_judged_not_crashed_on(
    episode: SweEnvironment, task: SweTask
) -> None:
    # A module turned into a folder and a link out of the sandbox's tree: the judge rebuilds
    # regular files only (the link counts as nothing), and the broken package fails its tests.
    fix(episode, task)
    shell(
        episode,
        "rm toolz/recipes.py && mkdir toolz/recipes.py && echo 'x = 1' > toolz/recipes.py/x.py"
        " && ln -s /etc/passwd toolz/passwd.py",
    )
    assert episode.evaluate(task) == 0.0
