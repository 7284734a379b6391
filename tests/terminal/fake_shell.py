"""A tiny fake shell for the exploring terminal policy, and episodes played against it.

Run in other processes too (tests/terminal/test_explore_policy.py checks that an episode does
not depend on the hash seed), so it is a module of its own, not part of a test module.
"""

from __future__ import annotations

import shlex

from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.terminal.explore import ExplorePolicy
from worldtrace.schemas import Action

HOME_PROJECT = "/home/user/proj"
TOP = {
    "README.md": "# proj\nWeather station tools for the coast network.\n",
    "data.csv": "station,city,temperature\nS1,lisbon,21\nS2,porto,18\nS3,faro,24\n",
    "notes.txt": "remember the backup before migrating stations\n",
}
SRC = {
    "main.py": "import report\n\nreport.summary()\n",
    "report.py": "def summary():\n    print('stations ok')\n",
}
PRE_EXISTING = {
    *(f"{HOME_PROJECT}/{name}" for name in TOP),
    *(f"{HOME_PROJECT}/src/{name}" for name in SRC),
    f"{HOME_PROJECT}/src",
}


class FakeShell:
    """Just enough of a shell for the policy: ls -1p, file contents, cd and foreground programs."""

    def __init__(self) -> None:
        self.cwd = HOME_PROJECT
        self.foreground: str | None = None

    def prompt(self) -> str:
        return f"user@sandbox:{self.cwd.replace('/home/user', '~', 1)}$ "

    def observation(self, screen: str) -> dict:
        lines = screen.split("\n")
        return {
            "screen": screen,
            "scrollback": "",
            "cursor": [len(lines[-1]), len(lines) - 1],
            "prompt": self.foreground is None,
            "exit_code": 0 if self.foreground is None else None,
            "cwd": self.cwd,
            "foreground": self.foreground,
            "timed_out": False,
        }

    def start(self) -> dict:
        return self.observation(self.prompt())

    def step(self, action: Action) -> dict:
        if action.name == "wait":
            self.foreground = None
            return self.observation(self.prompt())
        items = action.arguments["keys"]
        if self.foreground is not None:
            self._program_keys(items)
            return self.observation(self.prompt() if self.foreground is None else "~\n~\n~")
        line = items[0]
        before = self.prompt()
        output = self._run(line)
        screen = f"{before}{line}\n{output}{self.prompt()}" if self.foreground is None else "~\n~"
        return self.observation(screen)

    def _program_keys(self, items: list[str]) -> None:
        quits = {
            "less": {"q"},
            "vim": {":q", ":q!", ":wq", ":qa!"},
            "python3": {"C-d"},
            "cat": {"C-d", "C-c"},
            "tail": {"C-c"},
            "sleep": {"C-c"},
        }
        if quits.get(self.foreground or "", set()) & set(items):
            self.foreground = None

    def _run(self, line: str) -> str:
        words = shlex.split(line) if line.count("'") % 2 == 0 else line.split()
        if not words:
            return ""
        here = SRC if self.cwd.endswith("/src") else TOP
        if (words[0] == "ls" and "-1p" in words) or words[:3] == ["ls", "-p", "-1"]:
            target = [w for w in words[1:] if not w.startswith("-")]
            if target and target[0].rstrip("/") == "src":
                return "".join(f"{name}\n" for name in SRC)
            listing = list(here) + (["src/"] if here is TOP else [])
            return "".join(f"{name}\n" for name in listing)
        if words[0] == "cd":
            target = words[1] if len(words) > 1 else "~"
            if target.rstrip("/") == "src" and self.cwd == HOME_PROJECT:
                self.cwd = f"{HOME_PROJECT}/src"
            elif target in ("..", "-", "~", HOME_PROJECT, "~/proj"):
                self.cwd = HOME_PROJECT
            else:
                return f"bash: cd: {target}: No such file or directory\n"
            return ""
        if words[0] in ("cat", "head", "tail", "nl") and ">" not in words:
            if words[0] == "tail" and "-f" in words:
                self.foreground = "tail"
                return ""
            if words[0] == "cat" and len(words) == 1:
                self.foreground = "cat"
                return ""
            name = words[-1].split("/")[-1]
            content = {**TOP, **SRC}.get(name)
            return content if content is not None else f"{words[0]}: {name}: No such file\n"
        if words[0] == "cat" and words[1] == ">":
            self.foreground = "cat"
        elif words[0] in ("less", "vim") or words == ["python3"]:
            self.foreground = words[0]
        elif words[0] == "sleep" and words[-1] != "&":
            self.foreground = "sleep"
        return ""


def run_episode(seed: int, steps: int = 40) -> list[str]:
    """Play the policy against the fake shell; return the action texts."""
    return [text for text, _ in run_episode_with_cwd(seed, steps)]


def run_episode_with_cwd(seed: int, steps: int = 40) -> list[tuple[str, str]]:
    """Play the policy against the fake shell; return each action text with its directory."""
    policy = ExplorePolicy(max_steps=steps)
    policy.reset(seed, None)
    shell = FakeShell()
    observation = shell.start()
    history: list[HistoryItem] = []
    played = []
    while (action := policy.act(observation, history)) is not None:
        played.append((action.text, shell.cwd))
        observation = shell.step(action)
        history.append(HistoryItem(action=action, observation=observation))
    return played
