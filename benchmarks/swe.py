"""Benchmark of the swe domain: tool-call overhead, collection throughput, task synthesis.

Three numbers, each against something measured in the same run:

- **overhead**: the per-step time of our tool calls (``SweEnvironment.step``: the request over
  the exec stream, the driver running the tool as the user, ``git status`` and ``git diff
  --stat`` after it, the reply) against the same commands run through a bare ``docker exec``
  in the same container (``cat -n``, ``grep -rn``, ``ls -p``, ``git log``, one test through
  ``run_tests.py``). Ours and the baseline alternate, step by step, so load changes hit both.
  The ratio is the sum of the per-kind medians, ours over bare (target ≤ 1.15).
- **throughput**: transitions per second of a real collection (``explore`` policy, a fresh
  container per episode) with 1, 2 and 4 workers.
- **synthesis**: validated tasks per minute of ``worldtrace tasks swe synthesize`` (the bug
  synthesis and its validation by the repository's own tests), and the acceptance rate.

    .venv/bin/python benchmarks/swe.py [--repo toolz] [--quick]

Results go to ``benchmarks/results/swe.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import explore_throughput, loadavg, log, machine_info, throughput_table, write_report
from rich.console import Console
from rich.table import Table

from worldtrace.collectors.swe.environment import (
    REPO_PATH,
    USER,
    USER_ENV,
    SweConfig,
    SweEnvironment,
)
from worldtrace.collectors.swe.tools import tool_call
from worldtrace.flows.logs import configure
from worldtrace.sandboxes.docker import require_image
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.schemas import Action

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "swe.json"
TARGET_RATIO = 1.15
STEP_TIMEOUT_S = 120.0


def workload(env: SweEnvironment) -> list[tuple[str, Action, str]]:
    """(kind, our tool call, the same work as one bare shell command) for this repository."""
    listing = env.sandbox.exec(["git", "-C", REPO_PATH, "ls-files", "*.py"], user=USER)
    files = [f for f in listing.text.split() if "test" not in f and f.endswith(".py")]
    module = sorted(files)[len(files) // 2] if files else "setup.py"
    package = module.split("/", 1)[0] if "/" in module else "."
    baseline = json.loads(env.sandbox.exec(["cat", "/opt/worldtrace/baseline.json"]).text)
    test = baseline["passed"][0]
    return [
        ("read_file", tool_call("read_file", path=module), f"cat -n {shlex.quote(module)}"),
        (
            "search",
            tool_call("search", pattern="def ", path=package),
            f"grep -rnIE --color=never --exclude-dir=.git 'def ' {package}",
        ),
        ("list_dir", tool_call("list_dir", path=package), f"ls -p {package}"),
        (
            "run_shell_command",
            tool_call("run_shell_command", command="git log --oneline -3"),
            "git log --oneline -3",
        ),
        (
            "run_tests",
            tool_call("run_tests", selector=shlex.quote(test)),
            f"python3 /opt/worldtrace/run_tests.py {shlex.quote(test)}",
        ),
    ]


def bare_exec(env: SweEnvironment) -> Callable[[str], float]:
    """Time one command through a bare ``docker exec`` (the SDK's exec_run) as the user."""
    container = env.sandbox.container

    def run(command: str) -> float:
        started = time.perf_counter()
        result = container.exec_run(
            ["bash", "-c", command], user=USER, workdir=REPO_PATH, environment=USER_ENV
        )
        took = time.perf_counter() - started
        if result.exit_code != 0:
            raise RuntimeError(f"bare `{command}` exited {result.exit_code}")
        return took

    return run


def measure_overhead(repo: str, rounds: int) -> dict[str, Any]:
    """Alternate our tool call and the bare command, ``rounds`` times per kind."""
    env = SweEnvironment(SweConfig(repo=repo))
    try:
        env.reset(0, None)
        work = workload(env)
        bare = bare_exec(env)
        ours: dict[str, list[float]] = {kind: [] for kind, _, _ in work}
        base: dict[str, list[float]] = {kind: [] for kind, _, _ in work}
        for _kind, action, command in work:  # warm both paths (page cache, pytest import)
            env.step(action, STEP_TIMEOUT_S)
            bare(command)
        for index in range(rounds):
            for kind, action, command in work:
                # Which goes first alternates, so neither always gets the warmer cache.
                if index % 2:
                    base[kind].append(bare(command))
                started = time.perf_counter()
                outcome = env.step(action, STEP_TIMEOUT_S)
                ours[kind].append(time.perf_counter() - started)
                if outcome.error:
                    raise RuntimeError(f"{action.text}: {outcome.error}")
                if not index % 2:
                    base[kind].append(bare(command))
    finally:
        env.close()
    by_kind = {
        kind: {
            "ours_ms": round(statistics.median(ours[kind]) * 1000, 1),
            "bare_ms": round(statistics.median(base[kind]) * 1000, 1),
        }
        for kind in ours
    }
    for row in by_kind.values():
        row["ratio"] = round(row["ours_ms"] / row["bare_ms"], 3)
    total_ours = sum(row["ours_ms"] for row in by_kind.values())
    total_bare = sum(row["bare_ms"] for row in by_kind.values())
    return {
        "rounds": rounds,
        "by_kind": by_kind,
        "ratio": round(total_ours / total_bare, 3),
        "target": TARGET_RATIO,
    }


def measure_synthesis(repo: str, count: int, seed: int) -> dict[str, Any]:
    """Validated tasks per minute of the bug synthesis, and how many candidates it kept."""
    from worldtrace.collectors.swe.synthesis import SynthesisStats, synthesize

    last: list[SynthesisStats] = []
    started = time.perf_counter()
    tasks = synthesize(repo, count=count, seed=seed, progress=lambda stats: last.append(stats))
    took = time.perf_counter() - started
    stats = last[-1]
    return {
        "validated": len(tasks),
        "tried": stats.tried,
        "acceptance": round(stats.acceptance_rate, 3),
        "seconds": round(took, 1),
        "tasks_per_minute": round(len(tasks) / took * 60, 2),
        "summary": stats.summary(),
    }


def print_report(report: dict[str, Any]) -> None:
    """The three tables of the run."""
    console = Console()
    table = Table(title=f"swe tool calls vs bare docker exec ({report['repo']})")
    for column in ("tool", "ours ms", "bare ms", "ratio"):
        table.add_column(column, justify="right")
    for kind, row in report["overhead"]["by_kind"].items():
        table.add_row(kind, f"{row['ours_ms']:.1f}", f"{row['bare_ms']:.1f}", f"{row['ratio']:.2f}")
    overhead = report["overhead"]
    met = "met" if overhead["ratio"] <= TARGET_RATIO else "NOT met"
    table.add_row("all", "", "", f"{overhead['ratio']:.2f} (target ≤ {TARGET_RATIO}: {met})")
    console.print(table)
    console.print(throughput_table(report["throughput"], "collection throughput (explore)"))
    synthesis = report["synthesis"]
    if synthesis:
        console.print(
            f"synthesis: {synthesis['validated']} validated tasks in {synthesis['seconds']} s = "
            f"{synthesis['tasks_per_minute']} tasks/minute ({synthesis['validated']} of "
            f"{synthesis['tried']} candidates kept)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three measurements and print and save the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default="toolz", help="repository (default toolz)")
    parser.add_argument("--rounds", type=int, default=None, help="overhead rounds (default 30)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per worker (2)")
    parser.add_argument("--steps", type=int, default=None, help="steps per episode (20)")
    parser.add_argument("--synthesize", type=int, default=None, help="tasks to synthesize (5)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    rounds = args.rounds or (5 if args.quick else 30)
    episodes = args.episodes or (1 if args.quick else 2)
    steps = args.steps or (8 if args.quick else 20)
    count = args.synthesize if args.synthesize is not None else (2 if args.quick else 5)
    try:
        image_id = require_image(SweConfig(repo=args.repo).image_tag)
    except SandboxError as error:
        log(str(error))
        return 2

    log(f"library logs: {configure('bench-swe', loud=False)}")
    started = time.monotonic()
    loadavg_start = loadavg()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    log(f"overhead: {rounds} rounds of 5 tool kinds, ours and bare alternating")
    overhead = measure_overhead(args.repo, rounds)
    with tempfile.TemporaryDirectory(prefix="bench-swe-", dir=RESULTS_DIR) as tmp:
        log(f"throughput: {episodes} episode(s) of {steps} steps per worker")
        throughput = explore_throughput("swe", {"repo": args.repo}, episodes, steps, Path(tmp))
    log(f"synthesis: {count} tasks")
    synthesis = measure_synthesis(args.repo, count, seed=1000) if count else {}
    report = {
        "benchmark": "swe",
        "created_at": datetime.now(UTC).isoformat(),
        "quick": args.quick,
        "machine": machine_info(loadavg_start),
        "repo": args.repo,
        "image_id": image_id,
        "overhead": overhead,
        "throughput": throughput,
        "synthesis": synthesis,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results_file": str(args.output),
    }
    write_report(args.output, report)
    print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
