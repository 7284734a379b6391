"""Benchmark of the mcp domain: per-call overhead, server start, collection throughput.

Three numbers, each against something measured in the same run:

- **overhead**: the per-step time of tool calls through our environment (``McpEnvironment.step``:
  the request over the exec stream, the driver's SDK session and its raw tap, the server's
  world snapshot after the call, the typed diff on the host) against the same calls through a
  bare SDK client session (``mcp.ClientSession`` over the SDK's own ``stdio_client``, nothing
  recorded) run on the host against the same server in the same container through ``docker
  exec -i``, so both pay the same hop into the container. Ours and the bare session alternate
  call by call. The ratio is the sum of the per-call medians, ours over bare (target ≤ 1.2).
  Also shown: the driver's own ``call_s`` (the SDK request inside the container) and the
  snapshot's share, and a bare session inside the container (no hop at all) as the floor.
- **start**: seconds from a fresh container to a session with its tool list, per server
  (``McpEnvironment.reset``: container, services, server start, ``initialize``, ``tools/list``,
  first snapshot).
- **throughput**: calls per second of a real collection (``explore`` policy on the default
  filesystem server, a fresh container per episode) with 1, 2 and 4 workers.

    .venv/bin/python benchmarks/mcp.py [--quick]

Results go to ``benchmarks/results/mcp.json`` and tables on stdout. The bare session needs the
SDK on the host (``mcp``, in the ``dev`` extra).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from common import explore_throughput, loadavg, log, machine_info, throughput_table, write_report
from rich.console import Console
from rich.table import Table

from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment
from worldtrace.collectors.mcp.servers import IMAGE_TAG, SERVERS
from worldtrace.collectors.tool_calls import tool_call
from worldtrace.flows.logs import configure
from worldtrace.sandboxes.docker import require_image

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "mcp.json"
TARGET_RATIO = 1.2
STEP_TIMEOUT_S = 30.0

WORKLOAD: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "time": [("get_current_time", {"timezone": "Europe/Paris"})],
    "filesystem": [
        ("read_text_file", {"path": "/srv/project/README.md"}),
        ("list_directory", {"path": "/srv/project/src/tidewatch"}),
    ],
    "memory": [("search_nodes", {"query": "Brest"})],
    "git": [("git_log", {"repo_path": "/srv/repo", "max_count": 3})],
    "postgres": [("query", {"sql": "SELECT count(*) FROM orders WHERE status = 'paid'"})],
}
"""Calls that change nothing, so every repetition does the same work."""

IN_CONTAINER_BARE = r"""
import json, sys, time, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
spec = json.load(open("/opt/worldtrace/servers.json"))["servers"][sys.argv[1]]
calls, rounds = json.loads(sys.argv[2]), int(sys.argv[3])
command = spec["transports"]["stdio"]["command"]
params = StdioServerParameters(command=command[0], args=command[1:], env=spec["env"], cwd="/tmp")
async def main():
    times = {name: [] for name, _ in calls}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, arguments in calls:
            await session.call_tool(name, arguments)
        for _ in range(rounds):
            for name, arguments in calls:
                started = time.perf_counter()
                await session.call_tool(name, arguments)
                times[name].append(time.perf_counter() - started)
    print(json.dumps(times))
anyio.run(main)
"""
"""A bare SDK session inside the container (no hop): per-call times, as JSON."""


def sdk_client() -> Any:
    """The MCP SDK's ``mcp`` module, imported from the SDK and not from this file.

    This file is ``mcp.py``, and its folder is first on ``sys.path`` when it runs as a script:
    a plain ``import mcp`` would import the benchmark itself.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [path for path in sys.path if os.path.abspath(path or os.curdir) != here]
    importlib.import_module("mcp.client.stdio")
    return importlib.import_module("mcp")


class BareSession:
    """A bare SDK client session on the host, its server in the container via ``docker exec -i``.

    The SDK's own ``stdio_client`` and ``ClientSession``, entered and left in one task (the
    SDK requires it), nothing recorded.
    """

    def __init__(self, container_id: str, server: str) -> None:
        spec = SERVERS[server]
        command = list(spec.transports["stdio"].command)
        environment = [f"--env={key}={value}" for key, value in spec.env.items()]
        self.sdk = sdk_client()
        self.params = self.sdk.StdioServerParameters(
            command="docker",
            args=["exec", "-i", "--user", "user", *environment, container_id, *command],
        )

    def measure(
        self, calls: list[tuple[str, dict[str, Any]]], rounds: int
    ) -> dict[str, list[float]]:
        """Time ``rounds`` rounds of ``calls`` in one session; per-call seconds by tool."""

        async def run(errlog: Any) -> dict[str, list[float]]:
            times: dict[str, list[float]] = {name: [] for name, _ in calls}
            async with (
                self.sdk.client.stdio.stdio_client(self.params, errlog=errlog) as (read, write),
                self.sdk.ClientSession(read, write) as session,
            ):
                await session.initialize()
                for name, arguments in calls:  # warm the server's paths
                    await session.call_tool(name, arguments)
                for _ in range(rounds):
                    for name, arguments in calls:
                        started = time.perf_counter()
                        await session.call_tool(name, arguments)
                        times[name].append(time.perf_counter() - started)
            return times

        # The server's stderr (its start-up banner) is not the report's business.
        with open(os.devnull, "w") as errlog:
            return anyio.run(run, errlog)


def measure_overhead(server: str, rounds: int, blocks: int) -> dict[str, Any]:
    """Alternate blocks of our calls and a bare session's, ``rounds`` per block."""
    calls = WORKLOAD[server]
    env = McpEnvironment(McpConfig(server=server))
    ours: dict[str, list[float]] = {name: [] for name, _ in calls}
    inside: dict[str, list[float]] = {name: [] for name, _ in calls}
    snapshot: dict[str, list[float]] = {name: [] for name, _ in calls}
    bare: dict[str, list[float]] = {name: [] for name, _ in calls}
    try:
        env.reset(0, None)
        bare_session = BareSession(env.sandbox.container.id, server)
        for name, arguments in calls:  # warm
            env.step(tool_call(name, arguments), STEP_TIMEOUT_S)
        for _ in range(blocks):
            for name, values in bare_session.measure(calls, rounds).items():
                bare[name].extend(values)
            for _ in range(rounds):
                for name, arguments in calls:
                    started = time.perf_counter()
                    outcome = env.step(tool_call(name, arguments), STEP_TIMEOUT_S)
                    ours[name].append(time.perf_counter() - started)
                    if outcome.error:
                        raise RuntimeError(f"{server} {name}: {outcome.error}")
                    raw = outcome.observation
                    inside[name].append(float(raw["call_s"]))
                    snapshot[name].append(float(raw["wall_s"]) - float(raw["call_s"]))
        floor = env.sandbox.exec(
            ["/opt/mcp-venv/bin/python", "-c", IN_CONTAINER_BARE, server, json.dumps(calls),
             str(rounds * blocks)],
            timeout=600,
            user="user",
        )  # fmt: skip
        if floor.exit_code != 0:
            raise RuntimeError(f"the in-container bare session failed: {floor.stderr[-500:]!r}")
        in_container = json.loads(floor.stdout)
    finally:
        env.close()

    def ms(values: list[float]) -> float:
        return round(statistics.median(values) * 1000, 2)

    by_call = {
        f"{server}/{name}": {
            "ours_ms": ms(ours[name]),
            "bare_ms": ms(bare[name]),
            "ratio": round(ms(ours[name]) / ms(bare[name]), 3),
            "driver_call_ms": ms(inside[name]),
            "snapshot_ms": ms(snapshot[name]),
            "bare_in_container_ms": ms(in_container[name]),
        }
        for name, _ in calls
    }
    return by_call


def measure_start(servers: Sequence[str], repeats: int) -> dict[str, Any]:
    """Median seconds of a reset (fresh container to tool list) per server."""
    results: dict[str, Any] = {}
    for server in servers:
        env = McpEnvironment(McpConfig(server=server))
        resets: list[float] = []
        inside: list[float] = []
        try:
            for seed in range(repeats):
                started = time.perf_counter()
                first = env.reset(seed, None)
                resets.append(time.perf_counter() - started)
                inside.append(float(first["start_s"]))
        finally:
            env.close()
        results[server] = {
            "reset_s": round(statistics.median(resets), 2),
            "server_start_s": round(statistics.median(inside), 2),
            "tools": len(first["tools"]),
        }
        log(f"  {server}: {results[server]}")
    return results


def print_report(report: dict[str, Any]) -> None:
    """The three tables of the run."""
    console = Console()
    table = Table(title="mcp calls: our environment vs a bare SDK session (same container)")
    for column in (
        "call", "ours ms", "bare ms", "ratio", "driver call ms", "snapshot ms", "bare inside ms"
    ):  # fmt: skip
        table.add_column(column, justify="right")
    for name, row in report["overhead"]["by_call"].items():
        table.add_row(
            name,
            f"{row['ours_ms']:.2f}",
            f"{row['bare_ms']:.2f}",
            f"{row['ratio']:.2f}",
            f"{row['driver_call_ms']:.2f}",
            f"{row['snapshot_ms']:.2f}",
            f"{row['bare_in_container_ms']:.2f}",
        )
    overhead = report["overhead"]
    met = "met" if overhead["ratio"] <= TARGET_RATIO else "NOT met"
    table.add_row("all", "", "", f"{overhead['ratio']:.2f} (target ≤ {TARGET_RATIO}: {met})")
    console.print(table)
    table = Table(title="server start per episode (fresh container to tool list)")
    for column in ("server", "reset s", "server start s", "tools"):
        table.add_column(column, justify="right")
    for server, row in report["start"].items():
        table.add_row(
            server, f"{row['reset_s']:.2f}", f"{row['server_start_s']:.2f}", str(row["tools"])
        )
    console.print(table)
    title = "collection throughput (explore, filesystem)"
    console.print(throughput_table(report["throughput"], title, "calls"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three measurements and print and save the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None, help="calls per block (default 20)")
    parser.add_argument("--blocks", type=int, default=None, help="alternating blocks (default 5)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes per worker (2)")
    parser.add_argument("--steps", type=int, default=None, help="steps per episode (20)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    rounds = args.rounds or (5 if args.quick else 20)
    blocks = args.blocks or (2 if args.quick else 5)
    episodes = args.episodes or (1 if args.quick else 2)
    steps = args.steps or (8 if args.quick else 20)
    log(f"library logs: {configure('bench-mcp', loud=False)}")
    image_id = require_image(IMAGE_TAG)
    started = datetime.now(UTC)
    load_at_start = loadavg()
    log("overhead ...")
    by_call: dict[str, Any] = {}
    for server in WORKLOAD:
        by_call.update(measure_overhead(server, rounds, blocks))
        log(f"  {server}: done")
    total_ours = sum(row["ours_ms"] for row in by_call.values())
    total_bare = sum(row["bare_ms"] for row in by_call.values())
    overhead = {
        "rounds": rounds * blocks,
        "by_call": by_call,
        "ratio": round(total_ours / total_bare, 3),
        "target": TARGET_RATIO,
    }
    log("start ...")
    start = measure_start(list(SERVERS), repeats=2 if args.quick else 5)
    log("throughput ...")
    with tempfile.TemporaryDirectory(prefix="worldtrace-bench-mcp-") as work:
        throughput = explore_throughput("mcp", {}, episodes, steps, Path(work))
    report = {
        "benchmark": "mcp",
        "started_at": started.isoformat(),
        "machine": machine_info(load_at_start),
        "image": image_id,
        "overhead": overhead,
        "start": start,
        "throughput": throughput,
    }
    print_report(report)
    write_report(args.output, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
