"""Benchmark of the android domain: our step against the bare uiautomator2 calls it makes.

Measured in one run, on one device (the stand-in of ``tests/android/standin``, started here
in a process of its own with an adb server on a free port, unless ``--device`` names a real
one): the same action, a tap on Settings' Wi-Fi row (twice per round, so the device ends as
it began), through

- **ours**: ``AndroidEnvironment.step`` (the index resolved to the element's centre, the tap,
  settling: looks until two hierarchy dumps agree with no window transition, the screenshot
  as the device sent it, the element list parsed for the next step);
- **bare**: a client of uiautomator2 doing the same device work by hand: ``click``, then
  ``dump_hierarchy`` and the same ``dumpsys`` shell call per look until two dumps agree, the
  same pause between looks, then ``screenshot`` kept as uiautomator2 returns it.

Blocks of ours and bare alternate (and which goes first). The JPEG becomes the record's PNG
when the run is normalized, not in the step: that cost is measured apart (``render``). The
ratio is ours over bare, of the median step times (target ≤ 1.1), with the CPU this process
spends per step on each side. On the stand-in the device is cheap, so the ratio is an upper
bound of what a real device (whose dumps take 0.1-1 s) shows.

    .venv/bin/python benchmarks/android.py [--quick] [--device SERIAL --adb-server HOST:PORT]

Results go to ``benchmarks/results/android.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import loadavg, log, machine_info, write_report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the stand-in device lives in tests/

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.android.standin import standin_process  # noqa: E402
from worldtrace.collectors.android.actions import make_action  # noqa: E402
from worldtrace.collectors.android.device import LOOK_COMMAND, AndroidDevice  # noqa: E402
from worldtrace.collectors.android.environment import AndroidConfig, AndroidEnvironment  # noqa: E402
from worldtrace.collectors.android.render import AndroidRenderer, screen_text  # noqa: E402
from worldtrace.collectors.android.tasks import load_tasks  # noqa: E402

RESULTS_FILE = Path(__file__).resolve().parent / "results" / "android.json"
TARGET_RATIO = 1.1
WIFI_TASK = next(task for task in load_tasks() if task.name == "settings-wifi-off")


def free_port() -> int:
    """A TCP port nothing listens on now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def standin_device() -> Iterator[tuple[str, str]]:
    """A stand-in device in its own process, and an adb server of ours: (serial, server)."""
    adb_port = free_port()
    subprocess.run(["adb", "-P", str(adb_port), "start-server"], check=True, capture_output=True)
    try:
        with standin_process(free_port()) as serial:
            yield serial, f"127.0.0.1:{adb_port}"
    finally:
        subprocess.run(["adb", "-P", str(adb_port), "kill-server"], capture_output=True)


def wifi_index(observation: dict[str, Any]) -> int:
    """The index of the Wi-Fi row in the element list."""
    line = next(line for line in screen_text(observation).splitlines() if '"Wi-Fi"' in line)
    return int(line[1:3])


def bare_step(device: AndroidDevice, point: tuple[int, int], poll_s: float, cap_s: float) -> Any:
    """The same device work as our step, with uiautomator2 and adbutils called directly."""
    ui, adb = device.ui, device.adb
    ui.click(*point)
    started = time.monotonic()
    previous = ui.dump_hierarchy()
    adb.shell2(LOOK_COMMAND)
    while time.monotonic() - started < cap_s:
        time.sleep(poll_s)
        again = ui.dump_hierarchy()
        adb.shell2(LOOK_COMMAND)
        if again == previous:
            break
        previous = again
    return ui.screenshot()


def measure(env: AndroidEnvironment, blocks: int, per_block: int) -> dict[str, Any]:
    """Alternating blocks of our steps and bare ones; their times and CPU per step."""
    first = env.reset(0, WIFI_TASK)
    index = wifi_index(first)
    point = env._elements[index].center
    config = env.config
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    cpu: dict[str, float] = {"ours": 0.0, "bare": 0.0}
    for block in range(blocks):
        order = ("ours", "bare") if block % 2 == 0 else ("bare", "ours")
        for side in order:
            cpu_started = time.process_time()
            for _ in range(per_block):
                started = time.perf_counter()
                if side == "ours":
                    outcome = env.step(make_action("click", index=index), 30)
                    assert outcome.error is None, outcome.error
                else:
                    bare_step(env.device, point, config.settle_poll_s, config.settle_timeout_s)
                times[side].append(time.perf_counter() - started)
            cpu[side] += time.process_time() - cpu_started
    steps = blocks * per_block
    ours, bare = statistics.median(times["ours"]), statistics.median(times["bare"])
    renderer = AndroidRenderer()
    render_started = time.process_time()
    for _ in range(10):
        renderer.observation(outcome.observation)
    render_cpu = (time.process_time() - render_started) / 10
    return {
        "steps_per_side": steps,
        "ours_median_s": round(ours, 4),
        "bare_median_s": round(bare, 4),
        "ratio": round(ours / bare, 3),
        "ours_cpu_per_step_s": round(cpu["ours"] / steps, 4),
        "bare_cpu_per_step_s": round(cpu["bare"] / steps, 4),
        "target_ratio": TARGET_RATIO,
        "render_cpu_per_observation_s": round(render_cpu, 4),
    }


def print_report(report: dict[str, Any]) -> None:
    """The numbers as a table."""
    table = Table(title=f"android step against bare uiautomator2 ({report['device']})")
    for column in ("side", "median step (s)", "CPU per step (s)"):
        table.add_column(column)
    step = report["step"]
    table.add_row("ours", str(step["ours_median_s"]), str(step["ours_cpu_per_step_s"]))
    table.add_row("bare", str(step["bare_median_s"]), str(step["bare_cpu_per_step_s"]))
    table.add_row("ratio", f"{step['ratio']} (target ≤ {TARGET_RATIO})", "")
    render = step["render_cpu_per_observation_s"]
    table.add_row("render (normalize)", "", f"{render} (the JPEG as PNG, the element list)")
    Console().print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement and print and save the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=None, help="alternating blocks (6)")
    parser.add_argument("--per-block", type=int, default=10, help="steps per block")
    parser.add_argument("--quick", action="store_true", help="a smoke run of under a minute")
    parser.add_argument("--device", help="a real device's serial or host:port")
    parser.add_argument("--adb-server", default="127.0.0.1:5037", help="with --device")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    blocks = args.blocks or (2 if args.quick else 6)
    started = datetime.now(UTC)
    load_at_start = loadavg()
    with (
        standin_device() if args.device is None else _given(args.device, args.adb_server) as (
            serial,
            server,
        )
    ):
        env = AndroidEnvironment(AndroidConfig(device=serial, adb_server=server))
        try:
            log(f"android: {blocks} blocks of {args.per_block} steps per side on {serial} ...")
            step = measure(env, blocks, args.per_block)
        finally:
            env.close()
    report = {
        "benchmark": "android",
        "started_at": started.isoformat(),
        "machine": machine_info(load_at_start),
        "device": "stand-in" if args.device is None else args.device,
        "step": step,
    }
    print_report(report)
    write_report(args.output, report)
    return 0


@contextmanager
def _given(serial: str, server: str) -> Iterator[tuple[str, str]]:
    yield serial, server


if __name__ == "__main__":
    raise SystemExit(main())
