"""Deployments, workers and sandbox limits on a real Prefect server, with real worker processes.

One server for the session, shared with the other tests that need one (it takes ~15 s to come
up: tests/prefect_server.py). Every test drives the ``worldtrace`` command line, as a user
would, and reads the results from the run directories and the server's API. Workers are
``worldtrace worker`` processes; ``deploy`` runs as a process of its own in the sandbox limit
test (while its worker starts) and in this process (typer's runner, :func:`wt_here`) elsewhere:
the same command without a new interpreter's seconds of imports (in the interval test they
would delay its schedule's anchor, and so its first slot). Polls hold one API client each (a
client costs ~0.1 s of CPU to open: settings and TLS context), and a worker starts while its
test deploys, unless the scenario needs it to start later (the backlog, the next worker after a
kill).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import docker
import polars as pl
import pytest
import yaml

from tests.in_process import worldtrace_here
from tests.prefect_server import WORKER_START_TIMEOUT_S, wait_until_polling
from worldtrace.collectors.recorder import read_episode
from worldtrace.flows.scheduled import run_stamp
from worldtrace.flows.slots import machine_limit_name
from worldtrace.sandboxes.docker import LABEL, OWNER_PID_LABEL

pytestmark = pytest.mark.docker

CLI = [sys.executable, "-m", "worldtrace.flows.cli"]


@pytest.fixture
def server(prefect_server: str) -> str:
    """The session's real Prefect server (tests/prefect_server.py): SQLite, its own home, a
    scheduler pass every second. Every test here names its deployments and runs apart; the
    other tests that share the server run flows outside any work pool."""
    return prefect_server


def client_env(url: str) -> dict[str, str]:
    return os.environ | {
        "PREFECT_API_URL": url,
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        # A worker takes a run when it is due, not up to 10 s ahead: a later run of the
        # interval test is never in flight when that test stops the schedule.
        "PREFECT_WORKER_PREFETCH_SECONDS": "0",
        "COLUMNS": "200",  # tables on one line each
    }


@contextmanager
def api(url: str) -> Iterator[Any]:
    """A synchronous Prefect client of the test server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        yield client


def wt(url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=client_env(url), capture_output=True, text=True, timeout=120
    )


def wt_here(url: str, cwd: Path, *args: str) -> Any:
    """``worldtrace ARGS`` in ``cwd`` against ``url``, in this process (tests/in_process.py):
    the command as :func:`wt` runs it, without the ~4 s of CPU a new interpreter spends on
    imports this process has."""
    return worldtrace_here(url, *args, cwd=cwd, env={"COLUMNS": "200"})  # as for `wt`


@contextmanager
def starting_workers(
    url: str, cwd: Path, count: int, *args: str
) -> Iterator[tuple[list[subprocess.Popen[bytes]], Callable[[], None]]]:
    """``count`` ``worldtrace worker`` processes, started together (each start is seconds of
    imports), each killed with everything it started at the end.

    Yields them at once with a function that waits until each polls its pool, so that their
    start overlaps what the test does meanwhile (deploying).
    """
    started: list[tuple[subprocess.Popen[bytes], Path, Any]] = []

    def wait_started() -> None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S  # all of them, started together
        for process, log_path, _ in started:
            wait_until_polling(process, log_path, deadline)

    try:
        for _ in range(count):
            log_path = cwd / f"worker-{time.monotonic_ns()}.log"
            log = log_path.open("wb")
            process = subprocess.Popen(
                [*CLI, "worker", *args],
                cwd=cwd,
                env=client_env(url),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            started.append((process, log_path, log))
        yield [process for process, _, _ in started], wait_started
    finally:
        for process, _, log in started:
            killed = kill_tree(process.pid)
            process.wait()
            log.close()
            remove_sandboxes_of(killed)


@contextmanager
def workers(url: str, cwd: Path, count: int, *args: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """:func:`starting_workers`, yielded once every one of them polls its pool."""
    with starting_workers(url, cwd, count, *args) as (started, wait_started):
        wait_started()
        yield started


@contextmanager
def worker(url: str, cwd: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A ``worldtrace worker`` process, killed with everything it started at the end."""
    with workers(url, cwd, 1, *args) as (process,):
        yield process


@contextmanager
def starting_worker(
    url: str, cwd: Path, *args: str
) -> Iterator[tuple[subprocess.Popen[bytes], Callable[[], None]]]:
    """:func:`starting_workers` of one."""
    with starting_workers(url, cwd, 1, *args) as ((process,), wait_started):
        yield process, wait_started


def process_children() -> dict[int, list[int]]:
    """Each live process's children, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with suppress(OSError):
                stat = (entry / "stat").read_text()
                parent = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    return children


def descendants(pid: int, children: dict[int, list[int]] | None = None) -> list[int]:
    """Every live descendant of ``pid`` (flow runs are children in sessions of their own)."""
    children = process_children() if children is None else children
    found, queue = [], [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def kill_tree(pid: int) -> list[int]:
    """SIGKILL a process and all its descendants at once, as a machine crash would."""
    targets = [pid, *descendants(pid)]
    for target in targets:
        with suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)
    return targets


def remove_sandboxes_of(pids: list[int]) -> None:
    """Remove the sandboxes the killed processes left (only theirs: others' tests run too)."""
    owners = {str(pid) for pid in pids}
    # One listing for all of them; sparse: no inspection of each sandbox (its labels are there).
    client = docker.from_env()
    for container in client.containers.list(all=True, sparse=True, filters={"label": LABEL}):
        if (container.attrs.get("Labels") or {}).get(OWNER_PID_LABEL) not in owners:
            continue
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass  # gone since the listing (removed by whoever found its owner dead)
        except docker.errors.APIError as error:
            if error.status_code != 409:  # removal already in progress (auto_remove)
                raise


def write_config(folder: Path, **fields: Any) -> Path:
    config = {
        "domain": "terminal",
        "episodes": 2,
        "workers": 1,
        "out": "runs",
        "max_steps": 2,
        "policy": {"kind": "script", "tasks": ["word-frequency"]},
    } | fields
    path = folder / "collect.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def wait_for_final_state(url: str, flow_run_id: Any, timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    with api(url) as client:  # one client for the whole wait: a read is then ~3 ms of CPU
        while time.monotonic() < deadline:
            run = client.read_flow_run(flow_run_id)
            if run.state is not None and run.state.is_final():
                return run
            time.sleep(0.25)
    pytest.fail(f"flow run {flow_run_id} did not finish in {timeout} s (state {run.state})")


def start_run(url: str, deployment: str) -> Any:
    with api(url) as client:
        found = client.read_deployment_by_name(deployment)
        return client.create_flow_run_from_deployment(found.id).id


def sealed(run_dir: Path) -> dict[str, list[Any]]:
    return {
        path.stem: list(read_episode(path))
        for path in sorted((run_dir / "raw" / "episodes").glob("*.jsonl"))
    }


def assert_complete_run(run_dir: Path, episodes: int, first_seed: int = 0) -> dict[str, list[Any]]:
    """Every episode sealed once with one start and one end; transitions unique and complete."""
    recorded = sealed(run_dir)
    seeds = range(first_seed, first_seed + episodes)
    assert set(recorded) == {f"{run_dir.name}-s{seed:06d}" for seed in seeds}
    for events in recorded.values():
        kinds = [event.type for event in events]
        assert kinds.count("start") == 1 and kinds.count("end") == 1
        steps = [event.step for event in events if event.type == "step"]
        assert steps and steps == list(range(len(steps)))
    frame = pl.read_parquet(run_dir / "transitions" / "terminal" / "*.parquet")
    assert frame["id"].n_unique() == frame.height
    assert frame.height == sum(
        sum(event.type == "step" for event in events) for events in recorded.values()
    )
    assert not list((run_dir / "raw" / "partial").glob("*.jsonl"))
    return recorded


@pytest.mark.parametrize(
    ("fields", "flags", "message"),
    [
        ({"episodes": 0}, ["--interval", "60"], "episodes"),
        ({"domain": "fax"}, ["--interval", "60"], "no collector for domain 'fax'"),
        ({}, ["--cron", "every day"], "not a valid cron expression"),
        ({}, ["--interval", "0"], "--interval must be a positive number"),
        ({}, ["--interval", "60", "--cron", "0 2 * * *"], "not both"),
        ({}, ["--interval", "60", "--name", "a/b"], "--name 'a/b'"),
    ],
)
def test_bad_input_creates_nothing(
    server: str, tmp_path: Path, fields: dict[str, Any], flags: list[str], message: str
) -> None:
    from prefect.exceptions import ObjectNotFound

    config = write_config(tmp_path, **fields)
    # A flag given twice: the last one counts (--name).
    args = ["deploy", str(config), "--name", "bad", "--pool", "never-made", *flags]
    result = wt_here(server, tmp_path, *args)
    assert result.exit_code == 2, result.output
    assert "error: " in result.output and message in result.output
    assert "Traceback" not in result.output
    with api(server) as client:
        assert not [d for d in client.read_deployments() if d.name == "bad"]
        with pytest.raises(ObjectNotFound):
            client.read_work_pool("never-made")


def test_deploy_registers_the_deployment_where_an_event_loop_runs(
    server: str, tmp_path: Path
) -> None:
    # A thread whose loop is marked running (a notebook; a thread that drove Playwright's
    # sync API, as the web tests do in this process): Prefect's apply() handed back a
    # coroutine, and deploy reported its repr as the id of a deployment it never made.
    import asyncio

    from prefect.settings import PREFECT_API_URL, temporary_settings

    from worldtrace.flows.deploy import deploy

    async def deploy_in_a_running_loop() -> Any:
        return deploy(write_config(tmp_path), "in-a-loop", interval=3600)

    with temporary_settings({PREFECT_API_URL: server}):
        deployed = asyncio.run(deploy_in_a_running_loop())
    with api(server) as client:
        found = client.read_deployment_by_name("scheduled-collect/in-a-loop")
        client.delete_deployment(found.id)
    assert deployed.deployment_ids == [str(found.id)]


def test_an_interval_deployment_is_run_by_a_worker(server: str, tmp_path: Path) -> None:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    config = write_config(tmp_path, episodes=1)
    by_name = DeploymentFilter(name=DeploymentFilterName(any_=["often"]))
    # The worker starts while the deployment is made: it polls before the first slot, one
    # interval after deploying. (Not a shorter interval: the next slot would always be within
    # DUE_MARGIN_S when the schedule stops, left to the worker.)
    with starting_worker(server, tmp_path, "--pool", "worldtrace", "--limit", "2") as (_, started):
        deployed = wt_here(
            server, tmp_path, "deploy", str(config), "--name", "often", "--interval", "10"
        )
        assert deployed.exit_code == 0, deployed.output
        assert "scheduled-collect/often" in deployed.stdout
        listing = wt_here(server, tmp_path, "deployments")
        assert listing.exit_code == 0, listing.output
        assert "scheduled-collect/often" in listing.stdout and "every 10 s" in listing.stdout
        started()
        # Once the worker took a run, the deployment is paused (its later runs are deleted)
        # and every run it took is awaited.
        deadline = time.monotonic() + 60
        with api(server) as client:
            while not api_runs(client, by_name, taken_only=True):
                assert time.monotonic() < deadline, "no scheduled run was taken by the worker"
                time.sleep(0.2)
        stop_scheduling(server, "scheduled-collect/often", by_name)
        # Every run the worker took or may still take (one that was due when the schedule
        # stopped) is awaited: one, unless the worker started later than a slot or two.
        finished: dict[Any, Any] = {}
        while taken := [
            run
            for run in api_runs(server, by_name)
            if run.id not in finished and (not run.state.is_scheduled() or is_due(run))
        ]:
            assert len(finished) < 6, "runs kept coming after the deployment was paused"
            finished |= {run.id: wait_for_final_state(server, run.id) for run in taken}
            if all(run.id in finished for run in api_runs(server, by_name)):
                break  # none left, scheduled or taken: none can come (paused, and quiet)
            time.sleep(2)  # longer than the worker's query interval
    # A slot that came due while the previous run was going is skipped (flows/deploy.py).
    completed = [run for run in finished.values() if run.state.is_completed()]
    skipped = [run for run in finished.values() if not run.state.is_completed()]
    assert completed, finished
    assert all(
        run.state.is_cancelled() and "concurrency limit" in (run.state.message or "")
        for run in skipped
    ), finished
    latencies = []
    for run in completed:
        run_dir = tmp_path / "runs" / f"often-{run_stamp(run.expected_start_time)}"
        recorded = assert_complete_run(run_dir, episodes=1)
        steps = [event for events in recorded.values() for event in events if event.type == "step"]
        latencies.append(
            (min(s.started_at for s in steps) - run.expected_start_time).total_seconds()
        )
    # One run directory per scheduled time that ran, nothing else.
    assert len(list((tmp_path / "runs").iterdir())) == len(completed)
    print(f"\nscheduling latency (scheduled time to first step): {latencies} s")
    assert min(latencies) >= 0


DUE_MARGIN_S = 5.0
"""A scheduled run starting sooner than this may be taken by the worker at any moment."""


def is_due(run: Any) -> bool:
    """Whether a scheduled run is (nearly) due, so the worker (prefetch 0) may take it now."""
    return run.expected_start_time.timestamp() <= time.time() + DUE_MARGIN_S


def stop_scheduling(url: str, deployment: str, deployment_filter: Any) -> None:
    """Pause a deployment and delete its runs not yet due, as long as the scheduler adds some.

    Pausing deletes them too, but a scheduler pass that read the deployment just before may
    insert a batch after (seen here: 33 runs every 10 s after a pause). A run that is due is
    left to the worker: deleting it could race the worker taking it (the worker would run a
    flow run the server no longer has, leaving a run folder nobody awaits). Each run is read
    again just before it is deleted, so the decision is never made on a stale listing.
    """
    with api(url) as client:
        client.pause_deployment(client.read_deployment_by_name(deployment).id)
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 3:  # three scheduler passes
            for listed in client.read_flow_runs(deployment_filter=deployment_filter):
                run = client.read_flow_run(listed.id)
                if run.state.is_scheduled() and not is_due(run):
                    client.delete_flow_run(run.id)
                    quiet_since = time.monotonic()
            time.sleep(0.2)


def api_runs(server: Any, deployment_filter: Any, taken_only: bool = False) -> list[Any]:
    """The flow runs of the deployments ``deployment_filter`` selects; with ``taken_only``,
    those no longer Scheduled (filtered by the server: an interval deployment has ~100
    scheduled). ``server`` is an API client, or a URL to open one for this listing."""
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    if isinstance(server, str):
        with api(server) as client:
            return api_runs(client, deployment_filter, taken_only)
    not_scheduled = FlowRunFilterStateType(not_any_=[StateType.SCHEDULED])
    flow_run_filter = FlowRunFilter(state=FlowRunFilterState(type=not_scheduled))
    return server.read_flow_runs(
        deployment_filter=deployment_filter, flow_run_filter=flow_run_filter if taken_only else None
    )


def test_a_sandbox_limit_of_one_is_respected(server: str, tmp_path: Path) -> None:
    from prefect.exceptions import ObjectNotFound

    config = write_config(tmp_path, episodes=2, workers=2)
    try:
        # The worker sets the limit before it polls: it exists before the run is taken.
        with starting_worker(server, tmp_path, "--pool", "worldtrace", "--sandboxes", "1") as (
            _,
            started,
        ):
            # `worldtrace deploy` as a process of its own here, while the worker starts.
            deployed = wt(server, tmp_path, "deploy", str(config), "--name", "limited")
            assert deployed.returncode == 0, deployed.stderr
            assert "scheduled-collect/limited" in deployed.stdout
            flow_run_id = start_run(server, "scheduled-collect/limited")
            started()
            finished = wait_for_final_state(server, flow_run_id)
        with api(server) as client:
            limit = client.read_global_concurrency_limit_by_name(machine_limit_name())
        assert limit.limit == 1
    finally:
        with api(server) as client, suppress(ObjectNotFound):  # none if the worker never began
            client.delete_global_concurrency_limit_by_name(machine_limit_name())
    assert finished.state.is_completed(), finished.state
    run_dir = tmp_path / "runs" / f"limited-{run_stamp(finished.expected_start_time)}"
    recorded = assert_complete_run(run_dir, episodes=2)
    # Two episodes, two threads, one slot: the sandboxes lived one after the other.
    lifetimes = sorted((events[0].started_at, events[-1].ended_at) for events in recorded.values())
    for (_, ended), (started_at, _) in itertools.pairwise(lifetimes):
        assert ended <= started_at, lifetimes


def test_a_backlog_of_late_runs_drains_as_one_run_with_concurrent_workers(
    server: str, tmp_path: Path
) -> None:
    """Six runs that came due while no worker ran, then two workers at once (issue 24).

    Before, each worker submitted every late run at once: on SQLite the server answered 503
    (`database is locked`) and runs were lost. The rule (flows/deploy.py): one run of a
    deployment at a time, a run due while another is going is skipped, Cancelled.
    """
    from datetime import UTC, timedelta

    from prefect.states import Scheduled

    config = write_config(tmp_path, episodes=1, max_steps=2)
    deployed = wt_here(server, tmp_path, "deploy", str(config), "--name", "backlog")
    assert deployed.exit_code == 0, deployed.output
    now = datetime.now(UTC)
    with api(server) as client:
        deployment = client.read_deployment_by_name("scheduled-collect/backlog")
        run_ids = [
            client.create_flow_run_from_deployment(
                deployment.id, state=Scheduled(scheduled_time=now - timedelta(seconds=30 * k))
            ).id
            for k in range(6, 0, -1)
        ]
    with workers(server, tmp_path, 2, "--pool", "worldtrace") as started:
        finished = [wait_for_final_state(server, run_id) for run_id in run_ids]
        logs = [path.read_text() for path in tmp_path.glob("worker-*.log")]
        assert all(process.poll() is None for process in started)
    states = [run.state for run in finished]
    completed = [run for run in finished if run.state.is_completed()]
    skipped = [run for run in finished if run.state.is_cancelled()]
    assert len(completed) == 1 and len(skipped) == 5, [(s.type, s.message) for s in states]
    assert all("concurrency limit" in (run.state.message or "") for run in skipped)
    # Nothing was lost on the way: no submission failed, no run could not reach the server.
    assert not [log for log in logs if "Failed to submit" in log or "ConnectError" in log]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name == f"backlog-{run_stamp(completed[0].expected_start_time)}"
    assert_complete_run(run_dir, episodes=1)


def test_a_killed_worker_leaves_a_run_the_next_worker_completes(
    server: str, tmp_path: Path
) -> None:
    # Two episodes at a time: the first to be sealed finds the other one half recorded (or
    # the third, started in its place), and the next worker records what is left at once.
    config = write_config(tmp_path, episodes=3, max_steps=3, workers=2)
    with starting_worker(server, tmp_path, "--pool", "worldtrace") as (first, started):
        deployed = wt_here(server, tmp_path, "deploy", str(config), "--name", "killed")
        assert deployed.exit_code == 0, deployed.output
        flow_run_id = start_run(server, "scheduled-collect/killed")
        with api(server) as client:
            expected: datetime = client.read_flow_run(flow_run_id).expected_start_time
        run_dir = tmp_path / "runs" / f"killed-{run_stamp(expected)}"
        started()
        deadline = time.monotonic() + 120
        # Kill while one episode is sealed and another is half recorded.
        while time.monotonic() < deadline:
            done = list((run_dir / "raw" / "episodes").glob("*.jsonl"))
            partial = [
                p
                for p in (run_dir / "raw" / "partial").glob("*.jsonl")
                if len(p.read_text().splitlines()) >= 2
            ]
            if done and partial:
                break
            assert first.poll() is None, "the worker ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the run never had a sealed and a partial episode at once")
        kill_tree(first.pid)
    sealed_before = {p.name: p.read_bytes() for p in (run_dir / "raw" / "episodes").iterdir()}
    assert 0 < len(sealed_before) < 3

    # Nothing told the server: the run still says Running.
    with api(server) as client:
        assert client.read_flow_run(flow_run_id).state.is_running()
    # The next worker on this machine sees its dead predecessor's run and schedules it again.
    with worker(server, tmp_path, "--pool", "worldtrace"):
        finished = wait_for_final_state(server, flow_run_id)
    assert finished.state.is_completed(), finished.state
    with api(server) as client:
        history = client.read_flow_run_states(flow_run_id)
    assert any("died; scheduled again" in (state.message or "") for state in history)
    assert finished.expected_start_time == expected
    assert_complete_run(run_dir, episodes=3)
    for name, content in sealed_before.items():
        assert (run_dir / "raw" / "episodes" / name).read_bytes() == content
    assert list((run_dir / "raw" / "interrupted").glob("*.jsonl"))
    assert not [p for p in (tmp_path / "runs").iterdir() if p != run_dir]
    episodes = pl.read_parquet(run_dir / "episodes.parquet")
    assert episodes.height == 3 and episodes["episode_id"].n_unique() == 3
    print(json.dumps({"sealed_before_kill": len(sealed_before)}))


def test_a_scheduled_pipeline_curates_every_run_of_its_deployment(
    server: str, tmp_path: Path, terminal_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process, on the session's server (not a temporary API of its own, ~16 s of CPU
    # to start): a flow run's expected start time is its creation.
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from worldtrace.flows.pipeline import file_sha256
    from worldtrace.flows.scheduled import scheduled_pipeline

    pipeline_file = tmp_path / "pipeline.yaml"
    pipeline_file.write_text(
        yaml.safe_dump(
            {
                "collect": {
                    "domain": "terminal",
                    "episodes": 1,
                    "out": str(tmp_path / "runs"),
                    "max_steps": 2,
                    "policy": {"kind": "script", "tasks": ["word-frequency"]},
                },
                "corpus": str(tmp_path / "corpus"),
                "publish": {"to": str(tmp_path / "dist")},
            }
        )
    )
    sha256 = file_sha256(pipeline_file)
    monkeypatch.setenv("PREFECT_API_URL", server)  # and for what the flows start
    with temporary_settings({PREFECT_API_URL: server}):
        first = scheduled_pipeline(str(pipeline_file), sha256, "nightly")
        second = scheduled_pipeline(str(pipeline_file), sha256, "nightly")

    runs = sorted(path.name for path in (tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all(name.startswith("nightly-") for name in runs)
    assert first["curate"]["runs"] == 1 and second["curate"]["runs"] == 2
    # The second corpus read both runs' transitions; each run published its own folder.
    assert second["curate"]["rows_in"] == 2 * first["curate"]["rows_in"] > 0
    assert Path(second["curate"]["corpus"]) == tmp_path / "corpus" / runs[1]
    assert sorted(path.name for path in (tmp_path / "dist").iterdir()) == runs
    assert second["publish"]["rows"] >= first["publish"]["rows"] > 0


def test_a_remote_sandbox_host_is_limited_as_its_own_machine() -> None:
    from worldtrace.flows.slots import sandbox_machine

    assert sandbox_machine("ssh://collector@build-1:2222") == "build-1"
    assert sandbox_machine("tcp://build-1:2376") == "build-1"
    assert sandbox_machine(None) is None
    assert machine_limit_name(sandbox_machine("ssh://u@build-1")) == "sandboxes-build-1"
    assert machine_limit_name() == f"sandboxes-{socket.gethostname()}"


def test_two_workers_share_the_parts_of_a_run(server: str, tmp_path: Path) -> None:
    # Part 1's two episodes at once: the run takes one episode's time, not two.
    config = write_config(tmp_path, episodes=3, workers=2)
    with starting_workers(server, tmp_path, 2, "--pool", "worldtrace", "--limit", "1") as (
        (first, second),
        started,
    ):
        deployed = wt_here(
            server, tmp_path, "deploy", str(config), "--name", "shared", "--parts", "2"
        )
        assert deployed.exit_code == 0, deployed.output
        assert "shared-p1of2" in deployed.stdout and "shared-p2of2" in deployed.stdout
        started()  # both poll before the parts exist: neither can take both
        ids = [start_run(server, f"scheduled-collect/shared-p{k}of2") for k in (1, 2)]
        # Which worker ran each part: the parent of the flow run's process (Prefect records
        # its pid as the run's infrastructure pid), read while it runs.
        ran_on: dict[Any, int] = {}
        deadline = time.monotonic() + 240
        with api(server) as client:
            while len(ran_on) < 2 and time.monotonic() < deadline:
                runs = [client.read_flow_run(flow_run_id) for flow_run_id in ids]
                found = [run for run in runs if run.id not in ran_on and run.infrastructure_pid]
                children = process_children() if found else {}
                for run in found:
                    pid = int(run.infrastructure_pid.rsplit(":", 1)[-1])
                    for owner in (first, second):
                        if pid in descendants(owner.pid, children):
                            ran_on[run.id] = owner.pid
                time.sleep(0.1)
        finished = [wait_for_final_state(server, flow_run_id) for flow_run_id in ids]
    assert all(run.state.is_completed() for run in finished), finished
    # Each worker takes one flow run at a time: the two parts ran on the two workers.
    assert sorted(ran_on.values()) == sorted([first.pid, second.pid]), ran_on
    # Part 1 holds seeds 0 and 1, part 2 seed 2: every episode of the config exactly once.
    for k, run, episodes, first_seed in ((1, finished[0], 2, 0), (2, finished[1], 1, 2)):
        run_dir = tmp_path / "runs" / f"shared-{run_stamp(run.expected_start_time)}-p{k}of2"
        recorded = assert_complete_run(run_dir, episodes, first_seed)
        assert [events[0].seed for events in recorded.values()] == list(
            range(first_seed, first_seed + episodes)
        )
    assert len(list((tmp_path / "runs").iterdir())) == 2
