"""A real search engine over a real documentation corpus, in a Docker sandbox.

One fresh container per episode from ``worldtrace/search`` (the corpus, its Xapian index and
the site were built into the image; network ``none``: the site server listens on the
container's loopback), so a new container is the reset. The host speaks to
``/opt/worldtrace/search_driver.py`` over a single exec stream (one JSON line each way per
step; the protocol is the driver's docstring): ``start`` at reset (the site server, the index,
an empty memory), then one request per tool call:

- ``web_search(query, num_results)`` → ``search``;
- ``web_extractor(url, goal)`` → ``extract``;
- ``dict_memory(action, key, value)`` → ``memory``.

A call is checked against the tool's input schema (:data:`~worldtrace.collectors.search.
actions.TOOLS`) and sent whatever the check says, with the arguments it has (a missing one as
null): the driver's own answer to a bad call is data, and the problems found go into the raw
record (``schema_problems``). A call of a tool that does not exist has no request to map to:
its answer is our error, with the memory as an ``observe`` request reads it. The driver's
``error`` (a query the engine cannot parse, an HTTP 404, a URL outside the site, a missing
memory key) is the step's error; such a call changes nothing. A sandbox that stops answering
during a call is the call's doing: the step is recorded with the memory a second driver
process still reads (``--observe``) and the episode ends; a container removed from outside
raises ``SandboxError`` (retried).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from worldtrace.collectors.base import StepOutcome
from worldtrace.collectors.driven import (
    DriverEnvironment,
    LostSandbox,
    SandboxConfig,
    SandboxImage,
    SandboxLimits,
)
from worldtrace.collectors.search.actions import DEFAULT_NUM_RESULTS, TOOLS
from worldtrace.collectors.search.image_definition import DRIVER, IMAGE_TAG
from worldtrace.collectors.search.render import DEFAULT_MAX_MARKDOWN_CHARS
from worldtrace.collectors.search.state import memory_diff
from worldtrace.collectors.search.tasks import SearchTask, answered
from worldtrace.collectors.tool_calls import schema_problems
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas import Action, EnvironmentRef
from worldtrace.schemas.raw import RawObservation

VERSION_PROBE = [
    DRIVER[0],
    "-c",
    "import importlib.metadata as m, json, platform\n"
    "print(json.dumps({'python': platform.python_version(),\n"
    "    'beautifulsoup4': m.version('beautifulsoup4')}))\n",
]
"""Prints the driver's Python and the HTML parser under markdownify (the rest is corpus.json)."""

TOOL_NAMES = tuple(str(tool["name"]) for tool in TOOLS)


class SearchConfig(SandboxConfig):
    """Configuration of the search environment (every field has a default)."""

    default_image = IMAGE_TAG
    image: SandboxImage = Field(default=None, description=f"sandbox image; default {IMAGE_TAG}")
    limits: SandboxLimits = Field(default_factory=Limits)
    start_timeout_s: float = Field(
        default=60, gt=0, description="limit for the site server and the index to be ready"
    )
    call_timeout_s: float = Field(
        default=30, gt=0, description="limit for one tool call (the step timeout caps it too)"
    )
    max_markdown_chars: int = Field(
        default=DEFAULT_MAX_MARKDOWN_CHARS,
        ge=100,
        description="characters of a page's markdown an observation shows (the raw record "
        "keeps all of it)",
    )


def driver_request(action: Action) -> dict[str, Any] | None:
    """The driver request of a tool call, or None for a tool that does not exist.

    Arguments the call lacks are sent as null (``num_results`` as its default), arguments the
    tool does not have are not sent: the driver answers what it gets.
    """
    arguments = action.arguments
    if action.name == "web_search":
        return {
            "op": "search",
            "query": arguments.get("query"),
            "num_results": arguments.get("num_results", DEFAULT_NUM_RESULTS),
        }
    if action.name == "web_extractor":
        return {"op": "extract", "url": arguments.get("url"), "goal": arguments.get("goal")}
    if action.name == "dict_memory":
        return {
            "op": "memory",
            "action": arguments.get("action"),
            "key": arguments.get("key"),
            "value": arguments.get("value"),
        }
    return None


class SearchEnvironment(DriverEnvironment[SearchConfig, SearchTask]):
    """The search engine, the site and the memory in a fresh container per episode."""

    domain = "search"
    driver = DRIVER
    state_field = "memory_digest"

    def __init__(
        self, config: SearchConfig | None = None, labels: dict[str, str] | None = None
    ) -> None:
        super().__init__(config or SearchConfig(), labels)
        self._corpus: dict[str, Any] = {}

    def reset(self, seed: int, task: SearchTask | None) -> RawObservation:
        """Start a fresh container, the site server and the index; return the first observation.

        It holds the corpus identity (``corpus``: corpus.json as built), the site, the tool
        definitions (``tools``) and the empty memory. The corpus does not depend on the seed.
        """
        self._start_sandbox(self.config.image_tag, self.config.limits, network="none")
        self._open_driver()
        reply = self._request({"op": "start"}, timeout_s=self.config.start_timeout_s)
        self._corpus = dict(reply.get("corpus") or {})
        observation = {
            **reply,
            "tools": [dict(tool) for tool in TOOLS],
            "max_markdown_chars": self.config.max_markdown_chars,
            "state_diff": None,
        }
        self._last = observation
        return observation

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Send one tool call; return the driver's answer and the memory after it."""
        if self._driver is None:
            raise SandboxError("the search environment has no episode; call reset() first")
        started = time.monotonic()
        problems = schema_problems(action, TOOLS)
        request = driver_request(action)
        own_error = None
        if request is None:
            own_error = f"unknown tool {action.name!r} (the tools are: {', '.join(TOOL_NAMES)})"
            request = {"op": "observe"}
        timeout = min(float(timeout_s), self.config.call_timeout_s)
        try:
            # A tool's request answered with a driver error is the call's answer; an observe
            # the driver cannot serve is a broken sandbox.
            reply = self._request(
                request, timeout_s=timeout, raise_driver_error=request["op"] == "observe"
            )
        except SandboxError as error:
            if self._removed_from_outside():
                raise
            return self._lost_outcome(error, started, action, problems)
        if own_error is not None:
            reply["error"] = own_error
        elif "driver_error" in reply:
            # The driver could not serve what the call gave it: the call's answer, not a crash.
            reply["error"] = f"the search driver failed: {reply['driver_error']}"
        observation = self._call_observation(action, problems, reply)
        return self._outcome(observation, started, error=observation.get("error") or None)

    def _call_observation(
        self, action: Action, problems: list[str], reply: Mapping[str, Any]
    ) -> RawObservation:
        previous = (self._last or {}).get("memory")
        memory = reply.get("memory")
        if not isinstance(memory, Mapping):
            memory = previous or {}
        return {
            **reply,
            "tool": action.name,
            "arguments": action.arguments,
            "schema_problems": problems,
            "max_markdown_chars": self.config.max_markdown_chars,
            "memory": dict(memory),
            "state_diff": memory_diff(previous, memory),
        }

    def _lost_observation(
        self, lost: LostSandbox, action: Action, problems: list[str]
    ) -> RawObservation:
        """The call's observation without an answer, with the last look's memory if any."""
        look = lost.look
        reply: dict[str, Any] = {"error": lost.reason, **lost.marks()}
        if look is not None:
            reply.update(memory=look.get("memory"), memory_digest=look.get("memory_digest"))
        else:
            reply["memory_digest"] = (self._last or {}).get("memory_digest")
        return self._call_observation(action, problems, reply)

    def final_memory(self) -> dict[str, Any] | None:
        """The episode's memory now (None when it cannot be known: the sandbox was lost)."""
        last = self._last or {}
        if self._driver is not None and not self._unusable:
            try:
                return dict(self._request({"op": "observe"}, timeout_s=10).get("memory") or {})
            except SandboxError:
                return None
        if last.get("state_stale"):
            return None
        memory = last.get("memory")
        return dict(memory) if isinstance(memory, Mapping) else None

    def evaluate(self, task: SearchTask | None) -> float | None:
        """1.0 if the final memory holds one of the task's answers, else 0.0.

        None without a task to check, or when the final memory cannot be read.
        """
        if task is None or not getattr(task, "answers", ()):
            return None
        memory = self.final_memory()
        if memory is None:
            return None
        values = {str(key): str(value) for key, value in memory.items()}
        return 1.0 if answered(task, values) else 0.0

    def describe(self) -> EnvironmentRef:
        """Return the image id and the corpus identity (engine, index hash, package versions)."""
        sandbox = self.sandbox
        image_id = sandbox.image_id
        corpus = self._corpus
        engine = corpus.get("engine") or {}
        index = corpus.get("index") or {}
        documents = corpus.get("documents") or {}
        converter = corpus.get("converter") or {}
        components = {
            **sandbox.image_versions(VERSION_PROBE),
            "image": self.config.image_tag,
            "image_digest": image_id,
            "engine": str(engine.get("name", "")),
            "engine_version": str(engine.get("version", "")),
            "index_sha256": str(index.get("sha256", "")),
            "index_bytes": index.get("bytes"),
            "documents": documents.get("total"),
            "documents_per_collection": documents.get("per_collection") or {},
            "listing_sha256": str(documents.get("listing_sha256", "")),
            "converter": str(converter.get("name", "")),
            "converter_version": str(converter.get("version", "")),
            "packages": corpus.get("packages") or {},
            "base_url": str(corpus.get("base_url", "")),
        }
        return EnvironmentRef(
            name="search/docs",
            version=image_id,
            components=components,
            config_hash=self.config.config_hash(),
        )


__all__ = ["SearchConfig", "SearchEnvironment", "driver_request"]
