"""Benchmark of the curation pipeline against a bare datatrove MinHash pipeline.

Run ``.venv/bin/python benchmarks/curate.py [--rows N] [--rounds R] [--quick]``.

Synthetic but realistic terminal transitions (directory listings, logs full of numbers, git
and python output, a few secrets and e-mail addresses, some exact and some near duplicate
episodes) are written as parquet shards with ``to_table(..., Transition)``. Then, alternating
in the same run so that load from anything else on the machine hits both alike:

* *ours*: the full ``curate()`` pipeline with ``workers=1`` (reader with row validation,
  decontamination, filters, exact dedup, the four MinHash stages, scrubbing, the parquet
  writer, tallies and stats);
* *bare*: datatrove's four MinHash stages (signature, buckets, cluster, filter + a JSONL
  writer) reading a JSONL file of the same rendered texts with datatrove's ``JsonlReader``,
  with the same MinHash config and tokenizer, ``LocalPipelineExecutor`` and one task.

Both run in this process on one core; the ratio is ours / bare (target <= 1.3). The time of
each of our stages (and of each step inside them, from datatrove's own stats) is reported so
that a miss can be located. Numbers are printed and written to ``benchmarks/results/curate.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from common import loadavg, log, machine_info, write_report
from datatrove.executor.local import LocalPipelineExecutor

from worldtrace.curation.config import CurationConfig
from worldtrace.curation.dedup import StateWordTokenizer, minhash_config
from worldtrace.curation.documents import render_transition
from worldtrace.curation.pipeline import curate
from worldtrace.schemas import (
    Action,
    EnvironmentRef,
    Observation,
    PolicyRef,
    Source,
    Timing,
    Transition,
    from_row,
    to_row,
    to_table,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "curate.json"
TARGET_RATIO = 1.3
SCREEN_LINES = 24
EPOCH = datetime(2026, 3, 1, 8, 0, 0, tzinfo=UTC)

# --------------------------------------------------------------------------- synthetic screens

_DIRS = ("/etc", "/var/log", "/root/project", "/usr/lib/python3", "/srv/app", "/tmp/build")
_FILES = (
    "README.md",
    "main.py",
    "config.yaml",
    "server.log",
    "Makefile",
    "notes.txt",
    "requirements.txt",
    "data.csv",
    "setup.cfg",
    "index.html",
    "app.js",
    "Dockerfile",
)
_LEVELS = ("INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR")
_EVENTS = (
    "GET /api/items/{n} 200 {ms}ms",
    "POST /api/login 401 {ms}ms",
    "worker {n} processed {k} jobs in {ms}ms",
    "cache hit ratio {p}% ({k} keys)",
    "connection pool size={n} idle={k}",
    "retrying request {n} after {ms}ms",
)
_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank")


def _listing(rng: random.Random, path: str) -> list[str]:
    files = rng.sample(_FILES, rng.randint(3, 9))
    lines = [f"total {rng.randint(8, 400)}"]
    for name in sorted(files):
        size = rng.randint(40, 90_000)
        day = rng.randint(1, 28)
        lines.append(
            f"-rw-r--r-- 1 root root {size:>6} Mar {day:>2} {rng.randint(0, 23):02d}:"
            f"{rng.randint(0, 59):02d} {name}"
        )
    return lines


def _log(rng: random.Random) -> list[str]:
    lines = []
    stamp = EPOCH + timedelta(seconds=rng.randint(0, 10**6))
    for _ in range(rng.randint(4, 14)):
        stamp += timedelta(milliseconds=rng.randint(1, 5000))
        event = rng.choice(_EVENTS).format(
            n=rng.randint(1, 9999),
            k=rng.randint(1, 500),
            ms=rng.randint(1, 900),
            p=rng.randint(0, 99),
        )
        lines.append(
            f"{stamp:%Y-%m-%d %H:%M:%S},{stamp.microsecond // 1000:03d} "
            f"{rng.choice(_LEVELS)} {event}"
        )
    return lines


def _command(rng: random.Random, cwd: str) -> tuple[str, list[str]]:
    """Return a shell command and its output lines."""
    kind = rng.random()
    if kind < 0.25:
        path = rng.choice(_DIRS)
        return f"ls -la {path}", _listing(rng, path)
    if kind < 0.45:
        return f"tail -n 12 {cwd}/server.log", _log(rng)
    if kind < 0.55:
        count = rng.randint(1, 400)
        return f"grep -c ERROR {cwd}/server.log", [str(count)]
    if kind < 0.65:
        name = rng.choice(_NAMES)
        return "git log -1", [
            f"commit {rng.getrandbits(160):040x}",
            f"Author: {name.title()} <{name}@example.org>",
            f"Date:   Mon Mar {rng.randint(1, 28)} 10:{rng.randint(10, 59)}:00 2026",
            "",
            f"    fix issue #{rng.randint(1, 900)} in the parser",
        ]
    if kind < 0.72:
        return "env | grep -i key", [
            f"AWS_ACCESS_KEY_ID=AKIA{rng.getrandbits(64):016X}",
            f"API_KEY=sk-{rng.getrandbits(128):032x}",
        ]
    if kind < 0.82:
        n = rng.randint(2, 60)
        return f"python3 -c 'print(sum(range({n})))'", [str(sum(range(n)))]
    if kind < 0.9:
        return "df -h /", [
            "Filesystem      Size  Used Avail Use% Mounted on",
            f"overlay          {rng.randint(20, 200)}G   {rng.randint(1, 19)}G   "
            f"{rng.randint(1, 150)}G  {rng.randint(1, 99)}% /",
        ]
    if kind < 0.95:
        return f"cd {rng.choice(_DIRS)}", []
    return "cat missing.txt", ["cat: missing.txt: No such file or directory"]


def _episode(
    rng: random.Random, index: int, steps: int, domain: str, height: int = SCREEN_LINES
) -> list[dict[str, Any]]:
    """Return one episode's transitions as Transition keyword arguments (without ids)."""
    cwd = rng.choice(_DIRS)
    screen: list[str] = [f"root@wt:{cwd}# "]
    out = []
    for step in range(steps):
        screen = screen[-height:]
        before = "\n".join(screen)
        if rng.random() < 0.06:
            name, arguments, text, error = "wait", {"seconds": 1}, "wait 1s", None
        else:
            cmd, lines = _command(rng, cwd)
            if cmd.startswith("cd "):
                cwd = cmd[3:]
            screen[-1] += cmd
            screen += [*lines, f"root@wt:{cwd}# "]
            error = "exit status 1" if cmd.startswith("cat missing") else None
            name, arguments, text = "keys", {"keys": [cmd, "Enter"]}, cmd
        after = "\n".join(screen[-height:])
        out.append(
            {
                "step": step,
                "domain": domain,
                "task": f"inspect the service #{index % 50}",
                "observation_text": before,
                "observation_meta": {"cwd": cwd},
                "action": (name, arguments, text),
                "next_text": after,
                "next_meta": {"exit_code": 1 if error else 0},
                "action_error": error,
                "latency": round(rng.uniform(0.01, 0.4), 4),
            }
        )
    return out


def _perturb(text: str, rng: random.Random) -> str:
    """Change one digit of a text (a near duplicate)."""
    positions = [i for i, c in enumerate(text) if c.isdigit()]
    if not positions:
        return text + " "
    at = rng.choice(positions)
    return text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1 :]


def episodes(
    rows: int,
    seed: int = 0,
    domains: Sequence[str] = ("terminal",),
    dup_rate: float = 0.05,
    lines: int = SCREEN_LINES,
) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Yield ``(episode_id, steps)`` until ``rows`` steps; some episodes are duplicates."""
    rng = random.Random(seed)
    made, index, recent = 0, 0, []
    while made < rows:
        steps = min(rng.randint(8, 30), rows - made)
        roll = rng.random()
        if recent and roll < dup_rate:  # exact duplicate of an earlier episode, new ids
            body = [dict(s) for s in rng.choice(recent)][:steps]
        elif recent and roll < 2 * dup_rate:  # near duplicate: one digit changed per screen
            body = []
            for s in rng.choice(recent)[:steps]:
                s = dict(s)
                s["observation_text"] = _perturb(s["observation_text"], rng)
                s["next_text"] = _perturb(s["next_text"], rng)
                body.append(s)
        else:
            body = _episode(rng, index, steps, domains[index % len(domains)], lines)
            recent = [*recent[-20:], body]
        yield f"ep-{seed}-{index:07d}", body
        made += len(body)
        index += 1


def transition_rows(
    rows: int, seed: int = 0, domains: Sequence[str] = ("terminal",), lines: int = SCREEN_LINES
) -> Iterator[dict[str, Any]]:
    """Yield Arrow-ready transition rows (the shape ``to_row`` gives), without pydantic."""
    template = to_row(
        Transition(
            id="ep:00000",
            episode_id="ep",
            step=0,
            domain="terminal",
            env=EnvironmentRef(
                name="terminal/bash-tmux",
                version="sha256:4f2a9c",
                components={"bash": "5.2", "tmux": "3.4", "image": "worldtrace/terminal:0.3"},
                config_hash="cafe01",
            ),
            policy=PolicyRef(kind="script", name="task-script", version="1"),
            observation=Observation(format="terminal-screen", text=""),
            action=Action(name="keys", text=""),
            next_observation=Observation(format="terminal-screen", text=""),
            timing=Timing(started_at=EPOCH, step_latency_s=0.0),
            source=Source(origin="collected", collector_version="0.1.0", licence="cc-by-4.0"),
        )
    )
    for episode_id, body in episodes(rows, seed, domains, lines=lines):
        for s in body:
            name, arguments, text = s["action"]
            row = dict(template)
            row.update(
                id=f"{episode_id}:{s['step']:05d}",
                episode_id=episode_id,
                step=s["step"],
                domain=s["domain"],
                task=s["task"],
                observation={
                    "format": "terminal-screen",
                    "text": s["observation_text"],
                    "screenshot": None,
                    "meta": json.dumps(s["observation_meta"], sort_keys=True),
                },
                action={
                    "name": name,
                    "arguments": json.dumps(arguments, sort_keys=True),
                    "text": text,
                },
                next_observation={
                    "format": "terminal-screen",
                    "text": s["next_text"],
                    "screenshot": None,
                    "meta": json.dumps(s["next_meta"], sort_keys=True),
                },
                action_error=s["action_error"],
                timing={
                    "started_at": EPOCH + timedelta(seconds=s["step"]),
                    "step_latency_s": s["latency"],
                },
            )
            yield row


def transition_records(rows: int, seed: int = 0) -> list[Transition]:
    """Return validated ``Transition`` records (the pydantic path, as collectors produce)."""
    return [from_row(Transition, row) for row in transition_rows(rows, seed)]


def write_shards(folder: Path, records: list[Transition], per_shard: int) -> list[Path]:
    """Write ``records`` as ``transitions/<domain>/part-NNNNN.parquet`` shards of the corpus."""
    paths = []
    for start in range(0, len(records), per_shard):
        chunk = records[start : start + per_shard]
        domain = chunk[0].domain
        path = folder / "transitions" / domain / f"part-{start // per_shard:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(to_table(chunk, Transition), path, compression="zstd")
        paths.append(path)
    return paths


def write_jsonl(path: Path, records: list[Transition]) -> None:
    """Write the rendered texts of ``records`` as datatrove JSONL (``text`` and ``id``)."""
    with path.open("w", encoding="utf-8") as out:
        for record in records:
            row = to_row(record)
            out.write(json.dumps({"id": row["id"], "text": render_transition(row)}) + "\n")


# --------------------------------------------------------------------------- the two runs


class StageClock:
    """Wraps ``LocalPipelineExecutor.run`` to time every stage of a ``curate()`` call.

    With ``steps=True`` every pipeline step's ``run`` is wrapped too, to measure the time
    spent inside that step alone (its own work, without the steps upstream of it).
    """

    def __init__(self, steps: bool = False) -> None:
        self.times: dict[str, float] = {}
        self.step_times: dict[str, dict[str, float]] = {}
        self.steps = steps
        self._original: Callable[..., Any] = LocalPipelineExecutor.run

    def _wrap(self, stage: str, index: int, step: Any) -> None:
        label = f"{index:02d} {type(step).__name__}"
        bucket = self.step_times.setdefault(stage, {})
        original_run = step.run

        def run(data: Any = None, rank: int = 0, world_size: int = 1) -> Iterator:
            upstream = 0.0

            def source() -> Iterator:
                nonlocal upstream
                iterator = iter(data or ())
                while True:
                    start = time.perf_counter()
                    try:
                        item = next(iterator)
                    except StopIteration:
                        upstream += time.perf_counter() - start
                        return
                    upstream += time.perf_counter() - start
                    yield item

            start = time.perf_counter()
            generator = original_run(source() if data is not None else None, rank, world_size)
            spent = time.perf_counter() - start
            if generator is None:  # a step that does all its work in a plain function
                bucket[label] = bucket.get(label, 0.0) + spent - upstream
                return
            try:
                while True:
                    start = time.perf_counter()
                    try:
                        item = next(generator)
                    except StopIteration:
                        spent += time.perf_counter() - start
                        return
                    spent += time.perf_counter() - start
                    yield item
            finally:
                bucket[label] = bucket.get(label, 0.0) + spent - upstream

        step.run = run

    def __enter__(self) -> StageClock:
        original = self._original
        clock = self

        def timed(executor: LocalPipelineExecutor) -> Any:
            name = Path(executor.logging_dir.path).name
            if clock.steps:
                for index, step in enumerate(executor.pipeline):
                    clock._wrap(name, index, step)
            start = time.perf_counter()
            try:
                return original(executor)
            finally:
                clock.times[name] = clock.times.get(name, 0.0) + time.perf_counter() - start

        LocalPipelineExecutor.run = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        LocalPipelineExecutor.run = self._original  # type: ignore[method-assign]


def run_ours(input_dir: Path, out: Path, steps: bool = False) -> dict[str, Any]:
    config = CurationConfig()
    with StageClock(steps) as clock:
        wall, cpu = time.perf_counter(), time.process_time()
        report = curate(input_dir, out, config, workers=1)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    staged = sum(clock.times.values())
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "rows_in": report.rows_in,
        "rows_out": report.rows_out,
        "stages_s": {**clock.times, "after stages (quarantine, episodes, stats)": wall - staged},
        "steps_s": clock.step_times,
    }


def run_bare(jsonl_dir: Path, work: Path) -> dict[str, Any]:
    from datatrove.pipeline.dedup.minhash import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config = minhash_config(CurationConfig().minhash)
    sigs, buckets, remove = work / "sigs", work / "buckets", work / "remove"
    stages = [
        (
            "signature",
            [
                JsonlReader(str(jsonl_dir)),
                MinhashDedupSignature(
                    output_folder=str(sigs),
                    config=config,
                    language=StateWordTokenizer(),  # type: ignore[arg-type]
                ),
            ],
            1,
        ),
        (
            "buckets",
            [
                MinhashDedupBuckets(
                    input_folder=str(sigs), output_folder=str(buckets), config=config
                )
            ],
            config.num_buckets,
        ),
        (
            "cluster",
            [
                MinhashDedupCluster(
                    input_folder=str(buckets), output_folder=str(remove), config=config
                )
            ],
            1,
        ),
        (
            "filter",
            [
                JsonlReader(str(jsonl_dir)),
                MinhashDedupFilter(input_folder=str(remove)),
                JsonlWriter(str(work / "out"), compression=None),
            ],
            1,
        ),
    ]
    times = {}
    wall, cpu = time.perf_counter(), time.process_time()
    for name, pipeline, tasks in stages:
        start = time.perf_counter()
        LocalPipelineExecutor(
            pipeline=pipeline, tasks=tasks, workers=1, logging_dir=str(work / "logs" / name)
        ).run()
        times[name] = time.perf_counter() - start
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    kept = sum(1 for f in (work / "out").glob("*.jsonl") for _ in f.open())
    return {"wall_s": wall, "cpu_s": cpu, "rows_out": kept, "stages_s": times}


# --------------------------------------------------------------------------- report


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 150)
    summary = report["summary"]
    table = Table(title=f"Curation vs bare datatrove MinHash ({report['rows']:,} transitions)")
    for column in ("run", "median wall s", "median cpu s", "transitions/s/core", "rows out"):
        table.add_column(column, justify="right")
    for who in ("bare", "ours"):
        s = summary[who]
        table.add_row(
            who,
            f"{s['wall_s']:.2f}",
            f"{s['cpu_s']:.2f}",
            f"{s['rows_per_s_per_core']:,.0f}",
            f"{s['rows_out']:,}",
        )
    console.print(table)
    ratio = summary["ratio"]
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    console.print(
        f"ratio ours/bare (median of per-round ratios): {ratio:.2f} "
        f"(median walls {summary['ratio_of_medians']:.2f}, CPU time {summary['cpu_ratio']:.2f}); "
        f"target <= {TARGET_RATIO}: {verdict}"
    )

    stages = Table(title="Median stage times (s)")
    stages.add_column("run")
    stages.add_column("stage")
    stages.add_column("s", justify="right")
    stages.add_column("share", justify="right")
    for who in ("bare", "ours"):
        total = summary[who]["wall_s"]
        for name, seconds in summary[who]["stages_s"].items():
            stages.add_row(who, name, f"{seconds:.2f}", f"{seconds / total:.0%}")
    console.print(stages)

    steps = Table(
        title=f"Our steps: own time in a separate profiled run "
        f"({summary['ours']['profiled_wall_s']:.2f} s wall)"
    )
    steps.add_column("stage")
    steps.add_column("step")
    steps.add_column("s", justify="right")
    steps.add_column("ms/row", justify="right")
    for stage, entries in summary["ours"]["steps_s"].items():
        for name, seconds in entries.items():
            steps.add_row(stage, name, f"{seconds:.3f}", f"{seconds / report['rows'] * 1e3:.3f}")
    console.print(steps)


def summarize(
    ours: list[dict[str, Any]], bare: list[dict[str, Any]], profiled: dict[str, Any], rows: int
) -> dict[str, Any]:
    def med_map(runs: list[dict[str, Any]], key: str) -> dict[str, float]:
        names = list(runs[0][key])
        return {n: median([r[key].get(n, 0.0) for r in runs]) for n in names}

    result: dict[str, Any] = {}
    for who, runs in (("ours", ours), ("bare", bare)):
        wall = median([r["wall_s"] for r in runs])
        result[who] = {
            "wall_s": wall,
            "cpu_s": median([r["cpu_s"] for r in runs]),
            "rows_per_s_per_core": rows / wall,
            "rows_out": runs[-1]["rows_out"],
            "stages_s": med_map(runs, "stages_s"),
        }
    result["ours"]["steps_s"] = profiled["steps_s"]
    result["ours"]["profiled_wall_s"] = profiled["wall_s"]
    result["ratio"] = median([o["wall_s"] / b["wall_s"] for o, b in zip(ours, bare, strict=True)])
    result["ratio_of_medians"] = result["ours"]["wall_s"] / result["bare"]["wall_s"]
    result["cpu_ratio"] = median([o["cpu_s"] / b["cpu_s"] for o, b in zip(ours, bare, strict=True)])
    result["target_ratio"] = TARGET_RATIO
    result["target_met"] = result["ratio"] <= TARGET_RATIO
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=None, help="transitions (default 20000)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 3)")
    parser.add_argument("--per-shard", type=int, default=2000, help="transitions per input shard")
    parser.add_argument("--quick", action="store_true", help="a smoke run in about a minute")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    rows = args.rows or (3000 if args.quick else 20_000)
    rounds = args.rounds or (2 if args.quick else 3)

    started = time.monotonic()
    loadavg_start = loadavg()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-curate-", dir=RESULTS_DIR) as tmp:
        work = Path(tmp)
        log(f"generating {rows:,} transitions")
        records = transition_records(rows)
        corpus = work / "corpus"
        shards = write_shards(corpus, records, args.per_shard)
        (work / "jsonl").mkdir()
        write_jsonl(work / "jsonl" / "texts.jsonl", records)
        input_bytes = sum(p.stat().st_size for p in shards)
        del records
        ours: list[dict[str, Any]] = []
        bare: list[dict[str, Any]] = []
        for index in range(rounds):
            order = ("bare", "ours") if index % 2 == 0 else ("ours", "bare")
            for who in order:
                target = work / f"{who}-{index}"
                if who == "ours":
                    ours.append(run_ours(corpus, target))
                    result = ours[-1]
                else:
                    bare.append(run_bare(work / "jsonl", target))
                    result = bare[-1]
                log(f"round {index + 1}/{rounds} {who}: {result['wall_s']:.2f} s")
                shutil.rmtree(target, ignore_errors=True)
        log("profiling run of ours (every step's own time)")
        profiled = run_ours(corpus, work / "profiled", steps=True)

    report = {
        "benchmark": "curate",
        "created_at": datetime.now(UTC).isoformat(),
        "quick": args.quick,
        "machine": machine_info(loadavg_start),
        "rows": rows,
        "rounds": rounds,
        "input_shards": len(shards),
        "input_bytes": input_bytes,
        "minhash": CurationConfig().minhash.model_dump(),
        "summary": summarize(ours, bare, profiled, rows),
        "profiled": profiled,
        "ours": ours,
        "bare": bare,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results_file": str(args.output),
    }
    print_report(report)
    write_report(args.output, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
