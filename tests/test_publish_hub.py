"""Uploading a published folder, against a LOCAL STAND-IN for the Hub API (not the Hub)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from publishing.hub import SchemaMismatchError, push_to_hub
from publishing.layout import manifest_of, publish_folder
from tests.hub_standin import LocalHubStandIn
from tests.test_publish import make_corpus

TOKEN = "hf_standin_0123456789_secret"


@pytest.fixture()
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LocalHubStandIn]:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no stored token leaks in
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    with LocalHubStandIn() as server:
        yield server


@pytest.fixture()
def folder(tmp_path: Path) -> Path:
    corpus = make_corpus(tmp_path / "corpus")
    publish_folder(corpus, tmp_path / "dist", licence="cc-by-4.0")
    return tmp_path / "dist"


def test_first_push_uploads_every_file(
    hub: LocalHubStandIn,
    folder: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    report = push_to_hub(folder, "org/corpus", private=True, token=TOKEN, endpoint=hub.endpoint)

    assert not report.noop
    assert hub.repos["org/corpus"].private is True
    remote = hub.files("org/corpus")
    local = {p: (folder / p).read_bytes() for p in manifest_of(folder)} | {
        "meta/manifest.json": (folder / "meta" / "manifest.json").read_bytes()
    }
    assert {p: c for p, c in remote.items() if p != ".gitattributes"} == local
    assert "data/terminal/train-00000-of-00001.parquet" in remote
    assert "README.md" in remote
    assert hub.validated_cards == [(folder / "README.md").read_text()]
    uploads = [c for c in hub.commits if c.summary.startswith("Publish")]
    assert len(uploads) == 1 and uploads[0].revision == "main"
    assert report.commit == uploads[0].oid

    # the token travelled in the Authorization header of every request, and nowhere else
    assert hub.requests and all(r.authorization == f"Bearer {TOKEN}" for r in hub.requests)
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err
    assert TOKEN not in caplog.text
    assert not any(TOKEN in line for line in hub.log_lines)
    assert TOKEN not in repr(report)


def test_second_push_is_a_noop(hub: LocalHubStandIn, folder: Path) -> None:
    push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    commits, seen = len(hub.commits), len(hub.requests)
    report = push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    assert report.noop
    assert len(hub.commits) == commits
    second = [r.path for r in hub.requests[seen:]]
    assert second and not [p for p in second if p.endswith(("/commit/main", "/preupload/main"))]


def test_push_to_a_new_branch_with_token_from_env(
    hub: LocalHubStandIn, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    report = push_to_hub(folder, "org/corpus", revision="v1", endpoint=hub.endpoint)
    assert report.revision == "v1"
    assert "README.md" in hub.files("org/corpus", "v1")
    assert "README.md" not in hub.files("org/corpus", "main")
    assert [c.revision for c in hub.commits if c.summary.startswith("Publish")] == ["v1"]
    assert all(r.authorization == f"Bearer {TOKEN}" for r in hub.requests)
    assert hub.repos["org/corpus"].private is False


def test_schema_mismatch_is_refused_unless_forced(hub: LocalHubStandIn, folder: Path) -> None:
    push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    # the repo now holds an older corpus: another schema version and arrow schema
    files = hub.repos["org/corpus"].branches["main"]
    old = json.loads(files["meta/schema.json"])
    old.update(schema_version="0.9", arrow_schema_sha256="f" * 64)
    files["meta/schema.json"] = json.dumps(old).encode()
    files["data/terminal/train-00001-of-00002.parquet"] = b"old shard"
    commits = len(hub.commits)

    with pytest.raises(SchemaMismatchError, match=r"schema version '0\.9'.*force=True"):
        push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    assert len(hub.commits) == commits

    report = push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint, force=True)
    assert not report.noop
    files = hub.files("org/corpus")
    assert json.loads(files["meta/schema.json"])["schema_version"] == "1.0"
    assert "data/terminal/train-00001-of-00002.parquet" not in files  # stale shard removed
    assert report.deleted == ["data/terminal/train-00001-of-00002.parquet"]


def test_foreign_data_without_schema_is_refused(hub: LocalHubStandIn, folder: Path) -> None:
    push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    files = hub.repos["org/corpus"].branches["main"]
    del files["meta/schema.json"]
    with pytest.raises(SchemaMismatchError, match="not a worldtrace corpus"):
        push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)


def test_changed_corpus_uploads_only_the_difference(hub: LocalHubStandIn, tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c1")
    publish_folder(corpus, tmp_path / "d1", licence="mit")
    push_to_hub(tmp_path / "d1", "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    publish_folder(corpus, tmp_path / "d1", licence="apache-2.0")  # only the card changes
    report = push_to_hub(tmp_path / "d1", "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    assert sorted(report.uploaded) == ["README.md", "meta/manifest.json"]
    last = hub.commits[-1]
    assert sorted(last.added) == ["README.md", "meta/manifest.json"]
    assert b"apache-2.0" in hub.files("org/corpus")["README.md"]
