"""The swe oracle policy: its plan from a task and what the failing run printed."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.swe.policies import SweOraclePolicy, patch_hunks
from worldtrace.collectors.swe.tools import check_tool_call

GOLD = """\
--- a/toolz/itertoolz.py
+++ b/toolz/itertoolz.py
@@ -40,7 +40,7 @@ def take(n, seq):
     \"\"\"The first n elements of seq.\"\"\"
     out = []
     for item in seq:
-        if len(out) > n:
+        if len(out) >= n:
             break
         out.append(item)
     return out
"""


@dataclass(frozen=True)
class FakeTask:
    """A task with the fields the oracle reads (the real one is collectors.swe.tasks.SweTask)."""

    name: str = "toolz-take-flip"
    file: str = "toolz/itertoolz.py"
    function: str = "take"
    failing_tests: tuple[str, ...] = (
        "toolz/tests/test_itertoolz.py::test_take",
        "toolz/tests/test_itertoolz.py::test_take_nth",
    )
    gold_patch: str = GOLD


def play(policy: SweOraclePolicy, failure_output: str) -> list[tuple[str, dict]]:
    """Every action of an episode, with ``failure_output`` as every tool's output."""
    history: list[HistoryItem] = []
    calls = []
    observation = {"tool": None, "output": ""}
    while (action := policy.act(observation, history)) is not None:
        assert check_tool_call(action) is None, action.text
        assert json.loads(action.text) == {"name": action.name, "arguments": action.arguments}
        calls.append((action.name, action.arguments))
        observation = {"tool": action.name, "output": failure_output}
        history.append(HistoryItem(action=action, observation=observation))
    return calls


def test_the_hunks_of_a_patch_give_both_sides_with_their_context() -> None:
    (hunk,) = patch_hunks(GOLD)
    assert hunk.old_start == 40
    assert "if len(out) > n:" in hunk.old_text and "if len(out) >= n:" not in hunk.old_text
    assert "if len(out) >= n:" in hunk.new_text
    assert hunk.old_text.count("\n") == hunk.new_text.count("\n") == 7
    with pytest.raises(ValueError, match="no hunk"):
        patch_hunks("--- a/x\n+++ b/x\n")


@pytest.mark.parametrize("seed", range(8))
def test_the_oracle_reproduces_reads_fixes_and_verifies(seed: int) -> None:
    policy = SweOraclePolicy()
    policy.reset(seed, FakeTask())
    calls = play(policy, "toolz/itertoolz.py:43: AssertionError\n")
    names = [name for name, _ in calls]
    first_test_run = names.index("run_tests")
    fix = calls.index(
        (
            "str_replace",
            {
                "path": "toolz/itertoolz.py",
                "old": patch_hunks(GOLD)[0].old_text,
                "new": patch_hunks(GOLD)[0].new_text,
            },
        )
    )
    # Reproduce before reading the source, read it before editing, test after the fix.
    read = names.index("read_file", first_test_run)
    assert first_test_run < read < fix < len(names) - 1
    assert "run_tests" in names[fix + 1 :]
    # The traceback named line 43 of the package: the oracle reads around it, no search.
    start, end = calls[read][1]["start_line"], calls[read][1]["end_line"]
    assert start <= 43 <= end and "search" not in names


def test_without_a_traceback_into_the_package_the_oracle_searches_for_the_function() -> None:
    policy = SweOraclePolicy()
    policy.reset(3, FakeTask())
    calls = play(policy, "E   assert [1, 2] == [1, 2, 3]\n")
    searches = [arguments for name, arguments in calls if name == "search"]
    assert searches == [{"pattern": r"def take\b", "path": ".", "glob": "*.py"}]


def test_the_same_seed_gives_the_same_episode_and_seeds_vary_it() -> None:
    def episode(seed: int) -> list[tuple[str, dict]]:
        policy = SweOraclePolicy()
        policy.reset(seed, FakeTask())
        return play(policy, "toolz/itertoolz.py:43: AssertionError\n")

    assert episode(5) == episode(5)
    assert len({json.dumps(episode(seed)) for seed in range(12)}) > 3


def test_a_wrong_edit_is_tested_and_reverted_before_the_fix() -> None:
    policy = SweOraclePolicy(wrong_edit_rate=1.0)
    policy.reset(1, FakeTask())
    calls = play(policy, "toolz/itertoolz.py:43: AssertionError\n")
    edits = [(i, arguments) for i, (name, arguments) in enumerate(calls) if name == "str_replace"]
    wrong = edits[0][1]
    assert "FIXME" in wrong["new"] and wrong["old"] == patch_hunks(GOLD)[0].old_text
    revert_at = next(
        i
        for i, (name, arguments) in enumerate(calls)
        if (name == "str_replace" and arguments.get("old") == wrong["new"])
        or (name == "run_shell_command" and arguments["command"].startswith("git checkout"))
    )
    assert calls[edits[0][0] + 1][0] == "run_tests"
    assert edits[0][0] < revert_at < edits[-1][0]


def test_the_oracle_refuses_a_task_it_cannot_fix() -> None:
    with pytest.raises(ValueError, match="synthesized task"):
        SweOraclePolicy().reset(0, None)
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        SweOraclePolicy(wrong_edit_rate=2)
