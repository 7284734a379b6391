"""Overhead of collecting through a deployment and a worker, against the CLI, in one run.

Usage: ``.venv/bin/python benchmarks/orchestration.py [--episodes 50] [--workers 2]``

Everything runs against one real Prefect server (``worldtrace server start``, SQLite, a home
of its own under a temporary folder) with the commands a user runs:

1. **CLI**: ``worldtrace collect --config collect.yaml`` (the terminal domain, a scripted task,
   ``--episodes`` episodes, ``--workers`` at a time), timed from the command's start to its
   exit.
2. **Deployment**: the same config (another run directory) deployed with ``worldtrace deploy``
   to a pool served by one ``worldtrace worker`` (default settings: it polls every 10 s); a flow
   run is created through the API and timed from its creation to its Completed state (the
   *total*: waiting for the worker's poll, the flow run's process starting, the collection),
   and from its start to its end as the server recorded them (the *execution*).
The two alternate over ``--rounds`` rounds (CLI then deployment, then deployment then CLI, …),
each run into a run directory of its own, so that a drift in the machine's load (other work,
a warming page cache) falls on both alike.

Overhead = mean deployment / mean CLI - 1, for the total and for the execution (target ≤ 5 %).

3. **Scheduling latency**: a deployment of a one-episode, one-step config with
   ``--interval`` (default 30 s) on the same worker; for ``--scheduled`` runs, the time from
   each run's scheduled time to its first step's start (from the run directory's raw
   episode), with the server's and the worker's default settings.

Prints a table; writes ``benchmarks/results/orchestration.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from common import loadavg, log, machine_info, write_report
from rich.console import Console
from rich.table import Table

from worldtrace.collectors.recorder import read_episode

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLI = [sys.executable, "-m", "worldtrace.flows.cli"]
TASK = "word-frequency"
POOL = "bench-orchestration"


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wt(env: dict[str, str], cwd: Path, *args: str, timeout: float = 3600) -> str:
    """Run a ``worldtrace`` command; its output, or an error with it when it fails."""
    done = subprocess.run(
        [*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"worldtrace {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


@contextmanager
def prefect_server(folder: Path) -> Iterator[dict[str, str]]:
    """A managed Prefect server of this benchmark's own; yields the environment reaching it."""
    env = os.environ | {
        "WORLDTRACE_SERVER_HOME": str(folder / "server"),
        "PREFECT_HOME": str(folder / "prefect-home"),
        "COLUMNS": "200",
    }
    env.pop("PREFECT_API_URL", None)
    port = str(free_port())
    wt(env, folder, "server", "start", "--port", port)
    try:
        yield env | {"PREFECT_API_URL": f"http://127.0.0.1:{port}/api"}
    finally:
        wt(env, folder, "server", "stop")


@contextmanager
def worker(env: dict[str, str], cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A ``worldtrace worker`` on the benchmark's pool, stopped (with its runs) at the end."""
    log_path = cwd / "worker.log"
    with log_path.open("wb") as output:
        process = subprocess.Popen(
            [*CLI, "worker", "--pool", POOL],
            cwd=cwd,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 120
            while b"started!" not in log_path.read_bytes():
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the worker did not start:\n" + log_path.read_text())
                time.sleep(0.2)
            yield process
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@contextmanager
def api(env: dict[str, str]) -> Iterator[Any]:
    """A synchronous client of the benchmark's server."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings({PREFECT_API_URL: env["PREFECT_API_URL"]}),
        get_client(sync_client=True) as client,
    ):
        yield client


def write_config(path: Path, episodes: int, workers: int, out: str, **fields: Any) -> Path:
    """A terminal collection config with the benchmark's task."""
    config = {
        "domain": "terminal",
        "episodes": episodes,
        "workers": workers,
        "out": out,
        "policy": {"kind": "script", "tasks": [TASK]},
    } | fields
    path.write_text(yaml.safe_dump(config))
    return path


def time_cli(env: dict[str, str], folder: Path, config: Path) -> float:
    """Seconds ``worldtrace collect --config`` takes, start to exit."""
    started = time.perf_counter()
    wt(env, folder, "collect", "--config", str(config))
    return time.perf_counter() - started


def time_deployment_run(env: dict[str, str], deployment: str) -> dict[str, float]:
    """Create a flow run of ``deployment``; seconds to Completed, and its own start to end."""
    with api(env) as client:
        found = client.read_deployment_by_name(deployment)
        started = time.perf_counter()
        run_id = client.create_flow_run_from_deployment(found.id).id
    while True:
        with api(env) as client:
            run = client.read_flow_run(run_id)
        if run.state is not None and run.state.is_final():
            total = time.perf_counter() - started
            break
        time.sleep(0.25)
    if not run.state.is_completed():
        raise RuntimeError(f"the deployment's run ended {run.state.name}: {run.state.message}")
    execution = (run.end_time - run.start_time).total_seconds()
    return {"total_s": total, "execution_s": execution}


def first_step_at(run_dir: Path) -> datetime:
    """When the first step of the run's first sealed episode started."""
    for path in sorted((run_dir / "raw" / "episodes").glob("*.jsonl")):
        for event in read_episode(path):
            if event.type == "step":
                return event.started_at
    raise RuntimeError(f"{run_dir} has no recorded step")


def scheduling_latency(
    env: dict[str, str], folder: Path, interval_s: float, runs: int
) -> list[float]:
    """Seconds from each scheduled time to the run's first step, for ``runs`` runs."""
    config = write_config(folder / "latency.yaml", 1, 1, "latency-runs", max_steps=1)
    wt(env, folder, "deploy", str(config), "--name", "latency", "--interval", str(interval_s),
       "--pool", POOL)  # fmt: skip
    latencies: list[float] = []
    seen: set[str] = set()
    deadline = time.monotonic() + interval_s * (runs + 3) + 120
    with api(env) as client:
        deployment = client.read_deployment_by_name("scheduled-collect/latency")
    while len(latencies) < runs and time.monotonic() < deadline:
        time.sleep(1)
        with api(env) as client:
            flow_runs = client.read_flow_runs()
        for run in flow_runs:
            if run.deployment_id != deployment.id or str(run.id) in seen:
                continue
            if run.state is None or not run.state.is_completed():
                continue
            seen.add(str(run.id))
            stamp = run.expected_start_time.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
            run_dir = folder / "latency-runs" / f"latency-{stamp}"
            delay = (first_step_at(run_dir) - run.expected_start_time).total_seconds()
            latencies.append(delay)
            log(f"scheduled run {stamp}: first step {delay:.1f} s after its time")
    with api(env) as client:
        client.pause_deployment(deployment.id)
    if len(latencies) < runs:
        raise RuntimeError(f"only {len(latencies)} of {runs} scheduled runs completed in time")
    return latencies


def seconds(values: list[float]) -> str:
    """Each value and their mean, in seconds."""
    listed = ", ".join(f"{value:.1f}" for value in values)
    return f"{listed} s (mean {statistics.mean(values):.1f})"


def main() -> None:
    """Run the comparison and the latency measurement; print and save the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--interval", type=float, default=30.0, help="latency schedule, s")
    parser.add_argument("--scheduled", type=int, default=3, help="scheduled runs measured")
    parser.add_argument("--rounds", type=int, default=2, help="CLI/deployment pairs")
    args = parser.parse_args()
    load_start = loadavg()
    folder = Path(tempfile.mkdtemp(prefix="wt-bench-orchestration-"))
    try:
        with prefect_server(folder) as env:
            deployed = write_config(
                folder / "deployed.yaml", args.episodes, args.workers, "deployed-runs"
            )
            # Each deployment run is its own scheduled time, so its own run directory.
            wt(env, folder, "deploy", str(deployed), "--name", "bench", "--pool", POOL)
            cli_s: list[float] = []
            deployments: list[dict[str, float]] = []
            with worker(env, folder):
                for round_ in range(args.rounds):
                    order = ("cli", "deployment") if round_ % 2 == 0 else ("deployment", "cli")
                    for kind in order:
                        log(f"round {round_ + 1}, {kind}: {args.episodes} episodes…")
                        if kind == "cli":
                            config = write_config(
                                folder / "cli.yaml", args.episodes, args.workers, f"cli-{round_}"
                            )
                            cli_s.append(time_cli(env, folder, config))
                            log(f"  {cli_s[-1]:.1f} s")
                        else:
                            deployments.append(time_deployment_run(env, "scheduled-collect/bench"))
                            log(f"  {deployments[-1]['total_s']:.1f} s")
                log(f"scheduling latency ({args.scheduled} runs)…")
                latencies = scheduling_latency(env, folder, args.interval, args.scheduled)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    cli_mean = statistics.mean(cli_s)
    deployment = {
        key: statistics.mean(run[key] for run in deployments) for key in ("total_s", "execution_s")
    }
    report = {
        "when": datetime.now(UTC).isoformat(),
        "machine": machine_info(load_start),
        "episodes": args.episodes,
        "workers": args.workers,
        "task": TASK,
        "rounds": args.rounds,
        "cli_s": [round(value, 2) for value in cli_s],
        "deployment_total_s": [round(run["total_s"], 2) for run in deployments],
        "deployment_execution_s": [round(run["execution_s"], 2) for run in deployments],
        "overhead_total": round(deployment["total_s"] / cli_mean - 1, 4),
        "overhead_execution": round(deployment["execution_s"] / cli_mean - 1, 4),
        "scheduling_latency_s": [round(value, 2) for value in latencies],
        "scheduling_latency_median_s": round(statistics.median(latencies), 2),
        "interval_s": args.interval,
    }
    table = Table(title=f"orchestration: {args.episodes} terminal episodes, {args.workers} at once")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("CLI, start → exit", seconds(cli_s))
    table.add_row(
        "deployment + worker, creation → Completed", seconds([r["total_s"] for r in deployments])
    )
    table.add_row(
        "deployment flow run, start → end", seconds([r["execution_s"] for r in deployments])
    )
    table.add_row("overhead, total (target ≤ 5 %)", f"{report['overhead_total']:+.1%}")
    table.add_row("overhead, execution", f"{report['overhead_execution']:+.1%}")
    table.add_row(
        "scheduling latency, scheduled time → first step",
        ", ".join(f"{value:.1f}" for value in latencies)
        + f" s (median {report['scheduling_latency_median_s']:.1f})",
    )
    Console().print(table)
    write_report(RESULTS_DIR / "orchestration.json", report)
    print(json.dumps({k: report[k] for k in ("overhead_total", "overhead_execution")}))


if __name__ == "__main__":
    main()
