"""Choose the search domain's engine by measurement: Xapian against Tantivy on the same corpus.

Both engines index the same documents (every document of the ``worldtrace/search`` image, read
back from its index: url, title, visible text) with English stemming and the title weighted
5x, single-threaded, then answer the same known-item queries:

- **build**: seconds to index everything and commit (Xapian: build_index.py's own ``build``,
  compaction included; Tantivy: one writer thread, commit, merges waited for) and the index's
  size on disk. Both keep the text (snippets are made from it): Xapian in the document data
  as the image's index does, Tantivy as a stored field.
- **quality**: ``--items`` (300) documents drawn with ``--seed``; for each, two queries: its
  title, and a phrase of ``PHRASE_WORDS`` consecutive words of its text from a random offset
  (unquoted, as an agent types it). The known item's rank in the top 10 gives MRR@10, hit@1 and
  hit@10 per query kind.
- **latency**: the median and p95 of one query (parse and top 10, no snippets), all queries,
  the engines alternating query by query.

Everything runs in a throwaway container of the image with the host network (Tantivy is
installed there from PyPI into a venv beside the image's, ``TANTIVY_VERSION``); the container
is removed at the end.

    .venv/bin/python benchmarks/search_engines.py [--items 300] [--seed 13]

Results go to ``benchmarks/results/search_engines.json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from worldtrace.collectors.search.image_definition import IMAGE_TAG
from worldtrace.sandboxes.engine import docker_client

TANTIVY_VERSION = "0.27.0"
RESULTS = Path(__file__).parent / "results" / "search_engines.json"
PHRASE_WORDS = 8

# Runs inside the container with /tmp/tantivy-venv/bin/python (system site packages: xapian).
INNER = r"""
import json, os, random, re, statistics, sys, time
sys.path.insert(0, "/opt/worldtrace")
import xapian, tantivy
from build_index import build

items, seed, phrase_words = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
source = xapian.Database("/srv/search/index.glass")
documents = []
with open("/tmp/texts.jsonl", "w", encoding="utf-8") as texts:
    for docid in range(1, source.get_lastdocid() + 1):
        data = json.loads(source.get_document(docid).get_data())
        documents.append(data)
        texts.write(json.dumps(data, ensure_ascii=False) + "\n")

def size(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)

count, xapian_build_s = build("/tmp/texts.jsonl", "/tmp/bench.glass")
xdb = xapian.Database("/tmp/bench.glass")
parser = xapian.QueryParser()
parser.set_stemmer(xapian.Stem("english"))
parser.set_stemming_strategy(xapian.QueryParser.STEM_SOME)
parser.set_database(xdb)
parser.set_default_op(xapian.Query.OP_OR)
enquire = xapian.Enquire(xdb)

def xapian_top(query):
    enquire.set_query(parser.parse_query(query, xapian.QueryParser.FLAG_DEFAULT))
    return [json.loads(m.document.get_data())["url"] for m in enquire.get_mset(0, 10)]

builder = tantivy.SchemaBuilder()
builder.add_text_field("title", stored=True, tokenizer_name="en_stem")
builder.add_text_field("body", stored=True, tokenizer_name="en_stem")
builder.add_text_field("url", stored=True, tokenizer_name="raw")
schema = builder.build()
os.makedirs("/tmp/tantivy-index", exist_ok=True)
started = time.monotonic()
index = tantivy.Index(schema, path="/tmp/tantivy-index")
writer = index.writer(heap_size=256_000_000, num_threads=1)
for data in documents:
    writer.add_document(tantivy.Document(title=data["title"], body=data["text"], url=data["url"]))
writer.commit()
writer.wait_merging_threads()
tantivy_build_s = time.monotonic() - started
index.reload()
searcher = index.searcher()

def tantivy_top(query):
    parsed, _errors = index.parse_query_lenient(
        query, ["title", "body"], field_boosts={"title": 5.0}
    )
    hits = searcher.search(parsed, 10).hits
    return [searcher.doc(address)["url"][0] for _, address in hits]

rng = random.Random(seed)
queries = []
for docid in rng.sample(range(len(documents)), items):
    data = documents[docid]
    words = re.findall(r"\w+", data["text"])
    start = rng.randrange(max(len(words) - phrase_words, 0) + 1)
    queries.append(("title", data["url"], data["title"]))
    queries.append(("phrase", data["url"], " ".join(words[start:start + phrase_words])))

engines = {"xapian": xapian_top, "tantivy": tantivy_top}
latency = {name: [] for name in engines}
ranks = {name: {"title": [], "phrase": []} for name in engines}
for kind, url, query in queries:
    for name, top in engines.items():
        started = time.perf_counter()
        urls = top(query)
        latency[name].append(time.perf_counter() - started)
        ranks[name][kind].append(urls.index(url) + 1 if url in urls else None)

def quality(found):
    return {
        "mrr10": round(sum(1 / r for r in found if r) / len(found), 4),
        "hit1": round(sum(1 for r in found if r == 1) / len(found), 4),
        "hit10": round(sum(1 for r in found if r) / len(found), 4),
    }

def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]

import importlib.metadata
report = {"documents": count, "queries": len(queries), "engines": {}}
for name, build_s, path, version in (
    ("xapian", xapian_build_s, "/tmp/bench.glass", xapian.version_string()),
    ("tantivy", tantivy_build_s, "/tmp/tantivy-index", importlib.metadata.version("tantivy")),
):
    report["engines"][name] = {
        "version": version,
        "build_s": round(build_s, 2),
        "index_bytes": size(path),
        "latency_median_ms": round(statistics.median(latency[name]) * 1000, 3),
        "latency_p95_ms": round(percentile(latency[name], 0.95) * 1000, 3),
        "title": quality(ranks[name]["title"]),
        "phrase": quality(ranks[name]["phrase"]),
        "all": quality(ranks[name]["title"] + ranks[name]["phrase"]),
    }
print(json.dumps(report))
"""


def run(items: int, seed: int) -> dict[str, Any]:
    """Run both engines in a throwaway container of the image; the inner script's report."""
    client = docker_client()
    container = client.containers.run(
        IMAGE_TAG,
        ["sleep", "infinity"],
        detach=True,
        network_mode="host",  # pip needs the registry; nothing else is reached
        labels={"worldtrace.benchmark": "search_engines"},
    )
    try:
        install = container.exec_run(
            [
                "sh",
                "-c",
                "python3 -m venv --system-site-packages /tmp/tantivy-venv && "
                "/tmp/tantivy-venv/bin/pip install -q --disable-pip-version-check "
                f"--only-binary=:all: tantivy=={TANTIVY_VERSION}",
            ]
        )
        if install.exit_code != 0:
            raise RuntimeError(f"installing tantivy failed: {install.output.decode()[-2000:]}")
        command = ["/tmp/tantivy-venv/bin/python", "-c", INNER, str(items), str(seed)]
        result = container.exec_run([*command, str(PHRASE_WORDS)], demux=True)
        stdout, stderr = result.output
        if result.exit_code != 0:
            raise RuntimeError(f"the benchmark failed: {(stderr or b'').decode()[-3000:]}")
        return json.loads(stdout.decode().strip().splitlines()[-1])
    finally:
        container.remove(force=True)


def table(report: dict[str, Any]) -> str:
    """The report as a text table."""
    lines = [
        f"{report['documents']} documents, {report['queries']} queries "
        f"({report['items']} known items x title/phrase, seed {report['seed']})",
        f"{'engine':<9}{'version':<9}{'build s':>9}{'index MB':>10}{'median ms':>11}"
        f"{'p95 ms':>9}{'MRR title':>11}{'MRR phrase':>12}{'hit@1':>8}{'hit@10':>8}",
    ]
    for name, engine in report["engines"].items():
        lines.append(
            f"{name:<9}{engine['version']:<9}{engine['build_s']:>9.1f}"
            f"{engine['index_bytes'] / 1e6:>10.1f}{engine['latency_median_ms']:>11.2f}"
            f"{engine['latency_p95_ms']:>9.2f}{engine['title']['mrr10']:>11.3f}"
            f"{engine['phrase']['mrr10']:>12.3f}{engine['all']['hit1']:>8.3f}"
            f"{engine['all']['hit10']:>8.3f}"
        )
    return "\n".join(lines)


def main() -> None:
    """Measure, print the table, write the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--items", type=int, default=300, help="known items drawn")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    started = time.monotonic()
    report = run(args.items, args.seed)
    report.update(
        items=args.items,
        seed=args.seed,
        phrase_words=PHRASE_WORDS,
        image=IMAGE_TAG,
        image_id=docker_client().images.get(IMAGE_TAG).id,
        seconds=round(time.monotonic() - started, 1),
        measured_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(table(report))
    print(f"written to {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
