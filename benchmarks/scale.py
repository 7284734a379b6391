"""What one episode of each domain costs: CPU, memory, wall time and bytes, from real runs.

Usage: ``.venv/bin/python benchmarks/scale.py [--episodes 6] [--domains terminal swe mcp web]``
and ``.venv/bin/python benchmarks/scale.py --plan`` (no collecting: the ten-million-transition
plan of ``docs/scale.md`` from the saved measurements, as markdown).

For each domain, ``worldtrace collect DOMAIN --episodes N --workers 1`` runs with the domain's
defaults (as a user starts it) in a subprocess, and is measured while it runs:

- **sandbox CPU and memory**: every container the subprocess owns (label
  ``worldtrace.owner_pid``) is sampled every 0.2 s through its cgroup (v1: ``cpuacct.usage``,
  ``memory.max_usage_in_bytes``; v2: ``cpu.stat``, ``memory.peak``); a container's last sample
  counts (it misses at most its last 0.2 s);
- **collector CPU and memory**: the subprocess's own and its children's CPU time and peak RSS
  (``getrusage``; a browser the collector drives is its child);
- **wall**: per episode from the raw records (start event to the end of the last step), per
  step the environment's own latency; the command's whole time too (Prefect's start included);
- **bytes**: raw episode files and normalized parquet per transition.

Each domain runs twice, with one episode and with N: the difference is the *marginal* cost of
N - 1 episodes (what a long run pays per episode and per transition), the one-episode run's
excess the fixed cost of starting a command (Prefect, imports, images checked). Prints a
table; writes ``benchmarks/results/scale.json``, the input of ``docs/scale.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
import polars as pl
from common import loadavg, log, machine_info, write_report
from rich.console import Console
from rich.table import Table

from worldtrace.collectors.recorder import read_episode
from worldtrace.sandboxes.docker import LABEL, OWNER_PID_LABEL

RESULTS_DIR = Path(__file__).resolve().parent / "results"
CLI = [sys.executable, "-m", "worldtrace.flows.cli"]
SAMPLE_S = 0.2
CGROUP = Path("/sys/fs/cgroup")


def container_usage(container_id: str) -> tuple[float, int] | None:
    """CPU seconds and peak memory bytes of a running container, from its cgroup."""
    v1_cpu = CGROUP / "cpuacct" / "docker" / container_id / "cpuacct.usage"
    v1_mem = CGROUP / "memory" / "docker" / container_id / "memory.max_usage_in_bytes"
    v2 = CGROUP / "system.slice" / f"docker-{container_id}.scope"
    try:
        if v1_cpu.exists():
            return int(v1_cpu.read_text()) / 1e9, int(v1_mem.read_text())
        stat = dict(line.split() for line in (v2 / "cpu.stat").read_text().splitlines())
        return int(stat["usage_usec"]) / 1e6, int((v2 / "memory.peak").read_text())
    except (OSError, ValueError, KeyError):
        return None  # gone between the listing and the read


class ContainerSampler(threading.Thread):
    """Samples the containers a process owns until stopped; keeps each one's last sample."""

    def __init__(self, owner_pid: int) -> None:
        super().__init__(daemon=True)
        self.owner_pid = owner_pid
        self.last: dict[str, tuple[float, int]] = {}
        self._stop_event = threading.Event()
        self._client = docker.from_env()

    def run(self) -> None:
        """Sample until :meth:`stop`."""
        labels = [LABEL, f"{OWNER_PID_LABEL}={self.owner_pid}"]
        while not self._stop_event.is_set():
            try:
                containers = self._client.containers.list(filters={"label": labels})
            except docker.errors.APIError:
                containers = []
            for container in containers:
                usage = container_usage(container.id)
                if usage is not None:
                    self.last[container.id] = usage
            self._stop_event.wait(SAMPLE_S)

    def stop(self) -> None:
        """End sampling and wait for the thread."""
        self._stop_event.set()
        self.join()


@contextmanager
def domain_options(domain: str) -> Iterator[list[str]]:
    """The ``--env`` options a domain needs on this machine (none but android's).

    No Android runs here, so android collects from the stand-in device in a process of its
    own (benchmarks/android.py): its row measures the collecting machine's work, not the
    device's (the stand-in is not the collector's child, so its CPU is not counted).
    """
    if domain != "android":
        yield []
        return
    from android import standin_device

    with standin_device() as (serial, server):
        yield ["--env", f"device={serial}", "--env", f"adb_server={server}"]


def run_domain(
    domain: str, episodes: int, folder: Path, options: list[str] | None = None
) -> dict[str, Any]:
    """Collect ``episodes`` episodes of ``domain`` with its defaults and measure them."""
    out = folder / domain
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            *CLI,
            "collect",
            domain,
            "--episodes",
            str(episodes),
            "--workers",
            "1",
            "--out",
            str(out),
            *(options or []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=os.environ | {"COLUMNS": "200"},
    )
    sampler = ContainerSampler(process.pid)
    sampler.start()
    output = process.communicate()[0].decode(errors="replace")
    sampler.stop()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if process.returncode != 0:
        raise RuntimeError(f"collect {domain} failed:\n{output}")
    (run_dir,) = [path for path in out.iterdir() if path.is_dir()]
    episode_walls, step_latencies, steps = [], [], 0
    for path in sorted((run_dir / "raw" / "episodes").glob("*.jsonl")):
        events = list(read_episode(path))
        step_events = [event for event in events if event.type == "step"]
        steps += len(step_events)
        step_latencies += [event.latency_s for event in step_events]
        if step_events:
            last = step_events[-1]
            end = last.started_at.timestamp() + last.latency_s
            episode_walls.append(end - events[0].started_at.timestamp())
    transitions = pl.read_parquet(run_dir / "transitions" / "*" / "*.parquet").height
    raw_bytes = sum(p.stat().st_size for p in (run_dir / "raw" / "episodes").glob("*.jsonl"))
    parquet_bytes = sum(p.stat().st_size for p in (run_dir / "transitions").rglob("*.parquet"))
    sandbox_cpu = sum(cpu for cpu, _ in sampler.last.values())
    collector_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "episodes": episodes,
        "transitions": transitions,
        "steps_per_episode": round(steps / episodes, 2),
        "command_wall_s": round(wall, 2),
        "episode_wall_s_median": round(statistics.median(episode_walls), 3),
        "step_latency_s_median": round(statistics.median(step_latencies), 4),
        "sandboxes": len(sampler.last),
        "sandbox_cpu_s": round(sandbox_cpu, 2),
        "collector_cpu_s": round(collector_cpu, 2),
        "cpu_s": round(sandbox_cpu + collector_cpu, 3),
        # a borrowed device (android) is no sandbox of this machine: none sampled
        "sandbox_memory_peak_mb": round(
            max((m for _, m in sampler.last.values()), default=0) / 2**20, 1
        ),
        "collector_rss_peak_mb": round(after.ru_maxrss / 1024, 1),
        "raw_bytes_per_transition": round(raw_bytes / transitions),
        "parquet_bytes_per_transition": round(parquet_bytes / transitions),
    }


def marginal_costs(single: dict[str, Any], many: dict[str, Any]) -> dict[str, float]:
    """CPU of one more episode and transition (N-episode run minus one-episode run)."""
    extra_episodes = many["episodes"] - single["episodes"]
    extra_transitions = many["transitions"] - single["transitions"]
    extra_cpu = many["cpu_s"] - single["cpu_s"]
    per_episode = extra_cpu / extra_episodes
    return {
        "marginal_cpu_s_per_episode": round(per_episode, 3),
        "marginal_cpu_s_per_transition": round(extra_cpu / max(extra_transitions, 1), 4),
        "fixed_cpu_s": round(single["cpu_s"] - per_episode, 2),
    }


AGENTWORLD_DOMAINS = ("terminal", "swe", "mcp", "search", "web", "os", "android")
"""The seven domains of the AgentWorld family, in equal shares of the plan's transitions."""
TARGET_TRANSITIONS = 10_000_000
MACHINE_CPUS = 32
MACHINE_MEMORY_GB = 128
CPU_UTILISATION = 0.75
"""Share of a worker machine's cores the plan fills (the rest: Docker, the worker, spikes)."""
MEMORY_UTILISATION = 0.8
DAYS = 7


def plan_rows(measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Per domain: transitions, episodes, CPU hours, concurrency and machine hours of the plan.

    A domain not measured (not built yet) takes the web domain's costs and is marked.
    """
    rows = []
    share = TARGET_TRANSITIONS / len(AGENTWORLD_DOMAINS)
    for domain in AGENTWORLD_DOMAINS:
        source = domain if domain in measured else "web"
        m = measured[source]
        episodes = share / m["steps_per_episode"]
        cpu_per_episode = m["marginal_cpu_s_per_episode"]
        cores_per_running_episode = cpu_per_episode / m["episode_wall_s_median"]
        by_cpu = CPU_UTILISATION * MACHINE_CPUS / max(cores_per_running_episode, 1e-3)
        sandbox_mb = m["sandbox_memory_peak_mb"]
        by_memory = (
            MEMORY_UTILISATION * MACHINE_MEMORY_GB * 1024 / sandbox_mb if sandbox_mb else math.inf
        )
        concurrency = max(1, int(min(by_cpu, by_memory)))
        cpu_core_hours = share * m["marginal_cpu_s_per_transition"] / 3600
        # Machines are filled to CPU_UTILISATION of their cores, or to their memory when that
        # holds fewer episodes: then a machine-hour does proportionally less.
        filled_cores = CPU_UTILISATION * MACHINE_CPUS
        machine_hours = cpu_core_hours / filled_cores * max(1.0, by_cpu / by_memory)
        rows.append(
            {
                "domain": domain,
                "costs_of": source,
                "transitions": share,
                "episodes": episodes,
                "cpu_core_hours": cpu_core_hours,
                "concurrency": concurrency,
                "bound": "cpu" if by_cpu <= by_memory else "memory",
                "machine_hours": machine_hours,
                "raw_gb": share * m["raw_bytes_per_transition"] / 1e9,
                "parquet_gb": share * m["parquet_bytes_per_transition"] / 1e9,
            }
        )
    return rows


def print_plan(results_dir: Path) -> None:
    """The ten-million-transition plan from the saved measurements, as markdown tables."""
    measured = json.loads((results_dir / "scale.json").read_text())["domains"]
    rows = plan_rows(measured)
    print(
        f"| domain | costs of | transitions | episodes | CPU core-hours | episodes at once "
        f"per {MACHINE_CPUS}-core machine | machine-hours | raw GB | parquet GB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        costs_of = row["costs_of"] + (" (estimate)" if row["costs_of"] != row["domain"] else "")
        if row["costs_of"] == "android":  # no Android runs here: measured against the stand-in
            costs_of += " (stand-in device)"
        print(
            f"| {row['domain']} | {costs_of} | {row['transitions']:,.0f} | "
            f"{row['episodes']:,.0f} | {row['cpu_core_hours']:,.0f} | {row['concurrency']} "
            f"({row['bound']}) | {row['machine_hours']:,.0f} | {row['raw_gb']:,.1f} | "
            f"{row['parquet_gb']:,.1f} |"
        )
    total_hours = sum(row["machine_hours"] for row in rows)
    total_cpu = sum(row["cpu_core_hours"] for row in rows)
    print(
        f"| **total** | | {TARGET_TRANSITIONS:,} | {sum(r['episodes'] for r in rows):,.0f} | "
        f"{total_cpu:,.0f} | | {total_hours:,.0f} | {sum(r['raw_gb'] for r in rows):,.1f} | "
        f"{sum(r['parquet_gb'] for r in rows):,.1f} |"
    )
    for days in (1, DAYS):
        machines = total_hours / (days * 24)
        print(f"\n{MACHINE_CPUS}-core machines to finish in {days} day(s): {math.ceil(machines)}")
    curate = json.loads((results_dir / "curate.json").read_text())["summary"]["ours"]
    curation_core_hours = TARGET_TRANSITIONS / curate["rows_per_s_per_core"] / 3600
    print(f"curation: {curate['rows_per_s_per_core']:.0f} rows/s/core → "
          f"{curation_core_hours:.1f} core-hours")  # fmt: skip
    publish = json.loads((results_dir / "publish.json").read_text())["publish"]
    seconds = publish["ours_median_s"] * TARGET_TRANSITIONS / publish["rows"]
    print(f"publishing: {publish['rows']} rows in {publish['ours_median_s']:.2f} s → "
          f"{seconds / 60:.1f} min for {TARGET_TRANSITIONS:,} rows")  # fmt: skip


def main() -> None:
    """Measure each domain; print and save the report (or print the plan with --plan)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--domains", nargs="+", default=["terminal", "swe", "mcp", "web"])
    parser.add_argument("--plan", action="store_true", help="print the plan from scale.json")
    args = parser.parse_args()
    if args.plan:
        print_plan(RESULTS_DIR)
        return
    load_start = loadavg()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="wt-bench-scale-") as tmp:
        for domain in args.domains:
            log(f"{domain}: {args.episodes} episodes…")
            with domain_options(domain) as options:
                single = run_domain(domain, 1, Path(tmp) / "one", options)
                many = run_domain(domain, args.episodes, Path(tmp) / "many", options)
            results[domain] = many | marginal_costs(single, many)
            log(f"  {json.dumps(results[domain])}")
    table = Table(title=f"cost per domain ({args.episodes} episodes each, defaults, 1 at a time)")
    columns = {
        "steps/ep": "steps_per_episode",
        "episode wall s": "episode_wall_s_median",
        "step s": "step_latency_s_median",
        "CPU s/ep": "marginal_cpu_s_per_episode",
        "CPU s/transition": "marginal_cpu_s_per_transition",
        "fixed CPU s": "fixed_cpu_s",
        "sandbox MB peak": "sandbox_memory_peak_mb",
        "collector MB peak": "collector_rss_peak_mb",
        "raw B/transition": "raw_bytes_per_transition",
        "parquet B/transition": "parquet_bytes_per_transition",
    }
    table.add_column("domain")
    for title in columns:
        table.add_column(title, justify="right")
    for domain, row in results.items():
        table.add_row(domain, *(str(row[key]) for key in columns.values()))
    Console(width=200).print(table)
    # Domains measured earlier and not now are kept (one domain can be measured again alone).
    path = RESULTS_DIR / "scale.json"
    earlier = json.loads(path.read_text())["domains"] if path.exists() else {}
    when = datetime.now(UTC).isoformat()
    for row in results.values():
        row |= {"when": when, "machine": machine_info(load_start)}
    write_report(path, {"benchmark": "scale", "domains": earlier | results})


if __name__ == "__main__":
    main()
