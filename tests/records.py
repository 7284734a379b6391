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
