"""The episode loop shared by every domain: reset, act, step, record, seal.

The agent's own failures (an unknown action, a non-zero exit, a step that timed out, a
sandbox the action broke) are recorded as transitions with their error. A sandbox that broke
on its own raises ``SandboxError``: the attempt is set aside under ``interrupted/`` and the
caller decides whether to retry. A run asked to stop (:func:`request_stop`, on SIGTERM or
Ctrl-C) sets the attempt aside too and raises :class:`EpisodeInterrupted`: the episode is
collected again when the run resumes, never sealed half-done. Any other failure seals the
episode as ``failed`` with its reason, keeping every step recorded so far.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import worldtrace
from worldtrace.collectors.base import (
    Environment,
    EpisodePlan,
    HistoryItem,
    ModelCall,
    ModelUnavailable,
    Policy,
    PolicyGaveUp,
    RejectedReply,
    StepOutcome,
)
from worldtrace.collectors.recorder import EpisodeWriter, now_utc
from worldtrace.collectors.size_caps import cap_observation, cap_step
from worldtrace.sandboxes.engine import EngineLost, engine_lost
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.schemas.raw import RawEnd, RawObservation, RawStart, RawStep, RecordedLimits
from worldtrace.schemas.records import EnvironmentRef, EpisodeStatus


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


class EpisodeInterrupted(Exception):
    """The run was asked to stop; the episode's attempt was set aside to be collected again."""


_stop = threading.Event()


def request_stop() -> None:
    """Ask every running episode of this process to stop after (or instead of) its step."""
    _stop.set()


def stop_requested() -> bool:
    """Whether :func:`request_stop` was called (and not cleared)."""
    return _stop.is_set()


def wait_for_stop(seconds: float) -> bool:
    """Wait up to ``seconds``, returning early (True) if the run is asked to stop."""
    return _stop.wait(seconds)


def clear_stop() -> None:
    """Forget an earlier stop request (a new run in the same process)."""
    _stop.clear()


def _interrupt(writer: EpisodeWriter) -> EpisodeInterrupted:
    writer.abandon("interrupted: the run was asked to stop")
    return EpisodeInterrupted(writer.episode_id)


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
        policy.reset(plan.seed, plan.task)
        # Describing may ask the sandbox (its versions), which a stop may have removed by now.
        described = env.describe()
    except Exception as error:
        # Whatever a stop did to the environment (sandboxes removed, browser killed) is ours.
        if _stop.is_set():
            raise _interrupt(writer) from None
        _raise_if_engine_lost(writer, error)
        if isinstance(error, SandboxError):
            writer.abandon(f"sandbox failed during reset: {error}")
            raise
        if isinstance(error, ModelUnavailable):
            writer.abandon(f"the model did not answer: {error}")
            raise
        writer.write_start(_start(writer, plan, policy, started_at, limits, None, None))
        return _seal_failed(writer, error, errors=0)
    observation, cuts = cap_observation(observation)
    start = _start(writer, plan, policy, started_at, limits, described, observation)
    writer.write_start(start.model_copy(update={"cut": cuts}) if cuts else start)
    history: list[HistoryItem] = []
    errors = 0
    status: EpisodeStatus = "truncated"
    closing_call: ModelCall | None = None  # the reply that ended the episode made no step
    gave_up: str | None = None
    try:
        for step in range(limits.max_steps):
            if _stop.is_set():
                raise _interrupt(writer)
            try:
                choice = policy.act(observation, history)
            except PolicyGaveUp as reason:
                gave_up = str(reason)
                break
            call = policy.last_call()
            if choice is None:
                status = "completed"
                closing_call = call
                break
            step_started = now_utc()
            if isinstance(choice, RejectedReply):
                # Not an action: the environment is not touched and shows what it showed.
                action = choice.action()
                outcome = StepOutcome(observation=observation, latency_s=0.0, error=choice.problem)
            else:
                action = choice
                outcome = env.step(action, limits.step_timeout_s)
            if _stop.is_set():
                # The step may have ended because the stop removed its sandbox: not data.
                raise _interrupt(writer)
            # The policy goes on from what was recorded, so the record explains its choices.
            # step_error, not error: the handlers below bind (and then delete) `error`.
            action, observation, step_error, cuts = cap_step(
                action, outcome.observation, outcome.error
            )
            writer.write_step(
                RawStep(
                    step=step,
                    action=action,
                    observation=observation,
                    error=step_error,
                    reward=outcome.reward,
                    terminated=outcome.terminated,
                    truncated=outcome.truncated,
                    started_at=step_started,
                    latency_s=outcome.latency_s,
                    cut=cuts,
                    usage=call.usage if call else None,
                    reply=call.reply if call else None,
                )
            )
            errors += step_error is not None
            if on_step is not None:
                on_step(episode_id, step, step_error)
            history.append(HistoryItem(action, observation, step_error))
            if outcome.terminated or outcome.truncated:
                status = "completed" if outcome.terminated else "truncated"
                break
        reward = env.evaluate(plan.task)
    except EpisodeInterrupted:
        raise
    except ModelUnavailable as error:
        if _stop.is_set():  # the retries ended because the run was asked to stop
            raise _interrupt(writer) from None
        # The model server's failure, not the agent's: collected again when the run resumes.
        writer.abandon(f"the model did not answer: {error}")
        raise
    except Exception as error:
        if _stop.is_set():
            raise _interrupt(writer) from None
        _raise_if_engine_lost(writer, error)
        if isinstance(error, SandboxError):
            writer.abandon(f"sandbox failed during the episode: {error}")
            raise
        return _seal_failed(writer, error, errors=errors)
    _seal(writer, status, errors, reward, gave_up, closing_call)
    return EpisodeResult(episode_id, status, writer.steps, errors, reward, gave_up)


def _raise_if_engine_lost(writer: EpisodeWriter, error: Exception) -> None:
    """Set the episode aside and raise :class:`EngineLost` if the engine went away under it."""
    if engine_lost(error):
        writer.abandon(f"the sandbox engine stopped answering: {type(error).__name__}")
        raise EngineLost(
            f"the sandbox engine stopped answering ({type(error).__name__})"
        ) from error


def _start(
    writer: EpisodeWriter,
    plan: EpisodePlan,
    policy: Policy,
    started_at: datetime,
    limits: EpisodeLimits,
    env: EnvironmentRef | None,
    observation: RawObservation | None,
) -> RawStart:
    return RawStart(
        episode_id=writer.episode_id,
        seed=plan.seed,
        index=plan.index,
        task=plan.task.instruction if plan.task else None,
        task_name=plan.task.name if plan.task else None,
        env=env,
        policy=policy.describe(),
        started_at=started_at,
        limits=RecordedLimits(max_steps=limits.max_steps, step_timeout_s=limits.step_timeout_s),
        collector_version=worldtrace.__version__,
        observation=observation,
    )


def _seal(
    writer: EpisodeWriter,
    status: EpisodeStatus,
    errors: int,
    reward: float | None,
    error: str | None = None,
    closing_call: ModelCall | None = None,
) -> None:
    end = RawEnd(
        status=status,
        ended_at=now_utc(),
        steps=writer.steps,
        errors=errors,
        reward=reward,
        error=error,
        usage=closing_call.usage if closing_call else None,
        reply=closing_call.reply if closing_call else None,
    )
    writer.seal(end)


def _seal_failed(writer: EpisodeWriter, error: Exception, errors: int) -> EpisodeResult:
    reason = f"{type(error).__name__}: {error}"
    _seal(writer, "failed", errors, None, reason)
    return EpisodeResult(writer.episode_id, "failed", writer.steps, errors, None, reason)


def seal_after_retries(
    writer: EpisodeWriter, plan: EpisodePlan, policy: Policy, limits: EpisodeLimits, reason: str
) -> EpisodeResult:
    """Seal an episode whose sandbox kept failing, so the run can finish and say why."""
    writer.write_start(_start(writer, plan, policy, now_utc(), limits, None, None))
    _seal(writer, "failed", 0, None, reason)
    return EpisodeResult(writer.episode_id, "failed", 0, 0, None, reason)
