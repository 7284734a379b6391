"""The ``collect`` Prefect flow: one task per episode, bounded concurrency, resumable.

Started again with the same config, the flow finds the run directory, sets aside episodes a
killed run left unfinished, and runs only the episodes that are not sealed. Retries are for
infrastructure failures (a sandbox that died); the agent's own errors are data, not failures.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from collectors.episode import EpisodeLimits, EpisodeResult, run_episode, seal_after_retries
from collectors.recorder import EpisodeAlreadySealed, RunRecorder
from collectors.registry import get_collector
from flows import progress
from flows.config import CollectConfig
from normalizers import normalize_run
from sandboxes.docker import SandboxError


def _infrastructure_failure(task: Any, task_run: Any, state: Any) -> bool:
    """Retry only when the sandbox broke, never for anything the agent did."""
    try:
        state.result()
    except SandboxError:
        return True
    except Exception:
        return False
    return False


@task(
    name="collect-episode",
    cache_policy=NO_CACHE,
    retry_condition_fn=_infrastructure_failure,
    retry_delay_seconds=1,
)
def collect_episode(config: CollectConfig, index: int) -> dict[str, Any]:
    """Record episode ``index`` of the run in a fresh environment."""
    collector = get_collector(config.domain)
    env_config = collector.environment_config.model_validate(config.environment)
    plan = collector.plan(
        index, config.seed + index, config.policy.kind, config.policy.tasks, env_config
    )
    policy = collector.make_policy(config.policy.kind, config.policy.params)
    recorder = RunRecorder(config.run_dir, config.identity())
    writer = recorder.begin(config.episode_id(index))
    env = collector.make_environment(env_config)
    try:
        result = run_episode(
            env,
            policy,
            writer,
            plan,
            EpisodeLimits(config.max_steps, config.step_timeout_s),
            on_step=progress.step_done,
        )
    finally:
        env.close()
    progress.episode_done(result)
    return asdict(result)


@flow(name="collect", log_prints=False)
def collect(config: CollectConfig) -> dict[str, Any]:
    """Collect the run's missing episodes, then normalize the run; return a summary."""
    recorder = RunRecorder(config.run_dir, config.identity())
    interrupted = recorder.recover_interrupted()
    sealed = recorder.sealed_ids()
    pending = [i for i in range(config.episodes) if config.episode_id(i) not in sealed]
    episode_task = collect_episode.with_options(retries=config.retries)
    futures = {index: episode_task.submit(config, index) for index in pending}
    results: list[dict[str, Any]] = []
    for index, future in futures.items():
        future.wait()
        try:
            results.append(future.result())
        except EpisodeAlreadySealed:
            continue
        except Exception as error:
            results.append(_seal_broken_episode(config, index, error))
    summary: dict[str, Any] = {
        "run_dir": str(config.run_dir),
        "requested": config.episodes,
        "already_sealed": len(sealed),
        "resumed_interrupted": len(interrupted),
        "collected": len(results),
        "failed": sum(r["status"] == "failed" for r in results),
        "steps": sum(r["steps"] for r in results),
        "errors": sum(r["errors"] for r in results),
    }
    if config.normalize:
        report = normalize_run(config.run_dir)
        summary |= {
            "transitions": report.transitions,
            "episodes": report.episodes,
            "quarantined": len(report.quarantined),
        }
    return summary


def _seal_broken_episode(config: CollectConfig, index: int, error: Exception) -> dict[str, Any]:
    """Keep a record of an episode whose sandbox failed on every attempt."""
    collector = get_collector(config.domain)
    recorder = RunRecorder(config.run_dir, config.identity())
    env_config = collector.environment_config.model_validate(config.environment)
    plan = collector.plan(
        index, config.seed + index, config.policy.kind, config.policy.tasks, env_config
    )
    policy = collector.make_policy(config.policy.kind, config.policy.params)
    reason = f"{type(error).__name__}: {error}"
    result: EpisodeResult = seal_after_retries(
        recorder.begin(config.episode_id(index)), plan, policy, reason
    )
    progress.episode_done(result)
    return asdict(result)


def run_collection(config: CollectConfig) -> dict[str, Any]:
    """Check the environment can run, then run the flow with ``config.workers`` at a time."""
    # Fail fast (no image, no engine) before the Prefect API spends seconds starting up.
    collector = get_collector(config.domain)
    collector.preflight(collector.environment_config.model_validate(config.environment))
    runner = ThreadPoolTaskRunner(max_workers=config.workers)
    return collect.with_options(task_runner=runner)(config)
