"""The mcp domain's exploring policy: schema-driven tool calls that chain through what they saw.

:class:`McpExplorePolicy` calls the episode's server without a task. Each step it picks one of
the server's tools (tools it has not called yet more often) and makes the tool's arguments:

- **Values from the schema.** Arguments are drawn from the tool's ``inputSchema`` with
  hypothesis-jsonschema. Objects with plain ``properties`` are built as
  ``fixed_dictionaries`` (required keys always, optional keys sometimes, no keys the schema does
  not name) and arrays as ``lists`` of at most three items; every other schema, and every leaf,
  goes to ``hypothesis_jsonschema.from_schema``. Letting ``from_schema`` build whole objects
  costs 10-30 ms a value (it re-canonicalises sub-schemas while drawing); this way a value
  costs about 1 ms. Strategies are cached per schema for the life of the process.
- **Values it has seen.** A string field whose name says what it holds (see
  :func:`field_kind`: a root folder like ``repo_path``, a path, a glob pattern, a URL, SQL, a
  time zone, a time of day, or a name, id, branch, revision …) takes, most of the time
  (``reuse_share``), a value of that shape the episode knows: quoted examples in the field's
  description (``e.g., 'Europe/London'``), the manifest's ``examples`` from the first
  observation, values seen in earlier results, or values the last successful call brought
  (twice as likely as each other source, so calls chain: list a folder, then open what is in
  it; create an entity, then open it; write a file, then read it). Values are read from
  results that are not errors: ``[FILE]``/``[DIR]`` entries joined to the listed folder,
  ``{"name", "children"}`` trees likewise, quoted words, absolute paths, URLs, commit ids,
  ``key: value`` values, bullet items, one-word lines, every string of JSON text and of
  ``structuredContent``, and the path and name arguments of the call itself. Whole lines of
  words go only to free-text fields (``content``, ``message``, ``oldText`` …), which take a
  seen line now and then.
- **Invalid calls.** A share ``invalid_share`` of the calls is deliberately wrong, of one of
  :data:`INVALID_KINDS`: a field of the wrong type, a required field missing (both fail
  :func:`~worldtrace.collectors.tool_calls.schema_problems`), a seen path or name altered so
  that it names nothing the episode has seen or the state snapshot holds, or a tool name the
  server does not have. :meth:`McpExplorePolicy.call_kinds` says which call was which.

Tools that cannot work unattended are never called (:data:`UNATTENDED_TOOLS`, tools whose
``execution.taskSupport`` is ``required``), nor those in ``skip_tools``.

**Reproducibility.** The choices (tool, seen value, invalid kind) come from a
``random.Random(seed)``; the episode's knowledge lives in insertion-ordered dicts, never in
sets of strings (whose order changes between processes). Schema values come from Hypothesis
runs through its public API: ``@given(strategy)`` with ``@seed(n)``,
``settings(database=None, phases=[Phase.generate], max_examples=k, deadline=None)`` and every
health check off, so nothing depends on the clock, an example database or earlier runs. Each
run collects a batch of values for one tool; its seed is derived (SHA-256) from the episode
seed, the tool's name and the batch number, so a tool's values do not depend on which other
tools were called before it. The same seed and the same observations give the same calls, in
any process, as long as the versions of hypothesis and hypothesis-jsonschema are the same:
:meth:`McpExplorePolicy.describe` records them in the policy version. Hypothesis would also
mix literals of whatever local modules the process has imported into its values; that is
switched off during our runs (:func:`_without_local_constants`, the one use of private
Hypothesis names). Runs are serialised by a lock (workers are threads). Hypothesis caches
Unicode tables in ``$HYPOTHESIS_STORAGE_DIRECTORY``; unless that is set, this module points
it at ``$XDG_CACHE_HOME/worldtrace/hypothesis`` (``~/.cache/...``), so a collection leaves no
``.hypothesis/`` folder wherever it was started.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import posixpath
import random
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import version as installed_version
from typing import Any

from hypothesis.configuration import set_hypothesis_home_dir

# Importing hypothesis-jsonschema already writes Unicode tables to Hypothesis's storage: point
# it at the user's cache before that (unless it is set).
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    _cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    set_hypothesis_home_dir(os.path.join(_cache, "worldtrace", "hypothesis"))

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers as hypothesis_providers
from hypothesis.internal.constants_ast import Constants
from hypothesis_jsonschema import from_schema

from worldtrace.collectors.base import HistoryItem, Policy
from worldtrace.collectors.tool_calls import schema_problems, tool_call
from worldtrace.schemas import Action, PolicyRef
from worldtrace.schemas.raw import RawObservation

logger = logging.getLogger(__name__)

UNATTENDED_TOOLS: dict[str, str] = {
    # @modelcontextprotocol/server-everything 2026.8.31. The first five are listed only to a
    # client that offers sampling, elicitation or tasks (tests/mcp/data/tools/everything-capable
    # .json); should a driver ever offer them, nobody is there to answer.
    "trigger-sampling-request": "asks the client to sample an LLM; no model answers here",
    "trigger-sampling-request-async": "asks the client to sample an LLM, as a task",
    "trigger-elicitation-request": "asks the user to fill in a form; nobody answers",
    "trigger-elicitation-request-async": "asks the user to fill in a form, as a task",
    "trigger-url-elicitation": "asks the user to open a URL and come back; nobody does",
    "simulate-research-query": (
        "task-based (execution.taskSupport required): the result is polled with tasks/get and "
        "tasks/result, and `ambiguous` asks the user for clarification"
    ),
    "trigger-long-running-operation": (
        "sleeps `duration` seconds, any number the schema allows (hours): every such call "
        "would only run into the environment's timeout"
    ),
    # The same tools under the names of server-everything releases before its 2026 rewrite.
    "sampleLLM": "asks the client to sample an LLM; no model answers here",
    "startElicitation": "asks the user to fill in a form; nobody answers",
    "longRunningOperation": "sleeps `duration` seconds, any number the schema allows",
}
"""Tools never called unless ``skip_unattended=False``, each with the reason."""

INVALID_KINDS = ("wrong_type", "missing_required", "nonexistent", "unknown_tool")
"""The kinds of deliberately invalid calls; :meth:`McpExplorePolicy.call_kinds` names them."""

BATCH_SIZES = (2, 4, 8)
"""Argument values one Hypothesis run draws for a tool: few at first (most tools are called
once or twice an episode), more for a tool called again and again. Each run also draws the
simplest value first, which is dropped."""

MAX_SEEN = 1000
"""Seen values (and lines) kept per episode (the oldest go first; the examples always stay)."""

# How much of a result is read for values: the first lines of each text, strings up to a size.
_MAX_LINES = 200
_MAX_VALUE_CHARS = 200
# How likely a free-text field (content, message, oldText ...) takes a line seen before.
_TEXT_REUSE = 0.4
# How likely a seen value is one of the most recent few (chaining) rather than any.
_RECENT_SHARE = 0.6
_RECENT = 8

# Field kinds by the last word of the field's name (camelCase and snake_case split).
_URL_WORDS = frozenset(("url", "urls", "uri", "uris", "href", "link"))
_URL_FORMATS = frozenset(("uri", "iri", "uri-reference", "iri-reference", "url"))
_SQL_WORDS = frozenset(("sql",))
_PATH_WORDS = frozenset(
    [
        "path",
        "paths",
        "file",
        "files",
        "filename",
        "dir",
        "directory",
        "folder",
        "source",
        "destination",
        "root",
        "repo",
    ]
)
_NAME_WORDS = frozenset(
    [
        "name",
        "names",
        "id",
        "ids",
        "entity",
        "entities",
        "from",
        "to",
        "branch",
        "revision",
        "target",
        "ref",
        "tag",
        "commit",
        "sha",
        "key",
        "query",
        "topic",
        "contains",
        "type",
        "label",
        "title",
    ]
)
_PATTERN_WORDS = frozenset(("pattern", "patterns", "glob", "globs"))
# A time zone field: IANA names only (``Europe/Paris``, ``UTC``).
_ZONE_WORDS = frozenset(("timezone", "zone", "tz"))
_ZONE_VALUE = re.compile(r"^(?:[A-Z][A-Za-z_-]+(?:/[A-Z][A-Za-z0-9_+-]+)+|UTC|GMT)$")
# A field naming a repository or folder to work in (``repo_path``): absolute paths only.
_ROOT_WORDS = frozenset(("repo", "repository", "root", "cwd", "workdir", "workspace"))
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

# What seen values look like, by kind.
_URL = re.compile(r"\b[a-zA-Z][\w+.-]*://[^\s'\"<>()\[\]{}]+")
_URL_VALUE = re.compile(r"^(?:[a-zA-Z][\w+.-]*://\S+|data:\S+)$")
_SQL_VALUE = re.compile(
    r"^\s*(?:select|with|explain|show|values|table|insert|update|delete|create|drop|alter)\b",
    re.IGNORECASE,
)
_CLOCK = re.compile(r"^(?:[01]\d|2[0-3]):[0-5]\d$")
_FILE_NAME = re.compile(r"^[\w.@+-]+\.[A-Za-z0-9]{1,8}$")
# Reading results: a listing entry, a bullet, a `key: value` line, quoted words, absolute
# paths, commit ids.
_LISTING = re.compile(r"^\[(FILE|DIR)\]\s+(.+?)(?:\s{2,}.*)?$")
_BULLET = re.compile(r"^(?:[*+-]|\d+[.)])\s+")
_KEY_VALUE = re.compile(r"^([A-Za-z][\w -]{0,30}):\s+(\S.*)$")
_QUOTED = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"|`([^`\n]{1,80})`")
_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.])/(?:[\w.@+~-]+/?)+")
_COMMIT_ID = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")

# Tools that make what they are given the name of: an altered name creates a thing rather than
# failing, so they get no "nonexistent" calls.
_CREATING = re.compile(r"^(?:create|write|add|make|new|insert|put|save|upload|mkdir)", re.I)
# Fields that name something the call makes (a move's destination): they need not exist.
_MADE_FIELD = re.compile(r"^(?:dest|destination|new|output|out)(?:$|[_A-Z-])", re.I)
# Replacements for a field's value of the wrong type, tried in a seeded order.
_WRONG_VALUES: tuple[Any, ...] = (12345, "12345", True, None, ["a", "b"], {"value": 1}, 2.5)

_LOCK = threading.Lock()


def _words(field: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(field)]


def field_kind(field: str, schema: Mapping[str, Any]) -> str:
    """What a string field holds: root, path, pattern, url, sql, zone, name, clock or text.

    Decided by the last word of its name (``path`` is a path, ``entityNames`` names, any
    ``repo`` or ``root`` word a root folder: ``repo_path``), its ``format`` (``uri``) and its
    description (``SQL``, ``HH:MM``).
    """
    words = _words(field) or [field.lower()]
    last = words[-1]
    description = str(schema.get("description") or "")
    if schema.get("format") in _URL_FORMATS or last in _URL_WORDS:
        return "url"
    if last in _SQL_WORDS or re.search(r"\bSQL\b", description):
        return "sql"
    if last in _PATTERN_WORDS:
        return "pattern"
    if set(words) & _ROOT_WORDS:
        return "root"
    if last in _ZONE_WORDS:
        return "zone"
    if last in _PATH_WORDS:
        return "path"
    if last in _NAME_WORDS:
        return "name"
    if "HH:MM" in description:
        return "clock"
    return "text"


def fits_kind(kind: str, value: str) -> bool:
    """Whether a seen ``value`` could be the value of a field of ``kind``."""
    if not value or "\n" in value or len(value) > _MAX_VALUE_CHARS:
        return False
    if kind == "url":
        return _URL_VALUE.match(value) is not None
    if kind == "sql":
        return _SQL_VALUE.match(value) is not None
    if kind == "path":
        looks = value.startswith(("/", "~", "./")) or "/" in value or _FILE_NAME.match(value)
        return bool(looks) and "://" not in value and not re.search(r"[\s*?]|:$", value)
    if kind == "zone":
        return _ZONE_VALUE.match(value) is not None
    if kind == "root":
        return value.startswith("/") and not re.search(r"[\s*?]|://|:$", value)
    if kind == "pattern":
        return not re.search(r"\s", value) and (
            re.search(r"[*?\[]", value) is not None or _FILE_NAME.match(value) is not None
        )
    if kind == "clock":
        return _CLOCK.match(value) is not None
    if kind == "name":
        return (
            len(value) <= 60
            and len(value.split()) <= 3
            and "://" not in value
            and not value.startswith("/")
            and _SQL_VALUE.match(value) is None
        )
    return kind == "text"


def _description_examples(schema: Mapping[str, Any]) -> list[str]:
    """Quoted words in a field's description: ``(e.g., 'America/New_York', 'Europe/London')``."""
    description = str(schema.get("description") or "")
    return [next(group for group in m.groups() if group) for m in _QUOTED.finditer(description)]


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, keys excluded, in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _typo(text: str, rng: random.Random) -> str:
    """``text`` with one slip: a letter dropped, doubled or two swapped (in its last part)."""
    start = text.rfind("/") + 1
    letters = [i for i, c in enumerate(text) if c.isalpha() and i >= start]
    if not letters:
        return text + "x"
    i = rng.choice(letters)
    roll = rng.random()
    if roll < 0.35 and len(letters) > 1:
        return text[:i] + text[i + 1 :]
    if roll < 0.65 and i + 1 < len(text) and text[i + 1] != text[i]:
        return text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    return text[:i] + text[i] + text[i:]


def _derived_seed(*parts: Any) -> int:
    """A 64-bit seed from JSON-able parts, the same in every process (unlike ``hash``)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:8], "big")


# --- values from JSON Schema ----------------------------------------------------------------

_PLAIN_OBJECT_KEYS = frozenset(
    (
        "$schema",
        "type",
        "properties",
        "required",
        "additionalProperties",
        "title",
        "description",
        "default",
        "examples",
    )
)
_PLAIN_ARRAY_KEYS = frozenset(
    ("type", "items", "minItems", "maxItems", "title", "description", "default", "examples")
)
_MAX_ITEMS = 3
_MAX_STRING = 24


def _leaf_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A leaf schema as generated: free strings kept short (values stay valid against it)."""
    leaf = dict(schema)
    leaf.pop("$schema", None)
    constrained = {"maxLength", "pattern", "format", "enum", "const"} & set(leaf)
    if leaf.get("type") == "string" and not constrained:
        leaf["maxLength"] = max(_MAX_STRING, int(leaf.get("minLength", 0)))
    return leaf


def compile_schema(schema: Any) -> st.SearchStrategy[Any]:
    """A Hypothesis strategy for values valid against the JSON Schema ``schema``.

    Plain objects become ``fixed_dictionaries`` (required properties always, optional ones
    sometimes, no others), plain arrays ``lists`` of at most three items; the rest goes to
    ``hypothesis_jsonschema.from_schema``. A schema it cannot generate from raises
    ``HypothesisException`` or ``jsonschema`` errors.
    """
    if not isinstance(schema, Mapping):
        return from_schema(schema, allow_x00=False, codec="utf-8")
    if "$ref" in json.dumps(schema):
        # References need the whole document: hypothesis-jsonschema resolves them.
        return from_schema(dict(schema), allow_x00=False, codec="utf-8")
    kind = schema.get("type", "object" if "properties" in schema else None)
    properties = schema.get("properties")
    if (
        kind == "object"
        and isinstance(properties, Mapping)
        and set(schema) <= _PLAIN_OBJECT_KEYS
        and schema.get("additionalProperties", True) in (True, False, {})
        and all(isinstance(sub, Mapping) for sub in properties.values())
    ):
        required = [name for name in properties if name in (schema.get("required") or ())]
        missing = [name for name in (schema.get("required") or ()) if name not in properties]
        if not missing:
            return st.fixed_dictionaries(
                {name: compile_schema(properties[name]) for name in required},
                optional={
                    name: compile_schema(sub)
                    for name, sub in properties.items()
                    if name not in required
                },
            )
    items = schema.get("items")
    if kind == "array" and isinstance(items, Mapping) and set(schema) <= _PLAIN_ARRAY_KEYS:
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", max(_MAX_ITEMS, low)))
        return st.lists(compile_schema(items), min_size=low, max_size=max(low, high))
    return from_schema(_leaf_schema(schema), allow_x00=False, codec="utf-8")


@functools.lru_cache(maxsize=512)
def _cached_strategy(schema_text: str) -> st.SearchStrategy[Any]:
    return compile_schema(json.loads(schema_text))


def strategy_for(schema: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """The (cached) strategy of a tool's input schema."""
    return _cached_strategy(json.dumps(schema, sort_keys=True))


def _no_local_constants() -> Constants:
    return Constants()


@contextmanager
def _without_local_constants() -> Iterator[None]:
    """Hypothesis without the literals of the process's own modules in its values.

    Now and then Hypothesis draws a constant instead of a random value: one of its own (fixed
    per version) or one of the literals in the *local* modules loaded in the process (not
    stdlib, not site-packages: worldtrace's own, under an editable install), collected as
    modules are imported. Those depend on what the process happened to import, so the same
    seed drew ``"string"`` in one process and ``"stream"`` in another. There is no setting
    for it: the collecting function (private, hypothesis 6.131 to at least 6.170) is swapped
    for an empty one during our runs, under the lock, and the cache of permitted constants is
    cleared around them.
    """
    original = getattr(hypothesis_providers, "_get_local_constants", None)
    if original is None:  # a Hypothesis without local constants: nothing to do
        yield
        return
    hypothesis_providers._get_local_constants = _no_local_constants
    hypothesis_providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        hypothesis_providers._get_local_constants = original
        hypothesis_providers.CONSTANTS_CACHE.cache.clear()


def draw_values(strategy: st.SearchStrategy[Any], seed: int, count: int) -> list[Any]:
    """Up to ``count`` distinct values of ``strategy``, the same for the same ``seed``.

    One Hypothesis run with ``@seed``, generation only, no database, no deadline, no health
    checks, no constants of the process's own modules: nothing but the seed (and the library
    versions) decides the values.
    """
    found: list[Any] = []

    @settings(
        database=None,
        max_examples=count,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @hypothesis_seed(seed)
    @given(strategy)
    def collect(value: Any) -> None:
        found.append(value)

    with _LOCK, _without_local_constants():
        collect()
    return found


# --- the policy ------------------------------------------------------------------------------


def _succeeded(observation: RawObservation) -> bool:
    result = observation.get("result")
    return (
        isinstance(result, Mapping)
        and not result.get("isError")
        and observation.get("protocol_error") is None
        and not observation.get("timed_out")
    )


class McpExplorePolicy(Policy[Any]):
    """Explores an MCP server from its tool schemas and what it answered; see the module doc.

    ``steps``: calls per episode (``act`` returns None after them). ``invalid_share``: the
    chance (0..1) that a call is deliberately invalid. ``skip_tools``: tool names never called.
    ``skip_unattended``: also skip :data:`UNATTENDED_TOOLS` and task-only tools (default on).
    ``reuse_share``: the chance (0..1) that a path, URL, SQL or name field takes a value seen
    before, when there is one.
    """

    kind = "explore"
    name = "mcp-explore"
    version = "1"

    PARAMS = ("steps", "invalid_share", "skip_tools", "skip_unattended", "reuse_share")
    """The parameters a config's ``policy.params`` may give."""

    def __init__(
        self,
        steps: int = 20,
        invalid_share: float = 0.1,
        skip_tools: Sequence[str] = (),
        skip_unattended: bool = True,
        reuse_share: float = 0.8,
        **unknown: Any,
    ) -> None:
        # A config's policy.params arrive as keywords: a misspelt one is a clear ValueError.
        if unknown:
            raise ValueError(
                f"unknown parameters for the mcp explore policy: {sorted(unknown)} "
                f"(it takes {', '.join(self.PARAMS)})"
            )
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"steps must be an integer of at least 1, got {steps!r}")
        for label, share in (("invalid_share", invalid_share), ("reuse_share", reuse_share)):
            number = isinstance(share, int | float) and not isinstance(share, bool)
            if not number or not 0 <= share <= 1:
                raise ValueError(f"{label} must be a number in [0, 1], got {share!r}")
        if isinstance(skip_tools, str) or not isinstance(skip_tools, Sequence):
            raise ValueError(f"skip_tools must be a list of tool names, got {skip_tools!r}")
        bad = [name for name in skip_tools if not isinstance(name, str) or not name]
        if bad:
            raise ValueError(f"skip_tools must hold non-empty tool names, got {bad!r}")
        if not isinstance(skip_unattended, bool):
            raise ValueError(f"skip_unattended must be true or false, got {skip_unattended!r}")
        self.steps = steps
        self.invalid_share = float(invalid_share)
        self.skip_tools = tuple(skip_tools)
        self.skip_unattended = skip_unattended
        self.reuse_share = float(reuse_share)
        self.reset(0, None)

    def describe(self) -> PolicyRef:
        """Who this policy is; the version names the libraries its values depend on."""
        libraries = (
            f"hypothesis-{installed_version('hypothesis')}"
            f"+hypothesis-jsonschema-{installed_version('hypothesis-jsonschema')}"
        )
        return PolicyRef(kind=self.kind, name=self.name, version=f"{self.version}+{libraries}")

    def reset(self, seed: int, task: Any | None) -> None:
        """Forget the previous episode and seed the choices (the task is not used)."""
        self._seed = seed
        self._rng = random.Random(seed)
        self._taken = 0
        self._tools: dict[str, Mapping[str, Any]] = {}  # callable tools by name, server order
        self._server_tools: list[Mapping[str, Any]] = []  # every tool the server listed
        self._calls: dict[str, int] = {}  # calls per tool
        self._batches: dict[str, list[dict[str, Any]]] = {}  # drawn argument values per tool
        self._batch_numbers: dict[str, int] = {}
        self._examples: dict[str, None] = {}  # the manifest's examples
        self._seen: dict[str, None] = {}  # values seen, the most recent last
        self._lines: dict[str, None] = {}  # lines of text seen (for free-text fields)
        # Values the last successful call brought (its path and name arguments, its result's).
        self._fresh: dict[str, None] = {}
        self._state_strings: dict[str, None] = {}  # strings in the latest state snapshot
        self._last: Action | None = None
        self._kinds: list[str] = []
        self._unusable: dict[str, str] = {}
        self._skipped: dict[str, str] = {}

    def call_kinds(self) -> tuple[str, ...]:
        """The kind of each call of this episode so far: ``valid`` or one of INVALID_KINDS."""
        return tuple(self._kinds)

    def skipped_tools(self) -> dict[str, str]:
        """Tools of this episode's server it will not call, each with the reason."""
        return {**self._skipped, **self._unusable}

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next tool call, or None after ``steps`` calls."""
        if "tools" in observation:
            self._learn_session(observation)
        if self._last is not None:
            self._learn_call(self._last, observation, valid=self._kinds[-1] == "valid")
        self._learn_state(observation.get("state"))
        if self._taken >= self.steps:
            return None
        if not self._server_tools:
            raise ValueError(
                "the mcp explore policy needs the server's tools: the first observation "
                "(the environment's reset) must carry `tools`"
            )
        action, kind = self._next_call()
        self._last = action
        self._kinds.append(kind)
        self._taken += 1
        return action

    # --- reading observations ----------------------------------------------------------------

    def _learn_session(self, observation: RawObservation) -> None:
        tools = observation.get("tools")
        if not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools):
            raise ValueError(f"`tools` must be a list of tool definitions, got {tools!r}")
        self._server_tools = list(tools)
        self._tools = {}
        self._skipped = {}
        for tool in tools:
            name = str(tool.get("name") or "")
            execution = tool.get("execution")
            task_only = isinstance(execution, Mapping) and execution.get("taskSupport") == (
                "required"
            )
            if name in self.skip_tools:
                self._skipped[name] = "in skip_tools"
            elif self.skip_unattended and name in UNATTENDED_TOOLS:
                self._skipped[name] = UNATTENDED_TOOLS[name]
            elif self.skip_unattended and task_only:
                self._skipped[name] = "task-based (execution.taskSupport required)"
            elif name:
                self._tools[name] = tool
        for example in observation.get("examples") or ():
            if isinstance(example, str) and example:
                self._examples[example] = None

    def _learn_state(self, state: Any) -> None:
        """Remember every string of the latest snapshot (keys too): those names exist."""
        if not isinstance(state, Mapping):
            return
        strings: dict[str, None] = {}

        def walk(value: Any) -> None:
            if isinstance(value, str):
                strings[value] = None
            elif isinstance(value, Mapping):
                for key, item in value.items():
                    strings[str(key)] = None
                    walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)

        walk(state)
        root = state.get("root")
        if isinstance(root, str):
            # A files snapshot names paths relative to its root; calls name them absolutely.
            for value in state.values():
                if isinstance(value, Mapping):
                    for key in value:
                        strings[posixpath.join(root, str(key))] = None
        self._state_strings = strings

    def _learn_call(self, action: Action, observation: RawObservation, valid: bool) -> None:
        """Learn from a call that succeeded: its path and name arguments and its result.

        The arguments of a deliberately invalid call are not learnt even if the server took
        them (a lenient server, a search for an altered name): they name nothing real.
        """
        if not _succeeded(observation):
            return  # an error message repeats what was wrong; nothing in it exists
        self._fresh = {}
        properties = self._properties(action.name)
        folder = None
        for field, value in action.arguments.items() if valid else ():
            schema = properties.get(field) if isinstance(properties.get(field), Mapping) else {}
            kind = field_kind(field, schema)
            if kind not in ("path", "root", "zone", "name", "url"):
                continue
            values = value if isinstance(value, list) else [value]
            for item in values:
                if isinstance(item, str):
                    self._see(item)
                    if kind == "path" and folder is None:
                        folder = item
        result = observation["result"]
        for block in result.get("content") or ():
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                self._learn_text(block["text"], folder)
            elif block.get("type") == "resource_link":
                for key in ("uri", "name"):
                    if isinstance(block.get(key), str):
                        self._see(block[key])
            elif block.get("type") == "resource" and isinstance(block.get("resource"), Mapping):
                uri = block["resource"].get("uri")
                if isinstance(uri, str):
                    self._see(uri)
        for text in _strings(result.get("structuredContent")):
            self._learn_text(text, folder)

    def _learn_text(self, text: str, folder: str | None) -> None:
        stripped = text.strip()
        if stripped[:1] in ("{", "["):
            try:
                value = json.loads(stripped)
            except ValueError:
                value = None
            if value is not None:
                if folder:
                    self._learn_tree(value, folder)
                for item in _strings(value):
                    if "\n" in item:
                        self._learn_lines(item, folder)
                    else:
                        self._see(item)
                return
        self._learn_lines(text, folder)

    def _learn_tree(self, value: Any, folder: str) -> None:
        """Paths in a JSON tree of ``{"name", "children"}`` entries under ``folder``."""
        if isinstance(value, list):
            for item in value:
                self._learn_tree(item, folder)
        elif isinstance(value, Mapping) and isinstance(value.get("name"), str):
            path = posixpath.join(folder, value["name"])
            self._see(path)
            if isinstance(value.get("children"), list):
                self._learn_tree(value["children"], path)

    def _learn_lines(self, text: str, folder: str | None) -> None:
        for line in text.splitlines()[:_MAX_LINES]:
            line = line.strip()
            if not line or len(line) > 2 * _MAX_VALUE_CHARS:
                continue
            entry = _LISTING.match(line)
            if entry:
                # Under the folder listed; a bare name would be resolved against the root.
                name = entry[2].strip()
                self._see(posixpath.join(folder, name) if folder else name)
                continue
            self._see(line, whole_line=True)
            bare = _BULLET.sub("", line)
            if bare != line:
                self._see(bare)
            pair = _KEY_VALUE.match(bare)
            if pair:
                self._see(pair[2].strip().strip("'\""))
            for quoted in _QUOTED.finditer(line):
                self._see(next(group for group in quoted.groups() if group))
            for pattern in (_ABSOLUTE_PATH, _URL, _COMMIT_ID):
                for found in pattern.finditer(line):
                    self._see(found[0].rstrip(".,:;"))

    def _see(self, value: str, whole_line: bool = False) -> None:
        """Remember a value; a whole line of words only as text (it names nothing)."""
        value = value.strip()
        if not value or len(value) > _MAX_VALUE_CHARS or value in self._examples:
            return
        into = self._lines if whole_line and len(value.split()) > 1 else self._seen
        into.pop(value, None)
        into[value] = None
        self._fresh[value] = None
        if len(into) > MAX_SEEN:
            del into[next(iter(into))]

    # --- choosing calls ----------------------------------------------------------------------

    def _next_call(self) -> tuple[Action, str]:
        name, arguments = self._valid_arguments()
        if self.invalid_share and self._rng.random() < self.invalid_share:
            return self._invalid_call(name, arguments)
        return tool_call(name, arguments), "valid"

    def _choose_tool(self) -> str:
        usable = [name for name in self._tools if name not in self._unusable]
        if not usable:
            listed = ", ".join(str(t.get("name")) for t in self._server_tools) or "none"
            raise ValueError(
                f"the mcp explore policy has no tool to call: the server lists {listed}; "
                f"skipped: {self.skipped_tools()}"
            )
        # Tools not called yet come first, three to one: an episode sees most of the server.
        weights = [1.0 if self._calls.get(name) else 3.0 for name in usable]
        return self._rng.choices(usable, weights=weights)[0]

    def _valid_arguments(self) -> tuple[str, dict[str, Any]]:
        while True:
            name = self._choose_tool()
            drawn = self._draw(name)
            if drawn is not None:
                break
        self._calls[name] = self._calls.get(name, 0) + 1
        schema = self._tools[name].get("inputSchema") or {}
        arguments = self._with_seen_values(drawn, schema, None)
        if arguments != drawn and schema_problems(tool_call(name, arguments), [self._tools[name]]):
            arguments = drawn  # a seen value broke a constraint (a pattern, a length)
        return name, arguments

    def _draw(self, name: str) -> dict[str, Any] | None:
        """The next drawn value of the tool's arguments; None marks the tool unusable."""
        batch = self._batches.get(name)
        if not batch:
            number = self._batch_numbers.get(name, 0)
            self._batch_numbers[name] = number + 1
            schema = self._tools[name].get("inputSchema") or {"type": "object"}
            try:
                size = BATCH_SIZES[min(number, len(BATCH_SIZES) - 1)]
                seed = _derived_seed(self._seed, name, number)
                values = draw_values(strategy_for(schema), seed, size + 1)
            except Exception as error:
                # The schema is the server's: one that hypothesis-jsonschema cannot generate
                # from (a reference to nowhere, an unknown type, nothing satisfies it) raises
                # whatever it raises. Say so, and call the other tools.
                detail = str(error).strip().split("\n")[0][:200]
                reason = f"no values from its input schema: {type(error).__name__}: {detail}"
                logger.warning("mcp explore: tool %r skipped, %s", name, reason)
                self._unusable[name] = reason
                return None
            # The first value of a run is the simplest one ("" for every string): keep it only
            # when it is all there is.
            batch = values[1:] or values
            if not batch or not all(isinstance(value, dict) for value in batch):
                self._unusable[name] = "its input schema allows no JSON object of arguments"
                return None
            self._batches[name] = batch
        return batch.pop(0)

    def _with_seen_values(self, value: Any, schema: Any, field: str | None) -> Any:
        """``value`` with string fields of a known kind replaced by values seen before."""
        schema = schema if isinstance(schema, Mapping) else {}
        if isinstance(value, dict):
            properties = schema.get("properties")
            properties = properties if isinstance(properties, Mapping) else {}
            return {
                key: self._with_seen_values(item, properties.get(key), key)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [self._with_seen_values(item, schema.get("items"), field) for item in value]
        if not isinstance(value, str) or field is None or {"enum", "const"} & set(schema):
            return value
        kind = field_kind(field, schema)
        if kind == "clock":
            # A time of day: one the episode knows, or any.
            if self._rng.random() >= self.reuse_share:
                return value
            known = self._sources(kind, schema)
            if known and self._rng.random() < 0.5:
                return self._pick_recent(self._rng.choice(known)[0])
            return f"{self._rng.randrange(24):02d}:{self._rng.randrange(60):02d}"
        sources = self._sources(kind, schema)
        share = _TEXT_REUSE if kind == "text" else self.reuse_share
        if sources and self._rng.random() < share:
            values = self._rng.choices(
                [values for values, _ in sources], [weight for _, weight in sources]
            )[0]
            return self._pick_recent(values)
        return value

    def _sources(self, kind: str, schema: Mapping[str, Any]) -> list[tuple[list[str], float]]:
        """The values a field of ``kind`` may take, by where they come from, with weights.

        The field's description's examples, the manifest's examples, every value seen in this
        episode (oldest first), and the values the last successful call brought, twice as
        likely as each other source: an agent follows up what it has just seen (lists a
        folder, then opens what is in it; writes a file, then reads it). Empty sources are
        left out.
        """
        own = _description_examples(schema)
        examples = [v for v in self._examples if fits_kind(kind, v)]
        seen = [v for v in self._seen if fits_kind(kind, v)]
        if kind == "text":
            seen = [v for v in self._lines if fits_kind(kind, v)] + seen
        fresh = [v for v in self._fresh if fits_kind(kind, v)]
        if kind != "text":
            fresh = [v for v in fresh if v not in self._lines]
        weighted = ((own, 1.0), (examples, 1.0), (seen, 1.0), (fresh, 2.0))
        return [(values, weight) for values, weight in weighted if values]

    def _pick_recent(self, candidates: list[str]) -> str:
        if len(candidates) > _RECENT and self._rng.random() < _RECENT_SHARE:
            return self._rng.choice(candidates[-_RECENT:])
        return self._rng.choice(candidates)

    # --- invalid calls -----------------------------------------------------------------------

    def _invalid_call(self, name: str, arguments: dict[str, Any]) -> tuple[Action, str]:
        makers = {
            "wrong_type": self._wrong_type,
            "missing_required": self._missing_required,
            "nonexistent": self._nonexistent,
            "unknown_tool": self._unknown_tool,
        }
        kinds = list(INVALID_KINDS)
        self._rng.shuffle(kinds)
        for kind in kinds:
            action = makers[kind](name, arguments)
            if action is not None:
                return action, kind
        raise AssertionError("an unknown tool name can always be made")  # pragma: no cover

    def _properties(self, name: str) -> Mapping[str, Any]:
        schema = (self._tools.get(name) or {}).get("inputSchema")
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        return properties if isinstance(properties, Mapping) else {}

    def _required(self, name: str) -> list[str]:
        schema = (self._tools.get(name) or {}).get("inputSchema")
        required = schema.get("required") if isinstance(schema, Mapping) else None
        return [field for field in required or () if isinstance(field, str)]

    def _problems(self, name: str, arguments: dict[str, Any]) -> list[str]:
        return schema_problems(tool_call(name, arguments), [self._tools[name]])

    def _wrong_type(self, name: str, arguments: dict[str, Any]) -> Action | None:
        properties = self._properties(name)
        if not properties:
            return None
        required = self._required(name)
        fields = [f for f in properties if f in required] or list(properties)
        field = self._rng.choice(fields)
        replacements = list(_WRONG_VALUES)
        self._rng.shuffle(replacements)
        for replacement in replacements:
            changed = {**arguments, field: replacement}
            if self._problems(name, changed):
                return tool_call(name, changed)
        return None

    def _missing_required(self, name: str, arguments: dict[str, Any]) -> Action | None:
        required = self._required(name)
        present = [field for field in required if field in arguments]
        if not present:
            return None
        field = self._rng.choice(present)
        changed = {key: value for key, value in arguments.items() if key != field}
        return tool_call(name, changed) if self._problems(name, changed) else None

    def _nonexistent(self, name: str, arguments: dict[str, Any]) -> Action | None:
        """A path or name seen before, altered into one nothing in the episode has shown."""
        if _CREATING.match(name):
            return None
        options: list[tuple[str, str]] = []  # (field, kind) of top-level fields that name things
        for field, schema in self._properties(name).items():
            if not isinstance(schema, Mapping) or {"enum", "const"} & set(schema):
                continue
            kind = field_kind(field, schema)
            items = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
            strings = schema.get("type") == "string" or (
                schema.get("type") == "array" and items.get("type") == "string"
            )
            made = _MADE_FIELD.match(field) is not None
            if (
                kind in ("path", "root", "zone", "name")
                and strings
                and field in arguments
                and not made
            ):
                options.append((field, kind))
        if not options:
            return None
        field, kind = self._rng.choice(options)
        seen = [v for v in self._seen if fits_kind(kind, v)] + [
            v for v in self._examples if fits_kind(kind, v)
        ]
        if not seen:
            return None
        known = {**self._examples, **self._seen, **self._state_strings}
        original = self._pick_recent(seen)
        for _ in range(5):
            altered = _typo(original, self._rng)
            if altered not in known:
                break
        else:
            return None
        value: Any = altered
        if isinstance(arguments[field], list):
            value = [*arguments[field][:-1], altered] if arguments[field] else [altered]
        changed = {**arguments, field: value}
        return None if self._problems(name, changed) else tool_call(name, changed)

    def _unknown_tool(self, name: str, arguments: dict[str, Any]) -> Action:
        names = {str(tool.get("name")): None for tool in self._server_tools}
        wrong = _typo(name, self._rng)
        for _ in range(5):
            if wrong not in names:
                break
            wrong = _typo(wrong, self._rng)
        while wrong in names:
            wrong += "_x"
        return tool_call(wrong, arguments)


__all__ = [
    "BATCH_SIZES",
    "INVALID_KINDS",
    "UNATTENDED_TOOLS",
    "McpExplorePolicy",
    "compile_schema",
    "draw_values",
    "field_kind",
    "fits_kind",
    "strategy_for",
]
