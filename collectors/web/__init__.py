"""The web domain: Debian's Chromium through Playwright on real web applications.

Observations and actions follow BrowserGym: the accessibility tree with element ids (bids)
as text, and actions such as ``click('12')`` or ``fill('a3', 'text')``. The sites themselves
(seeded, reset per episode) are sandboxes: see :mod:`worldtrace.sandboxes.websites`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from worldtrace.collectors.base import Collector, EpisodePlan, Policy, Task
from worldtrace.collectors.policies import ReplayPolicy
from worldtrace.collectors.web.actions import parse_action
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.tasks import WebScriptPolicy, WebTask


class WebCollector(Collector):
    """Registry entry of the web domain."""

    domain = "web"
    environment_config = WebConfig

    def make_environment(self, config: BaseModel) -> WebEnvironment:
        """Build the web environment."""
        if not isinstance(config, WebConfig):
            raise TypeError(f"expected a WebConfig, got {type(config).__name__}")
        return WebEnvironment(config)

    def preflight(self, config: BaseModel) -> None:
        """Check that Chromium is installed and the site's image exists."""
        from worldtrace.collectors.web.browser import chromium_path
        from worldtrace.sandboxes.websites import require_site_images

        assert isinstance(config, WebConfig)
        chromium_path()
        require_site_images([config.site])

    def make_policy(self, kind: str, params: dict[str, Any]) -> Policy:
        """Build 'script' (the site's task library), 'explore' or 'replay' (action strings)."""
        if kind == "script":
            if params:
                raise ValueError(f"the script policy takes no parameters, got {sorted(params)}")
            return WebScriptPolicy()
        if kind == "explore":
            from worldtrace.collectors.web.explore import ExplorePolicy

            return ExplorePolicy(**params)
        if kind == "replay":
            actions = params.get("actions")
            if not isinstance(actions, list) or not actions or set(params) != {"actions"}:
                raise ValueError("the replay policy takes `actions`: a list of action strings")
            return ReplayPolicy([parse_action(str(text)) for text in actions])
        raise ValueError(f"unknown web policy {kind!r} (expected 'script', 'explore' or 'replay')")

    def plan(
        self,
        index: int,
        seed: int,
        policy_kind: str,
        tasks: list[str] | None,
        environment: BaseModel | None = None,
    ) -> EpisodePlan:
        """Scripted episodes cycle through the site's tasks (or the named ones)."""
        from worldtrace.collectors.web.site_tasks import task_by_name, tasks_for_site
        from worldtrace.sandboxes.websites import site_definition

        site = environment.site if isinstance(environment, WebConfig) else WebConfig().site
        try:
            site_definition(site)  # an unknown site is a config error, before anything starts
        except ValueError as error:
            raise LookupError(str(error)) from None
        if policy_kind != "script":
            return EpisodePlan(index=index, seed=seed, task=None)
        library = [task_by_name(name) for name in tasks] if tasks else tasks_for_site(site)
        foreign = sorted({task.name for task in library if task.site != site})
        if foreign:
            raise LookupError(f"tasks {foreign} are not tasks of the site {site!r}")
        if not library:
            raise LookupError(f"the site {site!r} has no scripted tasks")
        return EpisodePlan(index=index, seed=seed, task=library[index % len(library)])

    def interrupt(self) -> None:
        """Kill every browser this process launched: steps blocked in them return at once."""
        from worldtrace.collectors.web.browser import kill_all_browsers

        kill_all_browsers("interrupted: the run was asked to stop")

    def task_library(self) -> list[Task]:
        """Every scripted web task, all sites."""
        from worldtrace.collectors.web.site_tasks import TASKS

        return list(TASKS)


__all__ = ["WebCollector", "WebConfig", "WebEnvironment", "WebTask"]
