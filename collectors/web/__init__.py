"""The web domain: Debian's Chromium through Playwright on real web applications.

Observations and actions follow BrowserGym: the accessibility tree with element ids (bids)
as text, and actions such as ``click('12')`` or ``fill('a3', 'text')``. The sites (seeded,
reset per episode) are defined in :mod:`worldtrace.sandboxes.sites` and served by
:mod:`worldtrace.sandboxes.websites`. Policies: ``script`` plays a site's task library,
``explore`` walks the site, ``replay`` re-executes given action strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.base import Collector, Policy, Renderer
from worldtrace.collectors.requirements import Check, Requirements
from worldtrace.collectors.web.actions import parse_action
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.render import WebRenderer
from worldtrace.collectors.web.tasks import WebScriptPolicy, WebTask
from worldtrace.sandboxes.sites import IMAGES
from worldtrace.schemas import Action

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt


def browser_check() -> Check:
    """Chromium is installed and says which version it is (never `playwright install`)."""
    from worldtrace.collectors.web.browser import (
        BrowserUnavailable,
        chromium_path,
        chromium_version,
    )

    fix = "make setup  (or `apt-get install chromium`; never `playwright install`)"
    try:
        path = chromium_path()
    except BrowserUnavailable as error:
        return Check("web browser", False, str(error), fix)
    version = chromium_version()
    ok = version.startswith("Chromium")
    return Check("web browser", ok, f"{version} ({path})", None if ok else fix)


def browser_confinement_check() -> Check:
    """The browser can be confined: a memory cgroup, and a user namespace for its sandbox.

    The browser runs unprivileged with Chromium's own sandbox on (collectors/web/browser.py),
    which needs user namespaces for an ordinary user, under a memory cgroup that needs root
    and a writable cgroup file system; either missing fails the first episode, so say it here.
    """
    import subprocess

    from worldtrace.collectors.web.browser import browser_uid
    from worldtrace.sandboxes.cgroups import MemoryCapError, MemoryCgroup

    name = "web browser confinement"
    try:
        MemoryCgroup("doctor", 64 * 2**20).remove(0)
        uid = str(browser_uid())
    except (MemoryCapError, OSError) as error:
        return Check(name, False, str(error), "run as root on a machine with cgroups mounted")
    as_the_browser = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    probe = [*as_the_browser, "unshare", "--user", "--map-current-user", "true"]
    result = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        return Check(
            name,
            False,
            f"an unprivileged user cannot make a user namespace: {result.stderr.strip()}",
            "sysctl -w kernel.unprivileged_userns_clone=1 user.max_user_namespaces=15000",
        )
    return Check(name, True, f"memory cgroup and user namespaces for uid {uid}")


def script_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``script`` policy: a site task's steps, elements found by role and name."""
    if params:
        raise ValueError(f"the script policy takes no parameters, got {sorted(params)}")
    return WebScriptPolicy()


def explore_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``explore`` policy: a seeded walk over the site's interactive elements."""
    from worldtrace.collectors.web.explore import ExplorePolicy, WebExploreParams

    return ExplorePolicy(WebExploreParams.validated(params))


class WebCollector(Collector[WebConfig, WebTask]):
    """Registry entry of the web domain."""

    domain = "web"
    environment_config = WebConfig
    policies = {**Collector.policies, "script": script_policy, "explore": explore_policy}
    read_only_actions = frozenset({"noop", "scroll", "hover", "mouse_move"})
    requirements = Requirements(
        debian_packages=("chromium",),
        images=IMAGES,
        checks=(browser_check, browser_confinement_check),
    )

    def make_environment(self, config: WebConfig) -> WebEnvironment:
        """Build the web environment."""
        return WebEnvironment(config)

    def renderer(self) -> Renderer:
        """BrowserGym's tree text, the screenshot, and the page's facts in meta."""
        return WebRenderer()

    def agent_prompt(self) -> AgentPrompt:
        """The web's prompt for a model: the tree text with bids, BrowserGym's actions, ``DONE``."""
        from worldtrace.collectors.web.prompt import AGENT_PROMPT

        return AGENT_PROMPT

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Read a BrowserGym action string (``click('12')``) or an action object."""
        if isinstance(action, str):
            return parse_action(action)
        return super().parse_action(action)

    def task_library(self, environment: WebConfig | None = None) -> Sequence[WebTask]:
        """The scripted tasks of the environment's site (of every site without one)."""
        from worldtrace.collectors.web.site_tasks import TASKS, tasks_for_site

        return tasks_for_site(environment.site) if environment else TASKS

    def preflight(self, config: WebConfig) -> None:
        """Check that Chromium is installed and the images exist."""
        from worldtrace.collectors.web.browser import chromium_path

        chromium_path()
        super().preflight(config)

    def interrupt(self) -> None:
        """Kill every browser this process launched: steps blocked in them return at once."""
        from worldtrace.collectors.web.browser import kill_all_browsers

        kill_all_browsers("interrupted: the run was asked to stop")


__all__ = ["WebCollector", "WebConfig", "WebEnvironment", "WebTask"]
