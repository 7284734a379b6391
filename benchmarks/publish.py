"""Benchmark of publishing and of inspection queries against plain pyarrow and polars.

Run ``.venv/bin/python benchmarks/publish.py [--rows N] [--query-rows M] [--rounds R] [--quick]``.

It measures, alternating the order of the contenders in every round so that load from
anything else on the machine hits them alike:

1. Publishing throughput. *Ours* is ``publish_folder`` on a corpus folder of generated
   terminal-like transitions (three domains, ``transitions/<domain>/*.parquet``): streaming
   into ``data/<domain>`` shards, episodes, summary, card, manifest hashing and validation
   through ``datasets``. The *baseline* reads the same source files with
   ``pyarrow.parquet.read_table`` and writes each with ``pyarrow.parquet.write_table`` (zstd,
   like ours). MB/s is of the rows' in-memory Arrow size. Target ratio ours / baseline <= 1.2.
   The time of each part of ``publish_folder`` is reported, to see whether the fixed costs
   (validation, hashing, summary) dominate at this size.
2. A polars query (filter one domain, group by action name, count and mean next observation
   length) over at least 1M transitions: through ``publishing.inspect.scan`` on a corpus
   folder of nested-schema shards, versus two plain files holding the same rows:

   - *same schema* (the target's baseline): the record schema with its nested structs, as one
     file written by ``pyarrow.parquet.write_table`` with its defaults (zstd), queried with
     plain polars struct expressions (``pl.col("action").struct.field("name")``);
   - *same schema, corpus row groups*: that file again with the corpus's 20k-row row groups,
     to separate what the nesting costs from what the row groups cost (informative);
   - *flat columns*: the flattened columns as one file written by polars (informative).

   Target ratio ours / same schema <= 1.1. Files and row groups are reported: polars
   parallelises and skips by row group, so their number matters as much as the columns.

Numbers are printed and written to ``benchmarks/results/publish.json``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from common import loadavg, log, machine_info, write_report
from curate import transition_rows

import worldtrace.publishing.folder as folder_module
from worldtrace.publishing.inspect import scan
from worldtrace.schemas import Transition, arrow_schema_of

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "publish.json"
TARGET_PUBLISH = 1.2
TARGET_QUERY = 1.1
DOMAINS = ("terminal", "os", "swe")
BATCH = 20_000
BASELINE_LABELS = {
    "same_schema": "same schema, one plain pyarrow file (target)",
    "same_schema_row_groups": "same schema, corpus row groups (informative)",
    "flat": "flat columns, one polars file (informative)",
}
TIMED_PARTS = (
    "_write_transitions",
    "_write_episodes",
    "summarize_stats",
    "render_card",
    "manifest_of",
    "validate_folder",
    "_swap_in",
)

# --------------------------------------------------------------------------- corpora


def write_corpus(folder: Path, rows: int, lines: int, seed: int = 1) -> tuple[int, int]:
    """Write ``rows`` transitions split over the domains; return (arrow bytes, parquet bytes)."""
    schema = arrow_schema_of(Transition)
    arrow_bytes = 0
    per_domain = rows // len(DOMAINS)
    for offset, domain in enumerate(DOMAINS):
        count = per_domain + (rows - per_domain * len(DOMAINS) if offset == 0 else 0)
        target = folder / "transitions" / domain
        target.mkdir(parents=True, exist_ok=True)
        batch: list[dict[str, Any]] = []
        part = 0
        for row in transition_rows(count, seed + offset, (domain,), lines=lines):
            batch.append(row)
            if len(batch) == BATCH:
                arrow_bytes += _write_batch(target / f"part-{part:05d}.parquet", batch, schema)
                batch, part = [], part + 1
        if batch:
            arrow_bytes += _write_batch(target / f"part-{part:05d}.parquet", batch, schema)
    parquet_bytes = sum(p.stat().st_size for p in folder.rglob("*.parquet"))
    return arrow_bytes, parquet_bytes


def _write_batch(path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> int:
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, path, compression="zstd")
    return table.nbytes


def replicate(source: Path, target: Path, copies: int) -> int:
    """Write ``copies`` of every shard of ``source`` under ``target`` with fresh episode ids."""
    rows = 0
    for path in sorted((source / "transitions").glob("*/*.parquet")):
        table = pq.read_table(path)
        folder = target / "transitions" / path.parent.name
        folder.mkdir(parents=True, exist_ok=True)
        for copy in range(copies):
            episode = pc.binary_join_element_wise(table["episode_id"], f"-r{copy}", "")
            ident = pc.binary_join_element_wise(
                episode, pc.utf8_slice_codeunits(table["id"], -6), ""
            )
            out = table.set_column(
                table.schema.get_field_index("episode_id"), "episode_id", episode
            )
            out = out.set_column(out.schema.get_field_index("id"), "id", ident)
            pq.write_table(
                out.cast(table.schema), folder / f"{path.stem}-r{copy}.parquet", compression="zstd"
            )
            rows += out.num_rows
    return rows


# --------------------------------------------------------------------------- publishing


class PartClock:
    """Times the parts of ``publish_folder`` by wrapping the module functions it calls."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._saved: dict[str, Callable[..., Any]] = {}

    def __enter__(self) -> PartClock:
        for name in TIMED_PARTS:
            original = getattr(folder_module, name)
            self._saved[name] = original
            setattr(folder_module, name, self._timed(name, original))
        return self

    def _timed(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - start

        return timed

    def __exit__(self, *exc: object) -> None:
        for name, original in self._saved.items():
            setattr(folder_module, name, original)


def run_publish(corpus: Path, dest: Path) -> dict[str, Any]:
    with PartClock() as clock:
        start = time.perf_counter()
        # A synthetic corpus: it never went through curation, and the card says so.
        report = folder_module.publish_folder(corpus, dest, uncurated=True)
        wall = time.perf_counter() - start
    parts = dict(clock.times)
    parts["other"] = wall - sum(parts.values())
    return {"wall_s": wall, "rows": report.rows, "parts_s": parts}


def run_plain_write(corpus: Path, dest: Path) -> dict[str, Any]:
    start = time.perf_counter()
    rows = 0
    read = 0.0
    for path in sorted((corpus / "transitions").glob("*/*.parquet")):
        t0 = time.perf_counter()
        table = pq.read_table(path)
        read += time.perf_counter() - t0
        target = dest / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, target, compression="zstd")
        rows += table.num_rows
    wall = time.perf_counter() - start
    return {"wall_s": wall, "rows": rows, "parts_s": {"read": read, "write": wall - read}}


# --------------------------------------------------------------------------- query


def query(frame: pl.LazyFrame, domain: str = "terminal") -> pl.DataFrame:
    """The benchmark query over a flattened frame (``inspect.scan`` or the flat-column file)."""
    return (
        frame.filter(pl.col("domain") == domain)
        .group_by("action_name")
        .agg(
            pl.len().alias("count"),
            pl.col("next_observation_text").str.len_chars().mean().alias("mean_next_len"),
        )
        .sort("action_name")
        .collect()
    )


def nested_query(frame: pl.LazyFrame, domain: str = "terminal") -> pl.DataFrame:
    """The same query written with plain polars struct expressions over the record schema."""
    return (
        frame.filter(pl.col("domain") == domain)
        .group_by(pl.col("action").struct.field("name").alias("action_name"))
        .agg(
            pl.len().alias("count"),
            pl.col("next_observation")
            .struct.field("text")
            .str.len_chars()
            .mean()
            .alias("mean_next_len"),
        )
        .sort("action_name")
        .collect()
    )


def timed(run: Callable[[], pl.DataFrame]) -> tuple[float, pl.DataFrame]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def row_groups(path: Path) -> int:
    return sum(pq.ParquetFile(p).num_row_groups for p in sorted(path.parent.glob(path.name)))


# --------------------------------------------------------------------------- report


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def alternate(
    rounds: int, ours: Callable[[int], float], base: Callable[[int], float], log: Callable[..., Any]
) -> dict[str, Any]:
    """Time ours and one baseline, alternating which goes first; see :func:`rotate`."""
    times = rotate(rounds, {"ours": ours, "baseline": base}, log)
    return compare(times["ours"], times["baseline"])


def rotate(
    rounds: int, runs: dict[str, Callable[[int], float]], log: Callable[..., Any]
) -> dict[str, list[float]]:
    """Run every contender once per round after one untimed warm-up each.

    The order rotates every round, so no contender always runs first (cold) or last.
    """
    log("  warm-up (untimed): one run of each")
    for run in runs.values():
        run(-1)
    names = list(runs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            seconds = runs[name](index)
            times[name].append(seconds)
            log(f"  round {index + 1}/{rounds} {name}: {seconds:.3f} s")
    return times


def compare(ours: list[float], baseline: list[float]) -> dict[str, Any]:
    """Medians and the median of per-round ratios ours / baseline."""
    ratios = [o / b for o, b in zip(ours, baseline, strict=True)]
    return {
        "ours_s": ours,
        "baseline_s": baseline,
        "ours_median_s": median(ours),
        "baseline_median_s": median(baseline),
        "ratio": median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_of_medians": median(ours) / median(baseline),
    }


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 150)
    pub = report["publish"]
    mb = pub["arrow_bytes"] / 1e6
    table = Table(
        title=f"Publishing {pub['rows']:,} transitions ({mb:.0f} MB in Arrow, "
        f"{pub['parquet_bytes'] / 1e6:.1f} MB of zstd parquet)"
    )
    for column in ("run", "median s", "MB/s"):
        table.add_column(column, justify="right")
    for label, key in (("pyarrow read + write_table", "baseline"), ("publish_folder", "ours")):
        seconds = pub[f"{key}_median_s"]
        table.add_row(label, f"{seconds:.2f}", f"{mb / seconds:.1f}")
    console.print(table)
    verdict = "met" if pub["ratio"] <= TARGET_PUBLISH else "MISSED"
    console.print(
        f"publish ratio ours/baseline (median of per-round ratios): {pub['ratio']:.2f} "
        f"(of medians {pub['ratio_of_medians']:.2f}); target <= {TARGET_PUBLISH}: {verdict}"
    )
    parts = Table(title="publish_folder parts (median s)")
    parts.add_column("part")
    parts.add_column("s", justify="right")
    parts.add_column("share", justify="right")
    for name, seconds in pub["ours_parts_s"].items():
        parts.add_row(name, f"{seconds:.3f}", f"{seconds / pub['ours_median_s']:.0%}")
    for name, seconds in pub["baseline_parts_s"].items():
        parts.add_row(f"baseline {name}", f"{seconds:.3f}", "")
    console.print(parts)

    q = report["query"]
    qt = Table(title=f"Query over {q['rows']:,} transitions (filter domain, group by action)")
    for column in ("run", "files", "row groups", "MB", "median s", "Mrows/s", "ours / this"):
        qt.add_column(column, justify="right")
    seconds = q["ours_median_s"]
    qt.add_row(
        "inspect.scan(corpus folder)",
        str(q["files"]),
        str(q["row_groups"]),
        f"{q['corpus_bytes'] / 1e6:.0f}",
        f"{seconds:.3f}",
        f"{q['rows'] / seconds / 1e6:.1f}",
        "",
    )
    for name, base in q["baselines"].items():
        seconds = base["baseline_median_s"]
        qt.add_row(
            BASELINE_LABELS[name],
            "1",
            str(base["row_groups"]),
            f"{base['bytes'] / 1e6:.0f}",
            f"{seconds:.3f}",
            f"{q['rows'] / seconds / 1e6:.1f}",
            f"{base['ratio']:.2f} ({base['ratio_min']:.2f}-{base['ratio_max']:.2f})",
        )
    console.print(qt)
    verdict = "met" if q["ratio"] <= TARGET_QUERY else "MISSED"
    console.print(
        f"query ratio ours/same-schema plain file: {q['ratio']:.2f} "
        f"(of medians {q['ratio_of_medians']:.2f}); target <= {TARGET_QUERY}: {verdict}; "
        f"ours/same schema with the corpus's row groups: "
        f"{q['baselines']['same_schema_row_groups']['ratio']:.2f}; "
        f"ours/flat-column file: {q['baselines']['flat']['ratio']:.2f}; "
        f"same result: {q['same_result']}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=None, help="rows to publish (default 200k)")
    parser.add_argument(
        "--query-rows", type=int, default=None, help="rows to query (default and minimum ~1M)"
    )
    parser.add_argument("--rounds", type=int, default=None, help="publish rounds (default 3)")
    parser.add_argument("--query-rounds", type=int, default=None, help="query rounds (default 7)")
    parser.add_argument("--quick", action="store_true", help="a smoke run in a few minutes")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    rows = args.rows or (30_000 if args.quick else 200_000)
    query_rows = args.query_rows or 1_000_000
    rounds = args.rounds or (2 if args.quick else 3)
    query_rounds = args.query_rounds or (3 if args.quick else 7)

    started = time.monotonic()
    loadavg_start = loadavg()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-publish-", dir=RESULTS_DIR) as tmp:
        work = Path(tmp)
        log(f"generating a corpus of {rows:,} transitions")
        arrow_bytes, parquet_bytes = write_corpus(work / "corpus", rows, lines=24)
        runs: dict[str, list[dict[str, Any]]] = {"ours": [], "baseline": []}

        def ours(index: int) -> float:
            dest = work / f"published-{index}"
            result = run_publish(work / "corpus", dest)
            shutil.rmtree(dest, ignore_errors=True)
            if index >= 0:
                runs["ours"].append(result)
            return result["wall_s"]

        def base(index: int) -> float:
            dest = work / f"plain-{index}"
            result = run_plain_write(work / "corpus", dest)
            shutil.rmtree(dest, ignore_errors=True)
            if index >= 0:
                runs["baseline"].append(result)
            return result["wall_s"]

        log(f"publishing: {rounds} rounds")
        publish = alternate(rounds, ours, base, log)
        publish.update(
            rows=rows,
            arrow_bytes=arrow_bytes,
            parquet_bytes=parquet_bytes,
            ours_parts_s={
                name: median([r["parts_s"].get(name, 0.0) for r in runs["ours"]])
                for name in runs["ours"][0]["parts_s"]
            },
            baseline_parts_s={
                name: median([r["parts_s"][name] for r in runs["baseline"]])
                for name in runs["baseline"][0]["parts_s"]
            },
            target_ratio=TARGET_PUBLISH,
        )
        publish["target_met"] = publish["ratio"] <= TARGET_PUBLISH
        shutil.rmtree(work / "corpus")

        base_rows = max(1, query_rows // 5)
        log(f"generating {base_rows:,} short transitions, replicated to >= {query_rows:,}")
        write_corpus(work / "small", base_rows, lines=4, seed=7)
        copies = -(-query_rows // base_rows)
        total = replicate(work / "small", work / "query", copies)
        shutil.rmtree(work / "small")
        shards = sorted((work / "query" / "transitions").glob("*/*.parquet"))
        # The fair baseline: the same rows in the same record schema (nested structs), as ONE
        # parquet file written by pyarrow with its defaults, queried with struct expressions.
        nested = work / "same-schema.parquet"
        same_rows = pa.concat_tables(pq.read_table(path) for path in shards)
        pq.write_table(same_rows, nested, compression="zstd")
        # pyarrow's default row group (1Mi rows) leaves polars one unit of work and nothing to
        # skip; this copy has the corpus's row groups, to show what the nesting alone costs.
        nested_rg = work / "same-schema-row-groups.parquet"
        pq.write_table(same_rows, nested_rg, compression="zstd", row_group_size=BATCH)
        del same_rows
        # For comparison: the flattened columns as one file written by polars.
        flat = work / "flat.parquet"
        scan(str(work / "query")).sink_parquet(flat, compression="zstd")
        query_dir = str(work / "query")
        results: dict[str, pl.DataFrame] = {}

        def contender(name: str, run: Callable[[], pl.DataFrame]) -> Callable[[int], float]:
            def timed_run(index: int) -> float:
                seconds, results[name] = timed(run)
                return seconds

            return timed_run

        log(f"query: {query_rounds} rounds over {total:,} rows")
        times = rotate(
            query_rounds,
            {
                "ours": contender("ours", lambda: query(scan(query_dir))),
                "same_schema": contender(
                    "same_schema", lambda: nested_query(pl.scan_parquet(nested))
                ),
                "same_schema_row_groups": contender(
                    "same_schema_row_groups", lambda: nested_query(pl.scan_parquet(nested_rg))
                ),
                "flat": contender("flat", lambda: query(pl.scan_parquet(flat))),
            },
            log,
        )
        baselines = {
            name: compare(times["ours"], times[name])
            | {"row_groups": row_groups(path), "bytes": path.stat().st_size}
            for name, path in (
                ("same_schema", nested),
                ("same_schema_row_groups", nested_rg),
                ("flat", flat),
            )
        }
        query_result = dict(baselines["same_schema"])
        query_result.update(
            rows=total,
            files=len(shards),
            row_groups=sum(pq.ParquetFile(path).num_row_groups for path in shards),
            corpus_bytes=sum(path.stat().st_size for path in shards),
            baselines=baselines,
            same_result=all(results["ours"].equals(results[name]) for name in baselines),
            result=results["ours"].to_dicts(),
            target_ratio=TARGET_QUERY,
        )
        query_result["target_met"] = query_result["ratio"] <= TARGET_QUERY

    report = {
        "benchmark": "publish",
        "created_at": datetime.now(UTC).isoformat(),
        "quick": args.quick,
        "machine": machine_info(loadavg_start)
        | {"polars": pl.__version__, "pyarrow": pa.__version__},
        "publish": publish,
        "publish_runs": runs,
        "query": query_result,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results_file": str(args.output),
    }
    print_report(report)
    write_report(args.output, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
