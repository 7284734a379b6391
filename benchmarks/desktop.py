"""Benchmark of the desktop (os) domain: start, step phases, tree extraction, throughput.

Measured in one run against ``worldtrace/os``:

- **start**: wall time of ``OsEnvironment.reset`` (a new container, Xvfb, the D-Bus and AT-SPI
  buses, openbox, the launcher dock and mousepad on a document, until its window is in the
  tree and the desktop settled, and the first observation), with the driver's own ``start_s``
  (OSWorld's virtual machine takes minutes; target under 10 s).
- **step**: on a desktop of about 1,000 tree nodes (mousepad, gnumeric and galculator open),
  the median wall time of ``OsEnvironment.step`` over key presses and pointer moves, split
  into the driver's action, settle, tree and screenshot times; the bare baseline is the sum
  of the driver's four phases (what the desktop itself costs), so ours over bare is the
  host's share (the exec stream, JSON, the digest comparison). Target: a step under 1 s.
- **tree**: the driver's tree extraction time on a desktop with all four applications open
  (pcmanfm too: about 1,200 nodes) with ``max_nodes`` capped at 100, 250, 500, 1,000 and
  uncapped: how extraction grows with the number of nodes; and the baseline, the same whole
  tree read by a second driver process (``--observe``), which has no libatspi cache and asks
  the applications for every property (what the driver's walk cost before it kept the
  cache): the driver over it is the cache's gain.
- **throughput**: transitions per second of a real ``worldtrace collect os --policy explore``
  with 1 and 2 workers.

    .venv/bin/python benchmarks/desktop.py [--quick]

Results go to ``benchmarks/results/desktop.json`` and tables on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import explore_throughput, loadavg, log, machine_info, throughput_table, write_report
from rich.console import Console
from rich.table import Table

from worldtrace.collectors.os.actions import move_to, press
from worldtrace.collectors.os.environment import OsEnvironment
from worldtrace.collectors.os.image_definition import DRIVER, IMAGE_TAG
from worldtrace.collectors.os.tasks import DOCUMENTS, OsTask
from worldtrace.sandboxes.docker import require_image

RESULTS_FILE = Path(__file__).resolve().parent / "results" / "desktop.json"
STEP_TIMEOUT_S = 60.0
NODE_CAPS = (100, 250, 500, 1000, 100_000)

CALCULATOR = ("galculator",)
FILES = ("pcmanfm", DOCUMENTS)
SPREADSHEET = ("gnumeric", f"{DOCUMENTS}/budget.csv")
EDITOR_ON_NOTES = ("mousepad", f"{DOCUMENTS}/notes.txt")


def desktop_of(name: str, *launch: tuple[str, ...]) -> OsTask:
    """A task that only opens ``launch`` (the benchmark's desktops); nothing to check."""
    return OsTask(
        name=name,
        instruction="(benchmark)",
        application="mousepad",
        launch=launch,
        steps=(press("down"),),
        check_command="true",
    )


EDITOR = desktop_of("bench-editor", EDITOR_ON_NOTES)
ALL_FOUR = desktop_of("bench-all", CALCULATOR, FILES, SPREADSHEET, EDITOR_ON_NOTES)
THREE = desktop_of("bench-three", CALCULATOR, SPREADSHEET, EDITOR_ON_NOTES)


def median(values: list[float]) -> float:
    """The median, rounded to the millisecond."""
    return round(statistics.median(values), 3) if values else float("nan")


def measure_start(environment: OsEnvironment, runs: int) -> dict[str, Any]:
    """Reset wall time (container start to first observation) and the driver's start_s."""
    walls, drivers = [], []
    for index in range(runs):
        started = time.perf_counter()
        first = environment.reset(index, EDITOR)
        walls.append(time.perf_counter() - started)
        drivers.append(float(first["start_s"]))
        log(f"  start {index}: {walls[-1]:.2f} s (driver {drivers[-1]:.2f} s)")
    return {"runs": runs, "reset_s": median(walls), "driver_start_s": median(drivers)}


def measure_steps(environment: OsEnvironment, steps: int) -> dict[str, Any]:
    """Median step time and its phases on the desktop of about 1,000 nodes."""
    first = environment.reset(0, THREE)
    actions = [press("down"), press("up"), move_to(700, 400), move_to(720, 420)]
    walls: list[float] = []
    phases: dict[str, list[float]] = {
        "action_s": [],
        "settle_s": [],
        "tree_s": [],
        "screenshot_s": [],
    }
    nodes: list[int] = []
    for index in range(steps):
        started = time.perf_counter()
        outcome = environment.step(actions[index % len(actions)], STEP_TIMEOUT_S)
        walls.append(time.perf_counter() - started)
        if outcome.error:
            raise RuntimeError(f"benchmark step failed: {outcome.error}")
        timing = outcome.observation["timing"]
        for phase, values in phases.items():
            values.append(float(timing[phase]))
        nodes.append(int(outcome.observation["nodes"]))
    bare = [sum(phases[p][i] for p in phases) for i in range(steps)]
    result = {
        "steps": steps,
        "first_nodes": first["nodes"],
        "nodes": int(statistics.median(nodes)),
        "step_s": median(walls),
        "bare_s": median(bare),
        **{phase: median(values) for phase, values in phases.items()},
    }
    result["ratio"] = round(result["step_s"] / result["bare_s"], 2) if result["bare_s"] else None
    return result


def measure_tree(environment: OsEnvironment, repeats: int) -> list[dict[str, Any]]:
    """Tree extraction time per node cap on the four-application desktop."""
    environment.reset(0, ALL_FOUR)
    rows = []
    for cap in NODE_CAPS:
        times, counts = [], []
        for _ in range(repeats):
            reply = environment._request({"op": "observe", "max_nodes": cap}, timeout_s=60)
            times.append(float(reply["timing"]["tree_s"]))
            counts.append(int(reply["nodes"]))
        row = {"max_nodes": cap, "nodes": counts[0], "tree_s": median(times)}
        row["ms_per_node"] = round(1000 * row["tree_s"] / max(row["nodes"], 1), 3)
        rows.append(row)
        log(f"  tree cap {cap}: {row}")
    return rows


def measure_uncached_tree(environment: OsEnvironment, repeats: int) -> dict[str, Any]:
    """The whole tree as a second driver process reads it: no cache, every property asked."""
    times, counts = [], []
    for _ in range(repeats):
        looked = environment.sandbox.exec([*DRIVER, "--observe"], timeout=120)
        if looked.exit_code != 0:
            raise RuntimeError(f"--observe failed: {looked.stderr.decode(errors='replace')}")
        reply = json.loads(looked.text)
        times.append(float(reply["timing"]["tree_s"]))
        counts.append(int(reply["nodes"]))
    row = {"nodes": counts[0], "tree_s": median(times)}
    row["ms_per_node"] = round(1000 * row["tree_s"] / max(row["nodes"], 1), 3)
    log(f"  uncached: {row}")
    return row


def main() -> None:
    """Run every measurement and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    args = parser.parse_args()
    require_image(IMAGE_TAG)
    load_start = loadavg()
    starts, steps, repeats = (2, 12, 2) if args.quick else (5, 40, 5)
    environment = OsEnvironment()
    try:
        log("start:")
        start = measure_start(environment, starts)
        log("steps:")
        step = measure_steps(environment, steps)
        log(f"  {step}")
        log("tree:")
        tree = measure_tree(environment, repeats)
        uncached = measure_uncached_tree(environment, repeats)
    finally:
        environment.close()
    log("throughput:")
    with tempfile.TemporaryDirectory() as work:
        throughput = explore_throughput(
            "os", {}, 1, 8 if args.quick else 20, Path(work), workers=(1, 2)
        )
    report = {
        "when": datetime.now(UTC).isoformat(),
        "quick": args.quick,
        "start": start,
        "step": step,
        "tree": tree,
        "uncached_tree": uncached,
        "throughput": throughput,
        "machine": machine_info(load_start),
    }
    write_report(RESULTS_FILE, report)
    console = Console()
    table = Table(title="desktop: start and step (medians, seconds)")
    for column in ("measure", "value"):
        table.add_column(column)
    table.add_row("reset → first observation", f"{start['reset_s']:.2f}")
    table.add_row("driver start_s", f"{start['driver_start_s']:.2f}")
    table.add_row(f"step (tree ≈ {step['nodes']} nodes)", f"{step['step_s']:.3f}")
    for phase in ("action_s", "settle_s", "tree_s", "screenshot_s"):
        table.add_row(f"  {phase}", f"{step[phase]:.3f}")
    table.add_row("bare (sum of the driver's phases)", f"{step['bare_s']:.3f}")
    table.add_row("ours / bare", f"{step['ratio']:.2f}")
    console.print(table)
    trees = Table(title="desktop: tree extraction by node cap")
    for column in ("max_nodes", "nodes", "tree_s", "ms/node"):
        trees.add_column(column, justify="right")
    for row in tree:
        trees.add_row(
            str(row["max_nodes"]),
            str(row["nodes"]),
            f"{row['tree_s']:.3f}",
            f"{row['ms_per_node']:.3f}",
        )
    trees.add_row(
        "a second process, no cache",
        str(uncached["nodes"]),
        f"{uncached['tree_s']:.3f}",
        f"{uncached['ms_per_node']:.3f}",
    )
    console.print(trees)
    whole = tree[-1]["tree_s"]
    console.print(f"whole tree, driver / no cache: {whole / uncached['tree_s']:.2f}")
    console.print(throughput_table(throughput, "desktop: explore throughput"))


if __name__ == "__main__":
    main()
