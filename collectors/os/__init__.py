"""The desktop (os) domain: a real X11 desktop with real applications, OSWorld-style.

One image (``image/``, :mod:`~worldtrace.collectors.os.image_definition`) holds Xvfb, openbox,
the AT-SPI bus, mousepad, gnumeric, pcmanfm, galculator, lxterminal, a launcher dock and the
in-container driver; ``/opt/worldtrace/versions.json`` lists every part's version and goes
into every transition's ``env``. An action is pyautogui code (:mod:`~worldtrace.collectors.os.
actions`: ``pyautogui.click(640, 400)``, ``pyautogui.hotkey('ctrl', 's')``, ``WAIT``,
``DONE``, ``FAIL``; parsed with ``ast``, nothing evaluated) run against the container's display
(:mod:`~worldtrace.collectors.os.environment`). An observation is what a person sees: the
windows in stacking order (hidden ones said hidden), open popups, the focused widget with its
caret and selection, then the accessibility tree as OSWorld's rows (format ``a11y-linear``;
``docs/os.md``), the screenshot, and the focused window, windows and screen in ``meta``
(:mod:`~worldtrace.collectors.os.render`); the raw
record keeps the whole tree. Policies: ``script`` (:mod:`~worldtrace.collectors.os.tasks`:
editing, spreadsheet, file manager and calculator tasks checked in the container), ``explore``
(:mod:`~worldtrace.collectors.os.explore`) and ``replay`` (re-executes given pyautogui code).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.base import Collector, Policy, Renderer
from worldtrace.collectors.os.actions import parse_action
from worldtrace.collectors.os.environment import OsConfig, OsEnvironment
from worldtrace.collectors.os.image_definition import IMAGE
from worldtrace.collectors.os.render import OsRenderer
from worldtrace.collectors.os.tasks import DEFAULT_SCREEN, OsTask, load_tasks, uses_pointer
from worldtrace.collectors.requirements import Requirements
from worldtrace.sandboxes.docker import require_image
from worldtrace.schemas import Action

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt


def explore_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``explore`` policy: a seeded walk over the widgets of the current tree."""
    from worldtrace.collectors.os.explore import OsExploreParams, OsExplorePolicy

    return OsExplorePolicy(OsExploreParams.validated(params))


class OsCollector(Collector[OsConfig, OsTask]):
    """Registry entry of the desktop (os) domain."""

    domain = "os"
    environment_config = OsConfig
    policies = {**Collector.policies, "explore": explore_policy}
    # Moving the pointer, waiting and the episode's end words change nothing on purpose (a
    # hover may show a tooltip, but that is not the action's aim); scrolling only moves the view.
    read_only_actions = frozenset({"moveTo", "WAIT", "DONE", "FAIL", "scroll"})
    requirements = Requirements(images=(IMAGE,))

    def make_environment(self, config: OsConfig) -> OsEnvironment:
        """Build the desktop environment."""
        return OsEnvironment(config)

    def renderer(self) -> Renderer:
        """OSWorld's linearized tree, the screenshot, the windows and focus in meta."""
        return OsRenderer()

    def agent_prompt(self) -> AgentPrompt:
        """The desktop's prompt for a model: the screen's text, pyautogui, WAIT, DONE, FAIL."""
        from worldtrace.collectors.os.prompt import AGENT_PROMPT

        return AGENT_PROMPT

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Read a replayed action: pyautogui code, or ``{name, arguments, text}``.

        Of an object only the text (its code) is read: the code is what is parsed and run.
        """
        if isinstance(action, dict):
            text = action.get("text")
            if not isinstance(text, str):
                raise ValueError(f"a replayed os action needs its pyautogui code as text: {action}")
            return parse_action(text)
        return parse_action(action)

    def task_library(self, environment: OsConfig | None = None) -> Sequence[OsTask]:
        """The scripted tasks; on a screen other than 1280x800 only those without coordinates.

        Clicks in a script were read from the windows' geometry on the default screen.
        """
        tasks = load_tasks()
        if environment is None or (environment.width, environment.height) == DEFAULT_SCREEN:
            return tasks
        return tuple(task for task in tasks if not uses_pointer(task))

    def preflight(self, config: OsConfig) -> None:
        """Check that the configured image exists."""
        require_image(config.image_tag)


__all__ = ["OsCollector", "OsConfig", "OsEnvironment", "OsTask"]
