"""Scheduled deployments, process work pools and workers: ``deploy``, ``deployments``, ``worker``.

``worldtrace deploy CONFIG --name NAME`` validates the config file (a collection config, or with
``--pipeline`` a pipeline file) before anything is created, creates the process work pool if it
is missing, and registers a deployment of :func:`~worldtrace.flows.scheduled.scheduled_collect`
(or :func:`~worldtrace.flows.scheduled.scheduled_pipeline`) with its schedule. The flow is
found by its module path in the installed ``worldtrace`` package (``entrypoint_type`` module
path, no source storage, no image): any machine with worldtrace installed runs it. What a run
records and where is described in :mod:`worldtrace.flows.scheduled`. An ``--interval``
schedule is anchored at the time of deploying, so its first run comes one interval later; a
``--cron`` schedule is in UTC. Without either, runs start by hand (``prefect deployment run``
or the UI). ``--parts N`` splits every run into N deployments sharing the schedule, which the
pool's workers take one each (:mod:`worldtrace.flows.scheduled` says how parts divide a run).

**Late runs are skipped.** A deployment runs one flow run at a time (Prefect's deployment
concurrency limit of 1 with the ``CANCEL_NEW`` strategy): a run that comes due while another
run of the same deployment is going ends Cancelled ("Deployment concurrency limit reached.")
without starting. So a backlog that piled up while no worker ran (the server up, the workers
down) drains as one run, the first due, and a collection that takes longer than the interval
skips the slots it overran instead of stacking runs that compete for the machine and for the
server's database.

``worldtrace worker --pool POOL`` runs Prefect's process worker in this process, restricted to
worldtrace's own flows: a flow run whose deployment's entrypoint is not one of
:data:`ALLOWED_ENTRYPOINTS`, that has pull steps, whose job variables (or the pool's job
template) set a command, environment variables or anything but :data:`ALLOWED_JOB_VARIABLES`,
or whose working folder another user could write, is refused before any process starts and ends
Crashed with a message saying why (:func:`check_flow_run`, docs/deployments.md). Each flow run
it accepts is a child process that loads the checked entrypoint from the installed package.
It polls for due runs every 2 s (Prefect's default: 10 s). ``--limit``
caps its concurrent flow runs, ``--sandboxes`` sets this machine's global concurrency limit on
sandboxes (see :mod:`worldtrace.flows.slots`). A worker
is named ``<hostname>:<pid>``, which Prefect writes on every flow run it takes; so a worker
starting on a machine finds the runs of its pool that a dead worker of the same machine left
Running or Pending (a crash, a reboot, a ``kill -9``: nothing told the server) and schedules
them again at once, and they resume their run directories (see
:mod:`worldtrace.flows.scheduled`). A machine that never comes back needs its runs
rescheduled by hand (the UI's retry).

All three need a Prefect server (schedules, pools and workers live there): ``PREFECT_API_URL``
set, e.g. by ``worldtrace server start``. Prefect is imported inside the commands, after the
command line configured logging.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import socket
import stat
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

# worldtrace.schemas.errors is imported where an error is raised: the schemas package imports
# datasets, which reads its log settings on import, and the command line imports this module
# before it configures logging. In the branch that raises, not at the top of the function: a
# worker then never imports datasets (nor the sandboxes package): about a second of CPU less for
# each `worldtrace worker` to start.

DEFAULT_POOL = "worldtrace"
WORKER_QUERY_S = 2.0
"""How often a worker asks for due runs (Prefect's 10 s default was most of what a deployed run
waited: benchmarks/orchestration.py); ``PREFECT_WORKER_QUERY_SECONDS`` set by the user wins."""
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Deployed:
    """What ``deploy`` registered."""

    deployment_ids: list[str]
    full_names: list[str]
    pool: str
    schedule: str
    run_prefix: str
    pool_created: bool


def require_server() -> str:
    """Return the Prefect server's API URL; refuse to go on without one."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    if not url:
        from worldtrace.schemas.errors import SetupError

        raise SetupError(
            "deployments, schedules and workers need a Prefect server: start one with "
            "`worldtrace server start` (or set PREFECT_API_URL to a running server)"
        )
    return url


def ensure_process_pool(pool: str) -> bool:
    """Create the process work pool ``pool`` if it is missing; return whether it was created."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.workers.process import ProcessWorker

    if not NAME_PATTERN.match(pool):
        from worldtrace.schemas.errors import InputError

        raise InputError(f"work pool name {pool!r}: use letters, digits, '.', '_' and '-'")
    with get_client(sync_client=True) as client:
        try:
            existing = client.read_work_pool(pool)
        except ObjectNotFound:
            template = ProcessWorker.get_default_base_job_template()
            try:
                client.create_work_pool(
                    WorkPoolCreate(name=pool, type="process", base_job_template=template)
                )
            except ObjectAlreadyExists:  # another worker or deploy created it meanwhile
                return False
            return True
    if existing.type != "process":
        from worldtrace.schemas.errors import InputError

        raise InputError(
            f"work pool {pool!r} is a {existing.type!r} pool; worldtrace deploys to process "
            "pools (give another --pool)"
        )
    return False


def _schedule(cron: str | None, interval: float | None) -> tuple[dict[str, Any], str]:
    """The schedule arguments of a deployment and a description; errors name the bad flag."""
    from prefect.client.schemas.schedules import CronSchedule
    from pydantic import ValidationError

    from worldtrace.schemas.errors import ConfigError

    if cron is not None and interval is not None:
        raise ConfigError("give --cron or --interval, not both")
    if interval is not None:
        if interval <= 0:
            raise ConfigError(f"--interval must be a positive number of seconds, got {interval}")
        return {"interval": timedelta(seconds=interval)}, f"every {interval:g} s"
    if cron is not None:
        try:
            CronSchedule(cron=cron)
        except ValidationError as error:
            problem = error.errors()[0]["msg"].removeprefix("Value error, ")
            raise ConfigError(
                f"--cron {cron!r} is not a valid cron expression: {problem}"
            ) from None
        return {"cron": cron}, f"cron {cron}"
    return {}, "none (runs start by hand)"


def deploy(
    config_file: Path,
    name: str,
    *,
    cron: str | None = None,
    interval: float | None = None,
    pool: str = DEFAULT_POOL,
    pipeline: bool = False,
    parts: int = 1,
    working_dir: Path | None = None,
) -> Deployed:
    """Register a scheduled deployment of the collection (or pipeline) in ``config_file``.

    Everything is checked first (the name, the schedule, the config file with the domain's
    own validation, the server), so a bad input creates nothing. Deploying the same name again
    updates the deployment. Relative paths in the file are relative to ``working_dir``
    (default: the current folder), where the deployment's runs execute. With ``parts`` > 1,
    ``parts`` deployments ``NAME-p<k>of<parts>`` share the schedule, each collecting its part
    of the episodes (see :mod:`worldtrace.flows.scheduled`).
    """
    from worldtrace.flows.config import load_config
    from worldtrace.flows.pipeline import file_sha256, load_pipeline_config
    from worldtrace.schemas.errors import ConfigError

    if not NAME_PATTERN.match(name):
        raise ConfigError(f"--name {name!r}: use letters, digits, '.', '_' and '-'")
    schedule, described = _schedule(cron, interval)
    path = Path(config_file).resolve()
    collect_config = load_pipeline_config(path).collect if pipeline else load_config(path)
    if parts < 1 or parts > collect_config.episodes:
        raise ConfigError(
            f"--parts must be between 1 and the run's {collect_config.episodes} episode(s), "
            f"got {parts}"
        )
    if pipeline and parts > 1:
        raise ConfigError("--parts splits a collection; a --pipeline deployment is one run")
    sha256 = file_sha256(path)
    prefix = collect_config.run_name or name
    require_server()
    created = ensure_process_pool(pool)

    from prefect.client.schemas.objects import ConcurrencyLimitConfig, ConcurrencyLimitStrategy
    from prefect.deployments.runner import EntrypointType, RunnerDeployment

    from worldtrace.flows.scheduled import scheduled_collect, scheduled_pipeline

    target = scheduled_pipeline if pipeline else scheduled_collect
    ids, names = [], []
    for part in range(1, parts + 1):
        parameters: dict[str, Any] = (
            {"pipeline_file": str(path), "sha256": sha256, "run_prefix": prefix}
            if pipeline
            else {"config_file": str(path), "config_sha256": sha256, "run_prefix": prefix}
        )
        deployment_name = name
        if parts > 1:
            parameters |= {"part": part, "parts": parts}
            deployment_name = f"{name}-p{part}of{parts}"
        deployment = RunnerDeployment.from_flow(
            target,
            name=deployment_name,
            parameters=parameters,
            entrypoint_type=EntrypointType.MODULE_PATH,
            job_variables={"working_dir": str((working_dir or Path.cwd()).resolve())},
            tags=["worldtrace", collect_config.domain],
            # One run at a time; a run that comes due while one is going is skipped.
            concurrency_limit=ConcurrencyLimitConfig(
                limit=1, collision_strategy=ConcurrencyLimitStrategy.CANCEL_NEW
            ),
            description=f"{collect_config.episodes} {collect_config.domain} episodes from {path}"
            + (f", part {part} of {parts}" if parts > 1 else ""),
            **schedule,
        )
        # _sync: where an asyncio loop is marked running in this thread (a notebook; a thread
        # that drove Playwright's sync API) apply() would hand back a coroutine, not run.
        # Prefect's async_dispatch takes it but types the call as the sync method's.
        applied = deployment.apply(work_pool_name=pool, _sync=True)  # type: ignore[call-arg]
        ids.append(str(applied))
        names.append(f"{target.name}/{deployment_name}")
    return Deployed(
        deployment_ids=ids,
        full_names=names,
        pool=pool,
        schedule=described,
        run_prefix=prefix,
        pool_created=created,
    )


def describe_schedule(schedule: Any) -> str:
    """One line for a Prefect schedule object."""
    interval = getattr(schedule, "interval", None)
    if interval is not None:
        return f"every {interval.total_seconds():g} s"
    cron = getattr(schedule, "cron", None)
    if cron is not None:
        return f"cron {cron} ({schedule.timezone or 'UTC'})"
    rrule = getattr(schedule, "rrule", None)
    return f"rrule {rrule}" if rrule else type(schedule).__name__


def list_deployments() -> list[dict[str, str]]:
    """Every deployment on the server: name, schedules, pool, next scheduled run."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort

    rows = []
    with get_client(sync_client=True) as client:
        flows: dict[Any, str] = {}
        for deployment in client.read_deployments():
            if deployment.flow_id not in flows:
                flows[deployment.flow_id] = client.read_flow(deployment.flow_id).name
            upcoming = client.read_flow_runs(
                deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[deployment.id])),
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(
                        type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])
                    )
                ),
                sort=FlowRunSort.EXPECTED_START_TIME_ASC,
                limit=1,
            )
            schedules = [
                describe_schedule(s.schedule) + ("" if s.active else " (inactive)")
                for s in deployment.schedules
            ]
            rows.append(
                {
                    "deployment": f"{flows[deployment.flow_id]}/{deployment.name}",
                    "schedule": "; ".join(schedules) or "none",
                    "pool": deployment.work_pool_name or "",
                    "paused": "yes" if deployment.paused else "no",
                    "next run": (
                        upcoming[0].expected_start_time.isoformat(timespec="seconds")
                        if upcoming and upcoming[0].expected_start_time
                        else "-"
                    ),
                }
            )
    return sorted(rows, key=lambda row: row["deployment"])


ALLOWED_ENTRYPOINTS = {
    "worldtrace.flows.scheduled.scheduled_collect": "scheduled_collect",
    "worldtrace.flows.scheduled.scheduled_pipeline": "scheduled_pipeline",
}
"""The only flows a ``worldtrace worker`` runs: the entry points ``worldtrace deploy``
registers (module paths in the installed package), mapped to their names in
:mod:`worldtrace.flows.scheduled`."""
ALLOWED_JOB_VARIABLES = frozenset({"working_dir", "stream_output", "name", "labels"})
"""Job variables that leave what runs unchanged: the folder runs execute in (checked by
:func:`check_working_dir`), whether output is streamed, the process's display name and labels.
``command`` and ``env`` (``PYTHONPATH``, ``LD_PRELOAD``, ``PREFECT_*`` logging configs, …
each run code of the sender's choosing) and anything else are refused."""


class RefusedFlowRun(Exception):
    """A flow run a ``worldtrace worker`` will not execute; the message says why."""


def check_working_dir(path: Path, uid: int | None = None) -> None:
    """Refuse a working folder another user could plant code or settings in.

    A flow run's process starts there: Prefect reads ``.env``, ``prefect.toml`` and
    ``pyproject.toml`` from it (a logging config among them runs any code), so the folder and
    each folder above it must belong to the worker's user or root and be writable by no one
    else (a sticky folder such as ``/tmp`` may be above it: nobody else can rename in it).
    """
    uid = os.geteuid() if uid is None else uid
    try:
        resolved = path.resolve(strict=True)
    except OSError as error:
        raise RefusedFlowRun(f"working_dir {str(path)!r} cannot be used: {error}") from None
    if not resolved.is_dir():
        raise RefusedFlowRun(f"working_dir {str(path)!r} is not a folder")
    for folder in (resolved, *resolved.parents):
        info = folder.stat()
        if info.st_uid not in (uid, 0):
            raise RefusedFlowRun(
                f"working_dir {str(path)!r}: {folder} belongs to uid {info.st_uid}, not to "
                f"this worker's user (uid {uid}) or root, so its owner could plant code there"
            )
        writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        sticky = folder != resolved and info.st_mode & stat.S_ISVTX
        if writable_by_others and not sticky:
            raise RefusedFlowRun(
                f"working_dir {str(path)!r}: {folder} is writable by other users "
                f"(mode {stat.filemode(info.st_mode)}), so they could plant code there"
            )


def check_flow_run(
    entrypoint: str | None,
    pull_steps: list[Any] | None,
    job_variables: dict[str, Any],
    command_configured: bool,
    configured_env: dict[str, Any],
    working_dir: Path | None,
) -> str:
    """The entry point of a flow run this worker may run; :class:`RefusedFlowRun` if not.

    ``job_variables`` are the deployment's and the flow run's together; ``command_configured``
    and ``configured_env`` are what the pool's job template made of them (a template can set a
    command or environment of its own).
    """
    if entrypoint not in ALLOWED_ENTRYPOINTS:
        allowed = ", ".join(sorted(ALLOWED_ENTRYPOINTS))
        raise RefusedFlowRun(
            f"entrypoint {entrypoint!r} is not one of worldtrace's flows ({allowed})"
        )
    if pull_steps:
        raise RefusedFlowRun("the deployment has pull steps, which run code before the flow")
    foreign = sorted(set(job_variables) - ALLOWED_JOB_VARIABLES)
    if foreign:
        raise RefusedFlowRun(
            f"job variable(s) {', '.join(foreign)} would change what the worker executes "
            f"(allowed: {', '.join(sorted(ALLOWED_JOB_VARIABLES))})"
        )
    if command_configured:
        raise RefusedFlowRun("the work pool's job template sets a command")
    if configured_env:
        raise RefusedFlowRun(
            f"the work pool's job template sets environment variable(s) "
            f"{', '.join(sorted(configured_env))}"
        )
    if working_dir is not None:
        check_working_dir(working_dir)
    return entrypoint


@functools.cache
def worldtrace_worker_class() -> type[Any]:
    """Prefect's process worker, restricted to worldtrace's own flows (see :func:`check_flow_run`).

    Built on first use: Prefect is imported inside the commands, after logging is configured.
    """
    import warnings

    from prefect.utilities.dispatch import get_registry_for_type
    from prefect.workers.process import ProcessJobConfiguration, ProcessWorker
    from pydantic import PrivateAttr

    class GuardedJobConfiguration(ProcessJobConfiguration):
        """Keeps what the job template set before Prefect adds its own environment."""

        _template_env: dict[str, Any] = PrivateAttr(default_factory=dict)
        _deployment: Any = PrivateAttr(default=None)

        def prepare_for_flow_run(
            self,
            flow_run: Any,
            deployment: Any = None,
            flow: Any = None,
            work_pool: Any = None,
            worker_name: str | None = None,
            worker_id: Any = None,
        ) -> None:
            self._template_env = dict(self.env or {})
            self._deployment = deployment
            super().prepare_for_flow_run(
                flow_run, deployment, flow, work_pool, worker_name, worker_id
            )

    # Prefect registers every worker class under its type; ours is a process worker too, and
    # must not replace Prefect's in the registry (`prefect worker start --type process`).
    registry = get_registry_for_type(ProcessWorker)
    original = registry.get(ProcessWorker.type) if registry is not None else None
    with warnings.catch_warnings():
        # Prefect warns that the registered process worker is replaced: it is put back below.
        warnings.filterwarnings("ignore", message="Type 'WorldtraceWorker'", category=UserWarning)
        worker_class = _define_worker(ProcessWorker, GuardedJobConfiguration)
    if registry is not None and original is not None:
        registry[ProcessWorker.type] = original
    return worker_class


def _define_worker(process_worker: type[Any], guarded_configuration: type[Any]) -> type[Any]:
    """The :class:`WorldtraceWorker` class on Prefect's process worker (imported by the caller)."""
    import tempfile
    from contextlib import nullcontext

    import anyio
    from prefect.runner._flow_run_executor import FlowRunExecutorContext
    from prefect.runner._starter_engine import EngineCommandStarter
    from prefect.workers.process import ProcessWorkerResult

    class WorldtraceWorker(process_worker):
        """A process worker that executes only worldtrace's scheduled flows, and refuses the rest.

        The checks run in :meth:`run`, before any process starts; a refused run ends Crashed
        with a message that starts ``refused by the worldtrace worker:``. The flow run's process
        loads the flow from the checked entry point (``PREFECT__FLOW_ENTRYPOINT``), not from
        the deployment, which may change after the check, and never runs pull steps.
        """

        type = "process"
        job_configuration = guarded_configuration

        async def run(
            self,
            flow_run: Any,
            configuration: Any,
            task_status: Any = None,
        ) -> Any:
            if task_status is None:
                task_status = anyio.TASK_STATUS_IGNORED
            deployment = configuration._deployment
            if deployment is None and flow_run.deployment_id:
                deployment = await self.client.read_deployment(flow_run.deployment_id)
            try:
                if deployment is None:
                    raise RefusedFlowRun("the flow run belongs to no deployment")
                entrypoint = check_flow_run(
                    deployment.entrypoint,
                    deployment.pull_steps,
                    {**(deployment.job_variables or {}), **(flow_run.job_variables or {})},
                    configuration._command_configured,
                    configuration._template_env,
                    configuration.working_dir,
                )
            except RefusedFlowRun as refused:
                message = f"refused by the worldtrace worker: {refused}"
                # In the run's own logs on the server, and one line for whoever runs the worker.
                self.get_flow_run_logger(flow_run).error(message)
                # Unwrapped, so a line in the worker's log is a whole refusal.
                print(f"flow run {flow_run.name} ({flow_run.id}) {message}", file=sys.stderr)
                raise RefusedFlowRun(message) from None

            env = {
                **configuration.env,
                # A process started by `python -m` puts its working folder first on sys.path.
                "PYTHONSAFEPATH": "1",
            }
            folder = (
                nullcontext(configuration.working_dir)
                if configuration.working_dir
                else tempfile.TemporaryDirectory(suffix="prefect")
            )
            execution = None
            with folder as working_dir:
                async with FlowRunExecutorContext() as context:
                    starter = EngineCommandStarter(
                        entrypoint=entrypoint,
                        cwd=Path(working_dir).resolve(),
                        env=env,
                        stream_output=configuration.stream_output,
                        control_channel=context.control_channel,
                    )

                    async def resolve(run: Any) -> Any:
                        from worldtrace.flows import scheduled

                        return getattr(scheduled, ALLOWED_ENTRYPOINTS[entrypoint])

                    executor = context.create_executor(
                        flow_run, starter, resolve_flow=resolve, propose_submitting=False
                    )

                    async def execute(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                        nonlocal execution
                        execution = await executor.submit(task_status=task_status)

                    async with anyio.create_task_group() as group:
                        handle = await group.start(execute)
                        if handle.pid is None:
                            raise RuntimeError("Flow run process has no PID")
                        task_status.started(handle.pid)
            if execution is None or execution.status_code is None:
                raise RuntimeError("Failed to start flow run process.")
            return ProcessWorkerResult(
                status_code=execution.status_code, identifier=str(execution.handle.pid)
            )

    return WorldtraceWorker


def run_worker(
    pool: str, limit: int | None, sandboxes: int | None, name: str | None = None
) -> None:
    """Run a worldtrace worker on ``pool`` in this process until it is stopped.

    It is Prefect's process worker restricted to worldtrace's own flows
    (:func:`worldtrace_worker_class`).
    """
    from prefect.settings import temporary_settings

    from worldtrace.flows.slots import sandbox_machine, set_machine_limit

    require_server()
    ensure_process_pool(pool)
    if sandboxes is not None:
        from worldtrace.sandboxes.remote import SANDBOX_HOST_ENV  # only here: see the imports

        # The machine whose engine runs this worker's sandboxes (WORLDTRACE_SANDBOX_HOST's).
        machine = sandbox_machine(os.environ.get(SANDBOX_HOST_ENV))
        limit_name = set_machine_limit(sandboxes, hostname=machine)
        Console(stderr=True).print(f"{limit_name}: at most {sandboxes} sandbox(es) at once")

    for run_name in reschedule_orphaned_runs(pool):
        Console(stderr=True).print(f"scheduled again: {run_name} (its worker here had died)")

    async def work() -> None:
        worker_name = name or f"{socket.gethostname()}:{os.getpid()}"
        worker_class = worldtrace_worker_class()
        async with worker_class(work_pool_name=pool, limit=limit, name=worker_name) as worker:
            await worker.start()

    with temporary_settings(worker_settings()):
        asyncio.run(work())


def worker_settings() -> dict[Any, Any]:
    """Prefect settings a worldtrace worker changes, where the user did not set them."""
    from prefect.settings import PREFECT_WORKER_QUERY_SECONDS

    if PREFECT_WORKER_QUERY_SECONDS.name in os.environ:
        return {}
    return {PREFECT_WORKER_QUERY_SECONDS: WORKER_QUERY_S}


def process_started_at(pid: int) -> float | None:
    """When process ``pid`` of this machine started (Unix time), or None if there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, IndexError):
        return None
    return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _owned_by_a_live_process(pid: str | None, since: float) -> bool:
    """Whether ``pid`` is a process of this machine started before ``since`` (not a reuse)."""
    if not pid or not pid.isdigit():
        return False
    started = process_started_at(int(pid))
    return started is not None and started <= since + 1.0


def reschedule_orphaned_runs(pool: str) -> list[str]:
    """Schedule again the runs of ``pool`` left Running or Pending by a dead worker of this machine.

    A run is orphaned when the worker named on it (``<this hostname>:<pid>``) and the flow
    run's own process (``infrastructure_pid``) are both gone. Returns the runs' names.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        WorkPoolFilter,
        WorkPoolFilterName,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Scheduled

    host = socket.gethostname()
    state = FlowRunFilterStateType(any_=[StateType.RUNNING, StateType.PENDING])
    rescheduled = []
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(state=FlowRunFilterState(type=state)),
            work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[pool])),
        )
        for run in runs:
            worker_host, _, worker_pid = str(run.labels.get("prefect.worker.name", "")).rpartition(
                ":"
            )
            if worker_host != host:
                continue
            began = run.start_time or run.created or run.expected_start_time
            if began is None:
                continue  # no time to tell a live owner from a reused pid: left as it is
            since = began.timestamp()
            if _owned_by_a_live_process(worker_pid, since) or _owned_by_a_live_process(
                run.infrastructure_pid, since
            ):
                continue
            client.set_flow_run_state(
                run.id,
                Scheduled(message=f"its worker {host}:{worker_pid} died; scheduled again"),
                force=True,
            )
            rescheduled.append(run.name)
    return rescheduled


def register(app: typer.Typer) -> None:
    """Add ``deploy``, ``deployments`` and ``worker`` to the ``worldtrace`` command line."""

    @app.command("deploy")
    def deploy_command(
        config_file: Annotated[
            Path, typer.Argument(help="collection config YAML (a pipeline file with --pipeline)")
        ],
        name: Annotated[str, typer.Option("--name", help="deployment name")],
        cron: Annotated[
            str | None, typer.Option(help="cron schedule, e.g. '0 2 * * *' (UTC)")
        ] = None,
        interval: Annotated[float | None, typer.Option(help="run every this many seconds")] = None,
        pool: Annotated[str, typer.Option(help="process work pool (created if missing)")] = (
            DEFAULT_POOL
        ),
        pipeline: Annotated[
            bool, typer.Option("--pipeline", help="deploy collect → curate → publish")
        ] = False,
        parts: Annotated[
            int, typer.Option(help="split each run into this many parts that workers share")
        ] = 1,
    ) -> None:
        """Deploy a scheduled collection (or pipeline) to a work pool on the Prefect server."""
        deployed = deploy(
            config_file,
            name,
            cron=cron,
            interval=interval,
            pool=pool,
            pipeline=pipeline,
            parts=parts,
        )
        table = Table(title="deployment", show_header=False, title_justify="left")
        for key, value in (
            ("name", ", ".join(deployed.full_names)),
            ("id", ", ".join(deployed.deployment_ids)),
            ("schedule", deployed.schedule),
            ("pool", deployed.pool + (" (created)" if deployed.pool_created else "")),
            (
                "run directories",
                f"{deployed.run_prefix}-<scheduled time>"
                + ("-p<k>of<N>" if len(deployed.full_names) > 1 else ""),
            ),
        ):
            table.add_row(key, value)
        Console().print(table)
        Console(stderr=True).print(
            f"start a worker: worldtrace worker --pool {deployed.pool}", highlight=False
        )

    @app.command("deployments")
    def deployments_command() -> None:
        """List the deployments on the Prefect server with their schedules and next runs."""
        url = require_server()
        rows = list_deployments()
        if not rows:
            Console(stderr=True).print(f"no deployments on {url}", highlight=False)
            return
        table = Table()
        for column in ("deployment", "schedule", "pool", "paused", "next run"):
            # Folded, not cut: a user copies deployment names from here.
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row.values())
        Console().print(table)

    @app.command("worker")
    def worker_command(
        pool: Annotated[str, typer.Option(help="work pool to take flow runs from")] = (
            DEFAULT_POOL
        ),
        limit: Annotated[
            int | None, typer.Option(min=1, help="flow runs at the same time (default: no cap)")
        ] = None,
        sandboxes: Annotated[
            int | None,
            typer.Option(min=1, help="sandboxes at the same time on this machine, all runs"),
        ] = None,
        name: Annotated[str | None, typer.Option(help="worker name shown in Prefect")] = None,
    ) -> None:
        """Run a Prefect process worker that executes the pool's flow runs on this machine."""
        run_worker(pool, limit, sandboxes, name)
