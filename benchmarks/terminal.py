"""Benchmark of the terminal collector's per-step path against bare tmux in the same image.

Run ``.venv/bin/python benchmarks/terminal.py [--steps N] [--rounds R] [--quick]``.

It measures:

1. Per-step overhead. *Ours* is the real episode loop: ``run_episode`` with a policy that plays
   a fixed list of quick shell commands, a ``TerminalEnvironment`` (container + in-container
   tmux driver over one exec stream) and a real ``RunRecorder`` (every step fsynced), timed
   from one ``policy.act`` to the next. The *baseline* runs in its own fresh container of the
   same image and limits: bash starts the tmux session exactly as the driver does (as the
   sandbox's ``user``, on the same socket, with the same name, size, cwd, ``/etc/tmux.conf``
   and prompt hook), then a bash loop, also run as the user, runs per command
   ``tmux send-keys -l`` + ``Enter``, ``tmux wait-for wt-prompt`` (the hook's signal) and
   ``tmux capture-pane -p``, timing itself with ``$EPOCHREALTIME`` so that ``docker exec``
   start-up is not counted. The two never run at the same time. They alternate in chunks of
   ``--chunk`` commands (default 10, one pass over the command list) inside each round, so
   that load from anything else on the machine hits both alike; ``--chunk 0`` alternates
   whole runs instead. Odd rounds run the baseline's chunk before ours, even rounds after.
2. Throughput with 1, 2 and 4 environments stepping in parallel threads (each with its own
   container, driver and recorder), released together by a barrier once all have reset; with
   the CPU each step costs in the containers, in this process and in the Docker daemons.
3. The driver's phase timings (send, wait, capture) next to the baseline's, and where the
   host spends the rest: the ``env.step`` round trip beyond the driver's timed work, and the
   loop's own cost (recording with fsync, policy, history) beyond ``env.step``.

Numbers are printed and written to ``benchmarks/results/terminal.json``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import loadavg, log, machine_info, write_report

from worldtrace.collectors.base import EpisodePlan, HistoryItem, Policy, RawObservation
from worldtrace.collectors.episode import EpisodeLimits, run_episode
from worldtrace.collectors.recorder import RunRecorder, read_episode
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.sandboxes.docker import DockerSandbox, exit_cleanly_on_sigterm, require_image
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.schemas import Action

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "terminal.json"
TARGET_RATIO = 1.15
TARGET_SPEEDUP_4 = 1.7
WORKERS = (1, 2, 4)
LABELS = {"worldtrace.domain": "terminal", "worldtrace.benchmark": "terminal"}

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

# Must match tmux_driver.py: SESSION, CHANNEL, SOCKET, STATE_FILE, USER and the new-session
# arguments of its "start" op.
SESSION = "0"
CHANNEL = "prompt"
SOCKET = "/tmp/tmux-1000/default"
STATE_FILE = SOCKET + ".status"
USER = "user"
HOME = "/home/user"

BASELINE_SETUP = r"""
set -eu
# The session exactly as tmux_driver.py starts it for {"op": "start"}: run as the user.
tmux -S __SOCKET__ new-session -d -s __SESSION__ -x __WIDTH__ -y __HEIGHT__ -c __HOME__ bash
tmux -S __SOCKET__ wait-for __CHANNEL__   # the first prompt's signal: the hook is active
echo ready
"""

BASELINE_LOOP = r"""
set -u
first=$1 count=$2
cmds=(__COMMANDS__)
n=${#cmds[@]}
starts=() sent=() woken=() ends=()
out=""
t0=$EPOCHREALTIME
for ((i = first; i < first + count; i++)); do
  starts+=("$EPOCHREALTIME")
  tmux -S __SOCKET__ send-keys -t __SESSION__ -l -- "${cmds[i % n]}" \; \
    send-keys -t __SESSION__ Enter
  sent+=("$EPOCHREALTIME")
  tmux -S __SOCKET__ wait-for __CHANNEL__
  woken+=("$EPOCHREALTIME")
  out=$(tmux -S __SOCKET__ capture-pane -p -t __SESSION__)
  ends+=("$EPOCHREALTIME")
done
t1=$EPOCHREALTIME
echo "total $t0 $t1 ${#out}"
for ((i = 0; i < count; i++)); do
  echo "step ${starts[i]} ${sent[i]} ${woken[i]} ${ends[i]}"
done
"""


# --------------------------------------------------------------------------- helpers


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def container_cpu_s(container_id: str) -> float | None:
    """CPU seconds used so far by a container's cgroup (v1 cpuacct or v2), None if unknown."""
    v1 = Path("/sys/fs/cgroup/cpuacct/docker", container_id, "cpuacct.usage")
    v2 = Path("/sys/fs/cgroup/system.slice", f"docker-{container_id}.scope", "cpu.stat")
    try:
        if v1.exists():
            return int(v1.read_text()) / 1e9
        for line in v2.read_text().splitlines():
            if line.startswith("usage_usec "):
                return int(line.split()[1]) / 1e6
    except (OSError, ValueError):
        pass
    return None


def container_throttled_s(container_id: str) -> float | None:
    """Time the container's CPU quota held it back so far (cgroup v1 cpu.stat), or None."""
    try:
        text = Path("/sys/fs/cgroup/cpu/docker", container_id, "cpu.stat").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("throttled_time "):
            return int(line.split()[1]) / 1e9
    return None


_TICK = os.sysconf("SC_CLK_TCK")
_DAEMONS = {"dockerd", "containerd", "containerd-shim", "containerd-shim-runc-v2"}


def daemons_cpu_s() -> dict[int, float]:
    """CPU seconds used so far by each of the Docker engine's processes visible here."""
    usage = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        if name in _DAEMONS or name.startswith("containerd-shim"):
            fields = raw[raw.rindex(")") + 2 :].split()
            usage[int(entry.name)] = (int(fields[11]) + int(fields[12])) / _TICK
    return usage


def daemons_delta_s(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU the daemons used between two samples (shims that came and went are missed)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return (total - idle) / _TICK, total / _TICK


def cpu_counters() -> dict[str, Any]:
    busy, total = machine_cpu()
    return {
        "clock": time.monotonic(),
        "process": time.process_time(),
        "daemons": daemons_cpu_s(),
        "machine_busy": busy,
        "machine_total": total,
    }


# --------------------------------------------------------------------------- ours


class CommandLoopPolicy(Policy):
    """Plays ``steps`` commands from a fixed list, in a loop, and notes when act() runs.

    ``interlude(first, count)`` runs the baseline's share between two of our steps; the time
    it takes is excluded from ours. ``probe()`` is sampled after the start barrier and at the
    end, for CPU accounting.
    """

    kind = "script"
    name = "benchmark-command-loop"

    def __init__(
        self,
        commands: Sequence[str],
        steps: int,
        barrier: threading.Barrier | None = None,
        interlude: Callable[[int, int], None] | None = None,
        chunk: int = 0,
        baseline_first: bool = True,
        probe: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self._actions = [command(line) for line in commands]
        self._steps = steps
        self._barrier = barrier
        self._interlude = interlude
        self._chunk = chunk or steps
        self._baseline_first = baseline_first
        self._probe = probe
        self.entered: list[float] = []
        self.left: list[float] = []
        self.probes: list[dict[str, Any]] = []

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        step = len(history)
        if step == 0 and self._barrier is not None:
            self._barrier.wait(timeout=600)
        self.entered.append(time.monotonic())
        if self._probe is not None and step in (0, self._steps):
            self.probes.append(self._probe())
        if self._interlude is not None:
            if self._baseline_first and step % self._chunk == 0 and step < self._steps:
                self._interlude(step, min(self._chunk, self._steps - step))
            elif (
                not self._baseline_first
                and step
                and (step % self._chunk == 0 or step == self._steps)
            ):
                first = (step - 1) // self._chunk * self._chunk
                self._interlude(first, step - first)
        self.left.append(time.monotonic())
        if step >= self._steps:
            return None
        return self._actions[step % len(self._actions)]


def run_ours(
    config: TerminalConfig,
    steps: int,
    work_dir: Path,
    name: str,
    barrier: threading.Barrier | None = None,
    interlude: Callable[[int, int], None] | None = None,
    chunk: int = 0,
    baseline_first: bool = True,
    with_cpu: bool = False,
) -> dict[str, Any]:
    """Play ``steps`` commands through run_episode with a real recorder; return the timings."""
    recorder = RunRecorder(work_dir / name, {"benchmark": "terminal", "run": name})
    writer = recorder.begin("episode-0")
    env = TerminalEnvironment(config, labels=LABELS)

    def probe() -> dict[str, Any]:
        container_id = env.sandbox.container.id
        return {
            **cpu_counters(),
            "container": container_cpu_s(container_id),
            "throttled": container_throttled_s(container_id),
        }

    policy = CommandLoopPolicy(
        COMMANDS,
        steps,
        barrier=barrier,
        interlude=interlude,
        chunk=chunk,
        baseline_first=baseline_first,
        probe=probe if with_cpu else None,
    )
    try:
        result = run_episode(
            env,
            policy,
            writer,
            EpisodePlan(index=0, seed=0, task=None),
            EpisodeLimits(max_steps=steps + 1, step_timeout_s=30.0),
        )
    finally:
        if barrier is not None and not policy.entered:
            barrier.abort()  # never reached the start line: do not keep the others waiting
        env.close()
    if result.status != "completed" or result.steps != steps or result.errors:
        raise RuntimeError(f"benchmark episode {name} went wrong: {result}")
    events = list(read_episode(recorder.layout.sealed / "episode-0.jsonl"))
    image_id = events[0].env.version
    step_events = [e for e in events if e.type == "step"]
    if len(step_events) != steps:
        raise RuntimeError(f"{name}: {len(step_events)} steps recorded, expected {steps}")
    for event in step_events:
        observation = event.observation
        if not observation.get("prompt") or observation.get("timed_out"):
            raise RuntimeError(f"{name}: step {event.step} did not end at a prompt")
    # Step i runs from the end of act() that chose it to the start of the next act().
    loop = [nxt - left for left, nxt in zip(policy.left, policy.entered[1:], strict=False)]
    latency = [e.latency_s for e in step_events]
    timings = [e.observation["timings"] for e in step_events]
    driver = [t["send_s"] + t["wait_s"] + t["capture_s"] for t in timings]
    return {
        "steps": steps,
        "image_id": image_id,
        "start": policy.entered[0],
        "end": policy.entered[-1],
        "total_s": sum(loop),
        "loop_s": loop,
        "latency_s": latency,
        "send_s": [t["send_s"] for t in timings],
        "wait_s": [t["wait_s"] for t in timings],
        "capture_s": [t["capture_s"] for t in timings],
        "driver_s": driver,
        "transport_s": [lat - d for lat, d in zip(latency, driver, strict=True)],
        "record_s": [lp - lat for lp, lat in zip(loop, latency, strict=True)],
        "probes": policy.probes,
    }


# --------------------------------------------------------------------------- baseline


def _fill(script: str, config: TerminalConfig) -> str:
    replacements = {
        "__COMMANDS__": " ".join(shlex.quote(c) for c in COMMANDS),
        "__SESSION__": SESSION,
        "__CHANNEL__": CHANNEL,
        "__SOCKET__": SOCKET,
        "__HOME__": HOME,
        "__WIDTH__": str(config.width),
        "__HEIGHT__": str(config.height),
    }
    for key, value in replacements.items():
        script = script.replace(key, value)
    return script


class BareTmux:
    """The baseline: a fresh container of the same image and limits, tmux driven by bash."""

    def __init__(self, config: TerminalConfig) -> None:
        self.config = config
        self.sandbox = DockerSandbox(
            config.image, limits=config.limits, network="none", labels=LABELS
        )
        self.image_id = ""
        self.steps = 0
        self.total_s = 0.0
        self.step_s: list[float] = []
        self.send_s: list[float] = []
        self.wait_s: list[float] = []
        self.capture_s: list[float] = []

    def start(self) -> BareTmux:
        self.sandbox.start()
        self.image_id = self.sandbox.image_id
        self.sandbox.put_file("/tmp/bare-setup.sh", _fill(BASELINE_SETUP, self.config).encode())
        self.sandbox.put_file("/tmp/bare-loop.sh", _fill(BASELINE_LOOP, self.config).encode())
        result = self.sandbox.exec(
            ["bash", "/tmp/bare-setup.sh"], timeout=30, workdir=HOME, user=USER
        )
        if result.exit_code != 0 or result.text.strip() != "ready":
            raise RuntimeError(f"baseline tmux setup failed: {result.stderr!r}")
        return self

    def run(self, first: int, count: int) -> None:
        """Run commands ``first`` .. ``first + count - 1`` of the loop, timed inside."""
        result = self.sandbox.exec(
            ["bash", "/tmp/bare-loop.sh", str(first), str(count)],
            timeout=60 + count * 5,
            workdir=HOME,
            user=USER,
        )
        if result.exit_code != 0:
            raise RuntimeError(f"baseline loop exited {result.exit_code}: {result.stderr!r}")
        lines = [line.split() for line in result.text.splitlines()]
        kind, t0, t1, screen = lines[0]
        steps = [[float(v) for v in values] for kind, *values in lines[1:] if kind == "step"]
        if kind != "total" or len(steps) != count or int(screen) == 0:
            raise RuntimeError(f"baseline loop output is not what was expected:\n{result.text}")
        self.steps += count
        self.total_s += float(t1) - float(t0)
        for start, sent, woken, end in steps:
            self.step_s.append(end - start)
            self.send_s.append(sent - start)
            self.wait_s.append(woken - sent)
            self.capture_s.append(end - woken)

    def finish(self) -> dict[str, Any]:
        """Check that the hook fired once per command, and return the timings."""
        state = self.sandbox.exec(["cut", "-f3", STATE_FILE], timeout=10).text.strip()
        # One signal for the first prompt plus one per command: the hook really ran each time.
        if state != str(self.steps + 1):
            raise RuntimeError(f"baseline: prompt hook count {state!r}, expected {self.steps + 1}")
        return {
            "steps": self.steps,
            "image_id": self.image_id,
            "total_s": self.total_s,
            "step_s": self.step_s,
            "send_s": self.send_s,
            "wait_s": self.wait_s,
            "capture_s": self.capture_s,
        }

    def close(self) -> None:
        self.sandbox.close()


# --------------------------------------------------------------------------- measurements


def measure_overhead(
    config: TerminalConfig,
    steps: int,
    rounds: int,
    chunk: int,
    work_dir: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    rows = []
    ours_runs, base_runs = [], []
    for round_index in range(rounds):
        baseline_first = round_index % 2 == 0
        row: dict[str, Any] = {
            "round": round_index,
            "baseline_first": baseline_first,
            "loadavg": loadavg(),
        }
        bare = BareTmux(config)
        try:
            bare.start()
            ours = run_ours(
                config,
                steps,
                work_dir,
                f"overhead-{round_index}",
                interlude=bare.run,
                chunk=chunk,
                baseline_first=baseline_first,
            )
            base = bare.finish()
        finally:
            bare.close()
        ours_runs.append(ours)
        base_runs.append(base)
        row["image_ids"] = sorted({ours["image_id"], base["image_id"]})
        row["baseline_ms_per_step"] = ms(base["total_s"] / steps)
        row["ours_ms_per_step"] = ms(ours["total_s"] / steps)
        row["baseline_median_step_ms"] = ms(median(base["step_s"]))
        row["ours_median_step_ms"] = ms(median(ours["loop_s"]))
        row["ratio"] = round(row["ours_ms_per_step"] / row["baseline_ms_per_step"], 3)
        row["ratio_of_median_steps"] = round(
            row["ours_median_step_ms"] / row["baseline_median_step_ms"], 3
        )
        rows.append(row)
        log(
            f"  round {round_index + 1}/{rounds}: baseline {row['baseline_ms_per_step']:.2f} "
            f"ms/step, ours {row['ours_ms_per_step']:.2f} ms/step, ratio {row['ratio']:.3f}"
        )
    base_mean = median([r["baseline_ms_per_step"] for r in rows])
    ours_mean = median([r["ours_ms_per_step"] for r in rows])
    summary = {
        "steps_per_round": steps,
        "chunk": chunk or steps,
        "rounds": rows,
        "baseline_ms_per_step": base_mean,
        "ours_ms_per_step": ours_mean,
        "ratio": round(ours_mean / base_mean, 3),
        "median_of_round_ratios": median([r["ratio"] for r in rows]),
        "baseline_median_step_ms": median([r["baseline_median_step_ms"] for r in rows]),
        "ours_median_step_ms": median([r["ours_median_step_ms"] for r in rows]),
        "target_ratio": TARGET_RATIO,
    }
    summary["target_met"] = summary["ratio"] <= TARGET_RATIO
    return {"summary": summary, "ours": ours_runs, "baseline": base_runs}


PHASES = {
    "loop": "full step (act to act) / bare step",
    "latency": "env.step",
    "driver": "driver total (send+wait+capture)",
    "send": "  send keys",
    "wait": "  wait for prompt",
    "capture": "  capture",
    "transport": "env.step - driver total",
    "record": "full step - env.step",
}
BASELINE_KEYS = {"loop": "step_s", "send": "send_s", "wait": "wait_s", "capture": "capture_s"}


def phases(ours: list[dict[str, Any]], base: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-step phase timings pooled over every step of every round, in ms."""

    def stats(runs: list[dict[str, Any]], key: str) -> dict[str, float | None]:
        values = [v for run in runs for v in run[key]]
        return {
            "median_ms": ms(median(values)),
            "mean_ms": ms(statistics.fmean(values)) if values else None,
        }

    result = {}
    for name, label in PHASES.items():
        entry: dict[str, Any] = {"label": label.strip(), "ours": stats(ours, f"{name}_s")}
        if name in BASELINE_KEYS:
            entry["baseline"] = stats(base, BASELINE_KEYS[name])
        result[name] = entry
    return result


def measure_throughput(
    config: TerminalConfig,
    steps: int,
    rounds: int,
    work_dir: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    samples: dict[int, list[dict[str, Any]]] = {count: [] for count in WORKERS}
    for round_index in range(rounds):
        for count in WORKERS:
            barrier = threading.Barrier(count)
            with ThreadPoolExecutor(max_workers=count) as pool:
                futures = [
                    pool.submit(
                        run_ours,
                        config,
                        steps,
                        work_dir,
                        f"throughput-{round_index}-{count}-{i}",
                        barrier=barrier,
                        with_cpu=True,
                    )
                    for i in range(count)
                ]
                runs = [future.result() for future in futures]
            samples[count].append(_throughput_sample(runs, steps))
            sample = samples[count][-1]
            log(
                f"  round {round_index + 1}/{rounds}, {count} worker(s): "
                f"{sample['steps_per_s']:.1f} steps/s, machine busy {sample['machine_busy']:.0%}"
            )
    by_workers = {}
    for count, values in samples.items():
        by_workers[str(count)] = {
            "workers": count,
            "steps_per_worker": steps,
            "steps_per_s": median([v["steps_per_s"] for v in values]),
            "ms_per_step_per_worker": median([v["ms_per_step_per_worker"] for v in values]),
            "cpu_ms_per_step": {
                key: median([v["cpu_ms_per_step"][key] for v in values])
                for key in values[0]["cpu_ms_per_step"]
            },
            "machine_busy": median([v["machine_busy"] for v in values]),
            "cpu_bound_ceiling_steps_per_s": median(
                [v["cpu_bound_ceiling_steps_per_s"] or 0.0 for v in values]
            ),
            "rounds": values,
        }
    one = by_workers[str(WORKERS[0])]["steps_per_s"]
    speedup = {
        f"{count}_vs_{WORKERS[0]}": round(by_workers[str(count)]["steps_per_s"] / one, 3)
        for count in WORKERS[1:]
    }
    return {
        "by_workers": by_workers,
        "speedup": speedup,
        "target_speedup_4_vs_1": TARGET_SPEEDUP_4,
        "target_met": speedup.get("4_vs_1", 0) >= TARGET_SPEEDUP_4,
    }


def _throughput_sample(runs: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    first = min((r["probes"][0] for r in runs), key=lambda p: p["clock"])
    last = max((r["probes"][-1] for r in runs), key=lambda p: p["clock"])
    wall = last["clock"] - first["clock"]
    total_steps = steps * len(runs)

    def per_step(key: str, source: str = "run") -> float | None:
        if key == "daemons":
            return ms(daemons_delta_s(first[key], last[key]) / total_steps)
        if source == "machine":
            return ms((last[key] - first[key]) / total_steps)
        deltas = [r["probes"][-1][key] - r["probes"][0][key] for r in runs]
        return ms(sum(deltas) / total_steps) if None not in deltas else None

    containers = [r["probes"][-1]["container"] for r in runs] + [
        r["probes"][0]["container"] for r in runs
    ]
    cpu = {
        "container": per_step("container") if None not in containers else None,
        "container_throttled": per_step("throttled"),
        # process_time and the daemons are shared by all workers: measured once.
        "host_process": per_step("process", "machine"),
        "docker_daemons": per_step("daemons", "machine"),
        "machine_busy": per_step("machine_busy", "machine"),
    }
    ours_cpu = (
        cpu["container"] + cpu["host_process"] + cpu["docker_daemons"]
        if cpu["container"] is not None
        else None
    )
    cpu["ours_total"] = round(ours_cpu, 3) if ours_cpu is not None else None
    return {
        "image_ids": sorted({r["image_id"] for r in runs}),
        "wall_s": round(wall, 3),
        "steps_per_s": round(total_steps / wall, 2),
        "ms_per_step_per_worker": ms(median([r["total_s"] / steps for r in runs])),
        "cpu_ms_per_step": cpu,
        # If our own CPU per step were the only limit and every core were ours.
        "cpu_bound_ceiling_steps_per_s": (
            round((os.cpu_count() or 1) * 1000 / ours_cpu, 1) if ours_cpu else None
        ),
        "machine_busy": round(
            (last["machine_busy"] - first["machine_busy"])
            / (last["machine_total"] - first["machine_total"]),
            3,
        ),
        "loadavg": loadavg(),
    }


# --------------------------------------------------------------------------- output


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    # Wide enough for the tables when the output goes to a file or a pipe.
    console = Console(width=None if sys.stdout.isatty() else 150)
    over = report["overhead"]
    table = Table(
        title=f"Per-step overhead: {over['steps_per_round']} steps per round, "
        f"alternating every {over['chunk']} steps"
    )
    columns = ("round", "baseline ms/step", "ours ms/step", "ratio", "median-step ratio")
    for column in columns:
        table.add_column(column, justify="right")
    for row in over["rounds"]:
        table.add_row(
            str(row["round"] + 1),
            f"{row['baseline_ms_per_step']:.2f}",
            f"{row['ours_ms_per_step']:.2f}",
            f"{row['ratio']:.3f}",
            f"{row['ratio_of_median_steps']:.3f}",
        )
    verdict = "met" if over["target_met"] else "NOT met"
    table.add_section()
    table.add_row(
        "median",
        f"{over['baseline_ms_per_step']:.2f}",
        f"{over['ours_ms_per_step']:.2f}",
        f"[bold]{over['ratio']:.3f}[/bold]",
        f"{over['ours_median_step_ms'] / over['baseline_median_step_ms']:.3f}",
    )
    console.print(table)
    console.print(
        f"ratio ours/baseline {over['ratio']:.3f} (target <= {TARGET_RATIO}: {verdict}); "
        f"median of round ratios {over['median_of_round_ratios']:.3f}"
    )

    table = Table(title="Where a step's time goes (medians and means over all overhead steps)")
    table.add_column("phase")
    for column in ("ours median", "ours mean", "bare median", "bare mean"):
        table.add_column(column + " ms", justify="right")
    for values in report["phases"].values():
        base = values.get("baseline", {})
        table.add_row(
            values["label"],
            _fmt(values["ours"]["median_ms"]),
            _fmt(values["ours"]["mean_ms"]),
            _fmt(base.get("median_ms")),
            _fmt(base.get("mean_ms")),
        )
    console.print(table)

    through = report["throughput"]
    table = Table(title="Throughput: parallel environments in threads (medians over rounds)")
    columns = (
        "workers",
        "steps/s",
        "speed-up",
        "ms/step per worker",
        "machine busy",
        "CPU ms/step: container",
        "throttled",
        "host python",
        "dockerd+shims",
        "ours total",
        "whole machine",
        "ceiling steps/s",
    )
    for column in columns:
        table.add_column(column, justify="right")
    for key, values in through["by_workers"].items():
        cpu = values["cpu_ms_per_step"]
        table.add_row(
            key,
            f"{values['steps_per_s']:.1f}",
            f"{through['speedup'].get(f'{key}_vs_{WORKERS[0]}', 1.0):.2f}x",
            f"{values['ms_per_step_per_worker']:.2f}",
            f"{values['machine_busy']:.0%}",
            _fmt(cpu["container"]),
            _fmt(cpu["container_throttled"]),
            _fmt(cpu["host_process"]),
            _fmt(cpu["docker_daemons"]),
            _fmt(cpu["ours_total"]),
            _fmt(cpu["machine_busy"]),
            _fmt(values["cpu_bound_ceiling_steps_per_s"], ".1f"),
        )
    console.print(table)
    verdict = "met" if through["target_met"] else "NOT met"
    ceiling = through["by_workers"]["4"]["cpu_bound_ceiling_steps_per_s"]
    one = through["by_workers"]["1"]["steps_per_s"]
    console.print(
        "ceiling steps/s: all cores divided by our CPU per step (container + host + daemons) "
        f"at that concurrency; with 4 workers it allows at most {ceiling / one:.2f}x over 1"
    )
    console.print(
        f"speed-up 4 vs 1: {through['speedup']['4_vs_1']:.2f}x "
        f"(target >= {TARGET_SPEEDUP_4}: {verdict}); 2 vs 1: {through['speedup']['2_vs_1']:.2f}x"
    )
    if report["image_ids_seen"] != [report["image_id"]]:
        console.print(
            "[bold red]the image changed during the run; the numbers mix two images:[/] "
            + ", ".join(i.removeprefix("sha256:")[:12] for i in report["image_ids_seen"])
        )
    console.print(
        f"image {report['image']} {report['image_id'].removeprefix('sha256:')[:12]}; "
        f"load average at the end {report['machine']['loadavg_end']} on "
        f"{report['machine']['cpus']} CPUs; results written to {report['results_file']}"
    )


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="steps per round (default 300)")
    parser.add_argument("--rounds", type=int, default=None, help="overhead rounds (default 5)")
    parser.add_argument(
        "--chunk",
        type=int,
        default=len(COMMANDS),
        help="alternate baseline and ours every this many steps (0: whole runs)",
    )
    parser.add_argument(
        "--throughput-steps", type=int, default=None, help="steps per worker (default 200)"
    )
    parser.add_argument(
        "--throughput-rounds", type=int, default=None, help="throughput rounds (default 3)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run in under a minute")
    parser.add_argument("--image", default=TerminalConfig().image)
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)

    steps = args.steps or (30 if args.quick else 300)
    rounds = args.rounds or (2 if args.quick else 5)
    throughput_steps = args.throughput_steps or (20 if args.quick else 200)
    throughput_rounds = args.throughput_rounds or (1 if args.quick else 3)
    config = TerminalConfig(image=args.image)

    exit_cleanly_on_sigterm()
    try:
        image_id = require_image(config.image)
    except SandboxError as error:
        log(str(error))
        return 2

    started = time.monotonic()
    loadavg_start = loadavg()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    # The recorder writes where runs normally go (the same file system), not to a tmpfs.
    with tempfile.TemporaryDirectory(prefix="bench-terminal-", dir=RESULTS_DIR) as tmp:
        work_dir = Path(tmp)
        log(
            f"overhead: {rounds} rounds of {steps} steps, baseline and ours alternating every "
            f"{args.chunk or steps} steps"
        )
        overhead = measure_overhead(config, steps, rounds, args.chunk, work_dir, log)
        log(f"throughput: {throughput_rounds} rounds of {throughput_steps} steps per worker")
        throughput = measure_throughput(config, throughput_steps, throughput_rounds, work_dir, log)

    seen = {i for row in overhead["summary"]["rounds"] for i in row["image_ids"]}
    for values in throughput["by_workers"].values():
        seen.update(i for sample in values["rounds"] for i in sample["image_ids"])
    if seen != {image_id}:
        log(f"WARNING: the image {config.image} changed during the run: {sorted(seen)}")
    report = {
        "benchmark": "terminal",
        "created_at": datetime.now(UTC).isoformat(),
        "quick": args.quick,
        "machine": machine_info(loadavg_start),
        "image": config.image,
        "image_id": image_id,
        "image_ids_seen": sorted(seen),
        "limits": config.limits.model_dump(),
        "commands": list(COMMANDS),
        "overhead": overhead["summary"],
        "phases": phases(overhead["ours"], overhead["baseline"]),
        "throughput": throughput,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results_file": str(args.output),
    }
    write_report(args.output, report)
    print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
