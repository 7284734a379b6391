"""The raw episode record: the events an episode file holds, one JSON line each.

The episode loop writes these models (:mod:`worldtrace.collectors.recorder`) and the
normalizer reads them back (:func:`read_raw_episode`), so both sides agree on every field.
An episode file is a ``start`` line (the episode's facts and first observation), one ``step``
line per action, and an ``end`` line; an attempt that never finished ends with an
``abandoned`` line instead and is kept aside, never normalized.

Observations stay the domain's own JSON (:data:`RawObservation`), lossless, so they can be
rendered again (a newer renderer, a fixed bug) without collecting again.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from worldtrace.schemas.errors import InputError, validation_problems
from worldtrace.schemas.records import (
    Action,
    EnvironmentRef,
    EpisodeStatus,
    ModelUsage,
    PolicyRef,
)

RawObservation = dict[str, Any]
"""An observation as the environment returned it: JSON, in the domain's own shape."""


class _Event(BaseModel):
    # Frozen like the records; unknown fields are kept out so a typo never goes unnoticed.
    model_config = ConfigDict(extra="forbid", frozen=True)


class RecordedLimits(_Event):
    """The limits an episode ran under."""

    max_steps: int = Field(ge=1)
    step_timeout_s: float = Field(gt=0)


class Cut(_Event):
    """A recorded value cut to its size cap (:mod:`worldtrace.collectors.size_caps`)."""

    where: str = Field(
        min_length=1, description="which value: `observation.memory.notes`, `action.text` …"
    )
    chars: int = Field(ge=1, description="its length before the cut, in characters")
    kept: int = Field(ge=0, description="characters kept (0: the value was dropped)")


def _no_cuts(cuts: tuple[Cut, ...]) -> bool:
    return not cuts


def _cuts() -> Any:
    return Field(
        default=(),
        exclude_if=_no_cuts,  # an episode with nothing cut is written as before
        description="the values of this event cut to their size caps, if any",
    )


def _is_none(value: object) -> bool:
    return value is None


def _usage() -> Any:
    return Field(
        default=None,
        exclude_if=_is_none,  # only a model-driven policy's events have one
        description="a model-driven policy's call: tokens, model time, cost",
    )


def _reply() -> Any:
    return Field(
        default=None,
        exclude_if=_is_none,
        description="the model's reply as the server sent it: `content`, `tool_calls`, and "
        "`reasoning` where the server returned a reasoning text",
    )


class RawStart(_Event):
    """The first line: who ran the episode, in which environment, and what it saw first."""

    type: Literal["start"] = "start"
    episode_id: str = Field(min_length=1)
    seed: int
    index: int = Field(ge=0)
    task: str | None = Field(default=None, description="the task's instruction")
    task_name: str | None = None
    env: EnvironmentRef | None = Field(
        default=None, description="None only when the episode failed before its first state"
    )
    policy: PolicyRef
    started_at: datetime
    limits: RecordedLimits
    collector_version: str | None = Field(
        default=None, description="worldtrace's version; None before it was recorded"
    )
    observation: RawObservation | None = None
    cut: tuple[Cut, ...] = _cuts()


class RawStep(_Event):
    """One action and what the environment returned for it."""

    type: Literal["step"] = "step"
    step: int = Field(ge=0)
    action: Action
    observation: RawObservation
    error: str | None = Field(default=None, description="how the action failed, if it did")
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    started_at: datetime
    latency_s: float = Field(ge=0)
    cut: tuple[Cut, ...] = _cuts()
    usage: ModelUsage | None = _usage()
    reply: dict[str, Any] | None = _reply()


class RawEnd(_Event):
    """The last line of a sealed episode: how it ended."""

    type: Literal["end"] = "end"
    status: EpisodeStatus
    ended_at: datetime
    steps: int = Field(ge=0)
    errors: int = Field(ge=0)
    reward: float | None = Field(default=None, description="the task check's result")
    error: str | None = Field(default=None, description="why the episode did not complete")
    usage: ModelUsage | None = _usage()
    reply: dict[str, Any] | None = _reply()
    """The reply that ended the episode (a stop word, no tool call), which made no step."""


class RawAbandoned(_Event):
    """The last line of an attempt that never finished (set aside, recorded again)."""

    type: Literal["abandoned"] = "abandoned"
    reason: str
    at: datetime


RawEvent = Annotated[RawStart | RawStep | RawEnd | RawAbandoned, Field(discriminator="type")]
_EVENT = TypeAdapter(RawEvent)


class MalformedEpisode(InputError, ValueError):
    """A raw episode file that cannot be read as an episode; the message says why."""


class RawEpisode(BaseModel):
    """A sealed episode read back: its start, its steps in order, and its end."""

    model_config = ConfigDict(frozen=True)

    start: RawStart
    steps: tuple[RawStep, ...]
    end: RawEnd


def parse_event(line: str | bytes) -> RawEvent:
    """Parse one line of an episode file; :class:`MalformedEpisode` names the bad field."""
    try:
        return _EVENT.validate_json(line)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error, "event"))
        raise MalformedEpisode(f"not a raw event ({problems})") from None


def read_events(path: Path) -> Iterator[RawEvent]:
    """Yield the events of an episode file; a torn last line (killed mid-write) is skipped."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                return
            try:
                yield parse_event(line)
            except MalformedEpisode as error:
                raise MalformedEpisode(f"{Path(path).name} line {number}: {error}") from None


def read_raw_episode(path: Path) -> RawEpisode:
    """Read a sealed episode file; :class:`MalformedEpisode` if it is not one."""
    events = list(read_events(path))
    name = Path(path).name
    start = events[0] if events else None
    if not isinstance(start, RawStart):
        raise MalformedEpisode(f"{name}: no start line")
    end = events[-1]
    if not isinstance(end, RawEnd):
        raise MalformedEpisode(f"{name}: no end line (not a sealed episode)")
    steps = tuple(event for event in events[1:-1] if isinstance(event, RawStep))
    if len(steps) != len(events) - 2:
        raise MalformedEpisode(f"{name}: only step lines may come between start and end")
    return RawEpisode(start=start, steps=steps, end=end)
