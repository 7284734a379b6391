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
directory and the sha256 of its ``run.json`` and find the run prepared in this process by them
(:class:`PreparedRun`, read from ``run.json`` when none is), return only counts, and raise
only exceptions whose message names the episode, never its content.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from worldtrace.collectors.base import (
    Collector,
    Environment,
    EnvironmentConfig,
    EpisodePlan,
    ModelUnavailable,
    Policy,
)
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
from worldtrace.flows import progress
from worldtrace.flows.config import CollectConfig, claim_run, load_run
from worldtrace.flows.server_watch import watching_the_server
from worldtrace.flows.slots import sandbox_slot
from worldtrace.flows.stopping import collecting
from worldtrace.normalizers import normalize_run
from worldtrace.publishing.inspect import usage_sum, usage_totals
from worldtrace.sandboxes import remote
from worldtrace.sandboxes.docker import RUN_LABEL, gc, labelled, remove_left_behind
from worldtrace.sandboxes.engine import EngineLost, docker_client, wait_for_engine
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.images import build_images
from worldtrace.schemas.errors import ConfigError, SetupError
from worldtrace.schemas.layouts import RunLayout
from worldtrace.schemas.storage import RemoteFolder, is_remote, local_path

ENGINE_WAIT_S = 120.0
"""How long an episode whose engine went away waits for it to answer again (a daemon restart
takes seconds) before the run stops, resumable."""


class PreparedRun:
    """A run's configuration and what each of its episodes needs, made once per process.

    The collector, the environment config, the layout, the recorder and the limits are shared
    by every episode of the run (none of them keeps an episode's state); a policy does keep
    its episode's state, so :meth:`policy` makes a new one each time. Made from a validated
    config by :func:`run_collection`, or read back from ``run.json`` by the flow when it runs
    in a process of its own (a deployment's worker); the flow and its tasks find it in this
    process by run directory and config digest (:func:`prepared_run`), so what Prefect is given
    stays references only.
    """

    def __init__(self, config: CollectConfig) -> None:
        self.config = config
        self.collector: Collector[Any, Any] = config.collector()
        self.environment: EnvironmentConfig = self.collector.environment_config.model_validate(
            config.environment
        )
        # A policy plays the plans of its ``plans_as`` kind (a model pursuing the task library
        # plays the scripted plans), not always its own kind's.
        self.plans_as = self.policy().plans_as
        self.layout = RunLayout(config.run_dir)
        self.limits = EpisodeLimits(config.max_steps, config.step_timeout_s)
        self.run_labels = {RUN_LABEL: config.resolved_run_name()}
        self._recorder: RunRecorder | None = None
        self._hosts_ready: set[str] = set()
        self._lock = threading.Lock()

    @property
    def recorder(self) -> RunRecorder:
        """The run's recorder, made on first use (once the run is claimed)."""
        with self._lock:
            if self._recorder is None:
                self._recorder = RunRecorder(self.layout.root, self.config.identity())
            return self._recorder

    def policy(self) -> Policy[Any]:
        """A new policy for one episode."""
        return self.collector.make_policy(self.config.policy.kind, self.config.policy.params)

    def plan(self, index: int) -> EpisodePlan[Any]:
        """Episode ``index``'s plan: its seed, and its task if it has one."""
        config = self.config
        return self.collector.plan(
            index, config.seed + index, self.plans_as, config.policy.tasks, self.environment
        )

    def prepare_sandbox_host(self, sandbox_host: str | None) -> None:
        """On another machine's engine: refuse a disk cap, and build the domain's images there.

        Once per host for this run: the flow asks again for the host it was given.
        """
        if sandbox_host is None:
            return
        with self._lock:
            if sandbox_host in self._hosts_ready:
                return
            remote.require_no_disk_cap(self.environment, sandbox_host)
            build_images(list(self.collector.requirements.images), docker_client(sandbox_host))
            self._hosts_ready.add(sandbox_host)


_RUNS: dict[tuple[str, str], PreparedRun] = {}
"""The runs this process is collecting, by run directory and config digest."""
_RUNS_LOCK = threading.Lock()


def _run_key(run_dir: Path, config_sha256: str) -> tuple[str, str]:
    return os.path.abspath(run_dir), config_sha256


def prepared_run(run_dir: Path, config_sha256: str) -> PreparedRun:
    """The run in ``run_dir`` pinned by ``config_sha256``: this process's, else read anew.

    Read anew (from ``run.json``, digest checked) when no run of this process holds it: an
    episode task that runs in a process of its own.
    """
    with _RUNS_LOCK:
        prepared = _RUNS.get(_run_key(run_dir, config_sha256))
    return prepared if prepared is not None else PreparedRun(load_run(run_dir, config_sha256))


@contextmanager
def _holding(
    run_dir: Path, config_sha256: str, prepared: PreparedRun | None = None
) -> Iterator[PreparedRun]:
    """Keep the run where :func:`prepared_run` finds it while the block runs.

    A run this process holds already is the one used (the flow started by
    :func:`run_collection`); otherwise ``prepared``, or the run read from ``run.json``, is
    held until the block ends, so nothing a finished run prepared outlives it.
    """
    key = _run_key(run_dir, config_sha256)
    with _RUNS_LOCK:
        held = _RUNS.get(key)
    if held is not None:
        yield held
        return
    prepared = prepared or PreparedRun(load_run(run_dir, config_sha256))
    with _RUNS_LOCK:
        _RUNS[key] = prepared
    try:
        yield prepared
    finally:
        with _RUNS_LOCK:
            _RUNS.pop(key, None)


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
    run = prepared_run(Path(run_dir), config_sha256)
    episode_id = run.config.episode_id(index)
    if stop_requested():
        return _stopped(episode_id)
    policy = run.policy()
    plan = run.plan(index)
    # A slot of this machine's and this domain's sandbox limits while the sandbox lives, where
    # such limits exist on a Prefect server (flows/slots.py); nothing at all otherwise.
    with sandbox_slot(run.config.domain, sandbox_host):
        while True:  # again after the engine came back: the lost attempt was set aside
            if stop_requested():  # asked while waiting for a slot or for the engine
                return _stopped(episode_id)
            env = run.collector.make_environment(run.environment)
            lost = False
            try:
                writer = run.recorder.begin(episode_id)
                with remote.on_host(sandbox_host), labelled(run.run_labels):
                    result = run_episode(
                        env, policy, writer, plan, run.limits, on_step=progress.step_done
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
                remove_left_behind(run.run_labels)
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
    local_dir = staged.local if staged is not None else local_path(run_dir)
    with _holding(local_dir, config_sha256) as run:
        counts = _collect_run(run, local_dir, staged, config_sha256, retries, sandbox_host)
    summary: dict[str, Any] = {"run_dir": run_dir, **counts}
    # A stopped run is resumed later; its user asked for it to end now, not to normalize.
    if normalize and not stop_requested():
        report = normalize_run(run.layout.root, renderer=run.collector.renderer())
        summary |= {
            "transitions": report.transitions,
            "episodes": report.episodes,
            "quarantined": len(report.quarantined),
        }
        if run.config.policy.kind == "llm":
            # From the episodes the normalizer wrote (the whole run's, resumed ones included):
            # only these numbers pass through Prefect, never what an episode produced.
            summary["model_usage"] = usage_sum(usage_totals(str(run.layout.episodes_table)))
    if staged is not None:
        # Sealed episodes already there are kept as they are (another machine's, maybe).
        staged.upload_tree(
            exclude=(f"{RunLayout.PARTIAL}/",), keep_existing=(f"{RunLayout.SEALED}/",)
        )
    return summary


def _collect_run(
    run: PreparedRun,
    local_dir: Path,
    staged: RemoteFolder | None,
    config_sha256: str,
    retries: int,
    sandbox_host: str | None,
) -> dict[str, Any]:
    """Record the run's missing episodes, one task each; return the counts of the summary."""
    config = run.config
    sandbox_host = sandbox_host or remote.current_host()
    run.prepare_sandbox_host(sandbox_host)
    # The sandboxes a killed attempt of this run left behind: their owner is dead.
    orphans = gc(labels=run.run_labels, client=docker_client(sandbox_host))
    with remote.on_host(sandbox_host):  # and those this process could not remove, engine away
        orphans += remove_left_behind(run.run_labels)
    interrupted = run.recorder.recover_interrupted()
    sealed = run.recorder.sealed_ids()
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
                    results.append(_seal_broken_episode(run, index, failure.reason))
            if staged is not None and results[-1]["status"] != "stopped":
                sealed_file = run.layout.sealed_episode(config.episode_id(index))
                staged.upload(run.layout.relative(sealed_file), overwrite=False)
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
    return {
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


def stage_run(run_dir: str) -> RemoteFolder | None:
    """Bring a remote run's manifest and episodes into its staged copy (None for a local run).

    Set-aside attempts come too, so the staged copy holds the run's whole history; a sealed
    episode there replaces a local one that differs (the URL is the truth).
    """
    if not is_remote(run_dir):
        return None
    staged = RemoteFolder(run_dir)
    staged.download(RunLayout.MANIFEST)
    if not RunLayout(staged.local).manifest.is_file():
        raise ConfigError(f"{run_dir} holds no run.json; start the run with `worldtrace collect`")
    staged.download(f"{RunLayout.SEALED}/*.jsonl")
    staged.download(f"{RunLayout.INTERRUPTED}/*")
    return staged


def _seal_broken_episode(run: PreparedRun, index: int, reason: str) -> dict[str, Any]:
    """Keep a record of an episode whose sandbox failed on every attempt."""
    writer = run.recorder.begin(run.config.episode_id(index))
    result = seal_after_retries(writer, run.plan(index), run.policy(), run.limits, reason)
    progress.episode_done(result)
    return _counts(result)


def run_collection(config: CollectConfig) -> dict[str, Any]:
    """Check the environment can run, then run the flow with ``config.workers`` at a time."""
    run = PreparedRun(config)
    # Fail fast (no image, no engine, a bad sandbox host) before the Prefect API spends
    # seconds starting up.
    sandbox_host = config.sandbox_host or remote.current_host()
    run.prepare_sandbox_host(sandbox_host)
    with remote.on_host(sandbox_host):
        run.collector.preflight(run.environment)
    run.policy().preflight()
    config_sha256 = claim_run(config)
    # TaskRunner[Any]: Prefect's TaskRunner is invariant in its future type (see flows/pipeline.py).
    runner: TaskRunner[Any] = ThreadPoolTaskRunner(max_workers=config.workers)
    # The flow and its episodes find this prepared run here: Prefect is given references only.
    with _holding(config.run_dir, config_sha256, run):
        return collect.with_options(task_runner=runner)(
            config.run_location,
            config_sha256,
            retries=config.retries,
            normalize=config.normalize,
            sandbox_host=config.sandbox_host,
        )
