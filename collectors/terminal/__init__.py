"""The terminal domain: bash in a container (or on an SSH host), driven through tmux.

One registration (``[project.entry-points."worldtrace.collectors"]`` in ``pyproject.toml``)
gives the pipeline everything it needs: the environment and its config, the policies
(``script`` plays the task library, ``explore`` builds commands from what it has seen,
``replay`` re-executes given action texts such as ``echo hi<Enter>``), the renderer of raw
screens, the sandbox image (``image/``) and the actions that only read. With ``ssh`` in its config
the same driver runs on an existing machine reached over SSH instead (:mod:`.ssh`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.base import Collector, EpisodePlan, Policy, Renderer
from worldtrace.collectors.requirements import Requirements
from worldtrace.collectors.terminal.actions import is_key_name, parse_action_text
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.render import FORMAT, TerminalRenderer
from worldtrace.collectors.terminal.ssh import SshTerminalEnvironment
from worldtrace.collectors.terminal.tasks import TASKS, TerminalTask
from worldtrace.collectors.terminal.workspace import workspace_setup
from worldtrace.sandboxes.docker import require_image
from worldtrace.sandboxes.images import DRIVER_RUNTIME, ImageDefinition
from worldtrace.schemas import Action

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt

IMAGE = ImageDefinition("terminal", Path(__file__).parent / "image", shared_files=(DRIVER_RUNTIME,))
"""The sandbox image: bash, tmux, the usual command-line tools and the in-container driver."""


def explore_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``explore`` policy: commands built from what the episode has shown so far."""
    from worldtrace.collectors.terminal.explore import ExplorePolicy, TerminalExploreParams

    return ExplorePolicy(TerminalExploreParams.validated(params))


class TerminalCollector(Collector[TerminalConfig, TerminalTask]):
    """Registry entry of the terminal domain."""

    domain = "terminal"
    environment_config = TerminalConfig
    policies = {**Collector.policies, "explore": explore_policy}
    read_only_actions = frozenset({"wait"})
    screen_formats = frozenset({FORMAT})
    requirements = Requirements(images=(IMAGE,))

    def make_environment(self, config: TerminalConfig) -> TerminalEnvironment:
        """Build the terminal environment: a container, or the SSH host ``config.ssh`` names."""
        if config.ssh is not None:
            return SshTerminalEnvironment(config)
        return TerminalEnvironment(config)

    def renderer(self) -> Renderer:
        """Screens as plain text, the shell's state in meta."""
        return TerminalRenderer()

    def agent_prompt(self) -> AgentPrompt:
        """The terminal's prompt for a model: the screen, key names, ``<wait Ns>``, ``DONE``."""
        from worldtrace.collectors.terminal.prompt import AGENT_PROMPT

        return AGENT_PROMPT

    def typed_text(self, name: str, arguments: Mapping[str, Any]) -> list[str]:
        """The items of a ``keys`` action that are text, not key names."""
        items = arguments.get("keys") if name == "keys" else None
        return [
            item
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, str) and not is_key_name(item)
        ]

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Read a replayed action: canonical text (``ls -l<Enter>``, ``<wait 5s>``) or object."""
        if isinstance(action, str):
            return parse_action_text(action)
        return super().parse_action(action)

    def task_library(self, environment: TerminalConfig | None = None) -> Sequence[TerminalTask]:
        """The scripted shell tasks."""
        return TASKS

    def plan(
        self,
        index: int,
        seed: int,
        policy_kind: str,
        tasks: Sequence[str] | None,
        environment: TerminalConfig,
    ) -> EpisodePlan[TerminalTask]:
        """Episodes play the named tasks or the library; exploring ones get a workspace."""
        if policy_kind != "explore" or tasks:
            return super().plan(index, seed, policy_kind, tasks, environment)
        task = TerminalTask(
            name=f"explore-{seed}",
            instruction="Explore the workspace with shell commands.",
            category="explore",
            setup=workspace_setup(seed),
        )
        return EpisodePlan(index=index, seed=seed, task=task)

    def preflight(self, config: TerminalConfig) -> None:
        """Check that the Docker engine answers and the configured image exists.

        On an SSH host: that it is reachable with its host key known and the key accepted,
        runs bash, tmux and python3, and allows the chosen reset.
        """
        if config.ssh is None:
            require_image(config.image)
            return
        environment = SshTerminalEnvironment(config)
        try:
            environment.check_host()
        finally:
            environment.close()


__all__ = [
    "SshTerminalEnvironment",
    "TerminalCollector",
    "TerminalConfig",
    "TerminalEnvironment",
    "TerminalTask",
]
