"""The swe exploring policy, driven by a small in-memory repository (no Docker needed).

``FakeRepo`` (tests/swe/fake_repo.py) answers the seven tools the way the in-container driver
does, just enough for the policy's logic. The docker-marked test at the end runs one real
episode on the toolz image.
"""

from __future__ import annotations

import itertools
import json
import os
import posixpath
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.swe.fake_repo import FILES, SRC_LAYOUT, FakeRepo, play, texts
from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.registry import get_collector
from worldtrace.collectors.swe.explore import SweExplorePolicy
from worldtrace.collectors.swe.tools import check_tool_call

REPO = Path(__file__).resolve().parents[2]
REAL_SEED = 1
"""The seed of the real episode: its 25 steps list, read, search, run tests, edit and revert.

A walk depends on what the repository shows, so a changed toolz image may need another seed;
about two thirds of seeds do all of it in 25 steps (10 of 0..15 did when this was written)."""


def test_same_seed_same_actions() -> None:
    assert texts(7) == texts(7)
    # reset() forgets everything: a reused policy repeats itself.
    policy = SweExplorePolicy(max_steps=25)
    runs = []
    for _ in range(2):
        policy.reset(3, None)
        repo, history, played = FakeRepo(), [], []
        observation = repo.orientation()
        while (action := policy.act(observation, history)) is not None:
            observation = repo.step(action)
            history.append(HistoryItem(action=action, observation=observation))
            played.append(action.text)
        runs.append(played)
    assert runs[0] == runs[1] == texts(3, steps=25)


def test_same_seed_same_actions_across_processes() -> None:
    # Set iteration order changes with PYTHONHASHSEED; the policy must not depend on it.
    script = "import json; from tests.swe.fake_repo import texts; print(json.dumps(texts(11)))"
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] == texts(11)


def test_different_seeds_different_walks() -> None:
    walks = [tuple(texts(seed)) for seed in range(6)]
    assert len(set(walks)) == 6
    # Not just a different ending: the walks part early.
    assert len({walk[:8] for walk in walks}) >= 5


def test_every_action_is_a_valid_tool_call_and_the_mix_is_varied() -> None:
    names: dict[str, int] = {}
    for seed in range(20):
        actions, _, _ = play(seed, steps=40, mistake_rate=0.1)
        assert actions[0].name == "list_dir" and actions[0].arguments["path"] == "."
        # The fake repository never fails a clean-up, so no call is ever the one before again.
        assert all(a.text != b.text for a, b in itertools.pairwise(actions)), seed
        for action in actions:
            assert check_tool_call(action) is None, action.text
            names[action.name] = names.get(action.name, 0) + 1
            if action.name == "run_shell_command":
                assert action.arguments["timeout"] <= 60
                assert "rm -" not in action.arguments["command"], action.text
    assert set(names) == {
        "list_dir",
        "read_file",
        "search",
        "run_tests",
        "str_replace",
        "run_shell_command",
        "write_file",
    }
    # Reading leads; nothing crowds out the rest.
    total = sum(names.values())
    assert names["read_file"] / total > 0.2
    assert all(count / total < 0.45 for count in names.values()), names


def _referenced_words(pattern: str) -> list[str]:
    """The names a search pattern looks for (its regex escapes and keywords left out)."""
    words = re.findall(r"[A-Za-z_]\w+", re.sub(r"\\.", " ", pattern))
    return [w for w in words if w not in ("def", "class", "import")]


def test_actions_only_use_what_earlier_observations_showed() -> None:
    checked = 0
    for seed in range(20):
        actions, observations, _ = play(seed, steps=40, mistake_rate=0.0)
        seen_paths: set[str] = {"."}
        seen_text = ""  # everything read_file showed, line texts only
        written: set[str] = set()
        for action, after in zip(actions, observations[1:], strict=True):
            arguments = action.arguments
            paths = []
            if action.name in ("read_file", "list_dir", "search", "str_replace"):
                paths.append(posixpath.normpath(arguments["path"]))
            if action.name == "run_tests":
                paths.append(arguments["selector"].split("::")[0])
                for name in arguments["selector"].split("::")[1:]:
                    assert re.search(rf"(def|class) {name}\b", seen_text), action.text
            if action.name == "search":
                for word in _referenced_words(arguments["pattern"]):
                    assert word in seen_text, action.text
            if action.name == "str_replace":
                assert arguments["old"] in seen_text or arguments["new"] in seen_text, action.text
            if action.name == "write_file":
                assert arguments["path"] not in seen_paths
                written.add(arguments["path"])
            if action.name == "run_shell_command":
                for word in shlex.split(arguments["command"]):
                    if "/" in word or re.search(r"\.(py|rst|cfg|txt)$", word):
                        paths.append(posixpath.normpath(word))
                module = re.search(r"(?:import|from) ([\w.]+)", arguments["command"])
                if module:
                    assert "minitools" in seen_paths, action.text
                    for part in module[1].split(".")[1:]:
                        assert part in seen_text or f"{part}.py" in str(seen_paths), action.text
            for path in paths:
                assert path in seen_paths or path in written, (
                    seed,
                    action.text,
                    sorted(seen_paths),
                )
                checked += 1
            # Learn from the observation this action produced.
            if after["error"] is None and action.name == "list_dir":
                folder = posixpath.normpath(arguments["path"])
                for entry in after["output"].split():
                    seen_paths.add(posixpath.normpath(posixpath.join(folder, entry.rstrip("/"))))
            if action.name == "search" and arguments["path"] not in FILES:
                for line in after["output"].splitlines():
                    seen_paths.add(line.split(":")[0])
            if action.name == "read_file" and after["error"] is None:
                seen_text += "".join(
                    line.split("\t", 1)[1] + "\n" for line in after["output"].splitlines()
                )
    assert checked > 300


@pytest.mark.parametrize("files", [FILES, SRC_LAYOUT], ids=["flat", "src"])
def test_an_edit_is_tested_and_reverted_within_a_few_steps(files: dict[str, str]) -> None:
    edits = 0
    for seed in range(30):
        actions, observations, repo = play(seed, steps=30, files=files)
        for index, action in enumerate(actions):
            after = observations[index + 1]
            if action.name != "str_replace" or after["error"] is not None:
                continue
            if after["git_status"] == "":
                continue  # this was the revert by hand of an earlier edit
            edits += 1
            path = action.arguments["path"]
            following = actions[index + 1 : index + 7]
            tests = [a for a in following if a.name == "run_tests"]
            assert tests, [a.text for a in following]
            # The tests run are those of the edited module (its test file or one of its ids), or
            # the test folder when the episode has seen no test file named after the module.
            stem = posixpath.basename(path).removesuffix(".py")
            selectors = [a.arguments["selector"] for a in tests]
            assert any(stem in s or posixpath.basename(s) == "tests" for s in selectors), selectors
            restored = [
                i
                for i in range(index + 1, min(index + 8, len(actions)))
                if path not in observations[i + 1]["git_status"]
            ]
            assert restored, [a.text for a in following]
        # The episode leaves the repository exactly as it found it.
        assert repo.files == files, (seed, repo.git_status())
    assert edits >= 10


def test_mistakes_happen_and_fail_naturally() -> None:
    failed = 0
    kinds: set[str] = set()
    for seed in range(10):
        actions, observations, repo = play(seed, steps=30, mistake_rate=0.4)
        for action, after in zip(actions, observations[1:], strict=True):
            if after["error"] is not None or after["exit_code"] not in (0, None):
                failed += 1
                kinds.add(action.name)
        assert repo.files == FILES
    assert failed >= 30
    assert {"read_file", "run_tests", "str_replace"} <= kinds
    # Without mistakes, what fails is only a test run after an edit.
    for seed in range(10):
        actions, observations, _ = play(seed, steps=30, mistake_rate=0.0)
        for action, after in zip(actions, observations[1:], strict=True):
            if after["error"] is not None or after["exit_code"] not in (0, None):
                assert action.name == "run_tests" and after["exit_code"] == 1, action.text


def test_stops_at_max_steps_and_params_are_checked() -> None:
    assert len(play(1, steps=5)[0]) == 5
    assert len(play(1)[0]) == 30  # the default
    with pytest.raises(ValueError, match=r"unknown parameters.*colour"):
        SweExplorePolicy(**{"max_steps": 3, "colour": "red"})
    with pytest.raises(ValueError, match="max_steps should be greater than or equal to 1, got 0"):
        SweExplorePolicy(max_steps=0)
    with pytest.raises(ValueError, match=r"unknown action kinds.*dance"):
        SweExplorePolicy(weights={"dance": 1.0})
    with pytest.raises(ValueError, match="weights should be a valid dictionary"):
        SweExplorePolicy(weights=["edit"])
    with pytest.raises(ValueError, match=r"weights\.edit should be greater than or equal to 0"):
        SweExplorePolicy(weights={"edit": -1})
    with pytest.raises(ValueError, match="weights are all 0"):
        SweExplorePolicy(weights=dict.fromkeys(SweExplorePolicy.DEFAULT_WEIGHTS, 0))
    with pytest.raises(ValueError, match="mistake_rate should be less than or equal to 1"):
        SweExplorePolicy(mistake_rate=2)
    # The registry's factory passes a config's policy.params through.
    collector = get_collector("swe")
    with pytest.raises(ValueError, match=r"unknown parameters.*colour"):
        collector.policies["explore"](collector, {"colour": "red"})
    policy = collector.policies["explore"](collector, {"max_steps": 12, "weights": {"edit": 0}})
    assert isinstance(policy, SweExplorePolicy)
    assert policy.max_steps == 12 and policy.weights["edit"] == 0
    assert policy.describe().kind == "explore" and policy.describe().name == "swe-explore"
    for seed in range(5):
        actions, _, _ = play(seed, steps=30, weights={"edit": 0}, mistake_rate=0)
        assert not [a for a in actions if a.name == "str_replace"]


@pytest.fixture(scope="module")
def toolz_image() -> str:
    """The toolz repository image, built if its definition changed."""
    from worldtrace.collectors.swe.repos import image_definition
    from worldtrace.sandboxes.images import ensure_image

    definition = image_definition("toolz")
    ensure_image(definition)
    return definition.tag


@pytest.mark.docker
def test_explores_toolz_for_real_and_leaves_it_clean(toolz_image: str) -> None:
    from worldtrace.collectors.swe.environment import SweConfig, SweEnvironment

    seed, steps = REAL_SEED, 25
    env = SweEnvironment(SweConfig(repo="toolz", image=toolz_image))
    try:
        observation = env.reset(seed, None)
        assert "toolz" in observation["output"]
        policy = SweExplorePolicy(max_steps=steps)
        policy.reset(seed, None)
        history: list[HistoryItem] = []
        while (action := policy.act(observation, history)) is not None:
            outcome = env.step(action, timeout_s=60)
            observation = outcome.observation
            assert not outcome.truncated and not observation["timed_out"], action.text
            history.append(HistoryItem(action=action, observation=observation, error=outcome.error))
    finally:
        env.close()
    assert len(history) == steps
    played = [(item.action, item.error) for item in history]
    failures = [action.text for action, error in played if error is not None]
    assert len(failures) <= steps // 4, failures
    succeeded = [action.name for action, error in played if error is None]
    assert {"list_dir", "read_file", "search", "run_tests", "str_replace"} <= set(succeeded)
    # Searches look for names it read: they find them (a misspelled one now and then does not).
    searches = [item.observation["output"] for item in history if item.action.name == "search"]
    assert sum(output == "No matches found.\n" for output in searches) <= len(searches) // 2
    # An edit changed the tree; a later step (the revert) brought it back.
    edits = [
        index
        for index, item in enumerate(history)
        if item.action.name == "str_replace"
        and item.error is None
        and item.observation["git_status"].strip()
    ]
    assert edits
    for index in edits:
        path = history[index].action.arguments["path"]
        assert f" M {path}" in history[index].observation["git_status"]
        later = history[index + 1 : index + 8]
        assert any(item.action.name == "run_tests" for item in later)
        assert any(path not in item.observation["git_status"] for item in later)
    assert observation["git_status"] == "", observation["git_status"]
    assert observation["git_diff_stat"] == ""


class StubbornRepo(FakeRepo):
    """A repository where a second edit of a modified file fails: an undo by hand never works."""

    def str_replace(self, path: str, old: str, new: str) -> dict[str, Any]:
        if self.files.get(posixpath.normpath(path)) != self.original.get(path):
            return self.observation("str_replace", "", error=f"old string not found in {path}")
        return super().str_replace(path, old, new)


def test_a_failed_undo_is_cleaned_up_with_git() -> None:
    cleaned = 0
    # Short episodes too: an undo by hand near the end must leave a step for the clean-up.
    for seed, steps in itertools.product(range(40), (9, 21, 27, 30)):
        actions, observations, repo = play(seed, steps=steps, repo_type=StubbornRepo)
        for index, action in enumerate(actions[:-1]):
            failed_undo = action.name == "str_replace" and observations[index + 1]["error"]
            if failed_undo and " M " in observations[index + 1]["git_status"]:
                # Once the rest of its sequence (a git status, say) is done, git cleans up.
                checkout = f"git checkout -- {action.arguments['path']}"
                following = [a.arguments.get("command") for a in actions[index + 1 : index + 3]]
                assert checkout in following, following
                cleaned += 1
        assert repo.files == FILES, (seed, steps, repo.git_status())
    assert cleaned >= 3
