"""A small in-memory repository for the swe exploring policy, and episodes played against it.

``FakeRepo`` answers the seven tools the way the in-container driver does (``cat -n`` numbered
reads, ``path:line:text`` search hits, folders with a trailing ``/``, ``git status
--porcelain``), just enough for the policy's logic. Run in other processes too
(tests/swe/test_swe_explore.py checks that an episode does not depend on the hash seed), so it
is a module of its own, not part of a test module.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
from typing import Any

from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.swe.explore import SweExplorePolicy
from worldtrace.schemas import Action

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
