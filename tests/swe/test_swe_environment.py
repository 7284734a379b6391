"""The swe environment against real containers of the toolz image: every tool, its errors,
timeouts, the task's hidden bug, evaluation, isolation of the driver, and a lost sandbox.

Read-mostly tests share one container (``env``); each test that writes touches files of its
own, so the order of the tests does not matter. Tests that need a clean repository or end
their sandbox start their own.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from worldtrace.collectors.swe.environment import SweConfig, SweEnvironment
from worldtrace.collectors.swe.render import SweRenderer
from worldtrace.collectors.swe.tools import tool_call
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas import Action

pytestmark = pytest.mark.docker

IMAGE = "worldtrace/swe-toolz:latest"
ITERTOOLZ = "toolz/itertoolz.py"
TEST_ITERTOOLZ = "toolz/tests/test_itertoolz.py"


@pytest.fixture(scope="module")
def swe_image(toolz_image: str) -> str:
    """The toolz image, built if its definition (the driver included) changed."""
    assert toolz_image == IMAGE
    return IMAGE


@pytest.fixture(scope="module")
def env(swe_image: str) -> Iterator[SweEnvironment]:
    environment = SweEnvironment(SweConfig(repo="toolz", image=swe_image))
    environment.reset(seed=0, task=None)
    yield environment
    environment.close()


def run(env: SweEnvironment, name: str, timeout_s: float = 30, **arguments: object):
    return env.step(tool_call(name, **arguments), timeout_s)


def as_root(env: SweEnvironment, script: str) -> str:
    result = env.sandbox.exec(["bash", "-c", script], timeout=20)
    assert result.exit_code == 0, result.stderr
    return result.text


def as_user(env: SweEnvironment, script: str) -> str:
    result = env.sandbox.exec(
        ["bash", "-c", script], timeout=20, workdir="/home/user/repo", user="user"
    )
    assert result.exit_code == 0, result.stderr
    return result.text


def sha256(env: SweEnvironment, path: str) -> str:
    return hashlib.sha256(env.sandbox.get_file(f"/home/user/repo/{path}")).hexdigest()


# --- reset and identity ---------------------------------------------------------------------


def test_reset_orients_the_agent_and_describe_names_the_repository(env: SweEnvironment) -> None:
    first = env._last
    assert first is not None
    assert first["tool"] is None
    assert first["output"].startswith("Repository toolz 1.0.0 in /home/user/repo")
    assert "nothing to commit, working tree clean" in first["output"]
    assert "toolz/\n" in first["output"] and ".git" not in first["output"]
    ref = env.describe()
    image = env.sandbox.container.image
    assert ref.name == "swe/toolz"
    assert ref.version == image.id == ref.components["image_digest"]
    assert ref.components["repo"] == "toolz"
    assert ref.components["repo_version"] == "1.0.0" == image.labels["worldtrace.swe.version"]
    assert ref.components["image"] == IMAGE
    assert ref.components["python"].startswith("3.")
    assert ref.config_hash == SweConfig(repo="toolz", image=IMAGE).config_hash()


# --- the file tools -------------------------------------------------------------------------


def test_read_file_shows_numbered_lines_like_cat_n(env: SweEnvironment) -> None:
    whole = run(env, "read_file", path=ITERTOOLZ)
    assert whole.error is None
    assert whole.observation["output"] == as_user(env, f"cat -n {ITERTOOLZ}")
    part = run(env, "read_file", path=ITERTOOLZ, start_line=378, end_line=386)
    assert part.observation["output"] == as_user(env, f"cat -n {ITERTOOLZ} | sed -n 378,386p")
    assert part.observation["output"].startswith("   378\tdef second(seq):\n")
    # An end past the file is the end of the file.
    tail = run(env, "read_file", path=ITERTOOLZ, start_line=1000, end_line=10**6)
    assert tail.observation["output"] == as_user(env, f"cat -n {ITERTOOLZ} | sed -n '1000,$p'")
    assert part.observation["git_status"] == "" and part.observation["exit_code"] is None


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"path": "no/such.py"}, "no/such.py: No such file or directory"),
        ({"path": "toolz"}, "toolz: Is a directory (use list_dir)"),
        ({"path": ITERTOOLZ, "start_line": 100000}, f"{ITERTOOLZ}: start_line 100000 is past"),
        ({"path": "/bin/true"}, "/bin/true: binary file"),
    ],
)
def test_read_file_errors(env: SweEnvironment, arguments: dict, error: str) -> None:
    outcome = run(env, "read_file", **arguments)
    assert outcome.error is not None and outcome.error.startswith(error)
    assert outcome.observation["error"] == outcome.error
    assert outcome.observation["output"] == ""
    assert not outcome.truncated
    rendered = SweRenderer().observation(outcome.observation)
    assert rendered.text == f"[error: {outcome.error}]\n"


def test_write_file_then_read_it_back(env: SweEnvironment) -> None:
    content = "première ligne\nsecond line\n"
    written = run(env, "write_file", path="scratch/notes/a.txt", content=content)
    assert written.error is None
    assert (
        written.observation["output"]
        == f"Wrote {len(content.encode())} bytes to scratch/notes/a.txt\n"
    )
    assert "?? scratch/\n" in written.observation["git_status"]
    assert env.sandbox.get_file("/home/user/repo/scratch/notes/a.txt") == content.encode()
    owner = as_root(env, "stat -c %U /home/user/repo/scratch/notes/a.txt").strip()
    assert owner == "user"
    back = run(env, "read_file", path="scratch/notes/a.txt", start_line=2)
    assert back.observation["output"] == "     2\tsecond line\n"


def test_str_replace_absent_or_ambiguous_is_an_error_and_the_file_is_untouched(
    env: SweEnvironment,
) -> None:
    before = sha256(env, ITERTOOLZ)
    absent = run(env, "str_replace", path=ITERTOOLZ, old="no such text anywhere", new="x")
    assert absent.error == f"old string not found in {ITERTOOLZ}"
    assert sha256(env, ITERTOOLZ) == before
    count = int(as_user(env, f"grep -o 'seq = iter(seq)' {ITERTOOLZ} | wc -l"))
    assert count > 1
    ambiguous = run(env, "str_replace", path=ITERTOOLZ, old="seq = iter(seq)", new="seq = []")
    assert ambiguous.error is not None
    assert ambiguous.error.startswith(f"old string occurs {count} times in {ITERTOOLZ}")
    assert sha256(env, ITERTOOLZ) == before
    assert ITERTOOLZ not in ambiguous.observation["git_status"]


def test_str_replace_unique_edits_in_place_and_shows_the_context(env: SweEnvironment) -> None:
    path = "toolz/recipes.py"
    mode_before = as_root(env, f"stat -c '%a %U %i' /home/user/repo/{path}")
    original = env.sandbox.get_file(f"/home/user/repo/{path}").decode()
    old = original.splitlines()[0] + "\n"
    assert original.count(old) == 1
    outcome = run(env, "str_replace", path=path, old=old, new="# edited by the test\n" + old)
    assert outcome.error is None
    assert outcome.observation["output"].startswith(
        f"Edited {path}:\n     1\t# edited by the test\n"
    )
    assert f" M {path}\n" in outcome.observation["git_status"]
    assert f"{path} | 1 +" in outcome.observation["git_diff_stat"]
    edited = env.sandbox.get_file(f"/home/user/repo/{path}").decode()
    assert edited == "# edited by the test\n" + original
    # The same file, its owner and mode kept.
    assert as_root(env, f"stat -c '%a %U %i' /home/user/repo/{path}") == mode_before


def test_search_and_list_dir(env: SweEnvironment) -> None:
    hits = run(env, "search", pattern=r"^def (first|second)\(", glob="*.py")
    assert hits.error is None
    lines = hits.observation["output"].splitlines()
    assert f"{ITERTOOLZ}:369:def first(seq):" in lines
    assert f"{ITERTOOLZ}:378:def second(seq):" in lines
    expected = as_user(
        env, r"grep -rnE --include='*.py' '^def (first|second)\(' . | sed 's|^\./||'"
    )
    assert sorted(lines) == sorted(expected.splitlines())
    inside = run(env, "search", pattern=r"second\(", path="toolz/tests")
    assert (
        f"{TEST_ITERTOOLZ}:167:    assert second('ABCDE') == 'B'\n" in inside.observation["output"]
    )
    assert all(
        line.startswith("toolz/tests/") for line in inside.observation["output"].splitlines()
    )
    # Hits come by file and line, whatever order the file system lists folders in (grep's
    # own order differed between two fresh containers of the same image).
    wide = run(env, "search", pattern=r"^def ", path="toolz")
    hits = [re.match(r"^(.+?):(\d+):", line) for line in wide.observation["output"].splitlines()]
    places = [(hit.group(1), int(hit.group(2))) for hit in hits if hit]
    assert len({path for path, _ in places}) > 3 and places == sorted(places)
    none = run(env, "search", pattern="no_such_identifier_anywhere_42")
    assert (none.error, none.observation["output"]) == (None, "No matches found.\n")
    bad = run(env, "search", pattern="(unclosed")
    assert bad.error is not None and "Unmatched (" in bad.error

    listing = run(env, "list_dir")
    entries = listing.observation["output"].splitlines()
    assert entries == sorted(entries)
    assert "toolz/" in entries and "setup.py" in entries and ".git/" not in entries
    names = as_user(env, "ls -A").split()
    assert sorted(entry.rstrip("/") for entry in entries) == sorted(set(names) - {".git"})
    missing = run(env, "list_dir", path="nowhere")
    assert missing.error == "nowhere: No such file or directory"


# --- shell commands -------------------------------------------------------------------------


def test_shell_output_is_interleaved_in_order_with_the_exit_code(env: SweEnvironment) -> None:
    command = "for i in 1 2 3; do echo out$i; echo err$i >&2; done; exit 7"
    outcome = run(env, "run_shell_command", command=command)
    assert outcome.observation["output"] == "out1\nerr1\nout2\nerr2\nout3\nerr3\n"
    assert outcome.observation["exit_code"] == 7
    assert outcome.error == "exit status 7"
    rendered = SweRenderer().observation(outcome.observation)
    assert rendered.text.endswith("err3\n[exit code: 7]\n")
    assert rendered.meta["exit_code"] == 7
    who = run(env, "run_shell_command", command="id -un; pwd; command -v python")
    assert who.observation["output"] == "user\n/home/user/repo\n/opt/swe-venv/bin/python\n"
    assert who.error is None


def test_a_hanging_command_times_out_and_the_next_step_works(env: SweEnvironment) -> None:
    started = time.monotonic()
    outcome = run(env, "run_shell_command", command="echo before; sleep 600", timeout=2)
    assert time.monotonic() - started < 6
    assert outcome.observation["timed_out"] is True
    assert outcome.observation["exit_code"] is None
    assert outcome.error == "timed out after 2s"
    assert not outcome.truncated
    rendered = SweRenderer().observation(outcome.observation)
    assert rendered.text == "before\n[timed out after 2s]\n"
    # The step's timeout caps the command's own.
    capped = run(env, "run_shell_command", timeout_s=1.5, command="sleep 600", timeout=600)
    assert capped.error == "timed out after 1.5s"
    # The whole process group went: no sleep is left.
    assert "sleep 600" not in as_root(env, "ps -eo args")
    after = run(env, "run_shell_command", command="echo after")
    assert (after.error, after.observation["output"]) == (None, "after\n")


def test_a_background_process_holding_the_output_cannot_hang_the_step(
    env: SweEnvironment,
) -> None:
    started = time.monotonic()
    outcome = run(env, "run_shell_command", command="sleep 600 & echo started")
    assert time.monotonic() - started < 4
    assert (outcome.error, outcome.observation["output"]) == (None, "started\n")
    # Even one that left the process group (its own session) cannot.
    started = time.monotonic()
    escaped = run(env, "run_shell_command", command="setsid sleep 300 & echo escaped")
    assert time.monotonic() - started < 4
    assert escaped.observation["output"] == "escaped\n"
    # A background job that redirects its output is left running, as in a shell.
    run(env, "run_shell_command", command="nohup sleep 200 >/dev/null 2>&1 &")
    assert "sleep 200" in as_root(env, "ps -eo args")


def test_long_output_is_kept_in_the_raw_record_and_cut_in_the_text(env: SweEnvironment) -> None:
    outcome = run(env, "run_shell_command", command="python -c \"print('x' * 40000 + 'END')\"")
    raw = outcome.observation
    assert raw["output"] == "x" * 40000 + "END\n"
    rendered = SweRenderer().observation(raw)
    assert "\n[... 24004 characters truncated ...]\n" in rendered.text
    assert rendered.text.endswith("xEND\n[exit code: 0]\n")
    assert rendered.meta["output_chars"] == 40004
    assert rendered.meta["git_status"] == raw["git_status"]
    assert rendered.meta["wall_s"] == raw["wall_s"] > 0
    # A flood is kept up to the driver's capture limit (1 MiB): head and tail, the rest counted.
    flood = run(env, "run_shell_command", command="yes | head -c 3000000; echo; echo LAST")
    kept = flood.observation["output"]
    dropped = 3_000_000 + len("\nLAST\n") - (1 << 20)
    assert flood.observation["output_dropped_bytes"] == dropped
    assert kept.startswith("y\ny\n") and kept.endswith("y\n\nLAST\n")
    marker = f"\n[... {dropped} bytes of output not kept ...]\n"
    assert len(kept) == (1 << 20) + len(marker) and marker in kept


def test_a_huge_file_read_keeps_head_and_tail_in_the_raw_record(env: SweEnvironment) -> None:
    as_user(env, "seq 1 300000 > big.txt")
    outcome = run(env, "read_file", path="big.txt")
    raw = outcome.observation
    assert outcome.error is None
    assert raw["output"].startswith("     1\t1\n     2\t2\n")
    assert raw["output"].endswith("300000\t300000\n")
    assert raw["output_dropped_bytes"] > 0
    assert f"\n[... {raw['output_dropped_bytes']} bytes of output not kept ...]\n" in raw["output"]
    assert len(raw["output"].encode()) < (1 << 20) + 100


def test_run_tests_runs_pytest_as_the_user(env: SweEnvironment) -> None:
    outcome = run(env, "run_tests", selector=f"{TEST_ITERTOOLZ}::test_first")
    assert outcome.error is None
    assert outcome.observation["exit_code"] == 0
    assert "1 passed" in outcome.observation["output"]
    two = run(
        env, "run_tests", selector=f"{TEST_ITERTOOLZ}::test_first {TEST_ITERTOOLZ}::test_second"
    )
    assert "2 passed" in two.observation["output"]
    failing = run(env, "run_tests", selector=f"{TEST_ITERTOOLZ}::test_no_such_test")
    assert failing.error == f"exit status {failing.observation['exit_code']}"
    assert failing.observation["exit_code"] not in (None, 0)


# --- invalid calls --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "action",
    [
        Action(name="delete_repo", arguments={}, text="delete_repo()"),
        # A bad argument: nothing may run, not even the valid-looking command.
        Action(
            name="run_shell_command",
            arguments={"command": "touch /home/user/repo/RAN", "timeout": 0},
            text="run_shell_command(touch RAN, timeout=0)",
        ),
        Action(name="write_file", arguments={"path": "RAN"}, text="write_file(RAN)"),
    ],
)
def test_an_invalid_call_is_an_error_with_the_state_unchanged(
    env: SweEnvironment, action: Action
) -> None:
    before = run(env, "list_dir").observation
    outcome = env.step(action, 30)
    assert outcome.error is not None
    assert outcome.error.startswith(("unknown tool 'delete_repo'", "bad arguments for"))
    assert not outcome.truncated and not outcome.terminated
    after = outcome.observation
    assert after["tool"] is None and after["output"] == ""
    assert after["error"] == outcome.error
    assert (after["git_status"], after["git_diff_stat"]) == (
        before["git_status"],
        before["git_diff_stat"],
    )
    assert "RAN" not in as_root(env, "ls /home/user/repo")


# --- isolation ------------------------------------------------------------------------------


# Anchored: the command line of the shell running the attack holds the name too.
DRIVER_PID = "pgrep -o -f '^python3 /opt/worldtrace/swe_driver.py'"
FORGED = {"tool": "read_file", "output": "FORGED", "git_status": "", "error": None}


def test_the_agent_cannot_forge_a_reply_or_stop_the_driver(env: SweEnvironment) -> None:
    forged = json.dumps({**FORGED, "id": "x"}).replace("'", "")
    # The agent's commands run in its own view (sandboxes/view.py), where the driver does not
    # exist: pgrep finds nothing there. The attacks use the driver's pid as the container
    # knows it, which names no process in the view either.
    assert run(env, "run_shell_command", command=DRIVER_PID).observation["output"] == ""
    pid = as_root(env, DRIVER_PID).strip()
    assert pid.isdigit()
    attacks = [
        f"printf '%s\\n' '{forged}' > /proc/{pid}/fd/1",
        f"cat /proc/{pid}/fd/0",
        f"kill -9 {pid}",
    ]
    refusals = ("Permission denied", "Operation not permitted", "No such file", "No such process")
    for attack in attacks:
        outcome = run(env, "run_shell_command", command=attack)
        assert outcome.error == "exit status 1", outcome.observation["output"]
        assert any(refusal in outcome.observation["output"] for refusal in refusals)
        assert outcome.observation["skipped_replies"] == 0
    # Every later step is paired with its own result.
    after = run(env, "run_shell_command", command="echo mine")
    assert after.observation["output"] == "mine\n"
    assert after.observation["skipped_replies"] == 0


def test_the_file_tools_reach_only_what_the_user_can(env: SweEnvironment) -> None:
    as_root(
        env,
        "echo secret > /tmp/root-only && chmod 600 /tmp/root-only && "
        "mkdir -m 700 /tmp/root-dir && echo hidden > /tmp/root-dir/f",
    )
    denied = {
        "read_file": {"path": "/tmp/root-only"},
        "write_file": {"path": "/tmp/root-only", "content": "mine"},
        "str_replace": {"path": "/tmp/root-only", "old": "secret", "new": "mine"},
        "list_dir": {"path": "/tmp/root-dir"},
    }
    for name, arguments in denied.items():
        outcome = run(env, name, **arguments)
        assert outcome.error == f"{arguments['path']}: Permission denied", name
    searched = run(env, "search", pattern="hidden", path="/tmp/root-dir")
    assert searched.error is not None and "Permission denied" in searched.error
    assert "hidden" not in searched.observation["output"].replace("pattern", "")
    assert as_root(env, "cat /tmp/root-only") == "secret\n"
    shadow = run(env, "read_file", path="/etc/shadow")
    assert shadow.error == "/etc/shadow: Permission denied"
    outside = run(env, "write_file", path="/opt/worldtrace/planted.py", content="x")
    assert outside.error is not None and outside.error.startswith("/opt/worldtrace/planted.py: ")
    # What the user may read, the tools read; the driver's folder is not in the agent's view.
    readable = run(env, "read_file", path="/home/user/repo/setup.py")
    assert "toolz" in readable.observation["output"]
    hidden = run(env, "read_file", path="/opt/worldtrace/repo.json")
    assert hidden.error == "/opt/worldtrace/repo.json: No such file or directory"


# --- a task: the hidden bug and the evaluation ------------------------------------------------


@dataclass(frozen=True)
class BugTask:
    name: str
    instruction: str
    bug_patch: str
    failing_tests: tuple[str, ...]
    passing_tests: tuple[str, ...]


def second_bug(env: SweEnvironment) -> str:
    """A patch that drops `next(seq)` from `second` (test_second fails), made from the image."""
    original = env.sandbox.get_file(f"/home/user/repo/{ITERTOOLZ}").decode()
    mutated = original.replace(
        "    seq = iter(seq)\n    next(seq)\n    return next(seq)\n",
        "    seq = iter(seq)\n    return next(seq)\n",
    )
    assert mutated != original
    diff = difflib.unified_diff(
        original.splitlines(keepends=True),
        mutated.splitlines(keepends=True),
        f"a/{ITERTOOLZ}",
        f"b/{ITERTOOLZ}",
    )
    return f"diff --git a/{ITERTOOLZ} b/{ITERTOOLZ}\n" + "".join(diff)


PASS_EVERYTHING = """
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
"""


def test_a_task_bug_is_hidden_and_evaluation_runs_the_tests(
    env: SweEnvironment, swe_image: str
) -> None:
    task = BugTask(
        name="second-drops-a-statement",
        instruction="second() returns the first element",
        bug_patch=second_bug(env),
        failing_tests=(f"{TEST_ITERTOOLZ}::test_second",),
        passing_tests=(f"{TEST_ITERTOOLZ}::test_first",),
    )
    # Everything git and the file system say about the repository, but the commit id.
    view = (
        "git log --format='%an %ae %aI %cn %ce %cI %s'; git reflog --format='%gd %gs'; "
        "git fsck --unreachable --no-reflogs 2>&1; git count-objects -v | grep -v size; "
        f"stat -c '%n %Y' {ITERTOOLZ} {TEST_ITERTOOLZ}"
    )
    clean = as_user(env, view)
    bugged = SweEnvironment(SweConfig(repo="toolz", image=swe_image))
    try:
        first = bugged.reset(seed=0, task=task)
        assert (first["git_status"], first["git_diff_stat"]) == ("", "")
        assert "nothing to commit, working tree clean" in first["output"]
        assert as_user(bugged, "git status --porcelain; git diff HEAD") == ""
        assert as_user(bugged, view) == clean
        assert "commit (initial): " in clean and "unreachable" not in clean
        # Its change time (which nothing can set back) does not single the file out either.
        changed = as_user(bugged, "find . -path ./.git -prune -o -type f -printf '%C@ %p\\n'")
        ctimes = {
            path: float(when) for when, path in (line.split() for line in changed.splitlines())
        }
        patched = ctimes.pop(f"./{ITERTOOLZ}")
        assert max(ctimes.values()) >= patched
        source = bugged.sandbox.get_file(f"/home/user/repo/{ITERTOOLZ}").decode()
        assert "    seq = iter(seq)\n    return next(seq)\n" in source

        assert bugged.evaluate(task) == 0.0
        # Editing the test or adding a conftest.py does not pass it: both make the test pass
        # for run_tests, and the evaluation runs the image's tests in a sandbox of its own.
        selector = task.failing_tests[0]
        cheats = [
            tool_call(
                "str_replace",
                path=TEST_ITERTOOLZ,
                old="def test_second():\n",
                new="def test_second():\n    return\n",
            ),
            tool_call("write_file", path="toolz/tests/conftest.py", content=PASS_EVERYTHING),
        ]
        for cheat in cheats:
            assert bugged.step(cheat, 30).error is None
            assert "1 passed" in run(bugged, "run_tests", selector=selector).observation["output"]
            assert bugged.evaluate(task) == 0.0
            # The evaluation left the agent's sandbox as it was: the cheat still works there.
            assert run(bugged, "run_tests", selector=selector).observation["exit_code"] == 0
        fix = run(
            bugged,
            "str_replace",
            path=ITERTOOLZ,
            old="    seq = iter(seq)\n    return next(seq)\n",
            new="    seq = iter(seq)\n    next(seq)\n    return next(seq)\n",
        )
        assert fix.error is None
        assert bugged.evaluate(task) == 1.0
        assert bugged.evaluate(None) is None
    finally:
        bugged.close()


def test_a_patch_that_does_not_apply_fails_the_reset(swe_image: str) -> None:
    from worldtrace.collectors.swe.environment import TaskSetupError

    task = BugTask(
        "broken",
        "",
        "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-a\n+b\n",
        (),
        (),
    )
    environment = SweEnvironment(SweConfig(repo="toolz", image=swe_image))
    try:
        with pytest.raises(TaskSetupError, match="did not apply"):
            environment.reset(seed=0, task=task)
    finally:
        environment.close()


# --- a lost sandbox -------------------------------------------------------------------------


def test_the_wall_clock_ends_the_episode_with_the_step_recorded(swe_image: str) -> None:
    config = SweConfig(repo="toolz", image=swe_image, limits=Limits(wall_clock_s=4))
    environment = SweEnvironment(config)
    try:
        environment.reset(seed=0, task=None)
        outcome = run(environment, "run_shell_command", command="sleep 600", timeout=60)
        assert outcome.truncated
        assert outcome.error == "the sandbox reached its wall-clock limit of 4 s and was stopped"
        assert outcome.observation["sandbox_lost"] is True
        assert outcome.observation["state_stale"] is True
        assert outcome.observation["tool"] == "run_shell_command"
        assert environment.evaluate(BugTask("t", "", "", ("a::b",), ())) is None
    finally:
        environment.close()


def test_a_container_removed_from_outside_is_a_sandbox_error(swe_image: str) -> None:
    environment = SweEnvironment(SweConfig(repo="toolz", image=swe_image))
    try:
        environment.reset(seed=0, task=None)
        container = environment.sandbox.container
        threading.Timer(1.0, lambda: container.remove(force=True)).start()
        with pytest.raises(SandboxError):
            run(environment, "run_shell_command", command="sleep 600", timeout=60)
    finally:
        environment.close()


def test_a_driver_that_stops_answering_ends_the_episode_with_a_fresh_look(
    swe_image: str,
) -> None:
    environment = SweEnvironment(SweConfig(repo="toolz", image=swe_image))
    try:
        environment.reset(seed=0, task=None)
        run(environment, "write_file", path="seen.txt", content="x")
        # Nothing the agent runs can kill the driver (root); the kernel's OOM killer could.
        kill = ["pkill", "-KILL", "-f", "^python3 /opt/worldtrace/swe_driver.py"]
        threading.Timer(1.0, lambda: environment.sandbox.exec(kill, timeout=10)).start()
        outcome = run(environment, "run_shell_command", command="sleep 30", timeout=30)
        assert outcome.truncated
        assert outcome.error is not None
        assert outcome.error.startswith("the sandbox stopped answering after this action")
        # A second driver process looked at the working tree after the first one died.
        assert outcome.observation["sandbox_lost"] is True
        assert outcome.observation["state_stale"] is False
        assert outcome.observation["git_status"] == "?? seen.txt\n"
        assert outcome.observation["tool"] == "run_shell_command"
        assert environment.evaluate(BugTask("t", "", "", ("a::b",), ())) is None
    finally:
        environment.close()


FORK_BOMB = """
import os, time
children = []
try:
    while len(children) < 10000:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
except OSError as error:
    print("refused:", error.strerror)
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
"""


def test_a_fork_bomb_ends_the_episode(swe_image: str) -> None:
    environment = SweEnvironment(SweConfig(repo="toolz", image=swe_image, limits=Limits(pids=64)))
    try:
        environment.reset(seed=0, task=None)
        outcome = run(environment, "run_shell_command", command=f"python -c '{FORK_BOMB}'")
        assert "refused: Resource temporarily unavailable" in outcome.observation["output"]
        assert outcome.truncated
        assert outcome.error is not None
        assert outcome.error.startswith("the sandbox reached its process limit (64): ")
        assert environment.evaluate(BugTask("t", "", "", ("a::b",), ())) is None
    finally:
        environment.close()


def test_tools_keep_answering_after_the_agent_removes_the_repository(swe_image: str) -> None:
    environment = SweEnvironment(SweConfig(repo="toolz", image=swe_image))
    try:
        environment.reset(seed=0, task=None)
        gone = run(environment, "run_shell_command", command="cd .. && rm -rf repo")
        assert gone.error is None and not gone.truncated
        assert gone.observation["git_status"].startswith("fatal: not a git repository")
        # Every tool runs in the home folder now, and says what is missing.
        where = run(environment, "run_shell_command", command="pwd")
        assert where.observation["output"] == "/home/user\n"
        listing = run(environment, "list_dir", path="repo")
        assert listing.error == "repo: No such file or directory"
        assert not listing.truncated
    finally:
        environment.close()


def test_the_evaluation_runs_the_sources_not_stale_byte_code(swe_image: str) -> None:
    # Python reuses a module's byte code when the source has the same size and modification
    # second. A fix of the same size whose file time ends up where the bug's was (an editor, a
    # checkout, a patch that keeps times) would otherwise be scored as still broken.
    from worldtrace.collectors.swe.policies import patch_hunks
    from worldtrace.collectors.swe.tasks import load_tasks

    task = next(t for t in load_tasks("toolz") if t.name == "toolz-41c7402991")
    (hunk,) = patch_hunks(task.gold_patch)
    assert len(hunk.old_text) == len(hunk.new_text)
    env = SweEnvironment(SweConfig(repo="toolz", image=swe_image))
    try:
        env.reset(seed=0, task=task)
        selector = " ".join(task.failing_tests)
        assert run(env, "run_tests", 120, selector=selector).observation["exit_code"] != 0
        path = f"/home/user/repo/{task.file}"
        # The time Python's byte-code check reads (os.stat sees real file times, not the
        # episode clock's: docs/determinism.md), put back the same way.
        stat = f"python3 -c 'import os; print(os.stat(\"{path}\").st_mtime_ns)'"
        stamp = as_root(env, stat).strip()
        fixed = run(env, "str_replace", path=task.file, old=hunk.old_text, new=hunk.new_text)
        assert fixed.error is None
        as_root(env, f"python3 -c 'import os; os.utime(\"{path}\", ns=({stamp},) * 2)'")
        assert as_root(env, stat).strip() == stamp
        # The trap is real: a plain test run still sees the bug through the byte code.
        assert run(env, "run_tests", 120, selector=selector).observation["exit_code"] != 0
        assert env.evaluate(task) == 1.0
    finally:
        env.close()
