"""Build the Xapian index of the corpus and write the corpus identity, at image build time.

Reads the texts build_corpus.py wrote (one JSON line per document, in docid order) and
indexes each document: its title (weighted 5x, and under the ``title:`` prefix ``S``) and its
visible text, with English stemming (Xapian's TermGenerator, ``STEM_SOME``, positions kept so
phrase queries work). A document's data is JSON ``{"url", "title", "date", "collection",
"text"}`` (the text is what the driver builds snippets from); value slot 0 holds the date;
boolean terms ``Q<url>`` and ``XC<collection>`` identify it. Document ids are the line numbers
of ``documents.jsonl`` (from 1).

The database is built in a temporary folder, then compacted into one file,
``<out>/index.glass`` (the file the driver opens and whose sha256 is the index hash).
``--corpus-json`` gets the identity: engine and version, index sha256 and bytes, document
counts per collection, package versions, converter, build seconds, base URL.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import xapian

BASE_URL = "http://docs.localhost/"
TITLE_WEIGHT = 5
DATE_SLOT = 0


def sha256_file(path: Path) -> str:
    """The sha256 hex of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def build(texts: Path, target: Path) -> tuple[int, float]:
    """Index every document of ``texts`` into the single-file database ``target``."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="xapian-build-"))
    try:
        database = xapian.WritableDatabase(str(scratch / "db"), xapian.DB_CREATE)
        generator = xapian.TermGenerator()
        generator.set_stemmer(xapian.Stem("english"))
        generator.set_stemming_strategy(xapian.TermGenerator.STEM_SOME)
        count = 0
        with open(texts, encoding="utf-8") as handle:
            for count, line in enumerate(handle, start=1):
                record = json.loads(line)
                document = xapian.Document()
                generator.set_document(document)
                generator.index_text(record["title"], 1, "S")
                generator.index_text(record["title"], TITLE_WEIGHT)
                generator.increase_termpos()
                generator.index_text(record["text"])
                document.add_boolean_term("Q" + record["url"])
                document.add_boolean_term("XC" + record["collection"])
                document.add_value(DATE_SLOT, record["date"] or "")
                data = {key: record[key] for key in ("url", "title", "date", "collection", "text")}
                document.set_data(json.dumps(data, ensure_ascii=False))
                docid = database.add_document(document)
                if docid != count:
                    raise RuntimeError(f"document {count} got docid {docid}")
        database.commit()
        database.close()
        # Compaction merges the postings into one file: smaller and faster to search.
        xapian.Database(str(scratch / "db")).compact(
            str(target), xapian.DBCOMPACT_SINGLE_FILE | xapian.Compactor.FULLER
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return count, time.monotonic() - started


def main() -> None:
    """Build the index and write corpus.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--texts", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True, help="the corpus folder (/srv/search)")
    parser.add_argument("--stats", type=Path, default=Path("/tmp/corpus_stats.json"))
    parser.add_argument("--corpus-json", type=Path, required=True)
    parser.add_argument("--started", type=float, required=True, help="epoch the build began")
    args = parser.parse_args()
    stats = json.loads(args.stats.read_text(encoding="utf-8"))
    target = args.out / "index.glass"
    count, index_seconds = build(args.texts, target)
    if count != stats["total"]:
        raise RuntimeError(f"indexed {count} documents, the corpus has {stats['total']}")
    # The pages as served (the HTML collections are links to their packages' folders).
    with open(args.out / "documents.jsonl", encoding="utf-8") as listing:
        document_bytes = sum(json.loads(line)["bytes"] for line in listing)
    corpus: dict[str, Any] = {
        "base_url": BASE_URL,
        "engine": {"name": "xapian", "version": xapian.version_string(), "backend": "glass"},
        "index": {
            "path": str(target),
            "sha256": sha256_file(target),
            "bytes": target.stat().st_size,
            "documents": count,
            "build_seconds": round(index_seconds, 3),
        },
        "documents": {
            "total": count,
            "per_collection": stats["counts"],
            "skipped": stats["skipped"],
            "listing": str(args.out / "documents.jsonl"),
            "listing_sha256": sha256_file(args.out / "documents.jsonl"),
        },
        "site": {"root": str(args.out / "site"), "document_bytes": document_bytes},
        "packages": stats["package_versions"],
        "apt_index": {
            "records": stats["apt_index_records"],
            "packages_sha256": sha256_file(Path("/opt/worldtrace/apt/Packages.gz")),
            "translation_sha256": sha256_file(Path("/opt/worldtrace/apt/Translation-en.gz")),
        },
        "converter": {"name": "markdownify", "version": importlib.metadata.version("markdownify")},
        "build_seconds": {
            "corpus": stats["corpus_seconds"],
            "index": round(index_seconds, 3),
            "total": round(time.time() - args.started, 3),
        },
    }
    args.corpus_json.write_text(json.dumps(corpus, indent=1, sort_keys=True), encoding="utf-8")
    print(json.dumps({"documents": count, "index": corpus["index"]}))


if __name__ == "__main__":
    main()
