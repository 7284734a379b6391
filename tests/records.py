"""Builders of valid records for tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from worldtrace.schemas import (
    Action,
    EnvironmentRef,
    Observation,
    PolicyRef,
    Source,
    Timing,
    Transition,
)


def make_transition(step: int = 0, episode_id: str = "ep-1", **changes: Any) -> Transition:
    """Return a valid terminal transition, with ``changes`` applied to its fields."""
    fields: dict[str, Any] = {
        "id": f"{episode_id}:{step:05d}",
        "episode_id": episode_id,
        "step": step,
        "domain": "terminal",
        "env": EnvironmentRef(
            name="terminal/bash-tmux",
            version="sha256:abc",
            components={"bash": "5.2"},
            config_hash="cafe",
        ),
        "task": "say hello",
        "policy": PolicyRef(kind="script", name="task-script", version="1"),
        "observation": Observation(format="terminal-screen", text="$ ", meta={"cwd": "/root"}),
        "action": Action(name="keys", arguments={"keys": ["echo hi", "Enter"]}, text="echo hi"),
        "next_observation": Observation(
            format="terminal-screen", text="$ echo hi\nhi\n$ ", meta={"exit_code": 0}
        ),
        "timing": Timing(started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), step_latency_s=0.02),
        "source": Source(origin="collected", collector_version="0.1.0", licence="cc-by-4.0"),
    }
    fields.update(changes)
    return Transition(**fields)


def make_start(episode_id: str = "ep-1", observation: dict[str, Any] | None = None, **changes: Any):
    """Return a valid raw start event of a terminal episode."""
    from worldtrace.schemas.raw import RawStart, RecordedLimits

    fields: dict[str, Any] = {
        "episode_id": episode_id,
        "seed": 1,
        "index": 0,
        "task": "count",
        "env": make_transition().env,
        "policy": make_transition().policy,
        "started_at": datetime(2026, 1, 1, tzinfo=UTC),
        "limits": RecordedLimits(max_steps=50, step_timeout_s=30),
        "collector_version": "0.1.0",
        "observation": observation if observation is not None else {},
    }
    fields.update(changes)
    return RawStart(**fields)


def make_step(step: int = 0, observation: dict[str, Any] | None = None, **changes: Any):
    """Return a valid raw step event typing ``echo <step>``."""
    from worldtrace.schemas.raw import RawStep

    fields: dict[str, Any] = {
        "step": step,
        "action": Action(name="keys", arguments={"keys": [f"echo {step}", "Enter"]}, text="old"),
        "observation": observation if observation is not None else {},
        "started_at": datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC),
        "latency_s": 0.01,
    }
    fields.update(changes)
    return RawStep(**fields)


def make_end(steps: int, status: str = "completed", **changes: Any):
    """Return a valid raw end event."""
    from worldtrace.schemas.raw import RawEnd

    fields: dict[str, Any] = {
        "status": status,
        "ended_at": datetime(2026, 1, 1, 0, 1, tzinfo=UTC),
        "steps": steps,
        "errors": 0,
        "reward": 1.0,
    }
    fields.update(changes)
    return RawEnd(**fields)
