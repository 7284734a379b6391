"""A real MCP server in a Docker sandbox, called through the official Python SDK.

One fresh container per episode from ``worldtrace/mcp`` (every server installed at a pinned
version, its world seeded at build time), so a new container is the reset. The host speaks to
``/opt/worldtrace/mcp_driver.py`` over a single exec stream (one JSON line each way per step);
the driver starts the configured server as the unprivileged ``user`` (over stdio, or over
streamable HTTP on the container's loopback), opens an SDK client session, and answers each
step with the server's reply, every JSON-RPC message of the call byte for byte, the server's
stderr, and a snapshot of the server's world after the call (see the driver's docstring). The
fetch server's container shares the network namespace of a fresh web-domain site container
(``site``, default datasette), so it fetches ``http://127.0.0.1/`` and nothing else.

A call is checked against the tool's input schema, but sent whatever the check says: the
server's own answer to an unknown tool or a bad argument is data. The problems found go into
the raw record (``schema_problems``). A JSON-RPC error, a timed-out call and a server that
exited are the step's error; a result with ``isError`` is an answer (its text says so). A
server that exited ends the episode (``truncated``) with the reason. A sandbox that stops
answering during a call is the call's doing: the step is recorded with the best state there
is and the episode ends; a container removed from outside raises ``SandboxError`` (retried).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from worldtrace.collectors.base import StepOutcome, TaskSetupError
from worldtrace.collectors.driven import (
    LAST_LOOK_TIMEOUT_S,
    DriverEnvironment,
    LostSandbox,
    SandboxConfig,
    SandboxImage,
    SandboxLimits,
)
from worldtrace.collectors.mcp.render import McpRenderer, call_error
from worldtrace.collectors.mcp.servers import IMAGE_TAG, SERVERS
from worldtrace.collectors.mcp.state import state_diff
from worldtrace.collectors.mcp.tasks import CheckContext
from worldtrace.collectors.tool_calls import schema_problems
from worldtrace.sandboxes.channel import last_look
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.sandboxes.websites import RunningSite, SiteDefinition, start_site
from worldtrace.schemas import Action, EnvironmentRef
from worldtrace.schemas.raw import RawObservation

logger = logging.getLogger(__name__)

DRIVER = ["/opt/mcp-venv/bin/python", "/opt/worldtrace/mcp_driver.py"]
SNAPSHOT_ALLOWANCE_S = 15.0
"""Time a step may take beyond its call's limit: the driver's state snapshot after it."""
CHECK_TIMEOUT_S = 60.0
"""Limit for each command a task's check runs in the sandbox."""

VERSION_PROBE = [
    "/opt/mcp-venv/bin/python",
    "-c",
    "import glob, json, platform, subprocess\n"
    "def out(*argv):\n"
    "    run = subprocess.run(argv, capture_output=True, text=True)\n"
    "    return run.stdout.strip()\n"
    "pg = sorted(glob.glob('/usr/lib/postgresql/*/bin/postgres'))\n"
    "print(json.dumps({'node': out('node', '--version').lstrip('v'),\n"
    "    'python': platform.python_version(), 'git': out('git', '--version').split()[-1],\n"
    "    'postgresql': out(pg[-1], '--version').split()[2] if pg else ''}))\n",
]
"""Prints the versions of Node.js, the driver's Python, PostgreSQL and git in the image."""


class McpConfig(SandboxConfig):
    """Configuration of the mcp environment."""

    default_image = IMAGE_TAG

    server: str = Field(
        default="filesystem",
        pattern=r"^[a-z][a-z0-9_-]*$",
        description="the MCP server to drive (see `worldtrace tasks mcp` or docs/mcp.md)",
    )
    transport: Literal["stdio", "http"] = Field(
        default="stdio", description="stdio, or streamable HTTP on the container's loopback"
    )
    command: list[str] | None = Field(
        default=None,
        min_length=1,
        description="run this stdio command (a server installed in the image, or a wrapper "
        "of one) instead of the named server's; the named server's env, services and state "
        "snapshot apply (`server=time` for a server with no state to snapshot)",
    )
    image: SandboxImage = Field(default=None, description=f"sandbox image; default {IMAGE_TAG}")
    site: str = Field(
        default="datasette",
        description="the web-domain site a server that fetches pages reaches on 127.0.0.1",
    )
    limits: SandboxLimits = Field(default_factory=Limits)
    start_timeout_s: float = Field(
        default=60, gt=0, description="limit for the server to start and list its tools"
    )
    call_timeout_s: float = Field(
        default=30, gt=0, description="limit for one tool call (the step timeout caps it too)"
    )

    @model_validator(mode="after")
    def _known_server(self) -> McpConfig:
        spec = SERVERS.get(self.server)
        if spec is None:
            raise ValueError(
                f"no MCP server {self.server!r} (expected one of {', '.join(SERVERS)}; a "
                "server of your own in the image runs with --env command=... beside one)"
            )
        if self.command is not None and self.transport != "stdio":
            raise ValueError("a server given by `command` runs over stdio only")
        if self.transport not in spec.transports:
            raise ValueError(
                f"the {self.server} server runs over {', '.join(spec.transports)}, "
                f"not {self.transport}"
            )
        return self

    @field_validator("site")
    @classmethod
    def _known_site(cls, site: str) -> str:
        site_definition(site)  # an unknown site is a config error, before anything starts
        return site


class McpEnvironment(DriverEnvironment[McpConfig, Any]):
    """An MCP server in a fresh container per episode, called through the SDK."""

    domain = "mcp"
    driver = DRIVER
    state_field = "state"

    def __init__(self, config: McpConfig | None = None, labels: dict[str, str] | None = None):
        super().__init__(config or McpConfig(), labels)
        self._site: RunningSite | None = None
        self._session: dict[str, Any] = {}
        self._tools: list[dict[str, Any]] = []
        self._calls: list[RawObservation] = []
        self._renderer = McpRenderer()

    @property
    def _needs_site(self) -> bool:
        return "site" in SERVERS[self.config.server].services

    def reset(self, seed: int, task: Any | None) -> RawObservation:
        """Start a fresh container and the server in it; return the session's observation.

        The observation holds the server's identity, the protocol version, the tool
        definitions as ``tools/list`` gave them, the manifest's example values, and the state.
        A server that does not start raises ``SandboxError`` with its stderr; a task whose
        ``setup`` commands (run as root before the server starts) fail, ``TaskSetupError``.
        """
        self.close()
        site = (
            start_site(site_definition(self.config.site), clock_start=self.config.clock_start)
            if self._needs_site
            else None
        )
        network = "none" if site is None else f"container:{site.sandbox.container.id}"
        try:
            self._start_sandbox(self.config.image_tag, self.config.limits, network=network)
        except BaseException:
            if site is not None:
                site.close()
            raise
        self._site = site
        # A task's own starting point beyond the seed (a commit task's uncommitted edits),
        # in place before the server starts and the first snapshot is taken.
        for argv in getattr(task, "setup", ()):
            result = self.sandbox.exec(list(argv), timeout=CHECK_TIMEOUT_S)
            if result.exit_code != 0:
                raise TaskSetupError(
                    f"the setup of task {getattr(task, 'name', task)!r} failed ({argv[0]} "
                    f"exited with {result.exit_code}): "
                    f"{result.stderr.decode(errors='replace')[-500:]}"
                )
        self._open_driver()
        request: dict[str, Any] = {
            "op": "start",
            "server": self.config.server,
            "transport": self.config.transport,
            "timeout": self.config.start_timeout_s,
        }
        if self.config.command is not None:
            request["command"] = list(self.config.command)
        reply = self._request(request, timeout_s=self.config.start_timeout_s)
        self._session = reply
        self._tools = list(reply.get("tools") or ())
        self._calls = []
        observation = {
            **reply,
            "server": self.config.server,
            "transport": self.config.transport,
            "examples": [] if self.config.command else list(SERVERS[self.config.server].examples),
            "state_diff": None,
        }
        self._last = observation
        return observation

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Send one tool call and return the server's answer and its world's state after it."""
        if self._driver is None:
            raise SandboxError("the mcp environment has no episode; call reset() first")
        started = time.monotonic()
        problems = schema_problems(action, self._tools)
        timeout = min(float(timeout_s), self.config.call_timeout_s)
        request = {
            "op": "call",
            "name": action.name,
            "arguments": action.arguments,
            "timeout": timeout,
        }
        try:
            reply = self._request(request, timeout_s=timeout + SNAPSHOT_ALLOWANCE_S)
        except SandboxError as lost:
            if self._removed_from_outside():
                raise
            return self._lost_outcome(lost, started, action, problems, timeout)
        observation = self._call_observation(action, problems, timeout, reply)
        error = call_error(observation)
        exited = observation.get("server_exited") is not None
        if exited:
            self._unusable = True
        return self._outcome(observation, started, error=error, truncated=exited)

    def _call_observation(
        self, action: Action, problems: list[str], timeout: float, reply: dict[str, Any]
    ) -> RawObservation:
        previous = (self._last or {}).get("state")
        state = reply.get("state") or previous or {"kind": "none"}
        observation = {
            **reply,
            "tool": action.name,
            "arguments": action.arguments,
            "server": self.config.server,
            "schema_problems": problems,
            "timeout_s": timeout,
            "state": state,
            "state_diff": state_diff(previous, state),
        }
        self._calls.append(observation)
        return observation

    def _last_look(self) -> RawObservation | None:
        """The server's state from a second driver process, or None if none answers."""
        if self._sandbox is None:
            return None
        look = last_look(
            self._sandbox,
            [*self.driver, "--observe", "--server", self.config.server],
            LAST_LOOK_TIMEOUT_S,
        )
        if look is None or not isinstance(look.get(self.state_field), Mapping):
            return None
        return look

    def _lost_observation(
        self, lost: LostSandbox, action: Action, problems: list[str], timeout: float
    ) -> RawObservation:
        """The call's observation without an answer, with the last look's state if any."""
        reply: dict[str, Any] = {
            "result": None,
            "protocol_error": None,
            "timed_out": False,
            "server_exited": None,
            "messages": [],
            "garbage": [],
            "stderr": "",
            **lost.marks(),
        }
        if lost.look is not None:
            reply["state"] = dict(lost.look["state"])
        return self._call_observation(action, problems, timeout, reply)

    def evaluate(self, task: Any | None) -> float | None:
        """Run the task's check against the real state: 1.0 if it holds, else 0.0.

        A command of the check that fails (``CheckCommandError``) fails the check.

        None when there is nothing to check with: a task without a check, or a sandbox the
        episode's calls left dead or unanswering (its steps stand; only the reward is unknown).
        """
        check = getattr(task, "check", None)
        if check is None or self._sandbox is None or self._unusable:
            return None
        if not self._sandbox.is_running():
            return None
        context = CheckContext(
            run=self._run_for_check,
            results=[self._renderer.observation(raw).text for raw in self._calls],
            raw=list(self._calls),
            state=dict((self._last or {}).get("state") or {}),
        )
        try:
            return 1.0 if check(context) else 0.0
        except CheckCommandError as error:
            # The state the check looks for is not there (a file, a branch, a row).
            logger.info("the check of %s failed: %s", getattr(task, "name", task), error)
            return 0.0
        except SandboxError:
            return None

    def _run_for_check(self, argv: list[str]) -> str:
        """Run ``argv`` in the episode's sandbox as root; its stdout (an error if it fails)."""
        result = self.sandbox.exec(argv, timeout=CHECK_TIMEOUT_S)
        if result.exit_code != 0:
            raise CheckCommandError(
                f"{argv[0]} exited with {result.exit_code}: "
                f"{result.stderr.decode(errors='replace')[-500:]}"
            )
        return result.stdout.decode(errors="replace")

    def describe(self) -> EnvironmentRef:
        """Return the image id, the server's package and version, the SDK's and protocol's."""
        sandbox = self.sandbox
        image_id = sandbox.image_id
        spec = SERVERS[self.config.server]
        own = self.config.command is None
        info = self._session.get("server_info") or {}
        components = {
            **sandbox.image_versions(VERSION_PROBE),
            "server": self.config.server,
            "package": spec.package if own else "",
            "package_version": spec.version if own else "",
            "server_name": str(info.get("name", "")),
            "server_version": str(info.get("version", "")),
            "sdk_version": str(self._session.get("sdk_version", "")),
            "protocol_version": str(self._session.get("protocol_version", "")),
            "transport": self.config.transport,
            "image": self.config.image_tag,
            "image_digest": image_id,
        }
        if self.config.command is not None:
            components["command"] = " ".join(self.config.command)
        if self._site is not None:
            components["site"] = self.config.site
            components["site_image_digest"] = self._site.sandbox.image_id
        return EnvironmentRef(
            name=f"mcp/{self.config.server}",
            version=image_id,
            components=components,
            config_hash=self.config.config_hash(),
        )

    def _close_site(self) -> None:
        if self._site is not None:
            self._site.close()
            self._site = None

    def close(self) -> None:
        """Stop the driver and the server, remove the container (and the site's)."""
        super().close()
        self._close_site()


def site_definition(name: str) -> SiteDefinition:
    """The web-domain site ``name`` (the web domain owns the sites and their images)."""
    from worldtrace.sandboxes.sites import site_definition as web_site

    return web_site(name)


class CheckCommandError(RuntimeError):
    """A command a task's check ran in the sandbox failed."""


__all__ = ["CheckCommandError", "McpConfig", "McpEnvironment"]
