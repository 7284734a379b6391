"""The mcp domain's exploring policy: schema-driven tool calls that chain through what they saw.

:class:`McpExplorePolicy` calls the episode's server without a task. Each step it picks one of
the server's tools (tools it has not called yet more often) and makes the tool's arguments:

- **Values grounded in the episode** (since policy version 2, issue 23). Arguments are built
  by walking the tool's ``inputSchema`` (:meth:`McpExplorePolicy._grounded`): required fields
  always, at most one optional field half the time (a field with no default in a tool that
  requires nothing, or whose default is a URL outside the sandbox, always); ``enum`` and
  ``const`` values as listed; booleans either way; numbers the default half the time, else a
  small number inside the schema's range near the default (never the schema's far ends); arrays
  of one or two items. A string takes a value by what its field holds (:func:`field_kind`):
  paths that exist now (a folder for ``list_directory``, ``directory_tree`` and
  ``search_files``, a file for ``read_*`` and ``edit_file``, by the listings it saw and the
  latest files snapshot), or a new readable path in an existing folder for a tool that makes
  one (``write_file``, ``create_directory``, a move's ``destination``); the world's root for a
  ``repo_path``; existing branches, tags and full commit ids (from the git snapshot and
  results) for a ref, a new ``feature/<words>`` branch for ``git_create_branch``; values seen
  under the same JSON key for a name (``entityName`` from the ``name`` of entities read,
  ``entityType``, ``relationType``); zones, URLs on the examples' hosts (and the pages' own
  relative links), SQL (the examples, or ``SELECT`` on a table of the snapshot) and globs from
  what it knows; for ``oldText`` a line of the file as it last read or wrote it (edit tools
  wait until some file's text is known); free text from lines seen or a sentence of
  :data:`VOCABULARY`. Values quoted in a field's description (``'local'``, ``'remote'``,
  ``'all'``) are used as an enum. New names are words of :data:`VOCABULARY` and of names the
  world showed (``summary-notes.md``), never random characters. A tool whose valid call just
  failed is chosen less often until the world changes. A schema with keywords this walk does
  not handle (:data:`GROUNDED_SCHEMA_KEYS`: ``$ref``, ``pattern``, ``allOf`` …) falls back to
  Hypothesis, below.
- **Values from the schema, as a fallback.** Arguments of such schemas are drawn with
  hypothesis-jsonschema. Objects with plain ``properties`` are built as
  ``fixed_dictionaries`` (required keys always, optional keys sometimes, no keys the schema does
  not name) and arrays as ``lists`` of at most three items; every other schema, and every leaf,
  goes to ``hypothesis_jsonschema.from_schema``. Strategies are cached per schema for the life
  of the process.
- **Values it has seen** (for Hypothesis's values). A string field whose name says what it
  holds (see :func:`field_kind`: a root folder like ``repo_path``, a path, a glob pattern, a
  URL, SQL, a time zone, a time of day, or a name, id, branch, revision …) takes, most of the time
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
- **Invalid calls.** A share ``invalid_share`` (default 0.1) of the calls is deliberately
  wrong, of one of
  :data:`INVALID_KINDS`: a field of the wrong type, a required field missing (both fail
  :func:`~worldtrace.collectors.tool_calls.schema_problems`), a seen path or name altered so
  that it names nothing the episode has seen or the state snapshot holds, or a tool name the
  server does not have. :meth:`McpExplorePolicy.call_kinds` says which call was which.

Tools that cannot work unattended are never called (:data:`UNATTENDED_TOOLS`, tools whose
``execution.taskSupport`` is ``required``), nor those in ``skip_tools``.

**Reproducibility.** The choices (tool, seen value, invalid kind) come from a
``random.Random(seed)``, and so do grounded values; the episode's knowledge lives in
insertion-ordered dicts, never in sets of strings (whose order changes between processes).
Fallback values come from Hypothesis
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

import base64
import functools
import hashlib
import json
import logging
import math
import os
import posixpath
import random
import re
import threading
import zoneinfo
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import version as installed_version
from typing import Annotated, Any
from urllib.parse import urljoin, urlsplit

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
from pydantic import Field

from worldtrace.collectors.base import HistoryItem, Policy, PolicyParams, Share
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


# --- grounded values: what the environment showed, the schema's enums, defaults and ranges ---

VOCABULARY: tuple[str, ...] = (
    "notes",
    "draft",
    "summary",
    "report",
    "archive",
    "ideas",
    "plan",
    "review",
    "backup",
    "outline",
    "checklist",
    "agenda",
    "budget",
    "release",
    "changes",
    "status",
    "sample",
    "example",
    "overview",
    "guide",
    "index",
    "history",
    "tasks",
    "minutes",
    "feedback",
    "design",
    "metrics",
    "results",
    "schedule",
    "update",
    "cleanup",
    "refactor",
    "docs",
    "tests",
    "config",
    "data",
    "weekly",
    "monthly",
    "final",
    "old",
    "new",
    "extra",
    "local",
    "shared",
    "first",
    "second",
    "quick",
    "small",
    "main",
    "team",
    "project",
    "client",
)
"""Plain English words the policy makes new names and text from (a file it creates is
``summary-notes.md``, a branch ``feature/weekly-report``, never random characters)."""

_SENTENCE_VERBS = ("Add", "Update", "Check", "Review", "Move", "Write", "Keep", "Fix", "Note")

GROUNDED_SCHEMA_KEYS = (
    _PLAIN_OBJECT_KEYS
    | _PLAIN_ARRAY_KEYS
    | frozenset(
        (
            "enum",
            "const",
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "minLength",
            "maxLength",
            "format",
            "anyOf",
            "oneOf",
        )
    )
)
"""Schema keywords the grounded generator understands; a schema with any other keyword (a
``$ref``, a ``pattern``, ``allOf`` ...) is drawn with hypothesis-jsonschema instead."""


class _Unsupported(Exception):
    """A schema the grounded generator does not handle (Hypothesis draws it instead)."""


class _Exhausted(Exception):
    """No more lines of the file to quote: an array of edits stops here."""


# Tool-name words that say what a path argument must be.
_DIR_TOOL_WORDS = frozenset(
    ("directory", "dir", "folder", "tree", "search", "list", "find", "mkdir")
)
_FILE_TOOL_WORDS = frozenset(("file", "files", "read", "write", "edit", "media", "text"))
# Tools that make the thing their path or name argument names (a file, a folder, a branch).
_MAKING_VERBS = frozenset(("create", "write", "make", "new", "mkdir", "save", "put", "upload"))
# Field words of a git-like reference (a branch, a tag, a commit).
_REF_WORDS = frozenset(("branch", "revision", "target", "ref", "tag", "commit", "sha", "contains"))
# Free-text fields that must quote text already in the file (an edit's ``oldText``).
_OLD_TEXT = re.compile(r"^(?:old|search|find|original)(?:$|[_A-Z-]|text|str)", re.I)
# Numbers: fields whose name says they count lines, items or characters stay small.
_DATA_URI_HINT = re.compile(r"\bdata\s*URI", re.I)
# Relative links in markdown and HTML results, joined to the page they came from.
_RELATIVE_LINK = re.compile(r"\]\((/[^)\s]*)\)|href=\"(/[^\"\s]*)\"")


def _new_word(rng: random.Random, extra: Sequence[str] = ()) -> str:
    """A word of the vocabulary, or one of ``extra`` (words of names the episode saw)."""
    pool = [*VOCABULARY, *extra]
    return rng.choice(pool)


def _readable_name(rng: random.Random, extra: Sequence[str] = (), joiner: str = "-") -> str:
    """One or two readable words: ``weekly-report``."""
    words = [_new_word(rng, extra)]
    if rng.random() < 0.6:
        second = _new_word(rng)
        if second != words[0]:
            words.append(second)
    return joiner.join(words)


def _sentence(rng: random.Random) -> str:
    """A short readable sentence, such as ``Review the weekly budget notes.``."""
    words = [rng.choice(VOCABULARY) for _ in range(rng.randint(2, 5))]
    return f"{rng.choice(_SENTENCE_VERBS)} the {' '.join(words)}."


def _plain_words(value: str) -> list[str]:
    """Lower-case ASCII words of a name (``2024-03-brest.csv`` gives ``brest``, ``csv``)."""
    return [w for w in re.findall(r"[a-z]{3,12}", value.lower())]


_OPTIONAL_SHARE = 0.5
"""How often a call gives one of the tool's optional fields (never more than one)."""


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@functools.lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


def _real_zone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone (any name, where no zone database is installed)."""
    return name in _zones() or not _zones()


def _under(path: str, root: str) -> bool:
    """Whether an absolute ``path`` is ``root`` or inside it."""
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _needs_old_text(schema: Any) -> bool:
    """Whether a tool's schema has a field that must quote existing text (``oldText``)."""
    if isinstance(schema, Mapping):
        properties = _mapping(schema.get("properties"))
        if any(_OLD_TEXT.match(name) for name in properties):
            return True
        return any(_needs_old_text(sub) for sub in (*properties.values(), schema.get("items")))
    return False


# --- the policy ------------------------------------------------------------------------------


def _succeeded(observation: RawObservation) -> bool:
    result = observation.get("result")
    return (
        isinstance(result, Mapping)
        and not result.get("isError")
        and observation.get("protocol_error") is None
        and not observation.get("timed_out")
    )


class McpExploreParams(PolicyParams):
    """The parameters of :class:`McpExplorePolicy` (a config's ``policy.params``)."""

    policy = "mcp explore policy"

    steps: int = Field(
        default=20, ge=1, strict=True, description="calls per episode (then `act` ends it)"
    )
    invalid_share: Share = Field(default=0.1, description="the chance that a call is invalid")
    skip_tools: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="names of tools never called"
    )
    skip_unattended: bool = Field(
        default=True,
        strict=True,
        description="also skip UNATTENDED_TOOLS and the tools only a task may call",
    )
    reuse_share: Share = Field(
        default=0.8,
        description="the chance that a name field takes a value seen before rather than a new "
        "readable one (and, for Hypothesis's values, that a path, URL, SQL or name field takes "
        "a seen value)",
    )


class McpExplorePolicy(Policy[Any]):
    """Explores an MCP server from its tool schemas and what it answered; see the module doc.

    Its parameters are :class:`McpExploreParams`, given as the model or as keywords
    (``McpExplorePolicy(steps=5)``).
    """

    kind = "explore"
    name = "mcp-explore"
    version = "2"

    def __init__(self, params: McpExploreParams | None = None, /, **keywords: Any) -> None:
        self.params = McpExploreParams.given(params, keywords)
        self.steps = self.params.steps
        self.invalid_share = self.params.invalid_share
        self.skip_tools = tuple(self.params.skip_tools)
        self.skip_unattended = self.params.skip_unattended
        self.reuse_share = self.params.reuse_share
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
        # What the latest state snapshot says exists (it checks and types seen paths and
        # names; it is not a source of names by itself: those come from results and examples).
        self._root: str | None = None
        self._files_state: dict[str, str] | None = None  # absolute path -> "dir" or "file"
        self._types: dict[str, str] = {}  # path -> "dir"/"file", as listings said
        self._refs: dict[str, None] = {}  # git branches and tags
        self._branches: dict[str, None] = {}
        self._tags: dict[str, None] = {}
        self._commits: dict[str, None] = {}  # commit ids seen (HEAD, results)
        self._tables: list[str] = []  # tables of a database snapshot
        self._entities: dict[str, None] | None = None  # entities of a memory snapshot, now
        self._keyed: dict[str, dict[str, None]] = {}  # JSON key (lower case) -> values seen
        self._contents: dict[str, list[str]] = {}  # path -> lines read or written
        self._content_hash: dict[str, str | None] = {}  # path -> its hash when read
        self._failed: dict[str, None] = {}  # tools whose valid call failed, state unchanged
        self._call_path: str | None = None
        self._call_quoted: dict[str, None] = {}  # lines an edit of this call quotes
        self._call_needs_content = False
        self._page: str | None = None  # the URL a result came from (for its relative links)

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
        # The state first: a file read is remembered with the hash it had then.
        self._learn_state(observation.get("state"))
        if observation.get("state_diff"):
            self._failed = {}  # the world changed: a call that failed may work now
        if self._last is not None:
            self._learn_call(self._last, observation, valid=self._kinds[-1] == "valid")
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
        self._learn_world(state)
        root = state.get("root")
        if isinstance(root, str):
            # A files snapshot names paths relative to its root; calls name them absolutely.
            for value in state.values():
                if isinstance(value, Mapping):
                    for key in value:
                        strings[posixpath.join(root, str(key))] = None
        self._state_strings = strings

    def _learn_world(self, state: Mapping[str, Any]) -> None:
        """What exists now, by the snapshot: files and folders, refs, entities, tables."""
        root = state.get("root")
        self._root = root if isinstance(root, str) else self._root
        files = state.get("files")
        if state.get("kind") == "files" and isinstance(files, Mapping) and self._root:
            self._files_state = {
                posixpath.join(self._root, str(path)): "dir" if kind == "dir" else "file"
                for path, kind in files.items()
            }
        if state.get("kind") == "git":
            branches = state.get("branches")
            tags = state.get("tags")
            self._branches = dict.fromkeys(branches) if isinstance(branches, Mapping) else {}
            self._tags = dict.fromkeys(tags) if isinstance(tags, Mapping) else {}
            self._refs = {**self._branches, **self._tags}
            if isinstance(state.get("head"), str):
                self._commits.setdefault(state["head"], None)
        names = state.get("entity_names")
        if isinstance(names, Mapping):
            self._entities = {str(name): None for name in names}
            for name, kind in names.items():
                self._keyed.setdefault("name", {}).setdefault(str(name), None)
                self._keyed.setdefault("entitytype", {}).setdefault(str(kind), None)
        tables = state.get("tables")
        if isinstance(tables, Mapping):
            self._tables = [str(t).removeprefix("public.") for t in tables]

    def _learn_call(self, action: Action, observation: RawObservation, valid: bool) -> None:
        """Learn from a call that succeeded: its path and name arguments and its result.

        The arguments of a deliberately invalid call are not learnt even if the server took
        them (a lenient server, a search for an altered name): they name nothing real.
        """
        if not _succeeded(observation):
            if valid:
                self._failed[action.name] = None
            return  # an error message repeats what was wrong; nothing in it exists
        self._fresh = {}
        if valid:
            self._learn_content(action, observation)
        page = action.arguments.get("url") if valid else None
        self._page = page if isinstance(page, str) else None
        properties = self._properties(action.name)
        folder = None
        for field, value in action.arguments.items() if valid else ():
            declared = properties.get(field)
            schema = declared if isinstance(declared, Mapping) else {}
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
                self._learn_keys(value)
                if folder:
                    self._learn_tree(value, folder)
                for item in _strings(value):
                    if "\n" in item:
                        self._learn_lines(item, folder)
                    else:
                        self._see(item)
                return
        self._learn_lines(text, folder)

    def _learn_keys(self, value: Any) -> None:
        """Short strings of JSON objects by their key: ``{"entityType": "person"}``."""
        if isinstance(value, list):
            for item in value:
                self._learn_keys(item)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                items = item if isinstance(item, list) else [item]
                for text in items:
                    if isinstance(text, str) and text and "\n" not in text:
                        if len(text) <= _MAX_VALUE_CHARS:
                            self._keyed.setdefault(str(key).lower(), {})[text] = None
                    elif isinstance(text, Mapping | list):
                        self._learn_keys(text)

    def _learn_content(self, action: Action, observation: RawObservation) -> None:
        """The text of a file the call read (a ``read`` tool) or wrote (its ``content``)."""
        path = action.arguments.get("path")
        if not isinstance(path, str):
            return
        words = set(_words(action.name))
        hash_now = (self._files_state or {}).get(self._absolute(path))
        if "read" in words and "media" not in words and "multiple" not in words:
            texts = [
                text
                for b in observation["result"].get("content") or ()
                if isinstance(b, Mapping) and isinstance(text := b.get("text"), str)
            ]
            if texts:
                self._contents[path] = texts[0].splitlines()[:_MAX_LINES]
                self._content_hash[path] = hash_now
        elif words & _MAKING_VERBS and isinstance(action.arguments.get("content"), str):
            self._contents[path] = action.arguments["content"].splitlines()[:_MAX_LINES]
            self._content_hash[path] = hash_now
        if not self._contents.get(path):
            self._contents.pop(path, None)  # an empty file has no line to quote

    def _learn_tree(self, value: Any, folder: str) -> None:
        """Paths in a JSON tree of ``{"name", "children"}`` entries under ``folder``."""
        if isinstance(value, list):
            for item in value:
                self._learn_tree(item, folder)
        elif isinstance(value, Mapping) and isinstance(value.get("name"), str):
            path = posixpath.join(folder, value["name"])
            self._see(path)
            if value.get("type") in ("directory", "file"):
                self._types[path] = "dir" if value["type"] == "directory" else "file"
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
                path = posixpath.join(folder, name) if folder else name
                self._see(path)
                self._types[path] = "dir" if entry[1] == "DIR" else "file"
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
            for found in _COMMIT_ID.finditer(line):
                if len(found[0]) == 40:  # a full commit id (short ones are often blob ids)
                    self._commits.setdefault(found[0], None)
            if self._page is not None:
                for link in _RELATIVE_LINK.finditer(line):
                    self._see(urljoin(self._page, next(g for g in link.groups() if g)))

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
        # A tool whose last call failed waits for the world to change (an agent reads the
        # error), and one that edits text waits for a file it has read.
        weights = [
            (1.0 if self._calls.get(name) else 3.0)
            * (0.25 if name in self._failed else 1.0)
            * (0.1 if self._waits_for_text(name) else 1.0)
            for name in usable
        ]
        return self._rng.choices(usable, weights=weights)[0]

    def _waits_for_text(self, name: str) -> bool:
        schema = self._tools[name].get("inputSchema")
        if not _needs_old_text(schema):
            return False
        return not any(self._content_current(path) for path in self._contents)

    def _valid_arguments(self) -> tuple[str, dict[str, Any]]:
        while True:
            name = self._choose_tool()
            grounded = self._grounded(name)
            if grounded is not None:
                self._calls[name] = self._calls.get(name, 0) + 1
                return name, grounded
            drawn = self._draw(name)  # a schema the grounded values do not cover
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

    # --- grounded arguments ------------------------------------------------------------------

    def _grounded(self, name: str) -> dict[str, Any] | None:
        """Arguments made from what the episode knows, or None (Hypothesis draws them then).

        None for a schema with keywords the generator does not handle (see
        :data:`GROUNDED_SCHEMA_KEYS`), or a value the schema check refuses.
        """
        tool = self._tools[name]
        schema = tool.get("inputSchema")
        schema = schema if isinstance(schema, Mapping) else {"type": "object"}
        self._call_path = None
        self._call_quoted = {}
        self._call_needs_content = _needs_old_text(schema)
        try:
            value = self._make(schema, None, name)
        except (_Unsupported, _Exhausted):
            return None
        if not isinstance(value, dict) or schema_problems(tool_call(name, value), [tool]):
            return None
        return value

    def _make(self, schema: Any, field: str | None, tool: str) -> Any:
        if schema is True or schema == {}:
            schema = {"type": "object"} if field is None else {"type": "string"}
        if not isinstance(schema, Mapping) or set(schema) - GROUNDED_SCHEMA_KEYS:
            raise _Unsupported
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            options = schema["enum"]
            if not isinstance(options, list) or not options:
                raise _Unsupported
            return self._rng.choice(options)
        for key in ("anyOf", "oneOf"):
            if key in schema:
                branches = schema[key]
                if not isinstance(branches, list):
                    raise _Unsupported
                usable = [b for b in branches if isinstance(b, Mapping) and b.get("type") != "null"]
                if not usable:
                    return None
                rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
                return self._make({**rest, **self._rng.choice(usable)}, field, tool)
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            kind = kinds[0] if kinds else "null"
        if kind is None:
            kind = "object" if "properties" in schema else "string"
            kind = "array" if "items" in schema else kind
        if kind == "object":
            return self._make_object(schema, tool)
        if kind == "array":
            return self._make_array(schema, field, tool)
        if kind == "string":
            return self._make_string(schema, field, tool)
        if kind in ("integer", "number"):
            return self._make_number(schema)
        if kind == "boolean":
            default = schema.get("default")
            if isinstance(default, bool) and self._rng.random() < 0.5:
                return default
            return self._rng.random() < 0.5
        if kind == "null":
            return None
        raise _Unsupported

    def _make_object(self, schema: Mapping[str, Any], tool: str) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = schema.get("required") or []
        if not isinstance(properties, Mapping) or any(n not in properties for n in required):
            raise _Unsupported
        optional = [n for n in properties if n not in required]
        fields = [n for n in properties if n in required or self._needed(n, properties, required)]
        optional = [n for n in optional if n not in fields]
        # At most one optional field a call, half the time: what a client sends (and options
        # such as a file's head and tail may not be given together).
        if optional and self._rng.random() < _OPTIONAL_SHARE:
            fields.append(self._rng.choice(optional))
        # Paths first: an edit quotes text of the file the call names.
        ordered = sorted(fields, key=lambda n: field_kind(n, _mapping(properties[n])) != "path")
        made = {n: self._make(properties[n], n, tool) for n in ordered}
        return {n: made[n] for n in properties if n in made}

    def _needed(self, name: str, properties: Mapping[str, Any], required: Sequence[str]) -> bool:
        """Whether an optional field is given anyway: the tool cannot work without it.

        A tool that requires nothing but has a field with no default (postgres's ``query``
        and its ``sql``), and a field whose default is a URL outside the sandbox (a default
        that can only fail here).
        """
        schema = _mapping(properties[name])
        default = schema.get("default")
        if not required and "default" not in schema:
            return True
        if isinstance(default, str) and _URL_VALUE.match(default):
            hosts = {urlsplit(v).netloc for v in self._examples if _URL_VALUE.match(v)}
            return urlsplit(default).netloc not in hosts
        return False

    def _make_array(self, schema: Mapping[str, Any], field: str | None, tool: str) -> list[Any]:
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", max(low, 2)))
        if high < low:
            raise _Unsupported
        if schema.get("default") == [] and low == 0 and self._rng.random() < 0.5:
            return []
        count = self._rng.randint(max(low, 1), max(low, min(high, max(low, 1) + 1)))
        items: list[Any] = []
        for _ in range(count * 3):
            if len(items) >= count:
                break
            try:
                item = self._make(schema.get("items", {}), field, tool)
            except _Exhausted:
                if not items:
                    raise
                break
            if item not in items:  # the same file twice in one call is no client's habit
                items.append(item)
        return items if len(items) >= low else items + [items[-1]] * (low - len(items))

    def _make_number(self, schema: Mapping[str, Any]) -> int | float:
        declared = schema.get("default")
        number = isinstance(declared, int | float) and not isinstance(declared, bool)
        default = declared if number else None
        if default is not None and self._rng.random() < 0.5:
            return default
        low = schema.get("minimum")
        high = schema.get("maximum")
        if isinstance(schema.get("exclusiveMinimum"), int | float):
            low = schema["exclusiveMinimum"] + 1
        if isinstance(schema.get("exclusiveMaximum"), int | float):
            high = schema["exclusiveMaximum"] - 1
        if low is None:
            low = 0 if default == 0 else 1
        if high is None:
            high = max(low + 10, 2 * default if default is not None and default > 0 else 20)
        low, high = math.ceil(low), math.floor(high)
        if high < low:
            raise _Unsupported
        # A sensible range: near the default, small counts; never the schema's far ends.
        return self._rng.randint(low, min(high, max(low + 10, 2 * low)))

    def _make_string(self, schema: Mapping[str, Any], field: str | None, tool: str) -> str:
        if schema.get("format") not in (None, *_URL_FORMATS):
            raise _Unsupported  # a date, an e-mail address: Hypothesis knows those formats
        kind = field_kind(field or "", schema)
        value = self._string_of_kind(kind, schema, field or "", tool)
        low = int(schema.get("minLength", 0))
        high = schema.get("maxLength")
        if len(value) < low or (isinstance(high, int) and len(value) > high):
            value = _readable_name(self._rng)
            if len(value) < low or (isinstance(high, int) and len(value) > high):
                raise _Unsupported
        return value

    def _string_of_kind(self, kind: str, schema: Mapping[str, Any], field: str, tool: str) -> str:
        own = _description_examples(schema)
        if kind == "zone":
            # Descriptions name zones that do not exist ('America/San_Francisco').
            own = [zone for zone in own if _real_zone(zone)]
        share = 0.95 if kind in ("name", "text") else 0.5
        if own and kind not in ("path", "root") and self._rng.random() < share:
            # Quoted in the field's description: the values the server's author expects
            # (``'local'``, ``'remote'`` or ``'all'``), as good as an enum.
            return self._rng.choice(own)
        default = schema.get("default")
        if isinstance(default, str) and default and kind != "url" and self._rng.random() < 0.3:
            return default
        if kind in ("path", "root"):
            return self._path_value(field, tool, kind)
        if kind == "url":
            return self._url_value(schema)
        if kind == "sql":
            return self._sql_value()
        if kind == "clock":
            known = [v for v in self._known(kind) if fits_kind(kind, v)]
            if known and self._rng.random() < 0.5:
                return self._rng.choice(known)
            return f"{self._rng.randrange(24):02d}:{self._rng.randrange(60):02d}"
        if kind == "zone":
            known = [v for v in self._known(kind) if fits_kind(kind, v) and _real_zone(v)]
            return self._pick_recent(known) if known else "UTC"
        if kind == "pattern":
            return self._pattern_value()
        if kind == "name":
            return self._name_value(field, tool)
        return self._text_value(field)

    def _known(self, kind: str) -> list[str]:
        """Examples and seen values that fit ``kind``, the examples first."""
        return [v for v in (*self._examples, *self._seen) if fits_kind(kind, v)]

    # paths

    def _path_type(self, path: str) -> str | None:
        """``dir``, ``file``, ``None`` if it does not exist (by the latest files snapshot)."""
        if self._files_state is not None and self._root:
            absolute = posixpath.normpath(posixpath.join(self._root, path))
            if absolute == self._root:
                return "dir"
            return self._files_state.get(absolute)
        if self._root and path.startswith("/") and not _under(path, self._root):
            return None  # outside the server's world (``/dev/null`` of a diff)
        if path in self._types:
            return self._types[path]
        return "file" if _FILE_NAME.match(posixpath.basename(path)) else "dir"

    def _existing_paths(self, want: str) -> list[str]:
        """Known paths (examples, seen) that exist now and are of type ``want`` (or any)."""
        found: list[str] = []
        for value in (*self._examples, *self._seen):
            if not fits_kind("path", value) or value in self._refs:
                continue
            kind = self._path_type(value)
            if kind is not None and (want == "any" or kind == want):
                found.append(value)
        return found

    def _path_value(self, field: str, tool: str, kind: str) -> str:
        if kind == "root":
            roots = [v for v in self._known("root") if self._path_type(v) == "dir"]
            if self._root and (not roots or self._rng.random() < 0.7):
                return self._root
            return self._rng.choice(roots) if roots else "/"
        words = set(_words(tool))
        want = "dir" if words & _DIR_TOOL_WORDS else "file" if words & _FILE_TOOL_WORDS else "any"
        making = bool(words & _MAKING_VERBS)
        if _MADE_FIELD.match(field) or (making and self._rng.random() < 0.6):
            return self._new_path(directory=want == "dir")
        if self._call_needs_content:
            with_text = [p for p in self._contents if self._content_current(p)]
            if with_text:
                self._call_path = self._pick_recent(with_text)
                return self._call_path
        candidates = self._existing_paths(want) or self._existing_paths("any")
        if not candidates:
            return self._root or "."
        fresh = [v for v in candidates if v in self._fresh]
        pool = fresh if fresh and self._rng.random() < 0.5 else candidates
        self._call_path = self._pick_recent(pool)
        return self._call_path

    def _new_path(self, directory: bool) -> str:
        """A path that does not exist yet, in a folder that does: ``docs/weekly-notes.md``."""
        folders = self._existing_paths("dir") or [self._root or "."]
        folder = self._pick_recent(folders)
        files = self._existing_paths("file")
        extension = ""
        if not directory:
            extensions = [posixpath.splitext(f)[1] for f in files if posixpath.splitext(f)[1]]
            extension = self._rng.choice(extensions) if extensions else ".txt"
        words = [w for f in files for w in _plain_words(posixpath.basename(f))][:50]
        for _ in range(10):
            path = posixpath.join(folder, _readable_name(self._rng, words) + extension)
            known = path in self._seen or path in self._examples or path in self._types
            if not known and (self._files_state is None or self._path_type(path) is None):
                return path
        return posixpath.join(folder, f"{_readable_name(self._rng)}-{self._taken}{extension}")

    def _content_current(self, path: str) -> bool:
        """Whether the text read from ``path`` is still its content (its hash did not move)."""
        if self._files_state is None:
            return True
        return self._files_state.get(self._absolute(path)) == self._content_hash.get(path)

    def _absolute(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self._root or "/", path))

    # other kinds

    def _url_value(self, schema: Mapping[str, Any]) -> str:
        description = str(schema.get("description") or "")
        if _DATA_URI_HINT.search(description) and self._rng.random() < 0.9:
            return self._data_uri()
        hosts = {urlsplit(v).netloc for v in self._examples if _URL_VALUE.match(v)}
        known = [
            v
            for v in self._known("url")
            if urlsplit(v).netloc in hosts
            and urlsplit(v).scheme in ("http", "https")
            # Names reserved never to resolve (RFC 2606): an example, not a place to go.
            and not (urlsplit(v).hostname or "").endswith((".invalid", ".example", ".test"))
        ]
        if not known:
            if _DATA_URI_HINT.search(description):
                return self._data_uri()
            default = schema.get("default")
            return default if isinstance(default, str) else "http://127.0.0.1/"
        fresh = [v for v in known if v in self._fresh]
        return self._pick_recent(fresh if fresh and self._rng.random() < 0.5 else known)

    def _data_uri(self) -> str:
        """A ``data:`` URI of a readable sentence (content that needs no network)."""
        text = _sentence(self._rng).encode()
        return "data:text/plain;base64," + base64.b64encode(text).decode()

    def _sql_value(self) -> str:
        known = self._known("sql")
        if self._tables and (not known or self._rng.random() < 0.4):
            table = self._rng.choice(self._tables)
            if self._rng.random() < 0.5:
                return f"SELECT count(*) FROM {table}"
            return f"SELECT * FROM {table} LIMIT {self._rng.randint(1, 5)}"
        return self._rng.choice(known) if known else "SELECT 1"

    def _pattern_value(self) -> str:
        known = [v for v in self._known("pattern") if re.search(r"[*?\[]", v)]
        files = self._existing_paths("file")
        extensions = sorted({posixpath.splitext(f)[1] for f in files if posixpath.splitext(f)[1]})
        made = [f"**/*{e}" for e in extensions] + [f"*{e}" for e in extensions]
        words = [w for f in files for w in _plain_words(posixpath.basename(f))]
        made += [f"**/*{w}*" for w in words[:20]]
        pool = known + made
        return self._rng.choice(pool) if pool else "*"

    def _name_value(self, field: str, tool: str) -> str:
        words = _words(field)
        tool_words = _words(tool)
        making = bool(set(tool_words) & _MAKING_VERBS)
        nouns = {w.rstrip("s") for w in tool_words} - _MAKING_VERBS
        own_thing = field.lower() == "name" or bool({w.rstrip("s") for w in words} & nouns)
        base = bool(words) and words[0] in ("base", "source", "from", "parent", "old")
        if making and own_thing and not base and self._rng.random() < 0.9:
            return self._new_name(words)
        if set(words) & _REF_WORDS and (self._branches or self._commits):
            return self._ref_value(words)
        key, keyed = self._keyed_values(field)
        if key is not None and key.endswith("name") and self._entities:
            # An entity's name where the snapshot lists entities: one that exists now.
            return self._pick_recent([v for v in keyed if v in self._entities] or [*self._entities])
        if keyed and self._rng.random() < self.reuse_share:
            return self._pick_recent(keyed)
        sources = self._sources("name", {})
        if sources and self._rng.random() < self.reuse_share:
            values = self._rng.choices([v for v, _ in sources], [w for _, w in sources])[0]
            return self._pick_recent(values)
        return self._new_name(words)

    def _new_name(self, words: Sequence[str]) -> str:
        if "branch" in words:
            return f"feature/{_readable_name(self._rng)}"
        name = _readable_name(self._rng, joiner=" " if self._rng.random() < 0.5 else "-")
        return name.title() if " " in name else name

    def _ref_value(self, words: Sequence[str]) -> str:
        if "branch" in words and self._branches:
            return self._rng.choice(list(self._branches))
        if set(words) & {"sha", "commit", "contains"} and self._commits:
            return self._pick_recent(list(self._commits))
        refs = [*self._branches, *self._tags, *list(self._commits)[-5:]]
        refs += [v for v in self._examples if v.startswith("HEAD")]
        return self._rng.choice(refs)

    def _keyed_values(self, field: str) -> tuple[str | None, list[str]]:
        """The JSON key ``field`` matches and the values seen under it, or ``(None, [])``.

        ``entityName`` and ``entityNames`` match ``name``, ``relationType`` itself.
        """
        words = _words(field)
        keys = [field.lower(), field.lower().rstrip("s")]
        if words:
            keys += [words[-1], words[-1].rstrip("s")]
        for key in keys:
            values = list(self._keyed.get(key) or ())
            if values:
                return key, values
        return None, []

    def _text_value(self, field: str) -> str:
        if _OLD_TEXT.match(field) and self._call_path is not None:
            # A line of the file, each line once a call: edits apply one after the other.
            lines = [
                line
                for line in self._contents.get(self._call_path, ())
                if line.strip() and len(line) <= _MAX_VALUE_CHARS and line not in self._call_quoted
            ]
            if lines:
                line = self._rng.choice(lines)
                self._call_quoted[line] = None
                return line
            if self._call_quoted:
                raise _Exhausted
        lines = [v for v in self._lines if fits_kind("text", v)]
        if lines and self._rng.random() < _TEXT_REUSE:
            return self._pick_recent(lines)
        return _sentence(self._rng)

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
            declared = schema.get("items")
            items = declared if isinstance(declared, Mapping) else {}
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
