"""The swe domain: real Python repositories in Docker, driven through tool calls.

Each repository (``image/repos/<name>/``: a PyPI sdist at a pinned version with its test
dependencies pinned by hash) is a sandbox image holding the project as a one-commit git
repository and a recorded baseline of its passing tests. An agent acts through tool calls
(:mod:`~worldtrace.collectors.swe.tools`: run a shell command, read, write and edit files,
search, list a folder, run tests) answered by an in-container tool server; an observation is
the tool's output as the agent sees it (format ``tool-result``). Tasks are synthesized bugs
validated by the repository's own tests (``worldtrace tasks swe synthesize``). Policies:
``script`` (an oracle that reproduces, localizes and fixes the bug), ``explore`` (a task-free
walk of the repository), ``replay`` (re-executes given tool calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.base import Collector, Policy, Renderer, TaskCommands
from worldtrace.collectors.requirements import Requirements
from worldtrace.collectors.swe.environment import SweConfig, SweEnvironment
from worldtrace.collectors.swe.render import SweRenderer
from worldtrace.collectors.swe.repos import IMAGES, REPOS
from worldtrace.collectors.swe.tasks import SweTask, load_tasks
from worldtrace.collectors.swe.tools import parse_tool_call
from worldtrace.sandboxes.docker import require_image
from worldtrace.schemas import Action
from worldtrace.schemas.errors import ConfigError

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt


def oracle_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``script`` policy: fixes the task's bug like an engineer, with seeded variations."""
    from worldtrace.collectors.swe.policies import SweOraclePolicy

    return SweOraclePolicy(**params)


def explore_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``explore`` policy: a seeded walk of the repository, task-free."""
    from worldtrace.collectors.swe.explore import SweExploreParams, SweExplorePolicy

    return SweExplorePolicy(SweExploreParams.validated(params))


class SweCollector(Collector[SweConfig, SweTask]):
    """Registry entry of the swe domain."""

    domain = "swe"
    environment_config = SweConfig
    policies = {**Collector.policies, "script": oracle_policy, "explore": explore_policy}
    read_only_actions = frozenset({"read_file", "search", "list_dir"})
    requirements = Requirements(images=IMAGES)

    def make_environment(self, config: SweConfig) -> SweEnvironment:
        """Build the swe environment."""
        return SweEnvironment(config)

    def renderer(self) -> Renderer:
        """Tool outputs as the agent sees them, the working tree's state in meta."""
        return SweRenderer()

    def agent_prompt(self) -> AgentPrompt:
        """The swe prompt for a model: the repository, the tool results, the tools as functions."""
        from worldtrace.collectors.swe.prompt import AGENT_PROMPT

        return AGENT_PROMPT

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Read a replayed tool call: its JSON text or a ``{name, arguments}`` object."""
        return parse_tool_call(action)

    def task_library(self, environment: SweConfig | None = None) -> Sequence[SweTask]:
        """The synthesized tasks of the configured repository (of every one without config)."""
        if environment is None:
            return load_tasks()
        _require_known_repo(environment)
        return load_tasks(environment.repo)

    def task_commands(self) -> TaskCommands:
        """``worldtrace tasks swe synthesize``: make validated tasks for a repository."""
        from worldtrace.collectors.swe.commands import task_commands

        return task_commands()

    def preflight(self, config: SweConfig) -> None:
        """Check that the repository is one of ours and its image exists."""
        _require_known_repo(config)
        require_image(config.image_tag)


def _require_known_repo(config: SweConfig) -> None:
    """A repository without an image definition of ours needs an image of the user's."""
    if config.image is None and config.repo not in REPOS:
        raise ConfigError(
            f"no swe repository {config.repo!r} (expected one of {', '.join(REPOS)}, or "
            "give the image with --env image=...)"
        )


__all__ = ["SweCollector", "SweConfig", "SweEnvironment", "SweTask"]
