"""The records every stage shares: one transition per row, one episode per episode row.

These pydantic models are the single definition of the record shapes. The Arrow schema and
the ``datasets.Features`` used on disk are derived from them in :mod:`worldtrace.schemas.arrow`.

Free-form dictionaries (``meta``, ``arguments``, ``components``) are typed as :data:`JsonDict`:
in Python they are dicts, on disk they are JSON strings, so every domain shares one Arrow
schema and polars can scan all shards at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from worldtrace.schemas.errors import InputError, validation_problems

SCHEMA_VERSION = "1.3"
"""1.1 added the ``curation`` column (training-target marks); 1.0 shards read as all targets.
1.2 added ``observation.volatile`` (volatile spans); older shards read with none marked.
1.3 added ``usage`` (a model policy's tokens, time and cost); older shards read with none."""

DOMAINS: tuple[str, ...] = ("terminal", "swe", "mcp", "search", "web", "os", "android")
"""The seven domains of the design. A package may register another (see the registry)."""
Domain = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
"""A domain's name: one of :data:`DOMAINS` or another registered domain's."""

PolicyKind = Literal["script", "explore", "llm", "replay", "human"]
DuplicateRule = Literal["exact", "near"]
EpisodeStatus = Literal["completed", "truncated", "failed", "interrupted"]


class JsonColumn:
    """Marker: the annotated dict is stored as a JSON string column."""


class ImageColumn:
    """Marker: the annotated bytes are stored as a ``datasets.Image`` column (PNG)."""


JsonDict = Annotated[dict[str, Any], JsonColumn()]
PngBytes = Annotated[bytes, ImageColumn()]


class RecordError(InputError, ValueError):
    """A record failed validation; the message names every offending field."""

    def __init__(self, record: str, error: ValidationError) -> None:
        problems = [f"{record}.{problem}" for problem in validation_problems(error, "<record>")]
        super().__init__("; ".join(problems))
        self.problems = problems


class Record(BaseModel):
    """Base of all records: strict about unknown fields, immutable once built."""

    # Screenshots travel as base64 in JSON; on disk they are a datasets.Image column.
    model_config = ConfigDict(
        extra="forbid", frozen=True, ser_json_bytes="base64", val_json_bytes="base64"
    )

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Self:
        """Validate ``data`` and raise :class:`RecordError` naming each bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            raise RecordError(cls.__name__, error) from None


class EnvironmentRef(Record):
    """Which world a transition came from: the environment and its pinned versions."""

    name: str = Field(min_length=1, description="environment name, e.g. 'terminal/bash'")
    version: str = Field(
        min_length=1, description="primary pinned version, e.g. the sandbox image id"
    )
    components: JsonDict = Field(
        default_factory=dict, description="versions of every part: image, bash, tmux, apps"
    )
    config_hash: str = Field(min_length=1, description="hash of the environment configuration")


class PolicyRef(Record):
    """Who chose the actions."""

    kind: PolicyKind
    name: str = Field(min_length=1)
    version: str = Field(min_length=1, description="policy version or model id")


class ModelUsage(Record):
    """What a model-driven policy spent: one call's, or (on an episode) the sum of its calls.

    Tokens are the server's own ``usage`` counts (0 where it reported none); time is measured
    by the policy around the request that answered (retries and backoff not counted); the
    cost is computed from the
    policy's configured ``prices`` and is null without them.
    """

    model: str = Field(min_length=1, description="the model id the server reported")
    calls: int = Field(default=1, ge=0, description="model replies counted")
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0, description="prompt tokens served from cache")
    reasoning_tokens: int = Field(default=0, ge=0, description="completion tokens spent thinking")
    latency_s: float = Field(default=0.0, ge=0, description="model time, request to full reply")
    cost_usd: float | None = Field(default=None, ge=0, description="null without prices")
    trimmed_steps: int = Field(
        default=0,
        ge=0,
        description="the episode's oldest steps left out of the prompt to fit its history "
        "budget (for an episode: the most left out of any one prompt)",
    )


class Span(Record):
    """A range ``[start, end)`` of an observation's text, in characters (code points)."""

    start: int = Field(ge=0)
    end: int = Field(ge=1)

    @model_validator(mode="after")
    def _not_empty(self) -> Span:
        if self.end <= self.start:
            raise ValueError(f"span end {self.end} is not after its start {self.start}")
        return self


class Observation(Record):
    """One state of the environment as a world model sees it."""

    format: str = Field(min_length=1, description="format tag, e.g. 'terminal-screen'")
    text: str = Field(description="canonical observation text")
    screenshot: PngBytes | None = Field(default=None, description="PNG screenshot, if any")
    meta: JsonDict = Field(default_factory=dict, description="url, title, cwd, exit code …")
    volatile: tuple[Span, ...] = Field(
        default=(),
        description="volatile spans: where `text` shows a value that varies by nature from run "
        "to run (a measured duration, an object address, a process id), as the domain's "
        "declared patterns found them; sorted, not overlapping. Training can mask them, "
        "comparisons of runs ignore them",
    )

    @model_validator(mode="after")
    def _spans_inside_text(self) -> Observation:
        previous_end = 0
        for span in self.volatile:
            if span.start < previous_end:
                raise ValueError("volatile spans must be sorted and must not overlap")
            if span.end > len(self.text):
                raise ValueError(f"volatile span {span.start}:{span.end} ends past the text")
            previous_end = span.end
        return self

    def masked_text(self, mask: str = "\N{HORIZONTAL ELLIPSIS}") -> str:
        """Return ``text`` with each volatile span replaced by ``mask``."""
        pieces: list[str] = []
        position = 0
        for span in self.volatile:
            pieces += [self.text[position : span.start], mask]
            position = span.end
        pieces.append(self.text[position:])
        return "".join(pieces)


class Action(Record):
    """What the policy did."""

    name: str = Field(min_length=1)
    arguments: JsonDict = Field(default_factory=dict)
    text: str = Field(description="canonical action text")


class Timing(Record):
    """When the step happened and how long the environment took."""

    started_at: datetime
    step_latency_s: float = Field(ge=0)


class Source(Record):
    """Where the row came from."""

    origin: str = Field(pattern=r"^(collected|imported:.+)$")
    collector_version: str = Field(min_length=1)
    licence: str = Field(min_length=1)


class Curation(Record):
    """What curation decided about one row of a kept episode.

    Curation keeps or drops whole episodes, so a kept episode has every step, its first state
    and its final reward. A row that should not be learned from (a duplicate, or a row a rule
    excludes) stays for its episode's history and is marked ``target=False``; training jobs
    take their targets with ``curation.target`` (see the dataset card), exports do the same.
    Rows that were never curated are all targets.
    """

    target: bool = Field(
        default=True,
        description="a training target: false for duplicates and rows a rule excluded, which "
        "stay in their episode as history",
    )
    duplicate_of: str | None = Field(
        default=None, description="id of the row this one duplicates (the one kept as target)"
    )
    duplicate_rule: DuplicateRule | None = Field(
        default=None,
        description="`exact`: same environment version, observation, action (name, arguments, "
        "text), next observation, error and reward; `near`: MinHash, the same action and "
        "outcome making the same change to a nearly identical state",
    )
    labels: tuple[str, ...] = Field(
        default=(),
        description="the rules the row matched (`noop`, `empty_or_truncated`, `oversize`, "
        "`error_episode` …), whatever they decided",
    )

    @model_validator(mode="after")
    def _duplicates_are_not_targets(self) -> Curation:
        if (self.duplicate_of is None) != (self.duplicate_rule is None):
            raise ValueError("duplicate_of and duplicate_rule are set together")
        if self.duplicate_of is not None and self.target:
            raise ValueError("a duplicate is never a training target")
        return self


class Transition(Record):
    """One row of the corpus: observation → action → next observation."""

    id: str
    episode_id: str = Field(min_length=1)
    step: int = Field(ge=0)
    domain: Domain
    env: EnvironmentRef
    task: str | None = None
    policy: PolicyRef
    observation: Observation
    action: Action
    next_observation: Observation
    action_error: str | None = Field(
        default=None,
        description="the environment's own report that the action failed, else null. An "
        "action fails when the environment rejected it (malformed, unknown tool, element or "
        "key, invalid arguments), could not finish it (a timeout, a sandbox, server or browser "
        "that died), or ran it and signalled failure in its own terms (a command's non-zero "
        "exit status, a tool result flagged as an error). What the agent sees of the failure "
        "is in the next observation either way",
    )
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    timing: Timing
    source: Source
    usage: ModelUsage | None = Field(
        default=None,
        description="for a model-driven policy: the call that chose this action (tokens, "
        "model time beside `timing.step_latency_s`, cost); null for other policies",
    )
    curation: Curation = Field(
        default_factory=Curation,
        description="what curation decided: train on rows whose `curation.target` is true; the "
        "others are duplicates or excluded rows kept as their episode's history",
    )

    @model_validator(mode="after")
    def _id_matches_episode_and_step(self) -> Transition:
        expected = transition_id(self.episode_id, self.step)
        if self.id != expected:
            raise ValueError(f"id must be {expected!r} (episode_id:step), got {self.id!r}")
        return self


class Episode(Record):
    """Episode-level facts, stored in the episodes table beside the transitions."""

    episode_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    domain: Domain
    env: EnvironmentRef | None = Field(
        default=None, description="None only when the episode failed before its first state"
    )
    policy: PolicyRef
    task: str | None = None
    seed: int
    status: EpisodeStatus
    length: int = Field(ge=0, description="number of transitions")
    total_reward: float = 0.0
    started_at: datetime
    ended_at: datetime
    error: str | None = Field(default=None, description="why the episode did not complete")
    usage: ModelUsage | None = Field(
        default=None,
        description="for a model-driven policy: the sum over the episode's calls, the reply "
        "that ended it included; null for other policies",
    )

    @field_validator("ended_at")
    @classmethod
    def _ends_after_start(cls, ended_at: datetime, info: Any) -> datetime:
        started_at = info.data.get("started_at")
        if started_at is not None and ended_at < started_at:
            raise ValueError("ended_at is before started_at")
        return ended_at


def transition_id(episode_id: str, step: int) -> str:
    """Return the stable transition id ``{episode_id}:{step:05d}``."""
    return f"{episode_id}:{step:05d}"
