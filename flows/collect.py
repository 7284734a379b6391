"""The ``collect`` Prefect flow: one task per episode, bounded concurrency, resumable.

Started again with the same config, the flow finds the run directory, removes the sandboxes a
killed attempt of the run left behind, sets aside episodes it left unfinished, and runs only
the episodes that are not sealed. Retries are for infrastructure failures (a sandbox that
broke on its own); the agent's own errors are data, not failures.

A run whose folder is an fsspec URL (``out: s3://…``) is recorded in its staged local copy
(:mod:`worldtrace.schemas.storage`): the flow first brings down what the URL holds (the
manifest, sealed and set-aside episodes), puts each episode there the moment it is sealed
(never over one already there), and the normalized run at the end. So a run resumed on another
machine keeps every episode any machine sealed, and records only the rest.

Nothing an environment returned or an action contained may reach Prefect's database or logs
(a replay policy's actions, a screen with a secret on it): the flow and its tasks take the run
directory and the sha256 of its ``run.json`` and read the configuration from there, return
only counts, and raise only exceptions whose message names the episode, never its content.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from worldtrace.collectors.base import Environment, ModelUnavailable
from worldtrace.collectors.episode import (
    EpisodeInterrupted,
    EpisodeLimits,
    EpisodeResult,
    request_stop,
    run_episode,
    seal_after_retries,
    stop_requested,
)
from worldtrace.collectors.recorder import EpisodeAlreadySealed, RunRecorder
from worldtrace.collectors.registry import get_collector
from worldtrace.flows import progress
from worldtrace.flows.config import CollectConfig, claim_run, load_run
from worldtrace.flows.server_watch import watching_the_server
from worldtrace.flows.slots import sandbox_slot
from worldtrace.flows.stopping import collecting
from worldtrace.normalizers import normalize_run
from worldtrace.publishing.inspect import usage_sum, usage_totals
from worldtrace.sandboxes import remote
from worldtrace.sandboxes.docker import RUN_LABEL, SandboxError, docker_client, gc, labelled
from worldtrace.sandboxes.engine import EngineLost, remove_left_behind, wait_for_engine
from worldtrace.schemas.errors import ConfigError, SetupError
from worldtrace.schemas.layouts import RunLayout
from worldtrace.schemas.storage import RemoteFolder, is_remote

ENGINE_WAIT_S = 120.0
"""How long an episode whose engine went away waits for it to answer again (a daemon restart
takes seconds) before the run stops, resumable."""


class EngineGone(SandboxError):
    """The engine did not come back within :data:`ENGINE_WAIT_S`: the run stops, resumable."""

    def __init__(self, episode_id: str) -> None:
        super().__init__(f"episode {episode_id}: the sandbox engine did not answer again")


class ModelGone(SetupError):
    """The model server did not answer an episode after every retry: the run stops, resumable.

    The message names the episode, never what the model was sent.
    """

    def __init__(self, episode_id: str) -> None:
        super().__init__(f"episode {episode_id}: the model server did not answer")


class EpisodeSandboxFailed(SandboxError):
    """An episode's sandbox broke on its own; retried. The message never holds its content."""

    def __init__(self, episode_id: str, reason: str) -> None:
        super().__init__(f"episode {episode_id}: the sandbox failed (reason in its raw record)")
        self.reason = reason


def _infrastructure_failure(task: Any, task_run: Any, state: Any) -> bool:
    """Retry only when the sandbox broke, never for anything the agent did."""
    try:
        state.result()
    except EpisodeSandboxFailed:
        return not stop_requested()
    except Exception:
        return False
    return False


@task(
    name="collect-episode",
    cache_policy=NO_CACHE,
    persist_result=False,
    retry_condition_fn=_infrastructure_failure,
    retry_delay_seconds=1,
)
def collect_episode(
    run_dir: str, config_sha256: str, index: int, sandbox_host: str | None = None
) -> dict[str, Any]:
    """Record episode ``index`` of the run in ``run_dir`` in a fresh environment.

    Its sandboxes run on ``sandbox_host``'s engine (None: this process's default one).
    """
    config = load_run(Path(run_dir), config_sha256)
    episode_id = config.episode_id(index)
    if stop_requested():
        return _stopped(episode_id)
    collector = get_collector(config.domain)
    env_config = collector.environment_config.model_validate(config.environment)
    policy = collector.make_policy(config.policy.kind, config.policy.params)
    plan = collector.plan(
        index, config.seed + index, policy.plans_as, config.policy.tasks, env_config
    )
    recorder = RunRecorder(config.run_dir, config.identity())
    # A slot of this machine's and this domain's sandbox limits while the sandbox lives, where
    # such limits exist on a Prefect server (flows/slots.py); nothing at all otherwise.
    run_labels = {RUN_LABEL: config.resolved_run_name()}
    with sandbox_slot(config.domain, sandbox_host):
        while True:  # again after the engine came back: the lost attempt was set aside
            if stop_requested():  # asked while waiting for a slot or for the engine
                return _stopped(episode_id)
            env = collector.make_environment(env_config)
            lost = False
            try:
                writer = recorder.begin(episode_id)
                with remote.on_host(sandbox_host), labelled(run_labels):
                    result = run_episode(
                        env,
                        policy,
                        writer,
                        plan,
                        EpisodeLimits(config.max_steps, config.step_timeout_s),
                        on_step=progress.step_done,
                    )
                break
            except EpisodeInterrupted:
                return _stopped(episode_id)
            except EngineLost:
                lost = True
            except ModelUnavailable:
                request_stop()  # the model server is down for every episode: stop them all
                raise ModelGone(episode_id) from None
            except SandboxError as error:
                raise EpisodeSandboxFailed(episode_id, f"{type(error).__name__}: {error}") from None
            finally:
                _close(env, engine_away=lost)
            if not wait_for_engine(sandbox_host, ENGINE_WAIT_S):
                request_stop()  # the other episodes are set aside too, at once
                raise EngineGone(episode_id)
            with remote.on_host(sandbox_host):
                remove_left_behind(run_labels)
    progress.episode_done(result)
    return _counts(result)


def _close(env: Environment, engine_away: bool) -> None:
    """Close an episode's environment; while the engine is away, what fails is left for later."""
    try:
        env.close()
    except Exception:
        if not engine_away:
            raise


def _stopped(episode_id: str) -> dict[str, Any]:
    """The result of an episode the run's stop set aside (collected again on resume)."""
    return {"episode_id": episode_id, "status": "stopped", "steps": 0, "errors": 0, "reward": None}


def _counts(result: EpisodeResult) -> dict[str, Any]:
    """What a task returns to Prefect: the outcome in numbers, no text the episode produced."""
    return {
        "episode_id": result.episode_id,
        "status": result.status,
        "steps": result.steps,
        "errors": result.errors,
        "reward": result.reward,
    }


@flow(name="collect", log_prints=False, persist_result=False)
def collect(
    run_dir: str,
    config_sha256: str,
    retries: int = 2,
    normalize: bool = True,
    sandbox_host: str | None = None,
) -> dict[str, Any]:
    """Collect the run's missing episodes, then normalize the run; return a summary.

    ``run_dir`` (a path or an fsspec URL) holds the configuration (``run.json``, see
    :func:`worldtrace.flows.config.claim_run`);
    ``config_sha256`` pins it, so an edited file is refused rather than half applied.
    ``sandbox_host`` is the engine the sandboxes run on (default: this process's
    ``WORLDTRACE_SANDBOX_HOST``, else the local engine; see :mod:`worldtrace.sandboxes.remote`).
    """
    staged = stage_run(run_dir)
    local_dir = staged.local if staged is not None else Path(run_dir)
    config = load_run(local_dir, config_sha256)
    sandbox_host = sandbox_host or remote.current_host()
    _prepare_sandbox_host(config, sandbox_host)
    # The sandboxes a killed attempt of this run left behind: their owner is dead.
    run_labels = {RUN_LABEL: config.resolved_run_name()}
    orphans = gc(labels=run_labels, client=docker_client(sandbox_host))
    with remote.on_host(sandbox_host):  # and those this process could not remove, engine away
        orphans += remove_left_behind(run_labels)
    recorder = RunRecorder(config.run_dir, config.identity())
    interrupted = recorder.recover_interrupted()
    sealed = recorder.sealed_ids()
    pending = [i for i in range(config.episodes) if config.episode_id(i) not in sealed]
    episode_task = collect_episode.with_options(retries=retries)
    results: list[dict[str, Any]] = []
    engine_gone = model_gone = False
    with collecting(), watching_the_server(local_dir):
        futures = {
            index: episode_task.submit(str(local_dir), config_sha256, index, sandbox_host)
            for index in pending
        }
        for index, future in futures.items():
            future.wait()
            try:
                results.append(future.result())
            except EpisodeAlreadySealed:
                continue
            except EngineGone:
                engine_gone = True
                results.append(_stopped(config.episode_id(index)))
            except ModelGone:
                model_gone = True
                results.append(_stopped(config.episode_id(index)))
            except EpisodeSandboxFailed as failure:
                if stop_requested():
                    results.append(_stopped(config.episode_id(index)))
                else:
                    results.append(_seal_broken_episode(config, index, failure.reason))
            if staged is not None and results[-1]["status"] != "stopped":
                staged.upload(f"raw/episodes/{config.episode_id(index)}.jsonl", overwrite=False)
    if engine_gone:
        raise SandboxError(
            f"the sandbox engine stopped answering and did not come back within "
            f"{ENGINE_WAIT_S:.0f} s; the unfinished episodes were set aside: run the same "
            "command again once it answers (`docker info`)"
        )
    if model_gone:
        raise SetupError(
            "the model server did not answer after every retry (see the log for its errors); "
            "the unfinished episodes were set aside: run the same command again once it "
            "answers (`worldtrace doctor --policy-config FILE` checks it)"
        )
    stopped = sum(r["status"] == "stopped" for r in results)
    results = [r for r in results if r["status"] != "stopped"]
    summary: dict[str, Any] = {
        "run_dir": run_dir,
        "requested": config.episodes,
        "already_sealed": len(sealed),
        "resumed_interrupted": len(interrupted),
        "orphan_sandboxes_removed": len(orphans),
        "collected": len(results),
        "stopped": stopped,
        "failed": sum(r["status"] == "failed" for r in results),
        "steps": sum(r["steps"] for r in results),
        "errors": sum(r["errors"] for r in results),
    }
    # A stopped run is resumed later; its user asked for it to end now, not to normalize.
    if normalize and not stop_requested():
        report = normalize_run(config.run_dir)
        summary |= {
            "transitions": report.transitions,
            "episodes": report.episodes,
            "quarantined": len(report.quarantined),
        }
        if config.policy.kind == "llm":
            # From the episodes the normalizer wrote (the whole run's, resumed ones included):
            # only these numbers pass through Prefect, never what an episode produced.
            episodes_table = RunLayout(config.run_dir).episodes_table
            summary["model_usage"] = usage_sum(usage_totals(str(episodes_table)))
    if staged is not None:
        # Sealed episodes already there are kept as they are (another machine's, maybe).
        staged.upload_tree(exclude=("raw/partial/",), keep_existing=("raw/episodes/",))
    return summary


def stage_run(run_dir: str) -> RemoteFolder | None:
    """Bring a remote run's manifest and episodes into its staged copy (None for a local run).

    Set-aside attempts come too, so the staged copy holds the run's whole history; a sealed
    episode there replaces a local one that differs (the URL is the truth).
    """
    if not is_remote(run_dir):
        return None
    staged = RemoteFolder(run_dir)
    staged.download("run.json")
    if not RunLayout(staged.local).manifest.is_file():
        raise ConfigError(f"{run_dir} holds no run.json; start the run with `worldtrace collect`")
    staged.download("raw/episodes/*.jsonl")
    staged.download("raw/interrupted/*")
    return staged


def _seal_broken_episode(config: CollectConfig, index: int, reason: str) -> dict[str, Any]:
    """Keep a record of an episode whose sandbox failed on every attempt."""
    collector = get_collector(config.domain)
    recorder = RunRecorder(config.run_dir, config.identity())
    env_config = collector.environment_config.model_validate(config.environment)
    policy = collector.make_policy(config.policy.kind, config.policy.params)
    plan = collector.plan(
        index, config.seed + index, policy.plans_as, config.policy.tasks, env_config
    )
    limits = EpisodeLimits(config.max_steps, config.step_timeout_s)
    writer = recorder.begin(config.episode_id(index))
    result = seal_after_retries(writer, plan, policy, limits, reason)
    progress.episode_done(result)
    return _counts(result)


def _prepare_sandbox_host(config: CollectConfig, sandbox_host: str | None) -> None:
    """On another machine's engine: refuse a disk cap, and build the domain's images there."""
    if sandbox_host is None:
        return
    collector = get_collector(config.domain)
    environment = collector.environment_config.model_validate(config.environment)
    remote.require_no_disk_cap(environment, sandbox_host)
    remote.ensure_images(collector.requirements.images, docker_client(sandbox_host))


def run_collection(config: CollectConfig) -> dict[str, Any]:
    """Check the environment can run, then run the flow with ``config.workers`` at a time."""
    # Fail fast (no image, no engine, a bad sandbox host) before the Prefect API spends
    # seconds starting up.
    collector = get_collector(config.domain)
    sandbox_host = config.sandbox_host or remote.current_host()
    _prepare_sandbox_host(config, sandbox_host)
    with remote.on_host(sandbox_host):
        collector.preflight(collector.environment_config.model_validate(config.environment))
    collector.make_policy(config.policy.kind, config.policy.params).preflight()
    config_sha256 = claim_run(config)
    runner = ThreadPoolTaskRunner(max_workers=config.workers)
    return collect.with_options(task_runner=runner)(
        config.run_location,
        config_sha256,
        retries=config.retries,
        normalize=config.normalize,
        sandbox_host=config.sandbox_host,
    )
