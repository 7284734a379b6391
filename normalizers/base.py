"""From raw episode files to transitions: the part every domain shares.

A domain normalizer says how one raw observation becomes an :class:`Observation` and how a
recorded action becomes a canonical :class:`Action`. Pairing observations into transitions,
filling env/policy/source, rewards and end flags is the same for every domain and lives here.
Normalization reads only raw files, so it can be re-run at any time without collecting again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from worldtrace.collectors.recorder import read_episode
from worldtrace.schemas import (
    Action,
    EnvironmentRef,
    Episode,
    Observation,
    PolicyRef,
    Source,
    Timing,
    Transition,
    transition_id,
)
from worldtrace.schemas.records import Record

COLLECTOR_VERSION = "0.1.0"


class MalformedEpisode(ValueError):
    """A raw episode file that cannot be turned into records; the message says why."""


class DomainNormalizer(ABC):
    """How one domain's raw observations and actions become canonical records."""

    domain: ClassVar[str]

    @abstractmethod
    def observation(self, raw: dict[str, Any]) -> Observation:
        """Return the canonical observation for a raw observation."""

    def action(self, raw: dict[str, Any]) -> Action:
        """Return the canonical action for a recorded action (default: as recorded)."""
        return Action.parse(raw)  # type: ignore[return-value]

    def normalize_episode(
        self, path: Path, run_id: str, licence: str
    ) -> tuple[Episode, list[Transition]]:
        """Read one sealed raw episode and return its episode row and transitions."""
        events = list(read_episode(path))
        if not events or events[0].get("type") != "start":
            raise MalformedEpisode(f"{path.name}: no start line")
        if events[-1].get("type") != "end":
            raise MalformedEpisode(f"{path.name}: no end line (not a sealed episode)")
        start, end = events[0], events[-1]
        steps = [event for event in events if event.get("type") == "step"]
        env = EnvironmentRef.parse(start["env"]) if start.get("env") else None
        policy = PolicyRef.parse(start["policy"])
        transitions = self._transitions(start, end, steps, env, policy, licence)
        episode = Episode.parse(
            {
                "episode_id": start["episode_id"],
                "run_id": run_id,
                "domain": self.domain,
                "env": env,
                "policy": policy,
                "task": start.get("task"),
                "seed": start["seed"],
                "status": end["status"],
                "length": len(transitions),
                "total_reward": sum(t.reward for t in transitions),
                "started_at": start["started_at"],
                "ended_at": end["ended_at"],
                "error": end.get("error"),
            }
        )
        return episode, transitions  # type: ignore[return-value]

    def _transitions(
        self,
        start: dict[str, Any],
        end: dict[str, Any],
        steps: list[dict[str, Any]],
        env: EnvironmentRef | None,
        policy: PolicyRef,
        licence: str,
    ) -> list[Transition]:
        if steps and env is None:
            raise MalformedEpisode(f"{start['episode_id']}: steps recorded without an env")
        source = Source(origin="collected", collector_version=COLLECTOR_VERSION, licence=licence)
        observation = self.observation(start["observation"]) if steps else None
        transitions: list[Transition] = []
        for position, event in enumerate(steps):
            is_last = position == len(steps) - 1
            next_observation = self.observation(event["observation"])
            reward = float(event.get("reward") or 0.0)
            if is_last and end.get("reward") is not None:
                reward += float(end["reward"])
            transitions.append(
                _build(
                    Transition,
                    id=transition_id(start["episode_id"], event["step"]),
                    episode_id=start["episode_id"],
                    step=event["step"],
                    domain=self.domain,
                    env=env,
                    task=start.get("task"),
                    policy=policy,
                    observation=observation,
                    action=self.action(event["action"]),
                    next_observation=next_observation,
                    action_error=event.get("error"),
                    reward=reward,
                    terminated=bool(event.get("terminated"))
                    or (is_last and end["status"] == "completed"),
                    truncated=bool(event.get("truncated"))
                    or (is_last and end["status"] == "truncated"),
                    timing=Timing(
                        started_at=datetime.fromisoformat(event["started_at"]),
                        step_latency_s=event["latency_s"],
                    ),
                    source=source,
                )
            )
            observation = next_observation
        return transitions


def _build(model: type[Record], **fields: Any) -> Any:
    return model.parse(fields)
