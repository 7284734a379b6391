"""An exploring terminal policy.

:class:`ExplorePolicy` behaves like a person finding their way around an unfamiliar machine:
it lists directories, walks into the ones it saw, reads the files it found, greps for words it
read, makes scratch files and directories of its own, copies, moves and deletes *only what it
made*, runs small Python one-liners, starts and kills background jobs, plays with git in a
repository, opens interactive programs (less, vim, the Python REPL, ``tail -f``) and leaves
them properly, and now and then makes a mistake (a missing file, a typo).

Every command is built from what this episode has shown so far: names come from the output of
its own ``ls -1p`` and ``find`` commands, words from the files it read, the working directory
from the observation. Choices come from a ``random.Random(seed)``, and the episode state is
kept in insertion-ordered dicts (never sets of strings, whose order changes between
processes), so the same seed and the same observations give the same actions.

Task-free exploring episodes start from a seeded project tree
(:func:`worldtrace.collectors.terminal.workspace.workspace_setup`).
"""

from __future__ import annotations

import posixpath
import random
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from worldtrace.collectors.base import (
    HistoryItem,
    Policy,
    PolicyParams,
    RawObservation,
    Weight,
    merged_weights,
)
from worldtrace.collectors.terminal.actions import command, keys, wait
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.collectors.terminal.tasks.helpers import HOME, TerminalTask
from worldtrace.schemas import Action

# The sandbox prompt is PS1='\u@\h:\w\$ ' (see the image's shell.bashrc).
_PROMPT = re.compile(r"^[\w.-]+@[\w.-]+:\S*[#$](?: |$)")
# Identifiers and words of 4-20 characters, not dunder fragments like "name__".
_WORD = re.compile(r"(?<![\w])[A-Za-z][A-Za-z0-9_]{2,18}[A-Za-z0-9](?![\w])")


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_STOPWORD_TEXT = (
    "this that with from have will your into than then them they what when were been more "
    "some such only also very just like over each most true false none self return import "
    "user root sandbox"
)
_STOPWORDS = frozenset(_names(_STOPWORD_TEXT))
_SAFE_NAME = re.compile(r"^[\w.,+-]+$")
# Files that only make sense to list, not to page, grep or open as text.
_BINARY_SUFFIXES = (".pyc", ".gz", ".tgz", ".zip", ".png", ".jpg", ".pdf", ".db", ".sqlite", ".so")

# How to get back to the shell from a foreground program, in order of escalation: the first
# entry is the normal way out, later ones are tried if the program is still there.
_QUIT_VIM = ("Escape", ":q!", "Enter")
_ESCAPES: dict[str, tuple[tuple[str, ...], ...]] = {
    "less": (("q",), ("q",), ("C-c",), _QUIT_VIM),
    "more": (("q",), ("C-c",)),
    "man": (("q",), ("C-c",)),
    "vim": (_QUIT_VIM, ("Escape", "Escape", ":qa!", "Enter"), ("C-c",)),
    "vi": (_QUIT_VIM, ("Escape", "Escape", ":qa!", "Enter"), ("C-c",)),
    "view": (_QUIT_VIM, ("C-c",)),
    "nvim": (_QUIT_VIM, ("C-c",)),
    "python3": (("C-d",), ("C-c",), ("Enter", "C-d")),
    "python": (("C-d",), ("C-c",), ("Enter", "C-d")),
    "sqlite3": ((".quit", "Enter"), ("C-c",), ("C-d",)),
    # git in the foreground is its pager or its editor.
    "git": (("q",), _QUIT_VIM, ("C-c",)),
    # A nested shell: C-c clears its line, C-d leaves it.
    "bash": (("C-c",), ("C-d",)),
    "sh": (("C-c",), ("C-d",)),
    "cat": (("C-d",), ("C-c",)),
}
_DEFAULT_ESCAPES: tuple[tuple[str, ...], ...] = (("C-c",), ("q",), _QUIT_VIM, ("C-c",))

_FILE_STEMS = _names(
    "notes todo scratch summary report draft ideas results checklist output log-excerpt questions"
)
_FILE_EXTS = (".txt", ".md", ".txt", ".log", ".csv")
_DIR_NAMES = _names("tmp scratch backup archive experiments out sandbox-notes drafts playground")
_FALLBACK_WORDS = _names(
    "alpha beta config error result value total update check release cache deploy"
)
_TYPOS = ("gti status", "sl", "pyhton3 --version", "grpe -n main .", "cd..", "claer", "mkdri tmp")
_ENV_NAMES = ("APP_ENV", "LOG_LEVEL", "DEBUG", "REGION", "BUILD_ID", "EDITOR_MODE")
_ENV_VALUES = ("staging", "debug", "1", "eu-west", "local", "42")
# Command pools; "{f}" is a file, "{n}" a variable name.
_LOOK_AT_FILE = ("file {f}", "ls -l {f}", "stat -c '%s bytes, %y' {f}")
_CSV_VIEWS = (
    "cut -d, -f1 {f} | sort | uniq -c | head",
    "column -s, -t < {f} | head",
    "sort -t, -k2 {f} | head -n 5",
)
_LONG_LISTINGS = ("ls -la", "ls -lh", "tree -L 2", "ls -lt | head")
_FIND_OTHER = ("find . -type d", "find . -newer README.md -type f", "du -sh *")
_FIND_EXTS = (".py", ".md", ".csv", ".log", ".txt", ".json", ".sh")
_PY_SNIPPETS = (
    "python3 -c 'import sys; print(sys.version)'",
    "python3 -c 'print(sum(range(101)))'",
    "python3 -c 'import os; print(sorted(os.listdir(\".\")))'",
    "python3 -c 'import platform; print(platform.platform())'",
)
_REPL_EXPRESSIONS = (
    "2 ** 16",
    "len('worldtrace')",
    "import os",
    "sum(x * x for x in range(10))",
    "'-'.join(['a', 'b'])",
)
_PS_COMMANDS = ("ps", "ps aux | grep [s]leep", "ps -o pid,etime,args", "pgrep -a sleep")
_GIT_LOOKS = ("git log --oneline -n 5", "git log --stat -n 1", "git branch", "git diff --stat")
_GIT_MESSAGES = ("Add notes", "Add scratch files", "Update results", "WIP", "Add summary")
_GIT_BRANCHES = ("feature/notes", "experiment", "fix/typo", "wip")
_ENV_LOOKS = ("echo ${n}", "env | grep {n}", "echo $HOME", "printenv {n}", "echo $PATH", "echo $?")
_MISC = (
    *_names("pwd whoami date id clear uptime"),
    "uname -a",
    "df -h .",
    "history | tail -n 5",
    "echo $SHELL",
    "free -m",
)
_MISSING_STEMS = ("missing", "notes-final", "config", "data-old")
_MISSING_DIRS = ("nowhere", "build", "srcs", "tmp2")
_FAILING = ("test -d build && echo yes", "false", "ls nosuchdir/", "[ -f setup.cfg ]")


def _matches(foreground: str, expected: str) -> bool:
    return foreground == expected or foreground.startswith(expected)


def command_output(observation: RawObservation, line: str) -> list[str] | None:
    """Return the lines ``line`` printed, read from the observation's scrollback and screen.

    Finds the last prompt at which ``line`` was typed (following the line wrap of long
    commands) and returns what follows it up to the next prompt; None if it is not visible.
    """
    text = plain_screen(observation.get("scrollback") or "")
    screen = plain_screen(observation.get("screen") or "")
    lines = (text + "\n" + screen).split("\n") if text else screen.split("\n")
    wanted = line.rstrip()
    for index in range(len(lines) - 1, -1, -1):
        match = _PROMPT.match(lines[index])
        if not match:
            continue
        typed, end = lines[index][match.end() :], index
        while len(typed) < len(wanted) and end + 1 < len(lines) and wanted.startswith(typed):
            end += 1
            typed += lines[end]
        if typed.rstrip() != wanted:
            continue
        output = []
        for out_line in lines[end + 1 :]:
            if _PROMPT.match(out_line):
                break
            output.append(out_line)
        return output
    return None


def _shows_repository(kind: str, output: list[str]) -> bool:
    """Tell from ``ls -1pA`` or ``git status`` output whether the directory is in a repository."""
    if kind == "lsa":
        return any(entry.strip() == ".git/" for entry in output)
    return bool(output) and not output[0].startswith("fatal:")


def _at_prompt(observation: RawObservation) -> bool:
    if observation.get("prompt", True):
        return True
    # The prompt flag can miss a prompt that came back in a race with the quiet timer; a
    # prompt on the cursor's line is as good.
    screen = plain_screen(observation.get("screen") or "").split("\n")
    cursor = observation.get("cursor") or [0, len(screen) - 1]
    row = cursor[1] if isinstance(cursor, list | tuple) and len(cursor) == 2 else -1
    line = screen[row] if 0 <= row < len(screen) else (screen[-1] if screen else "")
    return bool(_PROMPT.match(line)) and line.rstrip().endswith(("#", "$"))


@dataclass
class _Step:
    """A queued action and the foreground program it is meant for (None: the shell)."""

    action: Action
    expect: str | None


@dataclass
class _Plan:
    """What a generator proposes: the action now, follow-ups, and how to read its output."""

    action: Action
    then: tuple[_Step, ...] = ()
    parse: tuple[str, str] | None = None


DEFAULT_WEIGHTS: dict[str, float] = {
    "list": 3.0,
    "cd": 2.0,
    "read": 4.0,
    "grep": 2.0,
    "find": 1.0,
    "create": 2.0,
    "modify": 2.0,
    "python": 1.5,
    "interactive": 1.5,
    "jobs": 1.0,
    "git": 1.5,
    "env": 0.7,
    "misc": 0.8,
    "fail": 0.8,
}
"""The relative frequency of each kind of action."""


class TerminalExploreParams(PolicyParams):
    """The parameters of :class:`ExplorePolicy` (a config's ``policy.params``)."""

    policy = "terminal explore policy"

    max_steps: int = Field(
        default=40, ge=1, strict=True, description="actions per episode (then `act` ends it)"
    )
    weights: dict[str, Weight] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        description="relative frequency of kinds of action (keys of DEFAULT_WEIGHTS); the "
        "kinds given replace their defaults",
    )

    @field_validator("weights")
    @classmethod
    def _known_kinds(cls, weights: dict[str, float]) -> dict[str, float]:
        return merged_weights(weights, DEFAULT_WEIGHTS, "weights", "action kinds in weights")


class ExplorePolicy(Policy[TerminalTask]):
    """Explores a shell from what it has seen in this episode; see the module docstring.

    Its parameters are :class:`TerminalExploreParams`, given as the model or as keywords
    (``ExplorePolicy(max_steps=5)``).
    """

    kind = "explore"
    name = "terminal-explore"
    version = "1"

    DEFAULT_WEIGHTS = DEFAULT_WEIGHTS

    def __init__(self, params: TerminalExploreParams | None = None, /, **keywords: Any) -> None:
        self.params = TerminalExploreParams.given(params, keywords)
        self.max_steps = self.params.max_steps
        self.weights = dict(self.params.weights)
        self._generators: dict[str, Callable[[], _Plan | None]] = {
            "list": self._list,
            "cd": self._cd,
            "read": self._read,
            "grep": self._grep,
            "find": self._find,
            "create": self._create,
            "modify": self._modify,
            "python": self._python,
            "interactive": self._interactive,
            "jobs": self._jobs_action,
            "git": self._git,
            "env": self._env,
            "misc": self._misc,
            "fail": self._fail,
        }
        self.reset(0, None)

    # --- episode state ---------------------------------------------------------------------

    def reset(self, seed: int, task: TerminalTask | None) -> None:
        """Forget the previous episode and seed the choices."""
        self._rng = random.Random(seed)
        self._taken = 0
        self._cwd = HOME
        self._start: str | None = None
        self._listings: dict[str, list[str]] = {}
        self._files: dict[str, None] = {}
        self._dirs: dict[str, None] = {}
        self._read_files: dict[str, None] = {}
        self._words: dict[str, str] = {}  # word -> the file it was read from
        self._created: dict[str, str] = {}  # path -> "file" or "dir"
        self._jobs: dict[int, str] = {}  # bash job number -> command
        self._repos: dict[str, dict[str, int]] = {}  # root -> {"staged": n, "commits": n}
        self._exported: dict[str, str] = {}  # variable -> value (export)
        self._visited: dict[str, None] = {}
        self._not_repos: dict[str, None] = {}
        self._pending: list[_Step] = []
        self._parse: tuple[str, str, str] | None = None  # (kind, argument, command line)
        self._escapes = 0

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next exploring action, or None after ``max_steps`` actions."""
        if self._taken >= self.max_steps:
            return None
        self._absorb(observation)
        action = self._choose(observation)
        self._taken += 1
        return action

    # --- reading observations --------------------------------------------------------------

    def _absorb(self, observation: RawObservation) -> None:
        cwd = observation.get("cwd")
        if isinstance(cwd, str) and cwd.startswith("/"):
            self._cwd = cwd
        if self._start is None:
            self._start = self._cwd
        self._visited[self._cwd] = None
        if self._parse is None:
            return
        kind, argument, line = self._parse
        self._parse = None
        output = command_output(observation, line)
        if output is None:
            return
        if kind == "ls":
            self._learn_listing(argument, output)
        elif kind == "find":
            self._learn_find(argument, output)
        elif kind == "read":
            self._learn_words(argument, output)
        elif kind in ("lsa", "git") and _shows_repository(kind, output):
            self._repos.setdefault(argument, {"staged": 0, "commits": 1})
        elif kind == "git":
            self._not_repos[argument] = None

    def _learn_listing(self, directory: str, output: list[str]) -> None:
        entries = [
            entry
            for entry in (line.strip() for line in output)
            if entry and not entry.startswith(("ls:", "total ")) and entry not in ("./", "../")
        ]
        # A fresh listing replaces what we believed about this directory.
        for gone in self._listings.get(directory, []):
            if gone not in entries:
                path = posixpath.join(directory, gone.rstrip("/"))
                self._files.pop(path, None)
                self._dirs.pop(path, None)
        self._listings[directory] = entries
        for entry in entries:
            # Names that would need quoting are left alone; they are rare in workspaces.
            if not _SAFE_NAME.match(entry.rstrip("/")):
                continue
            path = posixpath.join(directory, entry.rstrip("/"))
            if entry.endswith("/"):
                self._dirs[path] = None
            else:
                self._files[path] = None

    def _learn_find(self, base: str, output: list[str]) -> None:
        for line in output:
            line = line.strip()
            parts = line[2:].split("/")
            # Hidden directories (.git, caches) hold machine files, not things to read.
            if (
                not line.startswith("./")
                or not all(_SAFE_NAME.match(part) for part in parts)
                or any(part.startswith(".") or part == "__pycache__" for part in parts[:-1])
            ):
                continue
            path = posixpath.normpath(posixpath.join(base, line))
            self._files[path] = None
            parent = posixpath.dirname(path)
            while parent.startswith(base) and parent != base:
                self._dirs[parent] = None
                parent = posixpath.dirname(parent)

    def _learn_words(self, path: str, output: list[str]) -> None:
        if output and output[0].startswith(("cat:", "head:", "tail:")):
            return
        self._read_files[path] = None
        for line in output[:60]:
            for word in _WORD.findall(line):
                # Hashes and ids ("aa9d1b23", "JMU06d01") make poor grep patterns.
                digits = sum(c.isdigit() for c in word)
                if word.lower() not in _STOPWORDS and digits <= 2 and word not in self._words:
                    self._words[word] = path
        # Keep the vocabulary small; the earliest words are as good as any.
        while len(self._words) > 300:
            self._words.pop(next(iter(self._words)))

    # --- choosing --------------------------------------------------------------------------

    def _choose(self, observation: RawObservation) -> Action:
        foreground = observation.get("foreground")
        if self._pending:
            step = self._pending[0]
            if foreground is None:
                expected_here = step.expect is None
            else:
                expected_here = step.expect is not None and _matches(foreground, step.expect)
            if expected_here:
                self._pending.pop(0)
                self._escapes = 0
                return step.action
            self._pending.clear()
        if foreground is not None:
            return self._escape(str(foreground))
        if not _at_prompt(observation):
            # No program and no prompt: a continuation prompt or a race; C-c gives a prompt.
            self._parse = None
            return keys("C-c")
        self._escapes = 0
        if self._start not in self._listings and self._taken == 0:
            return self._use(self._plan_list(self._cwd, "ls -1p"))
        weights = dict(self.weights)
        # Curiosity: a directory not listed yet, or subdirectories not entered yet, pull harder.
        if self._cwd not in self._listings:
            weights["list"] *= 3
        if any(d not in self._visited for d in self._child_dirs()):
            weights["cd"] *= 3
        remaining = self.max_steps - self._taken
        if remaining <= 4:
            weights["interactive"] = 0.0  # its sequences run up to four steps
        kinds = [kind for kind, weight in weights.items() if weight > 0]
        for _ in range(20):
            kind = self._rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
            plan = self._generators[kind]()
            # An interactive sequence that cannot finish would end the episode inside a program.
            if plan is not None and len(plan.then) < remaining:
                return self._use(plan)
        return self._use(self._plan_list(self._cwd, "ls -1p"))

    def _use(self, plan: _Plan) -> Action:
        self._pending = list(plan.then)
        if plan.parse is not None:
            self._parse = (*plan.parse, plan.action.arguments["keys"][0])
        return plan.action

    def _escape(self, foreground: str) -> Action:
        ladder = next(
            (steps for name, steps in _ESCAPES.items() if _matches(foreground, name)),
            _DEFAULT_ESCAPES,
        )
        sequence = ladder[min(self._escapes, len(ladder) - 1)]
        self._escapes += 1
        self._parse = None
        return keys(*sequence)

    # --- helpers ---------------------------------------------------------------------------

    def _pick(self, items: Sequence[str]) -> str:
        return items[self._rng.randrange(len(items))]

    def _show(self, path: str) -> str:
        """Return how a person would type ``path`` from the current directory."""
        if path == self._cwd:
            return "."
        if path.startswith(self._cwd.rstrip("/") + "/"):
            shown = path[len(self._cwd.rstrip("/")) + 1 :]
        elif posixpath.dirname(path) == posixpath.dirname(self._cwd):
            shown = "../" + posixpath.basename(path)
        elif path == HOME or path.startswith(HOME + "/"):
            return "~" + shlex.quote(path[len(HOME) :]) if path != HOME else "~"
        else:
            shown = path
        return shlex.quote(shown)

    def _plain(self, path: str) -> str:
        """Return ``path`` relative to the current directory if inside it, else absolute.

        For paths inside Python strings, where the shell does not expand ``~``.
        """
        prefix = self._cwd.rstrip("/") + "/"
        return path[len(prefix) :] if path.startswith(prefix) else path

    def _files_near(self) -> list[str]:
        """Known text files under the current directory, or all known text files if none are."""
        prefix = self._cwd.rstrip("/") + "/"
        text = [path for path in self._files if not path.endswith(_BINARY_SUFFIXES)]
        near = [path for path in text if path.startswith(prefix)]
        return near or text

    def _child_dirs(self) -> list[str]:
        return [d for d in self._dirs if posixpath.dirname(d) == self._cwd]

    def _word(self) -> str | None:
        return self._pick(list(self._words)) if self._words else None

    def _new_name(self, directory: str, stem: str, ext: str = "") -> str:
        taken = {entry.rstrip("/") for entry in self._listings.get(directory, [])}
        taken |= {posixpath.basename(p) for p in self._created if posixpath.dirname(p) == directory}
        name, number = f"{stem}{ext}", 1
        while name in taken:
            number += 1
            name = f"{stem}-{number}{ext}"
        return name

    def _content_words(self, count: int) -> list[str]:
        pool = list(self._words) or list(_FALLBACK_WORDS)
        return [self._pick(pool) for _ in range(count)]

    def _plan_list(self, directory: str, form: str) -> _Plan:
        target = "" if directory == self._cwd else " " + self._show(directory)
        line = f"{form}{target}"
        return _Plan(command(line), parse=("ls", directory))

    # --- action generators -----------------------------------------------------------------
    # Each returns a plan, or None when it has nothing sensible to do in the current state.

    def _list(self) -> _Plan | None:
        unlisted = [d for d in self._child_dirs() if d not in self._listings]
        roll = self._rng.random()
        if self._cwd not in self._listings or roll < 0.35:
            return self._plan_list(self._cwd, self._pick(("ls -1p", "ls -1p", "ls -p -1")))
        if unlisted and roll < 0.75:
            return self._plan_list(self._pick(unlisted), "ls -1p")
        if roll < 0.85:
            return _Plan(command("ls -1pA"), parse=("lsa", self._cwd))
        return _Plan(command(self._pick(_LONG_LISTINGS)))

    def _cd(self) -> _Plan | None:
        children = self._child_dirs()
        fresh = [d for d in children if d not in self._visited]
        roll = self._rng.random()
        if fresh and roll < 0.8:
            return _Plan(command(f"cd {self._show(self._pick(fresh))}"))
        if children and roll < 0.6:
            return _Plan(command(f"cd {self._show(self._pick(children))}"))
        if self._cwd != self._start and self._start is not None:
            back = self._pick(("cd ..", "cd ..", "cd -", f"cd {self._show(self._start)}"))
            return _Plan(command(back))
        if self._cwd != HOME and roll < 0.8:
            return _Plan(command("cd .."))
        listed_elsewhere = [d for d in self._dirs if d != self._cwd]
        if listed_elsewhere:
            return _Plan(command(f"cd {self._show(self._pick(listed_elsewhere))}"))
        return None

    def _read(self) -> _Plan | None:
        files = self._files_near()
        if not files:
            return None
        unread = [path for path in files if path not in self._read_files]
        path = self._pick(unread if unread and self._rng.random() < 0.7 else files)
        shown = self._show(path)
        roll = self._rng.random()
        if roll < 0.4:
            line = f"cat {shown}"
        elif roll < 0.6:
            line = f"head -n {self._pick(('5', '10', '20'))} {shown}"
        elif roll < 0.72:
            line = f"tail -n {self._pick(('5', '10', '15'))} {shown}"
        elif roll < 0.84:
            return _Plan(command(f"wc {self._pick(('-l', '-lw', ''))} {shown}".replace("  ", " ")))
        elif roll < 0.92:
            return _Plan(command(self._pick(_LOOK_AT_FILE).format(f=shown)))
        elif path.endswith(".csv"):
            return _Plan(command(self._pick(_CSV_VIEWS).format(f=shown)))
        else:
            line = f"nl -ba {shown} | head -n 25"
        return _Plan(command(line), parse=("read", path))

    def _grep(self) -> _Plan | None:
        word = self._word()
        if word is None:
            return None
        source = self._words[word]
        files = self._files_near()
        roll = self._rng.random()
        if roll < 0.35:
            return _Plan(command(f"grep -n {word} {self._show(source)}"))
        if roll < 0.6:
            return _Plan(command(f"grep -rn {word} . | head -n 20"))
        if roll < 0.75 and files:
            other = self._pick(files)
            return _Plan(command(f"grep -c {word} {self._show(other)}"))
        if roll < 0.88:
            return _Plan(command(f"grep -ril {word.lower()} ."))
        return _Plan(command(f"grep -v {word} {self._show(source)} | wc -l"))

    def _find(self) -> _Plan | None:
        roll = self._rng.random()
        if roll < 0.5:
            return _Plan(command("find . -type f | head -n 40"), parse=("find", self._cwd))
        if roll < 0.75:
            ext = self._pick(_FIND_EXTS)
            return _Plan(command(f"find . -name '*{ext}'"), parse=("find", self._cwd))
        return _Plan(command(self._pick(_FIND_OTHER)))

    def _create(self) -> _Plan | None:
        if self._cwd not in self._listings:
            return None  # names must not collide with files we have not seen
        roll = self._rng.random()
        if roll < 0.25:
            name = self._new_name(self._cwd, self._pick(_DIR_NAMES))
            path = posixpath.join(self._cwd, name)
            self._created[path] = "dir"
            self._dirs[path] = None
            self._listings[self._cwd].append(name + "/")
            self._listings[path] = []
            if self._rng.random() < 0.6:
                return _Plan(command(f"mkdir {name}"))
            sub = self._pick(("2024", "old", "inbox", "v1"))
            self._created[f"{path}/{sub}"] = "dir"
            self._dirs[f"{path}/{sub}"] = None
            self._listings[path].append(sub + "/")
            self._listings[f"{path}/{sub}"] = []
            return _Plan(command(f"mkdir -p {name}/{sub}"))
        ext = self._pick(_FILE_EXTS)
        name = self._new_name(self._cwd, self._pick(_FILE_STEMS), ext)
        path = posixpath.join(self._cwd, name)
        self._created[path] = "file"
        self._files[path] = None
        self._listings[self._cwd].append(name)
        words = self._content_words(6)
        if ext == ".csv":
            rows = ["name,count"] + [f"{w},{self._rng.randint(1, 99)}" for w in words[:4]]
            line = "printf '%s\\n' " + " ".join(rows) + f" > {name}"
        elif roll < 0.55:
            line = f"echo '{' '.join(words[:4])}' > {name}"
        elif roll < 0.75:
            line = f"printf '%s\\n' {' '.join(words[:3])} > {name}"
        elif roll < 0.9:
            body = "\n".join(f"- {w}" for w in words[:4])
            line = f"cat > {name} <<'EOF'\n# {words[4]}\n{body}\nEOF"
        else:
            line = f"touch {name}"
        return _Plan(command(line))

    def _modify(self) -> _Plan | None:
        files = [p for p, kind in self._created.items() if kind == "file"]
        dirs = [p for p, kind in self._created.items() if kind == "dir"]
        if not files and not dirs:
            return None
        roll = self._rng.random()
        if files and roll < 0.25:
            path = self._pick(files)
            return _Plan(
                command(f"echo '{' '.join(self._content_words(3))}' >> {self._show(path)}")
            )
        if files and roll < 0.4:
            path = self._pick(files)
            old, new = self._content_words(2)
            return _Plan(command(f"sed -i 's/{old}/{new}/g' {self._show(path)}"))
        if files and roll < 0.55:
            path = self._pick(files)
            target_dir = (
                self._pick(dirs) if dirs and self._rng.random() < 0.5 else posixpath.dirname(path)
            )
            stem, ext = posixpath.splitext(posixpath.basename(path))
            name = self._new_name(
                target_dir, f"{stem}-copy" if target_dir == posixpath.dirname(path) else stem, ext
            )
            copy = posixpath.join(target_dir, name)
            self._created[copy] = "file"
            self._files[copy] = None
            self._listings.setdefault(target_dir, []).append(name)
            return _Plan(command(f"cp {self._show(path)} {self._show(copy)}"))
        if files and roll < 0.68:
            path = self._pick(files)
            stem, ext = posixpath.splitext(posixpath.basename(path))
            directory = posixpath.dirname(path)
            name = self._new_name(directory, f"{stem}-old", ext)
            moved = posixpath.join(directory, name)
            self._forget(path)
            self._created[moved] = "file"
            self._files[moved] = None
            self._listings.setdefault(directory, []).append(name)
            return _Plan(command(f"mv {self._show(path)} {self._show(moved)}"))
        if files and roll < 0.85:
            path = self._pick(files)
            self._forget(path)
            return _Plan(command(f"rm {self._show(path)}"))
        if dirs:
            path = self._pick(dirs)
            if self._cwd == path or self._cwd.startswith(path + "/"):
                return _Plan(command("cd .."))
            self._forget(path)
            return _Plan(command(f"rm -r {self._show(path)}"))
        return None

    def _forget(self, path: str) -> None:
        for known in list(self._created):
            if known == path or known.startswith(path + "/"):
                del self._created[known]
        for table in (self._files, self._dirs, self._read_files):
            for known in list(table):
                if known == path or known.startswith(path + "/"):
                    del table[known]
        parent = posixpath.dirname(path)
        base = posixpath.basename(path)
        if parent in self._listings:
            self._listings[parent] = [e for e in self._listings[parent] if e.rstrip("/") != base]
        self._listings.pop(path, None)

    def _python(self) -> _Plan | None:
        files = self._files_near()
        roll = self._rng.random()
        if not files or roll < 0.15:
            return _Plan(command(self._pick(_PY_SNIPPETS)))
        path = self._pick(files)
        shown = self._show(path)
        quoted = f'"{self._plain(path)}"'  # known names need no escaping (_SAFE_NAME)
        if path.endswith(".csv") and roll < 0.55:
            line = (
                f"python3 -c 'import csv; rows = list(csv.reader(open({quoted}))); "
                "print(rows[0], len(rows) - 1)'"
            )
        elif path.endswith(".json") and roll < 0.55:
            line = f"python3 -m json.tool {shown} | head -n 20"
        elif path.endswith(".py") and roll < 0.55:
            line = f"python3 -m py_compile {shown} && echo compiled"
        elif roll < 0.7:
            line = f"python3 -c 'print(len(open({quoted}).read().splitlines()))'"
        elif roll < 0.85:
            line = (
                f"python3 -c 'import collections; print(collections.Counter("
                f"open({quoted}).read().split()).most_common(3))'"
            )
        else:
            line = f"python3 -c 'print(open({quoted}).read().upper()[:200])'"
        return _Plan(command(line))

    def _interactive(self) -> _Plan | None:
        files = self._files_near()
        roll = self._rng.random()
        if files and roll < 0.3:
            path = self._pick(files)
            moves = [self._pick(("Space", "G", "j", "b"))]
            word = self._word()
            if word and self._rng.random() < 0.5:
                moves.append(f"/{word}")
            then = tuple(
                _Step(keys(move, "Enter") if move.startswith("/") else keys(move), "less")
                for move in moves
            )
            return _Plan(
                command(f"less {self._show(path)}"), then=(*then, _Step(keys("q"), "less"))
            )
        if roll < 0.5:
            expressions = [self._pick(_REPL_EXPRESSIONS)]
            if files and self._rng.random() < 0.6:
                quoted = f'"{self._plain(self._pick(files))}"'
                expressions.append(f"len(open({quoted}).read())")
            then = tuple(_Step(keys(e, "Enter"), "python3") for e in expressions)
            return _Plan(command("python3"), then=(*then, _Step(keys("C-d"), "python3")))
        if roll < 0.7:
            created = [p for p, kind in self._created.items() if kind == "file"]
            if created and self._rng.random() < 0.6:
                path = self._pick(created)
                text = " ".join(self._content_words(3))
                return _Plan(
                    command(f"vim {self._show(path)}"),
                    then=(
                        _Step(keys("G"), "vim"),
                        _Step(keys("o", text, "Escape"), "vim"),
                        _Step(keys(":wq", "Enter"), "vim"),
                    ),
                )
            if files:
                path = self._pick(files)
                return _Plan(
                    command(f"vim {self._show(path)}"),
                    then=(
                        _Step(keys(self._pick(("G", "j", "w", "}"))), "vim"),
                        _Step(keys(":q", "Enter"), "vim"),
                    ),
                )
            return None
        if roll < 0.8 and files:
            return _Plan(
                command(f"tail -f {self._show(self._pick(files))}"),
                then=(_Step(keys("C-c"), "tail"),),
            )
        if roll < 0.9 and self._cwd in self._listings:
            name = self._new_name(self._cwd, self._pick(_FILE_STEMS), ".txt")
            path = posixpath.join(self._cwd, name)
            self._created[path] = "file"
            self._files[path] = None
            self._listings[self._cwd].append(name)
            lines = tuple(
                _Step(keys(" ".join(self._content_words(3)), "Enter"), "cat")
                for _ in range(self._rng.randint(1, 3))
            )
            return _Plan(command(f"cat > {name}"), then=(*lines, _Step(keys("C-d"), "cat")))
        return _Plan(
            command(f"sleep {self._pick(('30', '100', '1000'))}"),
            then=(_Step(keys("C-c"), "sleep"),),
        )

    def _jobs_action(self) -> _Plan | None:
        roll = self._rng.random()
        if not self._jobs or (len(self._jobs) < 2 and roll < 0.3):
            seconds = self._pick(("300", "600", "900"))
            # bash numbers a new job one past the highest job it still lists.
            self._jobs[max(self._jobs, default=0) + 1] = f"sleep {seconds}"
            return _Plan(command(f"sleep {seconds} &"))
        if roll < 0.45:
            return _Plan(command(self._pick(("jobs", "jobs -l"))))
        if roll < 0.65:
            return _Plan(command(self._pick(_PS_COMMANDS)))
        if roll < 0.8:
            # A short foreground wait: the step ends while sleep runs, then we wait it out.
            return _Plan(command("sleep 1 && echo done"), then=(_Step(wait(2), "sleep"),))
        number = self._pick([str(n) for n in self._jobs])
        del self._jobs[int(number)]
        return _Plan(
            command(self._pick((f"kill %{number}", f"kill -9 %{number}", f"kill %{number}")))
        )

    def _git(self) -> _Plan | None:
        repo = next(
            (r for r in self._repos if self._cwd == r or self._cwd.startswith(r + "/")), None
        )
        if repo is None:
            if self._cwd not in self._not_repos:
                return _Plan(command("git status"), parse=("git", self._cwd))
            if self._cwd == HOME or self._cwd not in self._listings:
                return None
            self._repos[self._cwd] = {"staged": 0, "commits": 0}
            return _Plan(command("git init"))
        state = self._repos[repo]
        mine = [
            p for p, kind in self._created.items() if kind == "file" and p.startswith(repo + "/")
        ]
        roll = self._rng.random()
        if state["staged"] and roll < 0.5:
            state["staged"], state["commits"] = 0, state["commits"] + 1
            message = self._pick(_GIT_MESSAGES)
            return _Plan(command(f'git commit -m "{message}"'))
        if mine and roll < 0.5:
            state["staged"] += 1
            return _Plan(command(f"git add {self._show(self._pick(mine))}"))
        if roll < 0.6:
            return _Plan(
                command("git status --short" if self._rng.random() < 0.5 else "git status")
            )
        if state["commits"] and roll < 0.8:
            return _Plan(command(self._pick(_GIT_LOOKS)))
        if state["commits"] and roll < 0.9:
            branch = self._pick(_GIT_BRANCHES)
            create = self._rng.random() < 0.5
            return _Plan(command(f"git checkout -b {branch}" if create else f"git branch {branch}"))
        return _Plan(command(self._pick(("git diff", "git status --short", "git stash list"))))

    def _env(self) -> _Plan | None:
        roll = self._rng.random()
        if roll < 0.35 or not self._exported:
            name = self._pick(_ENV_NAMES)
            value = self._pick(_ENV_VALUES)
            self._exported[name] = value
            return _Plan(command(f"export {name}={value}"))
        name = self._pick(list(self._exported))
        return _Plan(command(self._pick(_ENV_LOOKS).format(n=name)))

    def _misc(self) -> _Plan | None:
        return _Plan(command(self._pick(_MISC)))

    def _fail(self) -> _Plan | None:
        roll = self._rng.random()
        if roll < 0.3:
            name = self._new_name(self._cwd, self._pick(_MISSING_STEMS), ".txt")
            return _Plan(command(f"cat {name}"))
        if roll < 0.45:
            return _Plan(command(f"cd {self._pick(_MISSING_DIRS)}"))
        if roll < 0.6:
            return _Plan(command(self._pick(_TYPOS)))
        if roll < 0.75:
            word = self._word() or self._pick(_FALLBACK_WORDS)
            if not self._files:
                return _Plan(command(f"grep {word} nosuchfile.log"))
            target = self._show(self._pick(self._files_near()))
            return _Plan(command(f"grep -q {word}zz {target}; echo $?"))
        if roll < 0.85:
            return _Plan(command("python3 -c 'print(1 / 0)'"))
        return _Plan(command(self._pick(_FAILING)))
