"""The mcp domain: real MCP servers in a Docker sandbox, called through the official SDK.

One image (``image/``) holds seven third-party MCP servers at pinned versions, from the Python
registry (``mcp-server-git`` over a repository with history, ``mcp-server-time``,
``mcp-server-fetch`` pointed at a local web-domain site) and the npm registry
(``server-filesystem`` over a seeded project folder, ``server-memory``'s knowledge graph,
``server-postgres`` against a seeded PostgreSQL, ``server-everything`` over stdio and
streamable HTTP), listed in ``image/servers.json``. An action is one tool call
(:mod:`~worldtrace.collectors.tool_calls`); an observation is the tool result as the client
receives it (format ``tool-result``, :mod:`~worldtrace.collectors.mcp.render`), with the
server's world after the call and its change in ``meta``. Policies: ``script`` (the task
library, :mod:`~worldtrace.collectors.mcp.tasks`), ``explore`` (schema-driven calls that chain
on what earlier results returned) and ``replay`` (re-executes given tool calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.base import Collector, Policy, Renderer
from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment, site_definition
from worldtrace.collectors.mcp.render import McpRenderer
from worldtrace.collectors.mcp.servers import IMAGE, SERVERS
from worldtrace.collectors.mcp.tasks import McpTask, load_tasks
from worldtrace.collectors.requirements import Requirements
from worldtrace.collectors.tool_calls import parse_tool_call
from worldtrace.sandboxes.docker import require_image
from worldtrace.sandboxes.sites import IMAGES as SITE_IMAGES
from worldtrace.schemas import Action

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt


def explore_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``explore`` policy: schema-driven calls, seeded, chaining on earlier results."""
    from worldtrace.collectors.mcp.explore import McpExploreParams, McpExplorePolicy

    return McpExplorePolicy(McpExploreParams.validated(params))


class McpCollector(Collector[McpConfig, McpTask]):
    """Registry entry of the mcp domain."""

    domain = "mcp"
    environment_config = McpConfig
    policies = {**Collector.policies, "explore": explore_policy}
    # Tools of the seven servers that only read; curation labels their no-ops.
    read_only_actions = frozenset(
        {
            "read_file",
            "read_text_file",
            "read_media_file",
            "read_multiple_files",
            "list_directory",
            "list_directory_with_sizes",
            "directory_tree",
            "search_files",
            "get_file_info",
            "list_allowed_directories",
            "git_status",
            "git_diff_unstaged",
            "git_diff_staged",
            "git_diff",
            "git_log",
            "git_show",
            "git_branch",
            "read_graph",
            "search_nodes",
            "open_nodes",
            "query",
            "get_current_time",
            "convert_time",
            "fetch",
        }
    )
    requirements = Requirements(
        images=(IMAGE, *(image for image in SITE_IMAGES if image.name == "site-datasette"))
    )

    def make_environment(self, config: McpConfig) -> McpEnvironment:
        """Build the mcp environment."""
        return McpEnvironment(config)

    def renderer(self) -> Renderer:
        """Tool results as the client receives them; the server's state in meta."""
        return McpRenderer()

    def agent_prompt(self) -> AgentPrompt:
        """The mcp prompt for a model: the result format, the server's own tools as functions."""
        from worldtrace.collectors.mcp.prompt import AGENT_PROMPT

        return AGENT_PROMPT

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Read a replayed tool call: its JSON text or a ``{name, arguments}`` object."""
        return parse_tool_call(action)

    def task_library(self, environment: McpConfig | None = None) -> Sequence[McpTask]:
        """The scripted tasks of the configured server (of every server without config)."""
        if environment is None:
            return load_tasks()
        if environment.command is not None:
            return ()
        return load_tasks(environment.server)

    def preflight(self, config: McpConfig) -> None:
        """Check that the image (and the site a fetching server reaches) exists."""
        require_image(config.image_tag)
        if "site" in SERVERS[config.server].services:
            require_image(site_definition(config.site).image)


__all__ = ["McpCollector", "McpConfig", "McpEnvironment", "McpTask"]
