"""From a raw episode to transitions: the pairing every domain shares.

A domain's :class:`~worldtrace.collectors.base.Renderer` says how one raw observation becomes
an :class:`Observation` and how a recorded action reads canonically (and how an episode an
older collector recorded is brought up to date). Pairing observations into transitions,
filling env/policy/source, rewards and end flags is the same for every domain and lives here.
Normalization reads only raw files, so it can be re-run at any time without collecting again.
"""

from __future__ import annotations

from worldtrace.collectors.base import INVALID_REPLY, Renderer
from worldtrace.schemas import (
    Action,
    Episode,
    ModelUsage,
    Observation,
    RecordError,
    Source,
    Timing,
    Transition,
    transition_id,
)
from worldtrace.schemas.raw import Cut, MalformedEpisode, RawEpisode

UNRECORDED_VERSION = "unrecorded"
"""``source.collector_version`` of episodes recorded before the version was kept."""


def episode_records(
    raw: RawEpisode, domain: str, renderer: Renderer, run_id: str, licence: str
) -> tuple[Episode, list[Transition]]:
    """Return the episode row and the transitions of one sealed raw episode.

    Raises :class:`MalformedEpisode` (or :class:`RecordError`) when the episode cannot make
    valid records; the caller quarantines it.
    """
    raw = renderer.upgrade(raw)
    start, end = raw.start, raw.end
    if raw.steps and start.env is None:
        raise MalformedEpisode(f"{start.episode_id}: steps recorded without an env")
    version = start.collector_version or UNRECORDED_VERSION
    source = Source(origin="collected", collector_version=version, licence=licence)
    transitions: list[Transition] = []
    observation = (
        _say_cuts(renderer.marked_observation(start.observation or {}), start.cut)
        if raw.steps
        else None
    )
    for position, step in enumerate(raw.steps):
        is_last = position == len(raw.steps) - 1
        next_observation = _say_cuts(renderer.marked_observation(step.observation), step.cut)
        reward = step.reward + ((end.reward or 0.0) if is_last else 0.0)
        transitions.append(
            Transition.parse(
                {
                    "id": transition_id(start.episode_id, step.step),
                    "episode_id": start.episode_id,
                    "step": step.step,
                    "domain": domain,
                    "env": start.env,
                    "task": start.task,
                    "policy": start.policy,
                    "observation": observation,
                    "action": _canonical_action(renderer, step.action),
                    "next_observation": next_observation,
                    "action_error": renderer.action_error(step),
                    "reward": reward,
                    "terminated": step.terminated or (is_last and end.status == "completed"),
                    "truncated": step.truncated or (is_last and end.status == "truncated"),
                    "timing": Timing(started_at=step.started_at, step_latency_s=step.latency_s),
                    "source": source,
                    "usage": step.usage,
                }
            )
        )
        observation = next_observation
    episode = Episode.parse(
        {
            "episode_id": start.episode_id,
            "run_id": run_id,
            "domain": domain,
            "env": start.env,
            "policy": start.policy,
            "task": start.task,
            "seed": start.seed,
            "status": end.status,
            "length": len(transitions),
            "total_reward": sum(t.reward for t in transitions),
            "started_at": start.started_at,
            "ended_at": end.ended_at,
            "error": end.error,
            "usage": episode_usage(raw),
        }
    )
    return episode, transitions


__all__ = ["MalformedEpisode", "RecordError", "episode_records"]


def _canonical_action(renderer: Renderer, action: Action) -> Action:
    """The domain's canonical action; a model reply that was no action stays as written."""
    return action if action.name == INVALID_REPLY else renderer.action(action)


def episode_usage(raw: RawEpisode) -> ModelUsage | None:
    """The sum of an episode's model calls (the reply that ended it included), if it made any."""
    calls = [step.usage for step in raw.steps if step.usage] + (
        [raw.end.usage] if raw.end.usage else []
    )
    if not calls:
        return None
    costs = [call.cost_usd for call in calls if call.cost_usd is not None]
    return ModelUsage(
        model=calls[-1].model,
        calls=sum(call.calls for call in calls),
        prompt_tokens=sum(call.prompt_tokens for call in calls),
        completion_tokens=sum(call.completion_tokens for call in calls),
        cached_tokens=sum(call.cached_tokens for call in calls),
        reasoning_tokens=sum(call.reasoning_tokens for call in calls),
        latency_s=sum(call.latency_s for call in calls),
        cost_usd=sum(costs) if costs else None,
        trimmed_steps=max(call.trimmed_steps for call in calls),
    )


def _say_cuts(observation: Observation, cuts: tuple[Cut, ...]) -> Observation:
    """Return ``observation`` with the values its step cut to their size caps in its meta.

    A step's cuts (its action, error and resulting observation) go to the row's next
    observation, the state they belong to; the first state's to the first observation.
    """
    if not cuts:
        return observation
    listed = [cut.model_dump() for cut in cuts]
    return observation.model_copy(update={"meta": {**observation.meta, "cut": listed}})
