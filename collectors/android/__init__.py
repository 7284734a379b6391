"""The android domain: real Android devices and emulators through uiautomator2 and adb.

A device is borrowed per episode from a pool (:mod:`~worldtrace.collectors.android.pool`),
reached through an adb server and the uiautomator server uiautomator2 starts on it
(:mod:`~worldtrace.collectors.android.device`), and reset per task by clearing its apps or
loading an emulator snapshot (:mod:`~worldtrace.collectors.android.environment`). An action
is AndroidWorld's JSON (:mod:`~worldtrace.collectors.android.actions`); an observation is the
UI hierarchy as an indexed element list, format ``uia-elements``, with the screenshot
(:mod:`~worldtrace.collectors.android.render`). Policies: ``script`` (the task library,
:mod:`~worldtrace.collectors.android.tasks`, checked against the device's state),
``explore`` (:mod:`~worldtrace.collectors.android.explore`), ``replay`` and ``llm``.

These machines cannot run Android; the tests collect from a stand-in device that speaks the
same protocols (``tests/android/standin``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.android.actions import READ_ONLY, parse_action
from worldtrace.collectors.android.doctor import devices_check
from worldtrace.collectors.android.environment import AndroidConfig, AndroidEnvironment
from worldtrace.collectors.android.render import AndroidRenderer
from worldtrace.collectors.android.tasks import AndroidTask, load_tasks
from worldtrace.collectors.base import Collector, Policy, Renderer
from worldtrace.collectors.requirements import Requirements
from worldtrace.schemas import Action

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt


def explore_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``explore`` policy: seeded taps, text, scrolls and navigation."""
    from worldtrace.collectors.android.explore import AndroidExploreParams, AndroidExplorePolicy

    return AndroidExplorePolicy(AndroidExploreParams.validated(params))


def script_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``script`` policy: the task library's steps, targets resolved on each screen."""
    from worldtrace.collectors.android.script import AndroidScriptPolicy

    if params:
        raise ValueError(f"the script policy takes no parameters, got {sorted(params)}")
    return AndroidScriptPolicy()


class AndroidCollector(Collector[AndroidConfig, AndroidTask]):
    """Registry entry of the android domain."""

    domain = "android"
    environment_config = AndroidConfig
    policies = {**Collector.policies, "script": script_policy, "explore": explore_policy}
    read_only_actions = READ_ONLY
    requirements = Requirements(debian_packages=("adb",), checks=(devices_check,))

    def make_environment(self, config: AndroidConfig) -> AndroidEnvironment:
        """Build the Android environment."""
        return AndroidEnvironment(config)

    def renderer(self) -> Renderer:
        """The element list and the screenshot."""
        return AndroidRenderer()

    def agent_prompt(self) -> AgentPrompt:
        """AndroidWorld's JSON actions over the element list."""
        from worldtrace.collectors.android.prompt import AGENT_PROMPT

        return AGENT_PROMPT

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Read an AndroidWorld JSON action (text or object)."""
        return parse_action(action)

    def task_library(self, environment: AndroidConfig | None = None) -> Sequence[AndroidTask]:
        """The scripted tasks."""
        return load_tasks()

    def preflight(self, config: AndroidConfig) -> None:
        """Check that the adb server runs and the pool has a device, before any episode."""
        config.pool()

    def typed_text(self, name: str, arguments: Any) -> list[str]:
        """What ``input_text`` typed (curation's scrubber reads it)."""
        return [str(arguments.get("text", ""))] if name == "input_text" else []


__all__ = ["AndroidCollector", "AndroidConfig", "AndroidEnvironment", "AndroidTask"]
