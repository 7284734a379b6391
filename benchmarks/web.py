"""Benchmark of the web environment on the real sites, against bare Playwright in the same run.

Run ``.venv/bin/python benchmarks/web.py [--steps N] [--quick]``.

Three measurements, printed as tables and written to ``benchmarks/results/web.json``:

* **step latency** on a small and a large page of each site, split into the phases the
  environment records (action, settle, tree extraction, screenshot), for a fixed cycle of
  actions (reload the page, scroll down, scroll up, hover a link). The same cycle also runs
  as a *bare* Playwright loop on the same page — the action, ``wait_for_load_state``,
  DevTools' ``Accessibility.getFullAXTree`` and a screenshot, with no bids, no frame
  merging, no settle wait and no text — alternating with ours so load hits both alike; the
  ratio ours / bare says what our observation costs on top of what any recorder pays.
  Target: median step <= 0.3 s on small pages.
* **throughput**: steps per second of the exploring policy with 1 and 2 workers (threads,
  each with its own browser and its own site container), recorded to disk as in a real run.
* **tree extraction vs page size**: extraction time over Datasette table pages of growing
  size (``?_size=N``), with the least-squares slope in milliseconds per 1,000 nodes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from common import loadavg, log, machine_info, write_report

from worldtrace.collectors.base import EpisodePlan
from worldtrace.collectors.episode import EpisodeLimits, run_episode
from worldtrace.collectors.recorder import RunRecorder, read_episode
from worldtrace.collectors.web import WebCollector
from worldtrace.collectors.web.actions import make_action
from worldtrace.collectors.web.axtree import node_role
from worldtrace.collectors.web.browser import close_thread_browser, thread_browser
from worldtrace.collectors.web.environment import WebConfig, WebEnvironment
from worldtrace.collectors.web.explore import ExplorePolicy
from worldtrace.sandboxes.sites import SITES
from worldtrace.sandboxes.websites import RunningSite, start_site

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "web.json"
TARGET_SMALL_MEDIAN_S = 0.3

PAGES: dict[str, dict[str, str]] = {
    "trac": {"small": "/wiki/WikiStart", "large": "/report/1"},
    "datasette": {"small": "/", "large": "/library/loans?_size=1000"},
    "tiddlywiki": {"small": "/", "large": "/"},
}
"""A small and a large page per site (TiddlyWiki is one page: its size is what it is)."""

GROWTH_SIZES = (10, 50, 100, 250, 500, 1000)
"""Rows per Datasette table page for the extraction-growth measurement."""


def _first_link(observation: dict[str, Any]) -> str | None:
    for node in observation["axtree"]["nodes"]:
        if node_role(node) == "link" and "browsergym_id" in node:
            return node["browsergym_id"]
    return None


def _ours_cycle(env: WebEnvironment, url: str, steps: int) -> list[dict[str, float]]:
    """Run the action cycle through the environment; return each step's phase timings."""
    rows = []
    observation = env.step(make_action("goto", url), 60).observation
    link = _first_link(observation)
    cycle = [
        make_action("goto", url),
        make_action("scroll", 0, 400),
        make_action("scroll", 0, -400),
    ]
    if link is not None:
        cycle.append(make_action("hover", link))
    for index in range(steps):
        started = time.perf_counter()
        outcome = env.step(cycle[index % len(cycle)], 60)
        total = time.perf_counter() - started
        rows.append({"total_s": total, **outcome.observation["timing"]})
    return rows


def _bare_cycle(env: WebEnvironment, url: str, steps: int) -> list[float]:
    """The same actions with bare Playwright calls on the same page; return step times."""
    page = env.page
    cdp = page.context.new_cdp_session(page)
    page.goto(url)
    times = []
    for index in range(steps):
        started = time.perf_counter()
        match index % 4:
            case 0:
                page.goto(url)
            case 1:
                page.mouse.wheel(0, 400)
            case 2:
                page.mouse.wheel(0, -400)
            case _:
                page.locator("a").first.hover(timeout=2000)
        page.wait_for_load_state("load")
        cdp.send("Accessibility.getFullAXTree")
        page.screenshot(type="png")
        times.append(time.perf_counter() - started)
    cdp.detach()
    return times


def _site_starter(site: RunningSite) -> Callable[[WebConfig, Any], tuple[Any, str]]:
    # One site container for the whole measurement: resets would measure Docker, not steps.
    class Shared:
        origin = site.origin

        def url(self, path: str) -> str:
            return site.url(path)

        def versions(self) -> dict[str, str]:
            return site.versions()

        def close(self) -> None:
            pass

    return lambda _config, _network: (Shared(), site.definition.start_path)


def _shared_site(site_name: str) -> RunningSite:
    """The site, started in this thread's browser network (the only place the browser sees)."""
    return start_site(SITES[site_name], network=thread_browser().network)


LARGE_PAGE_STEPS = 8
"""Steps per round on large pages (one such step takes seconds, not tenths)."""


def measure_latency(site_name: str, steps: int, rounds: int) -> dict[str, Any]:
    """Per-phase step latency on the site's small and large page, ours vs bare."""
    result: dict[str, Any] = {}
    with _shared_site(site_name) as site:
        env = WebEnvironment(WebConfig(site=site_name), start_site=_site_starter(site))
        try:
            env.reset(0, None)
            for size, path in PAGES[site_name].items():
                ours: list[dict[str, float]] = []
                bare: list[float] = []
                count = steps if size == "small" else min(steps, LARGE_PAGE_STEPS)
                for _ in range(rounds):
                    ours += _ours_cycle(env, site.url(path), count)
                    bare += _bare_cycle(env, site.url(path), count)
                nodes = env.step(make_action("goto", site.url(path)), 60).observation
                phases = {
                    key: round(statistics.median(row[key] for row in ours), 4)
                    for key in ("total_s", "action_s", "settle_s", "extract_s", "screenshot_s")
                }
                result[size] = {
                    "path": path,
                    "tree_nodes": nodes["tree_nodes"],
                    "median": phases,
                    "p90_total_s": round(
                        statistics.quantiles([r["total_s"] for r in ours], n=10)[-1], 4
                    ),
                    "bare_median_s": round(statistics.median(bare), 4),
                    "ratio": round(phases["total_s"] / statistics.median(bare), 3),
                }
                log(f"{site_name} {size}: {result[size]}")
        finally:
            env.close()
    close_thread_browser()
    return result


def _explore_worker(site_name: str, steps: int, seed: int, out: Path, counts: list[int]) -> None:
    env = WebEnvironment(WebConfig(site=site_name))
    recorder = RunRecorder(out, {"benchmark": "web", "site": site_name})
    try:
        writer = recorder.begin(f"bench-{seed}")
        result = run_episode(
            env,
            ExplorePolicy(),
            writer,
            EpisodePlan(index=seed, seed=seed),
            EpisodeLimits(max_steps=steps, step_timeout_s=60),
        )
        counts.append(result.steps)
    finally:
        env.close()
        close_thread_browser()


def measure_throughput(site_name: str, steps: int, workers: int, out: Path) -> dict[str, Any]:
    """Steps per second of ``workers`` exploring episodes at once.

    Two figures: over the wall time (site start-up and browser launch included), and over
    the recorded step latencies divided by the number of workers stepping in parallel.
    """
    counts: list[int] = []
    threads = [
        threading.Thread(target=_explore_worker, args=(site_name, steps, seed, out, counts))
        for seed in range(workers)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    step_time = _recorded_step_seconds(out)
    return {
        "workers": workers,
        "steps": sum(counts),
        "wall_s": round(wall, 2),
        "steps_per_s_wall": round(sum(counts) / wall, 2),
        "steps_per_s_stepping": round(sum(counts) / (step_time / workers), 2) if step_time else 0,
    }


def _recorded_step_seconds(run_dir: Path) -> float:
    """The step latencies the recorder wrote, summed over every episode of the run."""
    return sum(
        event.latency_s
        for path in (run_dir / "raw" / "episodes").glob("*.jsonl")
        for event in read_episode(path)
        if event.type == "step"
    )


def measure_growth(sizes: Sequence[int]) -> dict[str, Any]:
    """Tree extraction time against the number of accessibility nodes (Datasette tables)."""
    points = []
    with _shared_site("datasette") as site:
        env = WebEnvironment(WebConfig(site="datasette"), start_site=_site_starter(site))
        try:
            env.reset(0, None)
            for size in sizes:
                samples = []
                nodes = 0
                for _ in range(3):
                    observation = env.step(
                        make_action("goto", site.url(f"/library/loans?_size={size}")), 60
                    ).observation
                    samples.append(observation["timing"]["extract_s"])
                    nodes = observation["tree_nodes"]
                points.append(
                    {"rows": size, "nodes": nodes, "extract_s": statistics.median(samples)}
                )
                log(f"growth: {points[-1]}")
        finally:
            env.close()
    close_thread_browser()
    xs = [p["nodes"] for p in points]
    ys = [p["extract_s"] for p in points]
    slope, intercept = statistics.linear_regression(xs, ys)
    return {
        "points": points,
        "ms_per_1000_nodes": round(slope * 1e6, 2),
        "intercept_ms": round(intercept * 1000, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="steps per cycle (default 24)")
    parser.add_argument("--rounds", type=int, default=None, help="ours/bare rounds (default 3)")
    parser.add_argument(
        "--explore-steps", type=int, default=None, help="steps per exploring worker (default 60)"
    )
    parser.add_argument("--sites", nargs="*", default=list(PAGES), help="sites to measure")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    steps = args.steps or (8 if args.quick else 24)
    rounds = args.rounds or (1 if args.quick else 3)
    explore_steps = args.explore_steps or (15 if args.quick else 60)
    try:
        WebCollector.requirements.require_images()
    except Exception as error:  # any setup problem: report it and stop
        log(str(error))
        return 2

    loadavg_start = loadavg()
    report: dict[str, Any] = {"latency": {}, "throughput": {}}
    for site_name in args.sites:
        report["latency"][site_name] = measure_latency(site_name, steps, rounds)
    with tempfile.TemporaryDirectory(prefix="bench-web-", dir=RESULTS_DIR) as tmp:
        for workers in (1, 2):
            out = Path(tmp) / f"w{workers}"
            report["throughput"][workers] = measure_throughput(
                args.sites[0], explore_steps, workers, out
            )
            log(f"throughput: {report['throughput'][workers]}")
    report["growth"] = measure_growth(GROWTH_SIZES[:4] if args.quick else GROWTH_SIZES)
    report["machine"] = machine_info(loadavg_start)
    write_report(args.output, report)
    _print(report)
    return 0


def _print(report: dict[str, Any]) -> None:
    print("step latency (median seconds per phase; ratio = ours / bare Playwright)")
    print(
        f"{'site':<11} {'page':<6} {'nodes':>6} {'total':>7} {'action':>7} {'settle':>7} "
        f"{'tree':>7} {'shot':>7} {'p90':>7} {'bare':>7} {'ratio':>6}"
    )
    small = []
    for site_name, pages in report["latency"].items():
        for size, row in pages.items():
            m = row["median"]
            if size == "small":
                small.append(m["total_s"])
            print(
                f"{site_name:<11} {size:<6} {row['tree_nodes']:>6} {m['total_s']:>7.3f} "
                f"{m['action_s']:>7.3f} {m['settle_s']:>7.3f} {m['extract_s']:>7.3f} "
                f"{m['screenshot_s']:>7.3f} {row['p90_total_s']:>7.3f} "
                f"{row['bare_median_s']:>7.3f} {row['ratio']:>6.2f}"
            )
    if small:
        worst = max(small)
        verdict = "met" if worst <= TARGET_SMALL_MEDIAN_S else "MISSED"
        target = TARGET_SMALL_MEDIAN_S
        print(f"worst small-page median step: {worst:.3f} s (target <= {target}) {verdict}")
    print("\nthroughput (exploring policy, recorded)")
    for workers, row in report["throughput"].items():
        print(
            f"  {workers} worker(s): {row['steps']} steps, {row['steps_per_s_wall']} steps/s "
            f"wall (site start-up included), {row['steps_per_s_stepping']} steps/s stepping"
        )
    growth = report["growth"]
    print("\ntree extraction vs page size (Datasette loans table)")
    for point in growth["points"]:
        extract_ms = point["extract_s"] * 1000
        print(f"  {point['rows']:>5} rows {point['nodes']:>6} nodes {extract_ms:>8.1f} ms")
    slope, intercept = growth["ms_per_1000_nodes"], growth["intercept_ms"]
    print(f"  slope {slope} ms per 1000 nodes, intercept {intercept} ms")


if __name__ == "__main__":
    sys.exit(main())
