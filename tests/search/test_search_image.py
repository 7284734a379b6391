"""The ``worldtrace/search`` image: its corpus, identity and index, read in a real container."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from worldtrace.collectors.search.image_definition import CORPUS_JSON, DOCUMENTS_JSONL, IMAGE
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.images import ensure_image
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker

COLLECTIONS = ("man", "python", "postgresql", "git", "sqlite", "debian-reference", "packages")
URL = re.compile(
    r"^http://docs\.localhost/(man/[0-9][a-z0-9]*/[^/]+\.html|(python|sqlite)/.+\.html"
    r"|git/((howto|technical)/)?[^/]+\.html|(postgresql|debian-reference|packages)/[^/]+\.html)$"
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    """One sandbox of the image (nothing here writes)."""
    image = ensure_image(IMAGE)
    box = DockerSandbox(image, limits=Limits(disk_mb=64), network="none").start()
    try:
        yield box
    finally:
        box.close()


@pytest.fixture(scope="module")
def corpus(sandbox: DockerSandbox) -> dict[str, Any]:
    """/opt/worldtrace/corpus.json."""
    return json.loads(sandbox.get_file(CORPUS_JSON))


@pytest.fixture(scope="module")
def documents(sandbox: DockerSandbox) -> list[dict[str, Any]]:
    """Every line of /srv/search/documents.jsonl."""
    return [json.loads(line) for line in sandbox.get_file(DOCUMENTS_JSONL).splitlines()]


def test_corpus_has_every_collection_and_enough_documents(
    corpus: dict[str, Any], documents: list[dict[str, Any]]
) -> None:
    counts = corpus["documents"]["per_collection"]
    assert set(counts) == set(COLLECTIONS)
    assert all(counts[name] > 0 for name in COLLECTIONS), counts
    assert corpus["documents"]["total"] == sum(counts.values()) == len(documents) >= 20_000
    assert Counter(document["collection"] for document in documents) == Counter(counts)
    assert corpus["index"]["documents"] == len(documents)
    assert corpus["site"]["document_bytes"] == sum(document["bytes"] for document in documents)


def test_documents_have_stable_urls_titles_and_dates(documents: list[dict[str, Any]]) -> None:
    urls = [document["url"] for document in documents]
    assert len(set(urls)) == len(urls)
    assert [url for url in urls if not URL.match(url)] == []
    assert all(document["title"].strip() for document in documents)
    for document in documents:
        if document["collection"] == "packages":
            assert document["date"] is None
        elif document["date"] is not None:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", document["date"]), document
    dated = [d for d in documents if d["collection"] != "packages" and d["date"] is not None]
    # Every documentation package here has a Debian changelog.
    assert {d["collection"] for d in dated} == set(COLLECTIONS) - {"packages"}
    by_url = {document["url"]: document for document in documents}
    assert by_url["http://docs.localhost/man/1/ls.html"]["package"] == "coreutils"
    assert by_url["http://docs.localhost/packages/bash.html"]["title"].startswith("bash: ")


def test_identity_names_every_version(corpus: dict[str, Any]) -> None:
    assert corpus["base_url"] == "http://docs.localhost/"
    assert corpus["engine"]["name"] == "xapian"
    assert re.fullmatch(r"1\.4\.\d+", corpus["engine"]["version"])
    assert corpus["converter"]["name"] == "markdownify" and corpus["converter"]["version"]
    packages = corpus["packages"]
    for name in ("python3.11-doc", "postgresql-doc-15", "git-doc", "sqlite3-doc", "mandoc"):
        assert packages[name], name
    assert all(packages.values()), [name for name, version in packages.items() if not version]
    assert corpus["apt_index"]["records"] == corpus["documents"]["per_collection"]["packages"]
    assert corpus["build_seconds"]["index"] > 0 and corpus["build_seconds"]["total"] > 0


def test_index_hash_matches_the_index_file(sandbox: DockerSandbox, corpus: dict[str, Any]) -> None:
    index = corpus["index"]
    result = sandbox.exec(["sha256sum", index["path"]], timeout=60)
    assert result.exit_code == 0, result.text
    assert result.text.split()[0] == index["sha256"]
    size = sandbox.exec(["stat", "-c", "%s", index["path"]], timeout=10)
    assert int(size.text.strip()) == index["bytes"]


def test_site_tree_holds_every_document(
    sandbox: DockerSandbox, documents: list[dict[str, Any]]
) -> None:
    """Each document's page exists in the site tree with the listed size (the server's files)."""
    script = (
        "import json, os, sys\n"
        "missing = []\n"
        "for line in open(sys.argv[1]):\n"
        "    d = json.loads(line)\n"
        "    path = '/srv/search/site/' + d['url'].removeprefix('http://docs.localhost/')\n"
        "    if not os.path.isfile(path) or os.path.getsize(path) != d['bytes']:\n"
        "        missing.append(d['url'])\n"
        "print(json.dumps(missing))\n"
    )
    result = sandbox.exec(["python3", "-c", script, DOCUMENTS_JSONL], timeout=60)
    assert result.exit_code == 0, result.text
    assert json.loads(result.text) == []
