"""The swe domain's exploring policy: a task-free walk through a repository, like an agent's.

:class:`SweExplorePolicy` finds its way around a Python repository one tool call at a time:
it lists the top level and then folders it saw listed, reads files it saw (all of one or a
range of lines; Python files, READMEs and packaging files first), searches for identifiers it
read (definitions and imported names), runs single tests it found (test files it listed, test
ids it read in them), runs a few ordinary shell commands (``git log``, ``wc -l``, importing the
package), makes small edits of lines it read (a constant, a comparison, a string, a comment),
runs the tests that likely cover the edited module and reverts the edit with git. Now and then
it makes a mistake an agent makes (a mistyped path or test id, a search for a misspelled name,
an edit whose old text is slightly off), so the world model sees errors too.

Every argument is built from what this episode's observations have shown: paths from its own
``list_dir`` and ``search`` outputs, identifiers, test ids and edited lines from its own
``read_file`` outputs (numbered like ``cat -n``). Choices come from a ``random.Random(seed)``
and the episode state lives in insertion-ordered dicts (never sets of strings, whose order
changes between processes), so the same seed and the same observations give the same actions.

The repository is left as it was found: every edit is followed (within a few steps) by a test
run and a revert, an edit sequence starts only when the steps left can finish it, scratch files
it writes are removed, and a tracked file the working tree shows modified while nothing is
pending is checked out again.
"""

from __future__ import annotations

import posixpath
import random
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field, field_validator

from worldtrace.collectors.base import (
    HistoryItem,
    Policy,
    PolicyParams,
    Share,
    Weight,
    merged_weights,
)
from worldtrace.collectors.swe.tools import tool_call
from worldtrace.schemas import Action
from worldtrace.schemas.raw import RawObservation

SHELL_TIMEOUT_S = 30.0
"""The timeout every shell command of the policy asks for (all are quick)."""

# A read_file line: the number right-aligned in six columns, a tab, the line (like cat -n).
_NUMBERED = re.compile(r"^ *(\d+)\t(.*)$")
# A search hit: path:line:text (grep -rn).
_HIT = re.compile(r"^([\w./+-]+):(?P<line>\d+):")
_SINGLE_FILE_HIT = re.compile(r"^(?P<line>\d+):")
_DEFINITION = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)")
_FROM_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+\(?([\w\s,]+)\)?\s*(?:#.*)?$")
_IMPORT_LINE = re.compile(r"^\s*(?:from|import)\s")
_IMPORT = re.compile(r"^\s*import\s+([\w.]+)(?:\s+as\s+\w+)?\s*$")
# A line that looks like code rather than prose: an operator or bracket, or a statement keyword.
_CODE_LIKE = re.compile(
    r"[=()\[\]{}]|:$|^(?:return|if|elif|else|for|while|import|from|raise|yield|del|assert|try|"
    r"except|finally|with|pass|break|continue|global|nonlocal)\b"
)
_ORIENTATION = re.compile(r"^Repository ([\w.-]+)")
_SAFE_NAME = re.compile(r"^[\w.+-]+$")
_GIT_STATUS_LINE = re.compile(r"^(..) (.+)$")

# Files read whole or in part, in order of interest to someone new to a repository.
_PACKAGING = ("setup.cfg", "pyproject.toml", "setup.py", "tox.ini", "MANIFEST.in")
_TEXT_SUFFIXES = (".rst", ".md", ".txt", ".cfg", ".toml", ".ini", ".yml", ".yaml", ".json")
_BINARY_SUFFIXES = (".pyc", ".so", ".png", ".jpg", ".gif", ".gz", ".zip", ".whl", ".pdf", ".ico")
_TEST_DIRS = ("tests", "test", "testing")
# Folders of documentation, examples and assets: worth a look, less than the code.
_SIDE_DIRS = (
    "docs",
    "doc",
    "examples",
    "example",
    "artwork",
    "requirements",
    "scripts",
    "benchmarks",
)
# Folders of generated or hidden files that an agent rarely lists.
_DULL_DIRS = ("__pycache__", ".git", ".tox", ".eggs", "build", "dist")

# Changes an edit makes to one line: (pattern, replacement); the first that matches is a
# candidate. Comparisons are only swapped between spaces, so ``->`` or ``<=`` stay whole.
_COMPARISON_SWAPS = (
    (" == ", " != "),
    (" != ", " == "),
    (" <= ", " < "),
    (" >= ", " > "),
    (" < ", " <= "),
    (" > ", " >= "),
    (" is not None", " is None"),
    (" is None", " is not None"),
    (" and ", " or "),
    (" or ", " and "),
)
_INTEGER = re.compile(r"(?<![\w.'\"])(\d{1,4})(?![\w.'\"])")
_STRING = re.compile(r"""(['"])([A-Za-z][\w ,.:-]{0,30})\1""")
_BOOLEAN = re.compile(r"\b(True|False)\b")
_COMMENTS = (
    "# TODO: check this",
    "# note: edge case?",
    "# checked",
    "# FIXME: is this right?",
    "# why is this needed?",
)
_SHELL_LOOKS = (
    "git log --oneline -3",
    "git status --short",
    "git status",
    "git show --stat HEAD | head -n 20",
    "git diff --stat",
    "python --version",
    "ls -la",
)
_NOISE_WORDS = frozenset(("self", "cls", "None", "True", "False", "object", "print"))


@dataclass
class _FileView:
    """What the episode has seen of one file: its lines by number and whether all of them."""

    lines: dict[int, str] = field(default_factory=dict)
    length: int | None = None  # known after a read that reached the end of the file


@dataclass
class _Step:
    """A queued action; ``cancels_rest``: if it fails, the rest of its sequence is dropped."""

    action: Action
    cancels_rest: bool = False
    spare: int = 0  # steps to keep free after the sequence, should this one need a clean-up


def _succeeded(observation: RawObservation) -> bool:
    """Whether the tool call that produced ``observation`` did what it was asked."""
    return (
        observation.get("error") is None
        and not observation.get("timed_out")
        and observation.get("exit_code") in (0, None)
    )


def _typo(name: str, rng: random.Random) -> str:
    """Return ``name`` with one slip of the fingers: a letter dropped, doubled or swapped."""
    letters = [i for i, c in enumerate(name) if c.isalpha()]
    if not letters:
        return name + "x"
    i = letters[rng.randrange(len(letters))]
    roll = rng.random()
    if roll < 0.35 and len(letters) > 1:
        return name[:i] + name[i + 1 :]
    if roll < 0.65 and i + 1 < len(name) and name[i + 1] != name[i]:
        return name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    return name[:i] + name[i] + name[i:]


def _is_test_file(path: str) -> bool:
    base = posixpath.basename(path)
    return base.endswith(".py") and (base.startswith("test_") or base.endswith("_test.py"))


DEFAULT_WEIGHTS: dict[str, float] = {
    "list": 2.0,
    "read": 4.0,
    "search": 2.5,
    "test": 2.0,
    "edit": 2.0,
    "shell": 1.4,
    "script": 0.4,
}
"""The relative frequency of each kind of action."""


class SweExploreParams(PolicyParams):
    """The parameters of :class:`SweExplorePolicy` (a config's ``policy.params``)."""

    policy = "swe explore policy"

    max_steps: int = Field(
        default=30, ge=1, strict=True, description="actions per episode (then `act` ends it)"
    )
    weights: dict[str, Weight] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        description="relative frequency of kinds of action (keys of DEFAULT_WEIGHTS); the "
        "kinds given replace their defaults",
    )
    mistake_rate: Share = Field(
        default=0.06,
        description="the chance that a step is a natural mistake instead (a mistyped path, "
        "test id or name)",
    )

    @field_validator("weights")
    @classmethod
    def _known_kinds(cls, weights: dict[str, float]) -> dict[str, float]:
        return merged_weights(weights, DEFAULT_WEIGHTS, "weights", "action kinds in weights")


class SweExplorePolicy(Policy[Any]):
    """Explores a repository from what it has seen in this episode; see the module docstring.

    Its parameters are :class:`SweExploreParams`, given as the model or as keywords
    (``SweExplorePolicy(max_steps=5)``).
    """

    kind = "explore"
    name = "swe-explore"
    version = "1"

    DEFAULT_WEIGHTS = DEFAULT_WEIGHTS

    def __init__(self, params: SweExploreParams | None = None, /, **keywords: Any) -> None:
        self.params = SweExploreParams.given(params, keywords)
        self.max_steps = self.params.max_steps
        self.weights = dict(self.params.weights)
        self.mistake_rate = self.params.mistake_rate
        self._generators: dict[str, Callable[[], list[_Step] | None]] = {
            "list": self._list,
            "read": self._read,
            "search": self._search,
            "test": self._test,
            "edit": self._edit,
            "shell": self._shell_look,
            "script": self._script,
        }
        self.reset(0, None)

    # --- episode state -----------------------------------------------------------------------

    def reset(self, seed: int, task: Any | None) -> None:
        """Forget the previous episode and seed the choices (the task is not used)."""
        self._rng = random.Random(seed)
        self._taken = 0
        self._last: Action | None = None
        self._previous = ""  # the text of the last action, not to be repeated by choice
        self._pending: list[_Step] = []
        self._cancel_on_failure = False
        self._listings: dict[str, list[str]] = {}
        self._dirs: dict[str, None] = {".": None}
        self._files: dict[str, None] = {}
        self._views: dict[str, _FileView] = {}
        self._identifiers: dict[str, str] = {}  # identifier -> the file it was read in
        self._identifier_kinds: dict[str, str] = {}  # identifier -> "def", "class" or "import"
        self._top_level: dict[str, str] = {}  # module-level def/class name -> its module file
        self._test_ids: dict[str, None] = {}
        self._hits: dict[tuple[str, int], None] = {}  # search hits (path, line)
        self._packages: dict[str, str] = {}  # import name -> its folder
        self._repo_name = ""  # from the first observation's orientation
        # Files changed by an edit and not reverted yet, with the edit's (old, new) text.
        self._edited: dict[str, tuple[str, str]] = {}
        self._created: dict[str, None] = {}  # files the policy wrote

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next exploring action, or None after ``max_steps`` actions."""
        if self._taken >= self.max_steps:
            return None
        self._absorb(observation)
        action = self._choose(observation)
        self._last = action
        self._taken += 1
        return action

    # --- reading observations ----------------------------------------------------------------

    def _absorb(self, observation: RawObservation) -> None:
        action, self._last = self._last, None
        ok = _succeeded(observation)
        if self._cancel_on_failure and not ok:
            self._pending.clear()
        self._cancel_on_failure = False
        if action is None:
            # The first observation orients: "Repository NAME VERSION in ...".
            opening = _ORIENTATION.match(str(observation.get("output") or ""))
            if opening:
                self._repo_name = opening[1]
            return
        if not ok:
            return
        output = str(observation.get("output") or "")
        arguments = action.arguments
        if action.name == "list_dir":
            self._learn_listing(posixpath.normpath(arguments["path"]), output)
        elif action.name == "read_file":
            self._learn_read(posixpath.normpath(arguments["path"]), arguments, output)
        elif action.name == "search":
            self._learn_hits(posixpath.normpath(arguments["path"]), output)
        elif action.name == "str_replace":
            path = posixpath.normpath(arguments["path"])
            if self._edited.get(path) == (arguments["new"], arguments["old"]):
                del self._edited[path]  # the edit undone by hand
            else:
                self._edited[path] = (arguments["old"], arguments["new"])
            self._learn_edit(path, arguments["old"], arguments["new"])
        elif action.name == "write_file":
            self._created[posixpath.normpath(arguments["path"])] = None
        elif action.name == "run_shell_command":
            self._learn_command(arguments["command"])

    def _learn_listing(self, folder: str, output: str) -> None:
        entries = [line for line in output.splitlines() if line.strip()]
        self._listings[folder] = entries
        names = [entry.rstrip("/") for entry in entries]
        for entry in entries:
            name = entry.rstrip("/")
            # Names that would need quoting in a shell command are left alone.
            if not _SAFE_NAME.match(name):
                continue
            path = posixpath.normpath(posixpath.join(folder, name))
            if entry.endswith("/"):
                self._dirs[path] = None
            else:
                self._files[path] = None
        parent = posixpath.dirname(folder)
        package = posixpath.basename(folder)
        # A top-level folder with an __init__.py is a package, unless it holds the tests.
        top_level = parent in ("", ".", "src") and _SAFE_NAME.match(package) is not None
        library = package not in _TEST_DIRS and package.isidentifier()
        if "__init__.py" in names and top_level and library:
            self._packages.setdefault(package, folder)

    def _learn_read(self, path: str, arguments: Mapping[str, Any], output: str) -> None:
        view = self._views.setdefault(path, _FileView())
        numbered: list[tuple[int, str]] = []
        for line in output.split("\n"):
            match = _NUMBERED.match(line)
            if match:
                numbered.append((int(match[1]), match[2]))
        for number, text in numbered:
            view.lines[number] = text
        end = arguments.get("end_line")
        last = numbered[-1][0] if numbered else (arguments.get("start_line") or 1) - 1
        if end is None or last < end:
            view.length = last  # the read reached the end of the file
        self._learn_names(path, numbered)

    def _learn_names(self, path: str, numbered: list[tuple[int, str]]) -> None:
        """Take identifiers (definitions, imports) and test ids from lines read from ``path``."""
        test_file = _is_test_file(path)
        test_class: str | None = None
        for _, text in numbered:
            definition = _DEFINITION.match(text)
            if definition:
                indent, keyword, name = definition.groups()
                if not indent:
                    test_class = name if keyword == "class" and name.startswith("Test") else None
                    if not test_file and path.endswith(".py") and not name.startswith("_"):
                        self._top_level.setdefault(name, path)
                if test_file and keyword == "def" and name.startswith("test"):
                    if not indent:
                        self._test_ids.setdefault(f"{path}::{name}", None)
                    elif test_class is not None:
                        self._test_ids.setdefault(f"{path}::{test_class}::{name}", None)
                self._add_identifier(name, path, keyword)
                continue
            if text and not text[0].isspace() and not text.startswith(("#", ")", "@")):
                test_class = None
            imported = _FROM_IMPORT.match(text)
            if imported:
                for name in imported[2].replace("\n", " ").split(","):
                    self._add_identifier(name.split(" as ")[0].strip(), path, "import")
                continue
            single = _IMPORT.match(text)
            if single:
                self._add_identifier(single[1].split(".")[-1], path, "import")

    def _add_identifier(self, name: str, path: str, kind: str) -> None:
        usable = len(name) >= 3 and name.isidentifier() and not name.startswith("__")
        if usable and name not in _NOISE_WORDS:
            self._identifiers.setdefault(name, path)
            self._identifier_kinds.setdefault(name, kind)

    def _learn_hits(self, searched: str, output: str) -> None:
        # grep names the file of each hit, except when it searched one file: then "line:text".
        single = searched in self._files
        hits = []
        for line in output.splitlines():
            match = _SINGLE_FILE_HIT.match(line) if single else _HIT.match(line)
            if not match:
                continue
            path = searched if single else posixpath.normpath(match[1])
            if _SAFE_NAME.match(posixpath.basename(path)):
                hits.append((path, int(match["line"])))
        # grep lists files in the order the file system gives them, which can differ between
        # two builds of an image; sorted, the walk depends only on what was found.
        for path, line_number in sorted(hits):
            self._files.setdefault(path, None)
            self._hits.setdefault((path, line_number), None)

    def _learn_edit(self, path: str, old: str, new: str) -> None:
        """Keep the file view true after an edit: the edited lines are no longer known."""
        view = self._views.get(path)
        if view is None:
            return
        if old.count("\n") != new.count("\n"):
            # Line numbers shifted; forget the file (it can be read again).
            del self._views[path]
            return
        first_line = old.split("\n")[0]
        for number, text in list(view.lines.items()):
            if text == first_line:
                for offset, replacement in enumerate(new.split("\n")):
                    view.lines[number + offset] = replacement
                break

    def _learn_command(self, command: str) -> None:
        words = command.split()
        if words[:3] == ["git", "checkout", "--"] or words[:2] == ["git", "restore"]:
            for word in words[2:]:
                path = posixpath.normpath(word)
                edit = self._edited.pop(path, None)
                if edit is not None:
                    # The file is as it was read again.
                    self._learn_edit(path, edit[1], edit[0])
        elif words[:1] == ["rm"]:
            for word in words[1:]:
                self._created.pop(posixpath.normpath(word), None)

    # --- choosing ----------------------------------------------------------------------------

    def _choose(self, observation: RawObservation) -> Action:
        if self._pending:
            return self._take(self._pending)
        cleanup = self._cleanup(observation)
        if cleanup is not None:
            return self._take(cleanup)
        if "." not in self._listings and self._taken == 0:
            return self._take([_Step(tool_call("list_dir", path="."))])
        remaining = self.max_steps - self._taken
        if self._rng.random() < self.mistake_rate:
            mistake = self._mistake()
            if mistake is not None:
                return self._take(mistake)
        weights = dict(self.weights)
        # Curiosity: folders seen but not listed pull harder; once all are, listing is rarer.
        weights["list"] *= 1.5 if self._unlisted_dirs() else 0.4
        kinds = [kind for kind, weight in weights.items() if weight > 0]
        for _ in range(20):
            kind = self._rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
            steps = self._generators[kind]()
            if steps is None or steps[0].action.text == self._previous:
                continue  # nothing to do of this kind, or the very same call again
            # A sequence that cannot finish (an edit not reverted) is not started.
            if len(steps) + sum(s.spare for s in steps) <= remaining:
                return self._take(steps)
        return self._take([_Step(tool_call("list_dir", path="."))])

    def _take(self, steps: list[_Step]) -> Action:
        first, *rest = steps
        self._pending = rest
        self._cancel_on_failure = first.cancels_rest
        self._previous = first.action.text
        return first.action

    def _cleanup(self, observation: RawObservation) -> list[_Step] | None:
        """Revert what an earlier sequence left behind (a revert that failed, say)."""
        status = str(observation.get("git_status") or "")
        for line in status.splitlines():
            match = _GIT_STATUS_LINE.match(line)
            if not match:
                continue
            code, path = match[1], match[2]
            if code == "??" and path in self._created:
                return [_Step(self._shell(f"rm {shlex.quote(path)}"))]
            if code != "??" and path in self._edited:
                return [_Step(self._shell(f"git checkout -- {shlex.quote(path)}"))]
        return None

    # --- helpers -----------------------------------------------------------------------------

    def _pick(self, items: Sequence[Any]) -> Any:
        return items[self._rng.randrange(len(items))]

    def _shell(self, command: str) -> Action:
        return tool_call("run_shell_command", command=command, timeout=SHELL_TIMEOUT_S)

    def _unlisted_dirs(self) -> list[str]:
        return [
            d
            for d in self._dirs
            if d not in self._listings
            and not posixpath.basename(d).startswith(".")
            and posixpath.basename(d) not in _DULL_DIRS
        ]

    def _dir_interest(self, folder: str) -> float:
        """How much a folder pulls: the code (``src``, the package) most, docs and assets least."""
        base = posixpath.basename(folder)
        wanted = self._repo_name.replace("-", "_").lower()
        if base == "src" or base.lower() == wanted or folder in self._packages.values():
            return 4.0
        if base in _TEST_DIRS:
            return 2.5
        if base in _SIDE_DIRS or base.endswith(".egg-info"):
            return 0.5
        return 1.0

    def _file_interest(self, path: str) -> float:
        """How much a file pulls a reader; 0 for binary and hidden files."""
        base = posixpath.basename(path)
        if path.endswith(_BINARY_SUFFIXES) or base.startswith("."):
            return 0.0
        top = path.split("/")[0]
        # Docs, examples and packaging metadata pull less than the code.
        side = 0.3 if "/" in path and (top in _SIDE_DIRS or top.endswith(".egg-info")) else 1.0
        if base.upper().startswith("README"):
            return 3.0 * side
        if base in _PACKAGING:
            return 2.0 * side
        if base.endswith(".py"):
            inside = any(path.startswith(f + "/") for f in self._packages.values())
            return side * (1.5 if base == "__init__.py" else 4.0 if inside else 3.0)
        if base.endswith(_TEXT_SUFFIXES):
            return 1.0 * side
        return 0.3 * side

    def _pick_file(self, unread_first: bool = True) -> str | None:
        candidates = [p for p in self._files if self._file_interest(p) > 0]
        if not candidates:
            return None
        if unread_first:
            unread = [p for p in candidates if p not in self._views]
            if unread and self._rng.random() < 0.75:
                candidates = unread
        return self._rng.choices(candidates, [self._file_interest(p) for p in candidates])[0]

    def _test_files(self) -> list[str]:
        return [p for p in self._files if _is_test_file(p)]

    def _named_tests(self, path: str) -> list[str]:
        """Test files seen whose name holds the module's (``test_core.py`` for ``core.py``)."""
        stem = posixpath.basename(path).removesuffix(".py")
        if stem == "__init__":
            stem = posixpath.basename(posixpath.dirname(path))
        return [t for t in self._test_files() if stem and stem in posixpath.basename(t)]

    def _covering_tests(self, path: str) -> list[str]:
        """Selectors of the tests most likely to cover module ``path``, best first."""
        named = self._named_tests(path)
        ids = [t for t in self._test_ids if t.split("::")[0] in named]
        if named:
            return named + ids
        # Test files read that import the module.
        module = posixpath.basename(path).removesuffix(".py")
        importing = [
            t
            for t in self._test_files()
            if t in self._views
            and any(
                _IMPORT_LINE.match(line) and re.search(rf"\b{re.escape(module)}\b", line)
                for line in self._views[t].lines.values()
            )
        ]
        if importing:
            return importing
        folders = [d for d in self._dirs if posixpath.basename(d) in ("tests", "test")]
        return folders

    # --- action generators -------------------------------------------------------------------
    # Each returns the steps of a sequence, or None when it has nothing sensible to do now.

    def _list(self) -> list[_Step] | None:
        unlisted = self._unlisted_dirs()
        if unlisted and self._rng.random() < 0.8:
            # Shallow folders first, the way one walks down a tree.
            depth = min(d.count("/") for d in unlisted)
            shallow = [d for d in unlisted if d.count("/") <= depth + 1]
            chosen = self._rng.choices(shallow, [self._dir_interest(d) for d in shallow])[0]
            return [_Step(tool_call("list_dir", path=chosen))]
        listed = [d for d in self._listings if d != "."]
        if listed and self._rng.random() < 0.4:
            return [_Step(tool_call("list_dir", path=self._pick(listed)))]
        if self._rng.random() < 0.3:
            folder = self._pick(list(self._listings) or ["."])
            return [_Step(self._shell("ls -la" if folder == "." else f"ls -la {folder}"))]
        return [_Step(tool_call("list_dir", path="."))]

    def _read(self) -> list[_Step] | None:
        hits = [hit for hit in self._hits if hit[0] in self._files]
        if hits and self._rng.random() < 0.25:
            path, line = self._pick(hits)
            start = max(1, line - self._rng.choice((5, 10, 15)))
            end = line + self._rng.choice((10, 20, 30))
            return [_Step(tool_call("read_file", path=path, start_line=start, end_line=end))]
        path = self._pick_file()
        if path is None:
            return None
        view = self._views.get(path)
        roll = self._rng.random()
        if view is not None and view.length and roll < 0.6:
            # A range of a file read before: around a definition, or anywhere.
            definitions = [n for n, t in view.lines.items() if _DEFINITION.match(t)]
            start = self._pick(definitions) if definitions else self._rng.randint(1, view.length)
            end = min(view.length, start + self._rng.choice((15, 25, 40)))
            return [_Step(tool_call("read_file", path=path, start_line=start, end_line=end))]
        if view is None and roll < 0.3:
            end = self._rng.choice((40, 60, 80, 120))
            return [_Step(tool_call("read_file", path=path, start_line=1, end_line=end))]
        return [_Step(tool_call("read_file", path=path))]

    def _search(self) -> list[_Step] | None:
        if not self._identifiers:
            return None
        name = self._pick(list(self._identifiers))
        source = self._identifiers[name]
        kind = self._identifier_kinds[name]
        roll = self._rng.random()
        if kind != "import" and roll < 0.3:
            pattern = f"{kind} {name}\\b"  # where it is defined
        elif kind != "import" and roll < 0.5:
            pattern = f"{name}\\("  # where it is called
        elif roll < 0.6 and (kind == "import" or self._importable_name(name, source)):
            pattern = f"import.*\\b{name}\\b"  # who imports it
        else:
            pattern = f"\\b{name}\\b" if self._rng.random() < 0.5 else name
        path, glob = ".", None
        where = self._rng.random()
        if where < 0.35:
            glob = "*.py"
        elif where < 0.55:
            folder = posixpath.dirname(source)
            path = folder or "."
        elif where < 0.65 and not pattern.startswith("import"):
            path = source
        return [_Step(tool_call("search", pattern=pattern, path=path, glob=glob))]

    def _test(self) -> list[_Step] | None:
        ids = list(self._test_ids)
        files = self._test_files()
        if not ids and not files:
            return None
        if ids and (not files or self._rng.random() < 0.6):
            selector = self._pick(ids)
        else:
            selector = self._pick(files)
        return [_Step(tool_call("run_tests", selector=selector))]

    def _edit_candidates(self) -> list[tuple[str, str, str]]:
        """(path, old, new) edits of lines read from package modules, unique where known."""
        candidates: list[tuple[str, str, str]] = []
        for path, view in self._views.items():
            if not path.endswith(".py") or _is_test_file(path) or path in self._edited:
                continue
            # Only modules of a package it listed, whose tests it knows where to find.
            if path in self._created or self._module_name(path) is None:
                continue
            if not self._covering_tests(path):
                continue
            in_docstring = False
            known = "\n".join(view.lines[n] for n in sorted(view.lines))
            for number in sorted(view.lines):
                text = view.lines[number]
                quotes = text.count('"""') + text.count("'''")
                if in_docstring or quotes:
                    in_docstring ^= quotes % 2 == 1
                    continue
                stripped = text.strip()
                if not stripped or stripped.startswith(("#", "@")) or text.endswith("\\"):
                    continue
                # A lone bracket or a short word is no text to find again; prose is no code.
                if len(stripped) < 8 or not _CODE_LIKE.search(stripped):
                    continue
                if stripped.startswith((">>>", "...")):
                    continue  # prose of a docstring whose opening quotes were not read
                new = self._mutated(text)
                if new is None:
                    continue
                old = text
                if known.count(old) > 1 and number - 1 in view.lines:
                    # Not unique: take the line before it along, as one does.
                    old = view.lines[number - 1] + "\n" + text
                    new = view.lines[number - 1] + "\n" + new
                if known.count(old) == 1:
                    candidates.append((path, old, new))
        return candidates

    def _mutated(self, text: str) -> str | None:
        """One small change of a code line, or None if nothing fits it."""
        changes: list[str] = []
        for before, after in _COMPARISON_SWAPS:
            if before in text and not text.lstrip().startswith(("def ", "class ")):
                changes.append(text.replace(before, after, 1))
                break
        integer = _INTEGER.search(text)
        if integer and not text.lstrip().startswith(("def ", "class ", "import ", "from ")):
            value = int(integer[1])
            bumped = str(value + 1 if value == 0 or self._rng.random() < 0.6 else value - 1)
            changes.append(text[: integer.start()] + bumped + text[integer.end() :])
        string = _STRING.search(text)
        if string and "import" not in text:
            quote, content = string[1], string[2]
            changed = f"{quote}{content}_x{quote}" if self._rng.random() < 0.5 else quote * 2
            changes.append(text[: string.start()] + changed + text[string.end() :])
        boolean = _BOOLEAN.search(text)
        if boolean:
            flipped = "False" if boolean[1] == "True" else "True"
            changes.append(text[: boolean.start()] + flipped + text[boolean.end() :])
        # A comment changes no behaviour; mostly change the code so that tests can notice.
        commentable = "#" not in text and not text.rstrip().endswith((",", "(", "[", "{"))
        if commentable and (not changes or self._rng.random() < 0.25):
            return f"{text}  {self._pick(_COMMENTS)}"
        return self._pick(changes) if changes else None

    def _edit(self) -> list[_Step] | None:
        candidates = self._edit_candidates()
        if not candidates:
            return None
        # Mostly modules with a test file of their own: their tests are quick and to the point.
        tested = [c for c in candidates if self._named_tests(c[0])]
        if tested and self._rng.random() < 0.8:
            candidates = tested
        path, old, new = self._pick(candidates)
        steps = [_Step(tool_call("str_replace", path=path, old=old, new=new), cancels_rest=True)]
        if self._rng.random() < 0.2:
            line = next(n for n, t in self._views[path].lines.items() if t == old.split("\n")[-1])
            steps.append(
                _Step(
                    tool_call(
                        "read_file", path=path, start_line=max(1, line - 3), end_line=line + 3
                    )
                )
            )
        tests = self._covering_tests(path)
        # The test file or one of its ids; now and then a second run of another one.
        first = self._pick(tests[:4])
        steps.append(_Step(tool_call("run_tests", selector=first)))
        others = [test for test in tests if test != first]
        if others and self._rng.random() < 0.2:
            steps.append(_Step(tool_call("run_tests", selector=self._pick(others))))
        roll = self._rng.random()
        if roll < 0.3:
            steps.append(_Step(self._shell("git diff")))
        elif roll < 0.45:
            steps.append(_Step(self._shell("git status --short")))
        quoted = shlex.quote(path)
        revert = self._rng.random()
        if revert < 0.6:
            steps.append(_Step(self._shell(f"git checkout -- {quoted}")))
        elif revert < 0.75 or new in "\n".join(self._views[path].lines.values()):
            steps.append(_Step(self._shell(f"git restore {quoted}")))
        else:
            # Undo by hand: the reverse replacement. Should it fail, git status shows the file
            # still modified and the next step checks it out (one step is kept for that).
            back = tool_call("str_replace", path=path, old=new, new=old)
            steps.append(_Step(back, spare=1))
        if self._rng.random() < 0.4:
            steps.append(_Step(self._shell("git status --short")))
        return steps

    def _module_name(self, path: str) -> str | None:
        """The import name of a module file inside a package the episode listed."""
        for package, folder in self._packages.items():
            if path.startswith(folder + "/") and path.endswith(".py"):
                inner = path[len(folder) + 1 : -3].replace("/", ".")
                if not all(part.isidentifier() for part in inner.split(".")):
                    return None
                return (
                    package
                    if inner == "__init__"
                    else f"{package}.{inner.removesuffix('.__init__')}"
                )
        return None

    def _importable_name(self, name: str, path: str) -> bool:
        """Whether ``name``, defined in ``path``, is something other modules would import."""
        public = not name.startswith("_") and not _is_test_file(path)
        return public and self._module_name(path) is not None

    def _importable(self) -> list[tuple[str, str]]:
        """(module, name) pairs of module-level definitions read in the listed packages."""
        pairs = []
        for name, path in self._top_level.items():
            module = self._module_name(path)
            if module is not None and "/tests/" not in f"/{path}":
                pairs.append((module, name))
        return pairs

    def _shell_look(self) -> list[_Step] | None:
        roll = self._rng.random()
        files = [p for p in self._files if self._file_interest(p) > 0]
        if roll < 0.3 or not files:
            command = self._pick(_SHELL_LOOKS)
        elif roll < 0.45 and self._packages:
            package = self._pick(list(self._packages))
            init = self._views.get(f"{self._packages[package]}/__init__.py")
            has_version = init is not None and any(
                "__version__" in line for line in init.lines.values()
            )
            attribute = "__version__" if has_version else "__file__"
            command = f'python -c "import {package}; print({package}.{attribute})"'
        elif roll < 0.6 and self._importable():
            module, name = self._pick(self._importable())
            if self._rng.random() < 0.5:
                command = f'python -c "from {module} import {name}; print({name}.__doc__)"'
            else:
                command = (
                    f'python -c "import {module} as m; '
                    "print(sorted(n for n in dir(m) if not n.startswith('_'))[:20])\""
                )
        elif roll < 0.72 and self._identifiers:
            name = self._pick(list(self._identifiers))
            command = f"grep -c {name} {shlex.quote(self._identifiers[name])}"
        elif roll < 0.85:
            path = shlex.quote(self._pick(files))
            command = self._pick(
                (f"wc -l {path}", f"head -n 20 {path}", f"git log --oneline -3 -- {path}")
            )
        else:
            folder = self._pick(list(self._dirs))
            command = "ls -la" if folder == "." else f"ls -la {shlex.quote(folder)}"
        return [_Step(self._shell(command))]

    def _script(self) -> list[_Step] | None:
        pairs = self._importable()
        if not pairs:
            return None
        module, name = self._pick(pairs)
        taken = {entry.rstrip("/") for entry in self._listings.get(".", [])}
        script, number = f"check_{name.lower()}.py", 1
        while script in taken or script in self._files:
            number += 1
            script = f"check_{name.lower()}_{number}.py"
        content = (
            f'"""Quick look at {module}.{name}."""\n'
            f"from {module} import {name}\n\n"
            f"print(repr({name}))\n"
            f'print(({name}.__doc__ or "").strip().splitlines()[:3])\n'
        )
        return [
            _Step(tool_call("write_file", path=script, content=content), cancels_rest=True),
            _Step(self._shell(f"python {script}")),
            _Step(self._shell(f"rm {script}")),
        ]

    def _mistake(self) -> list[_Step] | None:
        """A natural slip: a mistyped path, test id or name, or an edit whose text is off."""
        roll = self._rng.random()
        files = [p for p in self._files if self._file_interest(p) > 0]
        if roll < 0.25 and files:
            path = self._pick(files)
            wrong = posixpath.join(
                posixpath.dirname(path), _typo(posixpath.basename(path), self._rng)
            )
            if wrong not in self._files:
                return [_Step(tool_call("read_file", path=wrong))]
        if roll < 0.35:
            listed = [d for d in self._listings if d != "."]
            if listed:
                folder = self._pick(listed)
                wrong = posixpath.join(
                    posixpath.dirname(folder), _typo(posixpath.basename(folder), self._rng)
                )
                if wrong not in self._dirs:
                    return [_Step(tool_call("list_dir", path=wrong))]
        if roll < 0.5 and self._identifiers:
            name = self._pick(list(self._identifiers))
            return [
                _Step(tool_call("search", pattern=f"def {_typo(name, self._rng)}\\(", path="."))
            ]
        if roll < 0.65 and self._test_ids:
            test_id = self._pick(list(self._test_ids))
            head, _, name = test_id.rpartition("::")
            return [_Step(tool_call("run_tests", selector=f"{head}::{_typo(name, self._rng)}"))]
        if roll < 0.8:
            edits = self._edit_candidates()
            if edits:
                path, old, new = self._pick(edits)
                line = old.split("\n")[-1]
                # A doubled space where the line has one, as when retyping it.
                indent = len(line) - len(line.lstrip())
                space = line.find(" ", indent)
                wrong = line[:space] + " " + line[space:] if space > 0 else line + " "
                known = "\n".join(self._views[path].lines.values())
                if wrong not in known:
                    return [
                        _Step(
                            tool_call("str_replace", path=path, old=wrong, new=new.split("\n")[-1])
                        )
                    ]
        if roll < 0.9 and files:
            path = self._pick(files)
            wrong = posixpath.join(
                posixpath.dirname(path), _typo(posixpath.basename(path), self._rng)
            )
            if wrong not in self._files:
                return [_Step(self._shell(f"wc -l {shlex.quote(wrong)}"))]
        if self._packages:
            package = self._pick(list(self._packages))
            return [_Step(self._shell(f'python -c "import {_typo(package, self._rng)}"'))]
        return None
