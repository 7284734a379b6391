"""The search domain: a real search engine over a real documentation corpus, pages over HTTP.

One image (``image/``, :mod:`~worldtrace.collectors.search.image_definition`) holds a corpus
of documentation installed from Debian (man pages, the Python, PostgreSQL, Git and SQLite
manuals, the Debian reference, the packages' descriptions), its Xapian index and a small site
server that serves the pages on the container's loopback as ``http://docs.localhost/...``, all
built at image build time; ``/opt/worldtrace/corpus.json`` is the corpus identity (engine and
index hash, package versions) that goes into every transition's ``env``. An action is one
tool call (:mod:`~worldtrace.collectors.search.actions`): ``web_search``, ``web_extractor``,
``dict_memory``. An observation is ranked results (format ``search-results``), a page's
markdown (``markdown``) or a memory result (``tool-result``), with the episode's memory and
its change in ``meta`` (:mod:`~worldtrace.collectors.search.render`). Policies: ``script`` (the
question library, :mod:`~worldtrace.collectors.search.tasks`, checked against the final
memory), ``explore`` (queries built from what it has read, :mod:`~worldtrace.collectors.search.
explore`) and ``replay`` (re-executes given tool calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.base import Collector, Policy, Renderer
from worldtrace.collectors.requirements import Requirements
from worldtrace.collectors.search.environment import SearchConfig, SearchEnvironment
from worldtrace.collectors.search.image_definition import IMAGE
from worldtrace.collectors.search.render import SearchRenderer
from worldtrace.collectors.search.tasks import SearchTask, load_tasks
from worldtrace.collectors.tool_calls import parse_tool_call
from worldtrace.sandboxes.docker import require_image
from worldtrace.schemas import Action

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt


def explore_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``explore`` policy: seeded queries built from what it has read, pages, memory."""
    from worldtrace.collectors.search.explore import SearchExploreParams, SearchExplorePolicy

    return SearchExplorePolicy(SearchExploreParams.validated(params))


class SearchCollector(Collector[SearchConfig, SearchTask]):
    """Registry entry of the search domain."""

    domain = "search"
    environment_config = SearchConfig
    policies = {**Collector.policies, "explore": explore_policy}
    # Searching and reading pages never change the state; dict_memory is one name for reads
    # and writes, so it is not listed (its failed writes are no-ops all the same).
    read_only_actions = frozenset({"web_search", "web_extractor"})
    requirements = Requirements(images=(IMAGE,))

    def make_environment(self, config: SearchConfig) -> SearchEnvironment:
        """Build the search environment."""
        return SearchEnvironment(config)

    def renderer(self) -> Renderer:
        """Search results, page markdown and memory results; the memory in meta."""
        return SearchRenderer()

    def agent_prompt(self) -> AgentPrompt:
        """The search prompt for a model: the corpus, the result formats, the three tools."""
        from worldtrace.collectors.search.prompt import AGENT_PROMPT

        return AGENT_PROMPT

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Read a replayed tool call: its JSON text or a ``{name, arguments}`` object."""
        return parse_tool_call(action)

    def task_library(self, environment: SearchConfig | None = None) -> Sequence[SearchTask]:
        """The scripted questions (the corpus is the same for every configuration)."""
        return load_tasks()

    def preflight(self, config: SearchConfig) -> None:
        """Check that the configured image exists."""
        require_image(config.image_tag)


__all__ = ["SearchCollector", "SearchConfig", "SearchEnvironment", "SearchTask"]
