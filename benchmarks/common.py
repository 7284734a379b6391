"""What every benchmark records about the machine, and how it saves its report."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def machine_info(loadavg_start: list[float]) -> dict[str, Any]:
    """CPU count, Python, platform and the load at the start and end of the run."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": loadavg_start,
        "loadavg_end": loadavg(),
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Save a report as JSON (benchmarks/results/ is git-ignored)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")


def log(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the report tables."""
    print(message, file=sys.stderr, flush=True)


def explore_throughput(
    domain: str,
    environment: dict[str, Any],
    episodes_per_worker: int,
    steps: int,
    work_dir: Path,
    workers: tuple[int, ...] = (1, 2, 4),
) -> dict[str, Any]:
    """Transitions per second of a real ``explore`` collection with each number of workers.

    A one-step collection runs first and is not counted: the first flow of a process starts
    Prefect's temporary server, which would be charged to the one-worker run. Returns, per
    number of workers, the episodes, transitions, seconds, ``steps_per_s`` and the speed-up
    over one worker.
    """
    # Imported here: Prefect reads its log settings at import, after the caller's configure().
    import time

    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    def config(name: str, count: int, episodes: int, max_steps: int) -> Any:
        return validate_config(
            {
                "domain": domain,
                "episodes": episodes,
                "workers": count,
                "max_steps": max_steps,
                "out": str(work_dir / name),
                "policy": {"kind": "explore"},
                "environment": environment,
            }
        )

    run_collection(config("warm-up", 1, 1, 1))
    results: dict[str, Any] = {}
    for count in workers:
        collection = config(f"throughput-{count}", count, episodes_per_worker * count, steps)
        started = time.perf_counter()
        summary = run_collection(collection)
        took = time.perf_counter() - started
        results[str(count)] = {
            "episodes": summary["collected"],
            "transitions": summary["transitions"],
            "seconds": round(took, 1),
            "steps_per_s": round(summary["transitions"] / took, 2),
        }
        log(f"  {count} worker(s): {results[str(count)]}")
    one = results[str(workers[0])]["steps_per_s"]
    for row in results.values():
        row["speedup"] = round(row["steps_per_s"] / one, 2) if one else None
    return results


def throughput_table(results: dict[str, Any], title: str, unit: str = "steps") -> Any:
    """The table of :func:`explore_throughput`'s results (``unit``: what a transition is)."""
    from rich.table import Table

    table = Table(title=title)
    for column in ("workers", "episodes", unit, "seconds", f"{unit}/s", "speed-up"):
        table.add_column(column, justify="right")
    for workers, row in results.items():
        table.add_row(
            workers,
            str(row["episodes"]),
            str(row["transitions"]),
            f"{row['seconds']:.1f}",
            f"{row['steps_per_s']:.2f}",
            f"{row['speedup']:.2f}",
        )
    return table
