"""The desktop's exploring policy: click, type into and navigate the widgets the tree shows.

:class:`OsExplorePolicy` works without a task, the way a person tries an unfamiliar desktop.
At each step it reads the current accessibility tree (the raw observation's ``tree``), keeps
the widgets OSWorld's filter keeps (:func:`~worldtrace.collectors.os.render.is_kept`) whose role
it knows how to use (:data:`ROLE_ACTIONS`: buttons, menus and menu items, table cells, list and
tree items, icons, check boxes, tabs, editable text), and picks one — an element it has not
tried yet when there is one (an element is its application, role and name), else any — and
acts on it at the centre of its extents:

- a button, menu, menu item, tab, icon, list or tree item, check box: a click (an icon or a
  list item sometimes a double click, which opens it);
- editable text: a click, then a word typed (:data:`WORDS`), sometimes followed by Enter;
- a table cell: a click, then a number or a word typed and Enter;
- a terminal (lxterminal's screen): a click, then a short command (:data:`COMMANDS`) and Enter.

The launcher dock's buttons are push buttons, so it opens applications from there too; while
no application but the dock is running, it always clicks a launcher button. Now and then
(``key_share``) it presses a navigation key instead (Escape, Tab, arrows, Enter), which closes
menus and dialogs and moves the focus. It never clicks a node whose name says it quits or
closes an application (:data:`AVOIDED_NAMES`), so an episode keeps something to explore.

**Reproducibility.** Every choice comes from a ``random.Random(seed)``; candidates are sorted
by position, role and name before choosing, and what was tried is kept in an insertion-ordered
dict. The same seed and the same observations give the same actions.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from worldtrace.collectors.base import HistoryItem, Policy, PolicyParams, Share
from worldtrace.collectors.os.actions import click, double_click, press, script, write
from worldtrace.collectors.os.render import kept_nodes
from worldtrace.collectors.os.tasks import OsTask
from worldtrace.schemas import Action
from worldtrace.schemas.raw import RawObservation

ROLE_ACTIONS = {
    "push button": "click",
    "toggle button": "click",
    "radio button": "click",
    "check box": "click",
    "menu": "click",
    "menu item": "click",
    "check menu item": "click",
    "radio menu item": "click",
    "page tab": "click",
    "icon": "open",
    "list item": "open",
    "tree item": "open",
    "table cell": "cell",
    "text": "type",
    "entry": "type",
    "terminal": "command",
}
"""How each role is used (see the module docstring)."""
WORDS = ("hello", "report", "42", "budget", "Monday", "notes 2", "3.5", "x")
COMMANDS = ("ls", "pwd", "echo hello", "cat Documents/todo.txt", "ls -a Pictures", "whoami")
"""Commands typed into a terminal (each followed by Enter), harmless and quick."""
NAVIGATION_KEYS = ("escape", "tab", "down", "up", "left", "right", "enter")
AVOIDED_NAMES = ("quit", "close", "exit", "log out")
LAUNCHER_APP = "launcher"


def _centre(node: Mapping[str, Any]) -> tuple[int, int]:
    return (
        int(node["x"]) + max(int(node["width"]) // 2, 0),
        int(node["y"]) + max(int(node["height"]) // 2, 0),
    )


def _key(node: Mapping[str, Any]) -> str:
    return f"{node.get('app')}|{node.get('role')}|{str(node.get('name') or '').strip()}"


def candidates(observation: RawObservation) -> list[Mapping[str, Any]]:
    """The widgets of the tree the policy may act on, in a stable order."""
    screen = observation.get("screen") or {}
    width, height = int(screen.get("width") or 1280), int(screen.get("height") or 800)
    found = []
    for node in kept_nodes(observation.get("tree")):
        role = node.get("role")
        if role not in ROLE_ACTIONS:
            continue
        if role in ("text", "entry") and "editable" not in (node.get("states") or ()):
            continue
        name = str(node.get("name") or "").strip().casefold()
        if any(name.startswith(word) for word in AVOIDED_NAMES):
            continue
        x, y = _centre(node)
        if 0 <= x < width and 0 <= y < height:
            found.append(node)
    found.sort(key=lambda n: (*_centre(n), str(n.get("role")), str(n.get("name"))))
    return found


class OsExploreParams(PolicyParams):
    """The parameters of :class:`OsExplorePolicy` (a config's ``policy.params``)."""

    policy = "os explore policy"

    key_share: Share = Field(
        default=0.1, description="the chance that an action is a navigation key press"
    )
    max_steps: int | None = Field(
        default=None,
        ge=1,
        strict=True,
        description="actions per episode (then `act` ends it); null: the step limit decides",
    )


class OsExplorePolicy(Policy[OsTask]):
    """Seeded walk over the widgets of the desktop's tree, preferring untried ones.

    Its parameters are :class:`OsExploreParams`, given as the model or as keywords
    (``OsExplorePolicy(max_steps=5)``).
    """

    kind = "explore"
    name = "os-explore"
    version = "2"  # 2: types commands into a terminal (lxterminal)

    def __init__(self, params: OsExploreParams | None = None, /, **keywords: Any) -> None:
        self.params = OsExploreParams.given(params, keywords)
        self.key_share = self.params.key_share
        self.max_steps = self.params.max_steps
        self._rng = random.Random(0)
        self._tried: dict[str, int] = {}

    def reset(self, seed: int, task: OsTask | None) -> None:
        """Start a new walk from ``seed``."""
        self._rng = random.Random(seed)
        self._tried = {}

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """The next action on a widget of the current tree (or a navigation key)."""
        if self.max_steps is not None and len(history) >= self.max_steps:
            return None
        nodes = candidates(observation)
        apps = {node.get("app") for node in nodes}
        if apps <= {LAUNCHER_APP}:
            nodes = [node for node in nodes if node.get("role") == "push button"]
        elif self._rng.random() < self.key_share or not nodes:
            return press(self._rng.choice(NAVIGATION_KEYS))
        if not nodes:
            return press("escape")
        untried = [node for node in nodes if _key(node) not in self._tried]
        node = self._rng.choice(untried or nodes)
        self._tried[_key(node)] = self._tried.get(_key(node), 0) + 1
        return self._use(node)

    def _use(self, node: Mapping[str, Any]) -> Action:
        x, y = _centre(node)
        how = ROLE_ACTIONS[str(node.get("role"))]
        if how == "open" and self._rng.random() < 0.3:
            return double_click(x, y)
        if how == "type":
            typed = [click(x, y), write(self._rng.choice(WORDS))]
            if self._rng.random() < 0.3:
                typed.append(press("enter"))
            return script(*typed)
        if how == "command":
            return script(click(x, y), write(self._rng.choice(COMMANDS) + "\n"))
        if how == "cell":
            return script(click(x, y), write(self._rng.choice(WORDS)), press("enter"))
        return click(x, y)


__all__ = ["OsExplorePolicy", "candidates"]
