"""The episode loop shared by every domain: reset, act, step, record, seal.

The agent's own failures (an unknown action, a non-zero exit, a step that timed out) are
recorded as transitions with their error and the episode goes on. A broken sandbox raises
``SandboxError``: the attempt is set aside under ``interrupted/`` and the caller decides
whether to retry. Any other failure seals the episode as ``failed`` with its reason, keeping
every step recorded so far.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from collectors.base import Environment, EpisodePlan, HistoryItem, Policy
from collectors.recorder import EpisodeWriter, now_utc
from sandboxes.docker import SandboxError
from schemas.records import EpisodeStatus


@dataclass(frozen=True)
class EpisodeLimits:
    """How long an episode may go on."""

    max_steps: int = 50
    step_timeout_s: float = 30.0


@dataclass(frozen=True)
class EpisodeResult:
    """What happened in one episode."""

    episode_id: str
    status: EpisodeStatus
    steps: int
    errors: int
    reward: float | None
    error: str | None = None


StepListener = Callable[[str, int, str | None], None]
"""Called after each recorded step with (episode_id, step, action_error)."""


def run_episode(
    env: Environment,
    policy: Policy,
    writer: EpisodeWriter,
    plan: EpisodePlan,
    limits: EpisodeLimits,
    on_step: StepListener | None = None,
) -> EpisodeResult:
    """Play one episode and record it with ``writer``; returns how it ended."""
    episode_id = writer.episode_id
    started_at = now_utc()
    try:
        observation = env.reset(plan.seed, plan.task)
    except SandboxError:
        writer.abandon("sandbox failed during reset")
        raise
    except Exception as error:
        writer.write_start(_facts(writer, plan, policy, started_at, limits, env=None), None)
        return _seal_failed(writer, error, steps=0, errors=0)
    policy.reset(plan.seed, plan.task)
    writer.write_start(
        _facts(writer, plan, policy, started_at, limits, env.describe().model_dump(mode="json")),
        observation,
    )
    history: list[HistoryItem] = []
    errors = 0
    status: EpisodeStatus = "truncated"
    try:
        for step in range(limits.max_steps):
            action = policy.act(observation, history)
            if action is None:
                status = "completed"
                break
            step_started = now_utc()
            outcome = env.step(action, limits.step_timeout_s)
            writer.write_step(
                {
                    "step": step,
                    "action": action.model_dump(mode="json"),
                    "observation": outcome.observation,
                    "error": outcome.error,
                    "reward": outcome.reward,
                    "terminated": outcome.terminated,
                    "truncated": outcome.truncated,
                    "started_at": step_started,
                    "latency_s": outcome.latency_s,
                }
            )
            errors += outcome.error is not None
            if on_step is not None:
                on_step(episode_id, step, outcome.error)
            history.append(HistoryItem(action, outcome.observation, outcome.error))
            observation = outcome.observation
            if outcome.terminated or outcome.truncated:
                status = "completed" if outcome.terminated else "truncated"
                break
        reward = env.evaluate(plan.task)
    except SandboxError:
        writer.abandon("sandbox failed during the episode")
        raise
    except Exception as error:
        return _seal_failed(writer, error, steps=writer.steps, errors=errors)
    writer.seal(status, {"steps": writer.steps, "errors": errors, "reward": reward})
    return EpisodeResult(episode_id, status, writer.steps, errors, reward)


def _facts(
    writer: EpisodeWriter,
    plan: EpisodePlan,
    policy: Policy,
    started_at: datetime,
    limits: EpisodeLimits,
    env: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "episode_id": writer.episode_id,
        "seed": plan.seed,
        "index": plan.index,
        "task": plan.task.instruction if plan.task else None,
        "task_name": plan.task.name if plan.task else None,
        "env": env,
        "policy": policy.describe().model_dump(mode="json"),
        "started_at": started_at,
        "limits": {"max_steps": limits.max_steps, "step_timeout_s": limits.step_timeout_s},
    }


def _seal_failed(writer: EpisodeWriter, error: Exception, steps: int, errors: int) -> EpisodeResult:
    reason = f"{type(error).__name__}: {error}"
    writer.seal("failed", {"steps": steps, "errors": errors, "reward": None, "error": reason})
    return EpisodeResult(writer.episode_id, "failed", steps, errors, None, reason)


def seal_after_retries(
    writer: EpisodeWriter, plan: EpisodePlan, policy: Policy, reason: str
) -> EpisodeResult:
    """Seal an episode whose sandbox kept failing, so the run can finish and say why."""
    writer.write_start(_facts(writer, plan, policy, now_utc(), EpisodeLimits(), env=None), None)
    writer.seal("failed", {"steps": 0, "errors": 0, "reward": None, "error": reason})
    return EpisodeResult(writer.episode_id, "failed", 0, 0, None, reason)
