"""Benchmark of the terminal collector's per-step path against bare tmux in the same image.

Run ``.venv/bin/python benchmarks/terminal.py [--steps N] [--rounds R] [--quick]``.

It measures:

1. Per-step overhead. *Ours* is the real episode loop: ``run_episode`` with a policy that plays
   a fixed list of quick shell commands, a ``TerminalEnvironment`` (container + in-container
   tmux driver over one exec stream) and a real ``RunRecorder`` (every step fsynced). The
   *baseline* is a bash loop run by one ``docker exec`` in a fresh container of the same image
   and limits, with the tmux session started exactly as the driver starts it (same name, size,
   cwd, ``/etc/tmux.conf`` and prompt hook); per command it runs ``tmux send-keys -l`` +
   ``Enter``, ``tmux wait-for wt-prompt`` (the hook's signal) and ``tmux capture-pane -p``, and
   times itself from inside with ``$EPOCHREALTIME`` so ``docker exec`` start-up is excluded.
   The two run alternately for several rounds, never at the same time; we report medians.
2. Throughput with 1, 2 and 4 environments stepping in parallel threads (each with its own
   container, driver and recorder), all released together by a barrier after their resets.
3. The driver's phase timings (send, wait, capture) and where the host spends the rest: the
   ``env.step`` round trip beyond the driver's timed work, and the loop's own cost (recording
   with fsync, policy, history) beyond ``env.step``.

Numbers are printed and written to ``benchmarks/results/terminal.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collectors.base import EpisodePlan, HistoryItem, Policy, RawObservation
from collectors.episode import EpisodeLimits, run_episode
from collectors.recorder import RunRecorder, read_episode
from collectors.terminal.actions import command
from collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from sandboxes.docker import DockerSandbox, SandboxError, exit_cleanly_on_sigterm, require_image
from schemas import Action

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "terminal.json"
TARGET_RATIO = 1.15
TARGET_SPEEDUP_4 = 1.7

# Quick, realistic shell commands; every one exits 0 and gives the prompt back.
COMMANDS: tuple[str, ...] = (
    "ls -la /etc",
    "echo hello world",
    "cat /etc/os-release",
    "grep -rs root /etc | head -5",
    "wc -l /etc/passwd",
    "python3 -c 'print(1)'",
    "git --version",
    "seq 1 50",
    "pwd",
    "date",
)

# Must match tmux_driver.py: SESSION, CHANNEL and the new-session arguments of the "start" op.
SESSION = "wt"
CHANNEL = "wt-prompt"

BASELINE_SCRIPT = r"""
set -u
steps=$1
cmds=(__COMMANDS__)
n=${#cmds[@]}
# The session exactly as tmux_driver.py starts it: {"op": "start", "width": W, "height": H}.
tmux new-session -d -s __SESSION__ -x __WIDTH__ -y __HEIGHT__ -c /root bash
tmux wait-for __CHANNEL__   # the first prompt's signal
starts=() sent=() woken=() ends=()
out=""
t0=$EPOCHREALTIME
for ((i = 0; i < steps; i++)); do
  starts+=("$EPOCHREALTIME")
  tmux send-keys -t __SESSION__ -l -- "${cmds[i % n]}" \; send-keys -t __SESSION__ Enter
  sent+=("$EPOCHREALTIME")
  tmux wait-for __CHANNEL__
  woken+=("$EPOCHREALTIME")
  out=$(tmux capture-pane -p -t __SESSION__)
  ends+=("$EPOCHREALTIME")
done
t1=$EPOCHREALTIME
echo "total $t0 $t1"
for ((i = 0; i < steps; i++)); do
  echo "step ${starts[i]} ${sent[i]} ${woken[i]} ${ends[i]}"
done
echo "state $(cut -f3 /run/.wt-state)"
echo "screen ${#out}"
tmux kill-server
"""


# --------------------------------------------------------------------------- helpers


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def loadavg() -> list[float]:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


class CommandLoopPolicy(Policy):
    """Plays ``steps`` commands from a fixed list, in a loop; notes when each act() happens."""

    kind = "script"
    name = "benchmark-command-loop"

    def __init__(
        self,
        commands: Sequence[str],
        steps: int,
        barrier: threading.Barrier | None = None,
    ) -> None:
        self._actions = [command(line) for line in commands]
        self._steps = steps
        self._barrier = barrier
        self.clock: list[float] = []

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        if not history and self._barrier is not None:
            self._barrier.wait(timeout=300)
        self.clock.append(time.monotonic())
        if len(history) >= self._steps:
            return None
        return self._actions[len(history) % len(self._actions)]


def _config_for(name: str) -> dict[str, Any]:
    return {"benchmark": "terminal", "run": name}


def run_ours(
    config: TerminalConfig,
    steps: int,
    work_dir: Path,
    name: str,
    barrier: threading.Barrier | None = None,
) -> dict[str, Any]:
    """Play ``steps`` commands through run_episode with a real recorder; return the timings."""
    recorder = RunRecorder(work_dir / name, _config_for(name))
    writer = recorder.begin("episode-0")
    policy = CommandLoopPolicy(COMMANDS, steps, barrier)
    env = TerminalEnvironment(config, labels={"worldtrace.benchmark": "terminal"})
    try:
        result = run_episode(
            env,
            policy,
            writer,
            EpisodePlan(index=0, seed=0, task=None),
            EpisodeLimits(max_steps=steps + 1, step_timeout_s=30.0),
        )
    finally:
        if barrier is not None and not policy.clock:
            barrier.abort()  # never reached the start line: do not keep the others waiting
        env.close()
    if result.status != "completed" or result.steps != steps or result.errors:
        raise RuntimeError(f"benchmark episode {name} went wrong: {result}")
    events = list(read_episode(recorder.episodes_dir / "episode-0.jsonl"))
    step_events = [e for e in events if e["type"] == "step"]
    if len(step_events) != steps:
        raise RuntimeError(f"{name}: {len(step_events)} steps recorded, expected {steps}")
    loop = [b - a for a, b in zip(policy.clock, policy.clock[1:], strict=False)]
    latency = [e["latency_s"] for e in step_events]
    timings = [e["observation"]["timings"] for e in step_events]
    for event in step_events:
        observation = event["observation"]
        if not observation.get("prompt") or observation.get("timed_out"):
            raise RuntimeError(f"{name}: step {event['step']} did not end at a prompt")
    driver = [t["send_s"] + t["wait_s"] + t["capture_s"] for t in timings]
    return {
        "steps": steps,
        "start": policy.clock[0],
        "end": policy.clock[-1],
        "total_s": policy.clock[-1] - policy.clock[0],
        "loop_s": loop,
        "latency_s": latency,
        "send_s": [t["send_s"] for t in timings],
        "wait_s": [t["wait_s"] for t in timings],
        "capture_s": [t["capture_s"] for t in timings],
        "driver_s": driver,
        "transport_s": [lat - d for lat, d in zip(latency, driver, strict=True)],
        "record_s": [lp - lat for lp, lat in zip(loop, latency, strict=True)],
    }


def baseline_script(config: TerminalConfig) -> str:
    replacements = {
        "__COMMANDS__": " ".join(shlex.quote(c) for c in COMMANDS),
        "__SESSION__": SESSION,
        "__CHANNEL__": CHANNEL,
        "__WIDTH__": str(config.width),
        "__HEIGHT__": str(config.height),
    }
    script = BASELINE_SCRIPT
    for key, value in replacements.items():
        script = script.replace(key, value)
    return script


def run_baseline(config: TerminalConfig, steps: int) -> dict[str, Any]:
    """Run the bare tmux loop in a fresh container of the same image and limits."""
    sandbox = DockerSandbox(
        config.image,
        limits=config.limits,
        network="none",
        labels={"worldtrace.domain": "terminal", "worldtrace.benchmark": "terminal"},
    )
    try:
        sandbox.start()
        sandbox.put_file("/tmp/bare-tmux-loop.sh", baseline_script(config).encode(), 0o755)
        result = sandbox.exec(
            ["bash", "/tmp/bare-tmux-loop.sh", str(steps)],
            timeout=60 + steps * 5,
            workdir="/root",
        )
    finally:
        sandbox.close()
    if result.exit_code != 0:
        raise RuntimeError(
            f"baseline loop exited {result.exit_code}: {result.stderr.decode(errors='replace')}"
        )
    per_step: list[float] = []
    send: list[float] = []
    wait: list[float] = []
    capture: list[float] = []
    total = seq = screen = None
    for line in result.text.splitlines():
        kind, *values = line.split()
        if kind == "total":
            total = float(values[1]) - float(values[0])
        elif kind == "step":
            start, sent, woken, end = (float(v) for v in values)
            per_step.append(end - start)
            send.append(sent - start)
            wait.append(woken - sent)
            capture.append(end - woken)
        elif kind == "state":
            seq = int(values[0])
        elif kind == "screen":
            screen = int(values[0])
    # One hook signal for the first prompt plus one per command: the hook really ran.
    if total is None or len(per_step) != steps or seq != steps + 1 or not screen:
        raise RuntimeError(f"baseline loop output is not what was expected:\n{result.text}")
    return {
        "steps": steps,
        "total_s": total,
        "step_s": per_step,
        "send_s": send,
        "wait_s": wait,
        "capture_s": capture,
    }


# --------------------------------------------------------------------------- measurements


def measure_overhead(
    config: TerminalConfig, steps: int, rounds: int, work_dir: Path, log: Any
) -> dict[str, Any]:
    rows = []
    ours_runs = []
    for round_index in range(rounds):
        # Alternate which goes first so that drift in machine load hits both alike.
        order = ("baseline", "ours") if round_index % 2 == 0 else ("ours", "baseline")
        row: dict[str, Any] = {"round": round_index, "loadavg": loadavg()}
        for which in order:
            if which == "baseline":
                base = run_baseline(config, steps)
                row["baseline_mean_ms"] = ms(base["total_s"] / steps)
                row["baseline_median_ms"] = ms(median(base["step_s"]))
            else:
                ours = run_ours(config, steps, work_dir, f"overhead-{round_index}")
                ours_runs.append(ours)
                row["ours_mean_ms"] = ms(ours["total_s"] / steps)
                row["ours_median_ms"] = ms(median(ours["loop_s"]))
        row["ratio_mean"] = round(row["ours_mean_ms"] / row["baseline_mean_ms"], 3)
        row["ratio_median"] = round(row["ours_median_ms"] / row["baseline_median_ms"], 3)
        rows.append(row)
        log(
            f"  round {round_index + 1}/{rounds}: baseline {row['baseline_mean_ms']:.2f} ms/step, "
            f"ours {row['ours_mean_ms']:.2f} ms/step, ratio {row['ratio_mean']:.3f}"
        )
    base_mean = median([r["baseline_mean_ms"] for r in rows])
    ours_mean = median([r["ours_mean_ms"] for r in rows])
    base_median = median([r["baseline_median_ms"] for r in rows])
    ours_median = median([r["ours_median_ms"] for r in rows])
    summary = {
        "steps_per_round": steps,
        "rounds": rows,
        "baseline_ms_per_step": base_mean,
        "ours_ms_per_step": ours_mean,
        "ratio": round(ours_mean / base_mean, 3),
        "baseline_median_step_ms": base_median,
        "ours_median_step_ms": ours_median,
        "ratio_of_median_steps": round(ours_median / base_median, 3),
        "ratio_per_round_median": median([r["ratio_mean"] for r in rows]),
        "target_ratio": TARGET_RATIO,
    }
    summary["target_met"] = summary["ratio"] <= TARGET_RATIO
    return {"summary": summary, "runs": ours_runs}


def phases(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median per-step phase timings over every step of every run, in ms."""

    def pooled(key: str) -> float | None:
        return ms(median([v for run in runs for v in run[key]]))

    def pooled_mean(key: str) -> float | None:
        values = [v for run in runs for v in run[key]]
        return ms(statistics.fmean(values)) if values else None

    keys = {
        "loop_s": "full step (act to act)",
        "latency_s": "env.step",
        "driver_s": "driver total (send+wait+capture)",
        "send_s": "driver send",
        "wait_s": "driver wait",
        "capture_s": "driver capture",
        "transport_s": "env.step - driver total",
        "record_s": "full step - env.step",
    }
    return {
        key.removesuffix("_s"): {
            "label": label,
            "median_ms": pooled(key),
            "mean_ms": pooled_mean(key),
        }
        for key, label in keys.items()
    }


def measure_throughput(
    config: TerminalConfig, steps: int, workers: Sequence[int], work_dir: Path, log: Any
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for count in workers:
        barrier = threading.Barrier(count)
        with ThreadPoolExecutor(max_workers=count) as pool:
            futures = [
                pool.submit(run_ours, config, steps, work_dir, f"throughput-{count}-{i}", barrier)
                for i in range(count)
            ]
            runs = [future.result() for future in futures]
        wall = max(r["end"] for r in runs) - min(r["start"] for r in runs)
        total_steps = steps * count
        results[str(count)] = {
            "workers": count,
            "steps_per_worker": steps,
            "wall_s": round(wall, 3),
            "steps_per_s": round(total_steps / wall, 2),
            "ms_per_step_per_worker": ms(median([r["total_s"] / steps for r in runs])),
            "driver_wait_median_ms": ms(median([v for r in runs for v in r["wait_s"]])),
            "loadavg": loadavg(),
        }
        log(
            f"  {count} worker(s): {results[str(count)]['steps_per_s']:.1f} steps/s "
            f"({wall:.1f} s for {total_steps} steps)"
        )
    one = results[str(workers[0])]["steps_per_s"]
    speedups = {
        f"{count}_vs_{workers[0]}": round(results[str(count)]["steps_per_s"] / one, 3)
        for count in workers[1:]
    }
    return {
        "by_workers": results,
        "speedup": speedups,
        "target_speedup_4_vs_1": TARGET_SPEEDUP_4,
        "target_met": speedups.get("4_vs_1", 0) >= TARGET_SPEEDUP_4,
    }


# --------------------------------------------------------------------------- output


def print_report(report: dict[str, Any]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is a dependency, but stay usable without it
        print(json.dumps(report, indent=2))
        return
    console = Console()
    over = report["overhead"]
    table = Table(title=f"Per-step overhead ({over['steps_per_round']} steps x rounds)")
    for column in ("round", "baseline ms/step", "ours ms/step", "ratio", "median-step ratio"):
        table.add_column(column, justify="right")
    for row in over["rounds"]:
        table.add_row(
            str(row["round"] + 1),
            f"{row['baseline_mean_ms']:.2f}",
            f"{row['ours_mean_ms']:.2f}",
            f"{row['ratio_mean']:.3f}",
            f"{row['ratio_median']:.3f}",
        )
    verdict = "met" if over["target_met"] else "NOT met"
    table.add_row(
        "median",
        f"{over['baseline_ms_per_step']:.2f}",
        f"{over['ours_ms_per_step']:.2f}",
        f"[bold]{over['ratio']:.3f}[/bold] (target <= {TARGET_RATIO}: {verdict})",
        f"{over['ratio_of_median_steps']:.3f}",
        end_section=True,
    )
    console.print(table)

    table = Table(title="Where a step's time goes (ours, pooled over all overhead rounds)")
    for column in ("phase", "median ms", "mean ms"):
        table.add_column(column, justify="right" if column != "phase" else "left")
    for values in report["phases"].values():
        table.add_row(values["label"], f"{values['median_ms']:.2f}", f"{values['mean_ms']:.2f}")
    console.print(table)

    through = report["throughput"]
    table = Table(title="Throughput (parallel environments, threads)")
    for column in ("workers", "steps/s", "ms/step per worker", "wall s", "speed-up"):
        table.add_column(column, justify="right")
    first = next(iter(through["by_workers"]))
    for key, values in through["by_workers"].items():
        speedup = through["speedup"].get(f"{key}_vs_{first}", 1.0)
        table.add_row(
            key,
            f"{values['steps_per_s']:.1f}",
            f"{values['ms_per_step_per_worker']:.2f}",
            f"{values['wall_s']:.1f}",
            f"{speedup:.2f}x",
        )
    console.print(table)
    verdict = "met" if through["target_met"] else "NOT met"
    console.print(
        f"speed-up 4 vs 1: {through['speedup'].get('4_vs_1', float('nan')):.2f}x "
        f"(target >= {TARGET_SPEEDUP_4}: {verdict}); "
        f"2 vs 1: {through['speedup'].get('2_vs_1', float('nan')):.2f}x"
    )
    console.print(f"results written to {report['results_file']}")


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default 300)")
    parser.add_argument("--rounds", type=int, default=None, help="overhead rounds (default 5)")
    parser.add_argument(
        "--throughput-steps", type=int, default=None, help="steps per worker (default: --steps)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run in under a minute")
    parser.add_argument("--image", default=TerminalConfig().image)
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)

    steps = args.steps or (40 if args.quick else 300)
    rounds = args.rounds or (2 if args.quick else 5)
    throughput_steps = args.throughput_steps or (30 if args.quick else steps)
    workers = (1, 2, 4)
    config = TerminalConfig(image=args.image)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    exit_cleanly_on_sigterm()
    try:
        image_id = require_image(config.image)
    except SandboxError as error:
        log(str(error))
        return 2

    started = time.monotonic()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    # The recorder writes where runs normally go (same file system), not to a tmpfs.
    with tempfile.TemporaryDirectory(prefix="bench-terminal-", dir=RESULTS_DIR) as tmp:
        work_dir = Path(tmp)
        log(f"overhead: {rounds} rounds of {steps} steps, baseline and ours alternately")
        overhead = measure_overhead(config, steps, rounds, work_dir, log)
        log(f"throughput: {throughput_steps} steps per worker with {workers} workers")
        throughput = measure_throughput(config, throughput_steps, workers, work_dir, log)

    report = {
        "benchmark": "terminal",
        "created_at": datetime.now(UTC).isoformat(),
        "quick": args.quick,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "loadavg_end": loadavg(),
        },
        "image": config.image,
        "image_id": image_id,
        "limits": config.limits.model_dump(),
        "commands": list(COMMANDS),
        "overhead": overhead["summary"],
        "phases": phases(overhead["runs"]),
        "throughput": throughput,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results_file": str(args.output),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
