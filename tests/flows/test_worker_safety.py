"""A ``worldtrace worker`` runs worldtrace's own flows and nothing else (issue 24).

The attack as it was done: a client of the server (which needs no credentials on loopback)
creates deployments on the worker's pool through Prefect's own client, one whose job variables
set ``command`` to a shell command, one whose entrypoint is a flow of its own, and others that
inject code through ``env`` or a working folder anyone can write, and starts a flow run of
each. A real ``worldtrace worker`` process polls the pool of the session's real Prefect server
(tests/prefect_server.py). No marker file may appear, and each run must end with a state whose
message says why it was refused; a deployment made by ``worldtrace deploy`` still runs, on the
same worker (one for the module: its start is seconds of imports, made while a test sets up).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.in_process import worldtrace_here
from tests.prefect_server import wait_until_polling
from worldtrace.flows.deploy import RefusedFlowRun, check_flow_run, check_working_dir

CLI = [sys.executable, "-m", "worldtrace.flows.cli"]
COLLECT = "worldtrace.flows.scheduled.scheduled_collect"
FINAL_TIMEOUT_S = 240
"""A refused run ends within a worker poll (1 s here); a legit one-step collection takes 10 to
30 s idle, minutes at load averages near 20."""


def client_env(url: str) -> dict[str, str]:
    """The environment of ``worldtrace`` commands pointed at the test server, polling often."""
    return os.environ | {
        "PREFECT_API_URL": url,
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "PREFECT_WORKER_PREFETCH_SECONDS": "0",
    }


@contextmanager
def api(url: str) -> Iterator[Any]:
    """A synchronous Prefect client of the test server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        yield client


@dataclass(frozen=True)
class Worker:
    """A ``worldtrace worker`` process polling ``pool``, writing to ``log``."""

    pool: str
    log: Path
    process: subprocess.Popen[bytes]

    def started(self) -> Path:
        """Wait until it polls its pool (and check it still does); return its log file."""
        wait_until_polling(self.process, self.log)
        assert self.process.poll() is None, self.log.read_text()  # an earlier test's worker
        return self.log


@contextmanager
def worker(url: str, cwd: Path, pool: str) -> Iterator[Worker]:
    """A real ``worldtrace worker`` process on ``pool``, not waited for (:meth:`Worker.started`),
    stopped at the end."""
    log_path = cwd / "worker.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [*CLI, "worker", "--pool", pool],
            cwd=cwd,
            env=client_env(url),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield Worker(pool, log_path, process)
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="module")
def pool_worker(prefect_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Worker]:
    """The module's worker, on a process pool of its own (made as Prefect makes one), started
    without waiting: each test sets up its runs while it starts, then waits for it."""
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    pool = f"safety-{uuid.uuid4().hex[:8]}"
    with api(prefect_server) as client:
        client.create_work_pool(
            WorkPoolCreate(
                name=pool,
                type="process",
                base_job_template=ProcessWorker.get_default_base_job_template(),
            )
        )
    with worker(prefect_server, tmp_path_factory.mktemp("worker"), pool) as started:
        yield started


def wait_for_final_states(url: str, runs: dict[str, Any], markers: list[Path]) -> dict[str, Any]:
    """Each run's final state; fails at once when a marker appears (the attack ran)."""
    deadline = time.monotonic() + FINAL_TIMEOUT_S
    final: dict[str, Any] = {}
    with api(url) as client:  # one client for the whole wait (~0.1 s of CPU to open one)
        while len(final) < len(runs):
            planted = [marker for marker in markers if marker.exists()]
            assert not planted, f"the worker ran the attacker's code: {planted}"
            for name, run_id in runs.items():
                run = client.read_flow_run(run_id)
                if run.state is not None and run.state.is_final():
                    final[name] = run
            if time.monotonic() > deadline:
                pending = sorted(set(runs) - set(final))
                pytest.fail(f"runs {pending} did not finish within {FINAL_TIMEOUT_S} s")
            time.sleep(0.3)
    return final


def write_config(folder: Path) -> Path:
    """A one-episode, one-step terminal collection recording into ``folder/runs``."""
    path = folder / "collect.yaml"
    config = {
        "domain": "terminal",
        "episodes": 1,
        "workers": 1,
        "out": "runs",
        "max_steps": 1,
        "policy": {"kind": "script", "tasks": ["word-frequency"]},
    }
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.docker
def test_the_worker_refuses_foreign_commands_entrypoints_and_variables(
    prefect_server: str, pool_worker: Worker, tmp_path: Path
) -> None:
    url, pool = prefect_server, pool_worker.pool
    names = ("command", "entrypoint", "env", "working_dir")
    markers = {name: tmp_path / f"marker-{name}" for name in names}
    # A flow of the attacker's own, and a module on a path it injects.
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "evil.py").write_text(
        "from pathlib import Path\nfrom prefect import flow\n\n"
        f"@flow\ndef evil() -> None:\n    Path({str(markers['entrypoint'])!r}).touch()\n"
    )
    (evil / "sitecustomize.py").write_text(
        f"from pathlib import Path\nPath({str(markers['env'])!r}).touch()\n"
    )
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)  # anyone can plant a package there that shadows Prefect's
    (open_folder / "prefect").mkdir()
    for module in ("__init__.py", "engine.py"):
        (open_folder / "prefect" / module).write_text(
            f"from pathlib import Path\nPath({str(markers['working_dir'])!r}).touch()\n"
        )
    collect_parameters = {"config_file": "/nonexistent", "config_sha256": "0", "run_prefix": "x"}
    attacks: dict[str, dict[str, Any]] = {
        "command": {
            "entrypoint": COLLECT,
            "job_variables": {"command": f"sh -c 'touch {markers['command']}'"},
            "parameters": collect_parameters,
            "why": "job variable(s) command would change what the worker executes",
        },
        "entrypoint": {
            "entrypoint": f"{evil / 'evil.py'}:evil",
            "job_variables": {},
            "parameters": {},
            "why": "is not one of worldtrace's flows",
        },
        "env": {
            "entrypoint": COLLECT,
            "job_variables": {"env": {"PYTHONPATH": str(evil)}},
            "parameters": collect_parameters,
            "why": "job variable(s) env would change what the worker executes",
        },
        "working_dir": {
            "entrypoint": COLLECT,
            "job_variables": {"working_dir": str(open_folder)},
            "parameters": collect_parameters,
            "why": "is writable by other users",
        },
    }
    with api(url) as client:
        flow_id = client.create_flow_from_name("scheduled-collect")
        runs: dict[str, Any] = {}
        for name, attack in attacks.items():
            deployment_id = client.create_deployment(
                flow_id=flow_id,
                name=f"{pool}-{name}",
                entrypoint=attack["entrypoint"],
                work_pool_name=pool,
                job_variables=attack["job_variables"],
                parameters=attack["parameters"],
            )
            runs[name] = client.create_flow_run_from_deployment(deployment_id).id

    log = pool_worker.started()
    final = wait_for_final_states(url, runs, list(markers.values()))
    for name, attack in attacks.items():
        state = final[name].state
        assert not state.is_completed(), (name, state)
        assert state.message and "refused by the worldtrace worker" in state.message, (name, state)
        assert attack["why"] in state.message, (name, state.message)
    assert not [marker for marker in markers.values() if marker.exists()]
    # Each refusal is a line of the worker's own output too, for whoever runs it.
    lines = log.read_text().splitlines()
    for name, run_id in runs.items():
        said = [line for line in lines if str(run_id) in line]
        assert said and "refused by the worldtrace worker" in said[0], (name, lines)


@pytest.mark.docker
def test_a_worldtrace_deployment_still_runs(
    prefect_server: str, pool_worker: Worker, terminal_image: str, tmp_path: Path
) -> None:
    url, pool = prefect_server, pool_worker.pool
    config = write_config(tmp_path)
    deployed = deploy_here(url, tmp_path, str(config), "--name", pool, "--pool", pool)
    assert deployed.exit_code == 0, deployed.output
    with api(url) as client:
        deployment = client.read_deployment_by_name(f"scheduled-collect/{pool}")
        assert deployment.entrypoint == COLLECT
        run_id = client.create_flow_run_from_deployment(deployment.id).id
    pool_worker.started()
    (run,) = wait_for_final_states(url, {"legit": run_id}, []).values()
    assert run.state.is_completed(), run.state
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert list((run_dir / "raw" / "episodes").glob("*.jsonl"))


def deploy_here(url: str, cwd: Path, *args: str) -> Any:
    """``worldtrace deploy ARGS`` in ``cwd`` against ``url``, in this process
    (tests/in_process.py): without the ~4 s of CPU a new interpreter spends on imports."""
    return worldtrace_here(url, "deploy", *args, cwd=cwd)


def test_check_flow_run_names_what_it_refuses(tmp_path: Path) -> None:
    allowed = check_flow_run(COLLECT, None, {"working_dir": str(tmp_path)}, False, {}, tmp_path)
    assert allowed == COLLECT
    cases: list[tuple[tuple[Any, ...], str]] = [
        (("os.system", None, {}, False, {}, None), "'os.system' is not one of worldtrace's"),
        ((COLLECT, [{"run_shell_script": {}}], {}, False, {}, None), "pull steps"),
        ((COLLECT, None, {"image": "x"}, False, {}, None), "job variable(s) image"),
        ((COLLECT, None, {}, True, {}, None), "job template sets a command"),
        ((COLLECT, None, {}, False, {"LD_PRELOAD": "x"}, None), "LD_PRELOAD"),
    ]
    for arguments, message in cases:
        with pytest.raises(RefusedFlowRun) as refused:
            check_flow_run(*arguments)
        assert message in str(refused.value)


def test_a_working_dir_another_user_owns_or_can_write_is_refused(tmp_path: Path) -> None:
    check_working_dir(tmp_path)
    # A folder of another user: a test run as root gives one to nobody; otherwise the
    # worker's user is told to be someone else.
    other = tmp_path / "other"
    other.mkdir()
    uid = os.geteuid()
    if uid == 0:
        os.chown(other, 65534, -1)
    else:
        uid += 12345
    with pytest.raises(RefusedFlowRun, match="belongs to uid"):
        check_working_dir(other, uid=uid)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    with pytest.raises(RefusedFlowRun, match="writable by other users"):
        check_working_dir(shared)
    # Below a shared sticky folder (as /tmp is), a private folder is fine...
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "mine").mkdir(mode=0o700)
    check_working_dir(sticky / "mine")
    # ...but below a shared folder that is not sticky, anyone may swap it.
    (shared / "mine").mkdir(mode=0o700)
    with pytest.raises(RefusedFlowRun, match="writable by other users"):
        check_working_dir(shared / "mine")
    with pytest.raises(RefusedFlowRun, match="cannot be used"):
        check_working_dir(tmp_path / "missing")
