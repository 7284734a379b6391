"""The swe exploring policy, driven by a small in-memory repository (no Docker needed).

``FakeRepo`` answers the seven tools the way the in-container driver does (``cat -n`` numbered
reads, ``path:line:text`` search hits, folders with a trailing ``/``, ``git status
--porcelain``), just enough for the policy's logic. The docker-marked test at the end runs one
real episode on the toolz image.
"""

from __future__ import annotations

import fnmatch
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

from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.registry import get_collector
from worldtrace.collectors.swe.explore import SweExplorePolicy
from worldtrace.collectors.swe.tools import check_tool_call
from worldtrace.schemas import Action

REPO = Path(__file__).resolve().parents[2]
REAL_SEED = 1
"""The seed of the real episode: its 25 steps list, read, search, run tests, edit and revert.

A walk depends on what the repository shows, so a changed toolz image may need another seed;
about two thirds of seeds do all of it in 25 steps (10 of 0..15 did when this was written)."""

FILES = {
    "README.rst": "minitools\n=========\n\nSmall helpers for lists and text.\n",
    "setup.cfg": "[metadata]\nname = minitools\nversion = 0.3.1\n\n[tool:pytest]\naddopts = -q\n",
    "setup.py": "from setuptools import setup\n\nsetup()\n",
    "LICENSE.txt": "BSD 3-Clause License\n",
    "docs/index.rst": "Welcome to minitools\n====================\n",
    "minitools/__init__.py": (
        "from .core import chunks, clamp\nfrom .text import shout\n\n__version__ = '0.3.1'\n"
    ),
    "minitools/core.py": (
        '"""Helpers for numbers and sequences."""\n'
        "import itertools\n"
        "\n"
        "DEFAULT_SIZE = 2\n"
        "\n"
        "\n"
        "def clamp(value, low=0, high=10):\n"
        '    """Return value limited to low..high."""\n'
        "    if value < low:\n"
        "        return low\n"
        "    if value > high:\n"
        "        return high\n"
        "    return value\n"
        "\n"
        "\n"
        "def chunks(items, size=DEFAULT_SIZE):\n"
        '    """Split items into lists of size."""\n'
        "    iterator = iter(items)\n"
        "    while True:\n"
        "        chunk = list(itertools.islice(iterator, size))\n"
        "        if len(chunk) == 0:\n"
        "            return\n"
        "        yield chunk\n"
        "\n"
        "\n"
        "class Counter:\n"
        '    """Counts calls."""\n'
        "\n"
        "    def __init__(self):\n"
        "        self.count = 0\n"
        "        self.label = 'calls'\n"
        "\n"
        "    def tick(self, strict=False):\n"
        "        self.count += 1\n"
        "        return self.count\n"
    ),
    "minitools/text.py": (
        "from minitools.core import clamp\n"
        "\n"
        "\n"
        "def shout(text, times=1):\n"
        "    times = clamp(times, 1, 3)\n"
        "    return (text.upper() + '!') * times\n"
    ),
    "minitools/tests/__init__.py": "",
    "minitools/tests/test_core.py": (
        "from minitools.core import Counter, chunks, clamp\n"
        "\n"
        "\n"
        "def test_clamp():\n"
        "    assert clamp(12) == 10\n"
        "\n"
        "\n"
        "def test_chunks():\n"
        "    assert list(chunks([1, 2, 3])) == [[1, 2], [3]]\n"
        "\n"
        "\n"
        "class TestCounter:\n"
        "    def test_tick(self):\n"
        "        assert Counter().tick() == 1\n"
    ),
    "minitools/tests/test_text.py": (
        "from minitools.text import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A!'\n"
    ),
}

# The same project in the src layout, its tests in a top-level folder (like click, marshmallow).
SRC_LAYOUT = {
    (
        path.replace("minitools/tests/", "tests/")
        if "/tests/" in path
        else "src/" + path
        if path.startswith("minitools/")
        else path
    ): text
    for path, text in FILES.items()
}


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _numbered(lines: list[str], first: int) -> str:
    return "".join(f"{n:6}\t{line}\n" for n, line in enumerate(lines, first))


class FakeRepo:
    """The repository's files in a dict, changed by the tools as the real driver would."""

    def __init__(self, original: dict[str, str] = FILES) -> None:
        self.original = original
        self.files = dict(original)

    # --- state ---

    def folders(self) -> set[str]:
        found = {"."}
        for path in self.files:
            parent = posixpath.dirname(path)
            while parent:
                found.add(parent)
                parent = posixpath.dirname(parent)
        return found

    def git_status(self) -> str:
        lines = []
        for path in sorted(set(self.original) | set(self.files)):
            if path not in self.files:
                lines.append(f" D {path}")
            elif path not in self.original:
                lines.append(f"?? {path}")
            elif self.files[path] != self.original[path]:
                lines.append(f" M {path}")
        return "".join(f"{line}\n" for line in lines)

    def observation(
        self, tool: str | None, output: str, exit_code: int | None = None, error: str | None = None
    ) -> dict[str, Any]:
        changed = [line[3:] for line in self.git_status().splitlines() if line[:2] != "??"]
        stat = "".join(f" {path} | 2 +-\n" for path in changed)
        return {
            "tool": tool,
            "output": output,
            "exit_code": exit_code,
            "timed_out": False,
            "error": error,
            "git_status": self.git_status(),
            "git_diff_stat": stat,
            "wall_s": 0.01,
        }

    def orientation(self) -> dict[str, Any]:
        top = sorted({p.split("/")[0] + ("/" if "/" in p else "") for p in self.files})
        text = "Repository minitools 0.3.1 in /home/user/repo (a git repository).\n\n"
        text += "$ git status\nnothing to commit, working tree clean\n\n$ ls\n" + "\n".join(top)
        return self.observation(None, text + "\n")

    # --- tools ---

    def step(self, action: Action) -> dict[str, Any]:
        return getattr(self, action.name)(**action.arguments)

    def list_dir(self, path: str) -> dict[str, Any]:
        folder = posixpath.normpath(path)
        if folder not in self.folders():
            kind = "Not a directory" if folder in self.files else "No such file or directory"
            return self.observation("list_dir", "", error=f"{path}: {kind}")
        prefix = "" if folder == "." else folder + "/"
        entries = set()
        for file in self.files:
            if file.startswith(prefix):
                rest = file[len(prefix) :]
                entries.add(rest.split("/")[0] + ("/" if "/" in rest else ""))
        return self.observation("list_dir", "".join(f"{e}\n" for e in sorted(entries)))

    def read_file(self, path: str, start_line: int | None, end_line: int | None) -> dict[str, Any]:
        path = posixpath.normpath(path)
        if path not in self.files:
            error = "Is a directory (use list_dir)" if path in self.folders() else "No such file"
            return self.observation("read_file", "", error=f"{path}: {error}")
        lines = _lines(self.files[path])
        first = start_line or 1
        if first > max(len(lines), 1):
            return self.observation("read_file", "", error=f"{path}: start_line past the end")
        last = min(end_line or len(lines), len(lines))
        return self.observation("read_file", _numbered(lines[first - 1 : last], first))

    def search(self, pattern: str, path: str, glob: str | None) -> dict[str, Any]:
        where = posixpath.normpath(path)
        regex = re.compile(pattern)
        hits = []
        for file in sorted(self.files):
            inside = where == "." or file == where or file.startswith(where + "/")
            if not inside or (glob and not fnmatch.fnmatch(posixpath.basename(file), glob)):
                continue
            for number, line in enumerate(_lines(self.files[file]), 1):
                if regex.search(line):
                    # Like grep -rn: no file name when the one operand is a file.
                    hits.append(
                        f"{number}:{line}\n" if file == where else f"{file}:{number}:{line}\n"
                    )
        if where != "." and where not in self.files and where not in self.folders():
            return self.observation("search", "", error=f"{path}: No such file or directory")
        return self.observation("search", "".join(hits) or "No matches found.\n")

    def str_replace(self, path: str, old: str, new: str) -> dict[str, Any]:
        path = posixpath.normpath(path)
        if path not in self.files:
            return self.observation("str_replace", "", error=f"{path}: No such file")
        count = self.files[path].count(old)
        if count != 1:
            error = "old string not found" if not count else f"old string occurs {count} times"
            return self.observation("str_replace", "", error=f"{error} in {path}")
        self.files[path] = self.files[path].replace(old, new)
        return self.observation("str_replace", f"Edited {path}:\n")

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        self.files[posixpath.normpath(path)] = content
        return self.observation("write_file", f"Wrote {len(content)} bytes to {path}\n")

    def run_tests(self, selector: str | None) -> dict[str, Any]:
        for part in shlex.split(selector or ""):
            file, _, name = part.partition("::")
            known = file in self.files or file in self.folders()
            if not known or (name and f"def {name.split('::')[-1]}(" not in self.files[file]):
                return self.observation("run_tests", f"ERROR: not found: {part}\n", exit_code=4)
        broken = any(
            self.files.get(p) != text for p, text in self.original.items() if "tests/" not in p
        )
        output = "1 failed, 2 passed\n" if broken else "3 passed\n"
        return self.observation("run_tests", output, exit_code=1 if broken else 0)

    def run_shell_command(self, command: str, timeout: float) -> dict[str, Any]:
        assert timeout <= 60, command
        words = shlex.split(command)
        if words[:3] == ["git", "checkout", "--"] or words[:2] == ["git", "restore"]:
            paths = words[3:] if words[1] == "checkout" else words[2:]
            for path in paths:
                if path not in self.original:
                    out = f"error: pathspec '{path}' did not match any file(s) known to git\n"
                    return self.observation("run_shell_command", out, exit_code=1)
                self.files[path] = self.original[path]
            return self.observation("run_shell_command", "", exit_code=0)
        if words[0] == "rm":
            assert words[1:] and all(not w.startswith("-") for w in words[1:]), command
            for path in words[1:]:
                if path not in self.files:
                    out = f"rm: cannot remove '{path}': No such file or directory\n"
                    return self.observation("run_shell_command", out, exit_code=1)
                del self.files[path]
            return self.observation("run_shell_command", "", exit_code=0)
        if words[0] in ("wc", "head", "cat"):
            missing = [w for w in words[1:] if not w.startswith("-") and w not in self.files]
            missing = [w for w in missing if not w.isdigit()]
            if missing:
                out = f"{words[0]}: {missing[0]}: No such file or directory\n"
                return self.observation("run_shell_command", out, exit_code=1)
        if words[0] == "python" and len(words) > 1 and words[1] == "-c":
            module = re.match(r"(?:import|from) ([\w.]+)", words[2])
            if module and module[1].split(".")[0] != "minitools":
                out = f"ModuleNotFoundError: No module named '{module[1]}'\n"
                return self.observation("run_shell_command", out, exit_code=1)
        if words[0] == "python" and words[-1].endswith(".py") and words[-1] not in self.files:
            out = f"python: can't open file '{words[1]}'\n"
            return self.observation("run_shell_command", out, exit_code=2)
        return self.observation("run_shell_command", "ok\n", exit_code=0)


def play(
    seed: int,
    steps: int = 30,
    files: dict[str, str] = FILES,
    repo_type: type[FakeRepo] = FakeRepo,
    **params: Any,
) -> tuple[list[Action], list[dict[str, Any]], FakeRepo]:
    """Play one episode against a fresh FakeRepo; return the actions, observations and repo."""
    policy = SweExplorePolicy(max_steps=steps, **params)
    policy.reset(seed, None)
    repo = repo_type(files)
    observation = repo.orientation()
    observations = [observation]
    history: list[HistoryItem] = []
    actions: list[Action] = []
    while (action := policy.act(observation, history)) is not None:
        actions.append(action)
        observation = repo.step(action)
        observations.append(observation)
        history.append(HistoryItem(action=action, observation=observation))
    return actions, observations, repo


def texts(seed: int, steps: int = 30) -> list[str]:
    """The action texts of one episode."""
    return [action.text for action in play(seed, steps)[0]]


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
    script = (
        "import json; from tests.swe.test_swe_explore import texts; print(json.dumps(texts(11)))"
    )
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
    with pytest.raises(ValueError, match="max_steps"):
        SweExplorePolicy(max_steps=0)
    with pytest.raises(ValueError, match=r"unknown action kinds.*dance"):
        SweExplorePolicy(weights={"dance": 1.0})
    with pytest.raises(ValueError, match="weights must map"):
        SweExplorePolicy(weights=["edit"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        SweExplorePolicy(weights={"edit": -1})
    with pytest.raises(ValueError, match="mistake_rate"):
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
