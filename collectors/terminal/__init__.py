"""The terminal domain: bash in a container, driven through tmux."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from worldtrace.collectors.base import Collector, EpisodePlan, Policy, Task
from worldtrace.collectors.policies import ScriptPolicy
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.tasks import TASKS, TerminalTask, task_by_name
from worldtrace.sandboxes.docker import require_image


class TerminalCollector(Collector):
    """Registry entry of the terminal domain."""

    domain = "terminal"
    environment_config = TerminalConfig

    def make_environment(self, config: BaseModel) -> TerminalEnvironment:
        """Build the terminal environment."""
        if not isinstance(config, TerminalConfig):
            raise TypeError(f"expected a TerminalConfig, got {type(config).__name__}")
        return TerminalEnvironment(config)

    def preflight(self, config: BaseModel) -> None:
        """Check that the Docker engine answers and the sandbox image exists."""
        assert isinstance(config, TerminalConfig)
        require_image(config.image)

    def make_policy(self, kind: str, params: dict[str, Any]) -> Policy:
        """Build the scripted task policy ('script') or the exploring policy ('explore')."""
        if kind == "script":
            if params:
                raise ValueError(f"the script policy takes no parameters, got {sorted(params)}")
            return ScriptPolicy()
        if kind == "explore":
            from worldtrace.collectors.terminal.explore import ExplorePolicy

            return ExplorePolicy(**params)
        raise ValueError(f"unknown terminal policy {kind!r} (expected 'script' or 'explore')")

    def plan(
        self,
        index: int,
        seed: int,
        policy_kind: str,
        tasks: list[str] | None,
        environment: BaseModel | None = None,
    ) -> EpisodePlan:
        """Scripted episodes cycle through the task library; exploring ones get a workspace."""
        if policy_kind == "explore":
            from worldtrace.collectors.terminal.explore import workspace_setup

            task = TerminalTask(
                name=f"explore-{seed}",
                instruction="Explore the workspace with shell commands.",
                category="explore",
                setup=workspace_setup(seed),
            )
            return EpisodePlan(index=index, seed=seed, task=task)
        library = [task_by_name(name) for name in tasks] if tasks else list(TASKS)
        if not library:
            raise ValueError("the terminal task library is empty")
        return EpisodePlan(index=index, seed=seed, task=library[index % len(library)])

    def task_library(self) -> list[Task]:
        """The 48 scripted shell tasks."""
        return list(TASKS)


__all__ = ["TerminalCollector", "TerminalConfig", "TerminalEnvironment"]
