"""Benchmark of the search domain: our web_search against Xapian's own client, pages, the index.

Measured in one run, on one container of ``worldtrace/search``:

- **search**: queries per second and median latency of ``web_search`` through our environment
  (``SearchEnvironment.step``: the schema check, the request over the exec stream, the driver's
  parse, match and snippets, the memory read every reply carries, the diff on the host)
  against the engine's own client called directly with the same queries: a bare Python
  process in the same container, reached through its own ``docker exec`` stream (so both pay
  the same hop), that parses each query with the same ``xapian.QueryParser`` settings, takes
  the same ``MSet`` and builds the same snippets, and answers with the hits' URLs, titles and
  snippets, recording nothing. Blocks of ours and bare alternate (and which goes first). The
  ratio is ours over bare, of the medians (target ≤ 1.2). The bare process's own timing
  inside the container (no hop) is shown as the floor.
- **extract**: median latency of ``web_extractor`` (fetch over loopback from the site server,
  markdownify) over the pages the task library cites, with the driver's fetch and convert
  shares.
- **index**: the corpus's build time and size, as ``/opt/worldtrace/corpus.json`` records them
  (documents, index bytes, corpus and index build seconds).

    .venv/bin/python benchmarks/search.py [--quick]

Results go to ``benchmarks/results/search.json`` and tables on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import loadavg, log, machine_info, write_report
from rich.console import Console
from rich.table import Table

from worldtrace.collectors.search.actions import web_extractor, web_search
from worldtrace.collectors.search.environment import SearchEnvironment
from worldtrace.collectors.search.image_definition import DRIVER, IMAGE_TAG
from worldtrace.collectors.search.tasks import load_tasks
from worldtrace.sandboxes.channel import DriverChannel
from worldtrace.sandboxes.docker import require_image

RESULTS_FILE = Path(__file__).resolve().parent / "results" / "search.json"
TARGET_RATIO = 1.2
STEP_TIMEOUT_S = 30.0
NUM_RESULTS = 10

EXTRA_QUERIES = (
    "signal handler",
    "regular expression",
    "compress archive gzip",
    '"working tree"',
    "title:sqlite",
    "postgresql string functions",
    "python list sort key",
    "mount filesystem read only",
    "qzxv wplkj",
)
"""Queries beyond the task library's: phrases, a field, a miss."""

BARE_CLIENT = r"""
import json, sys, time
from html import unescape
import re
import xapian
database = xapian.Database("/srv/search/index.glass")
stemmer = xapian.Stem("english")
parser = xapian.QueryParser()
parser.set_stemmer(stemmer)
parser.set_stemming_strategy(xapian.QueryParser.STEM_SOME)
parser.set_database(database)
parser.set_default_op(xapian.Query.OP_OR)
parser.add_prefix("title", "S")
enquire = xapian.Enquire(database)
flags = xapian.MSet.SNIPPET_BACKGROUND_MODEL | xapian.MSet.SNIPPET_EXHAUSTIVE
marks = re.compile(r"</?b>")
for line in sys.stdin:
    request = json.loads(line)
    started = time.perf_counter()
    enquire.set_query(parser.parse_query(request["query"], xapian.QueryParser.FLAG_DEFAULT))
    matches = enquire.get_mset(0, request["num_results"])
    hits = []
    for item in matches:
        data = json.loads(item.document.get_data())
        snippet = matches.snippet(data["text"], 300, stemmer, flags, "<b>", "</b>", "...")
        if isinstance(snippet, bytes):
            snippet = snippet.decode("utf-8", "replace")
        hits.append([data["url"], data["title"], unescape(marks.sub("", snippet))])
    took = time.perf_counter() - started
    sys.stdout.write(json.dumps({"id": request["id"], "hits": hits, "took": took}) + "\n")
    sys.stdout.flush()
"""
"""Xapian's own Python client, as the driver sets it up, answering one JSON line per query."""


def queries() -> list[str]:
    """The queries of the task library's scripts and :data:`EXTRA_QUERIES`, each once."""
    found: dict[str, None] = {}
    for task in load_tasks():
        for step in task.steps:
            if step.name == "web_search":
                found.setdefault(str(step.arguments["query"]), None)
    for query in EXTRA_QUERIES:
        found.setdefault(query, None)
    return list(found)


def pages() -> list[str]:
    """The pages the task library cites first, each once."""
    return list(dict.fromkeys(task.documents[0] for task in load_tasks()))


def ms(values: list[float]) -> float:
    """The median of ``values`` (seconds) in milliseconds."""
    return round(statistics.median(values) * 1000, 3)


def measure_search(env: SearchEnvironment, texts: list[str], blocks: int) -> dict[str, Any]:
    """Alternate blocks of all queries through our environment and through the bare client."""
    bare = DriverChannel(
        env.sandbox.open_stream([DRIVER[0], "-c", BARE_CLIENT]), "bare xapian client"
    )
    ours_s: list[float] = []
    bare_s: list[float] = []
    inside_s: list[float] = []
    driver_s: list[float] = []
    ours_wall = bare_wall = 0.0
    same_urls = 0
    try:
        for text in texts:  # warm both: the index's pages in the cache, the code paths
            env.step(web_search(text, NUM_RESULTS), STEP_TIMEOUT_S)
            bare.request({"query": text, "num_results": NUM_RESULTS}, STEP_TIMEOUT_S)
        for block in range(blocks):
            # Which side goes first alternates, so neither always runs on a warmer machine.
            for side in ("ours", "bare") if block % 2 == 0 else ("bare", "ours"):
                started_block = time.perf_counter()
                for text in texts:
                    started = time.perf_counter()
                    if side == "ours":
                        outcome = env.step(web_search(text, NUM_RESULTS), STEP_TIMEOUT_S)
                        ours_s.append(time.perf_counter() - started)
                        if outcome.error:
                            raise RuntimeError(f"{text!r}: {outcome.error}")
                        driver_s.append(float(outcome.observation["search_s"]))
                    else:
                        request = {"query": text, "num_results": NUM_RESULTS}
                        reply = bare.request(request, STEP_TIMEOUT_S)
                        bare_s.append(time.perf_counter() - started)
                        inside_s.append(float(reply["took"]))
                took = time.perf_counter() - started_block
                if side == "ours":
                    ours_wall += took
                else:
                    bare_wall += took
        for text in texts:  # the two give the same ranking
            ours = env.step(web_search(text, NUM_RESULTS), STEP_TIMEOUT_S).observation
            theirs = bare.request({"query": text, "num_results": NUM_RESULTS}, STEP_TIMEOUT_S)
            same_urls += [r["url"] for r in ours["results"]] == [h[0] for h in theirs["hits"]]
    finally:
        bare.stream.close()
    count = len(texts) * blocks
    return {
        "queries": len(texts),
        "repetitions": blocks,
        "ours_qps": round(count / ours_wall, 1),
        "bare_qps": round(count / bare_wall, 1),
        "ours_median_ms": ms(ours_s),
        "bare_median_ms": ms(bare_s),
        "ratio": round(statistics.median(ours_s) / statistics.median(bare_s), 3),
        "driver_search_median_ms": ms(driver_s),
        "bare_in_container_median_ms": ms(inside_s),
        "same_ranking": f"{same_urls}/{len(texts)}",
        "target": TARGET_RATIO,
    }


def measure_extract(env: SearchEnvironment, urls: list[str], rounds: int) -> dict[str, Any]:
    """Median latency of ``web_extractor`` over ``urls``, ``rounds`` times each."""
    wall: list[float] = []
    fetch: list[float] = []
    convert: list[float] = []
    sizes: list[int] = []
    for url in urls:  # warm
        env.step(web_extractor(url, "benchmark"), STEP_TIMEOUT_S)
    for _ in range(rounds):
        for url in urls:
            started = time.perf_counter()
            outcome = env.step(web_extractor(url, "benchmark"), STEP_TIMEOUT_S)
            wall.append(time.perf_counter() - started)
            if outcome.error:
                raise RuntimeError(f"{url}: {outcome.error}")
            raw = outcome.observation
            fetch.append(float(raw["fetch_s"]))
            convert.append(float(raw["convert_s"]))
            sizes.append(int(raw["html_bytes"]))
    return {
        "pages": len(urls),
        "rounds": rounds,
        "median_ms": ms(wall),
        "fetch_median_ms": ms(fetch),
        "convert_median_ms": ms(convert),
        "html_median_bytes": int(statistics.median(sizes)),
    }


def index_facts(corpus: dict[str, Any]) -> dict[str, Any]:
    """The corpus's build time and size from its identity (corpus.json)."""
    index = corpus.get("index") or {}
    seconds = corpus.get("build_seconds") or {}
    return {
        "documents": (corpus.get("documents") or {}).get("total"),
        "index_bytes": index.get("bytes"),
        "index_mb": round(int(index.get("bytes") or 0) / 1e6, 1),
        "site_mb": round(int((corpus.get("site") or {}).get("bytes") or 0) / 1e6, 1),
        "corpus_build_s": seconds.get("corpus"),
        "index_build_s": seconds.get("index"),
        "total_build_s": seconds.get("total"),
        "engine": corpus.get("engine"),
        "index_sha256": index.get("sha256"),
    }


def print_report(report: dict[str, Any]) -> None:
    """The three tables of the run."""
    console = Console()
    search = report["search"]
    table = Table(title="web_search: our environment vs Xapian's own client (same container)")
    for column in ("", "queries/s", "median ms"):
        table.add_column(column, justify="right")
    table.add_row("ours (SearchEnvironment.step)", f"{search['ours_qps']:.1f}",
                  f"{search['ours_median_ms']:.2f}")  # fmt: skip
    table.add_row("bare client (docker exec stream)", f"{search['bare_qps']:.1f}",
                  f"{search['bare_median_ms']:.2f}")  # fmt: skip
    table.add_row("driver's own search_s", "", f"{search['driver_search_median_ms']:.2f}")
    table.add_row("bare client inside (no hop)", "", f"{search['bare_in_container_median_ms']:.2f}")
    met = "met" if search["ratio"] <= TARGET_RATIO else "NOT met"
    table.add_row("ratio ours/bare", f"{search['ratio']:.2f}", f"target ≤ {TARGET_RATIO}: {met}")
    console.print(table)
    extract = report["extract"]
    table = Table(title="web_extractor (site server over loopback, markdownify)")
    for column in ("pages", "median ms", "fetch ms", "convert ms", "HTML bytes (median)"):
        table.add_column(column, justify="right")
    table.add_row(
        str(extract["pages"]),
        f"{extract['median_ms']:.1f}",
        f"{extract['fetch_median_ms']:.1f}",
        f"{extract['convert_median_ms']:.1f}",
        f"{extract['html_median_bytes']:,}",
    )
    console.print(table)
    index = report["index"]
    table = Table(title="corpus and index (built at image build time, corpus.json)")
    for column in ("documents", "index MB", "site MB", "corpus s", "index s", "total s"):
        table.add_column(column, justify="right")
    table.add_row(
        f"{index['documents']:,}",
        f"{index['index_mb']:.1f}",
        f"{index['site_mb']:.1f}",
        f"{index['corpus_build_s']:.1f}",
        f"{index['index_build_s']:.1f}",
        f"{index['total_build_s']:.1f}",
    )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurements and print and save the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=None, help="alternating blocks (5)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds over the pages (3)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of under a minute")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    blocks = args.blocks or (2 if args.quick else 5)
    rounds = args.rounds or (1 if args.quick else 3)
    image_id = require_image(IMAGE_TAG)
    started = datetime.now(UTC)
    load_at_start = loadavg()
    env = SearchEnvironment()
    try:
        reset_started = time.perf_counter()
        first = env.reset(0, None)
        reset_s = time.perf_counter() - reset_started
        texts = queries()
        log(f"search: {len(texts)} queries x {blocks} blocks ...")
        search = measure_search(env, texts, blocks)
        urls = pages()
        log(f"extract: {len(urls)} pages x {rounds} rounds ...")
        extract = measure_extract(env, urls, rounds)
    finally:
        env.close()
    report = {
        "benchmark": "search",
        "started_at": started.isoformat(),
        "machine": machine_info(load_at_start),
        "image": image_id,
        "reset_s": round(reset_s, 2),
        "search": search,
        "extract": extract,
        "index": index_facts(first["corpus"]),
    }
    print_report(report)
    write_report(args.output, report)
    log(json.dumps({"ratio": search["ratio"], "same_ranking": search["same_ranking"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
