"""Uploading a published folder, against a LOCAL STAND-IN for the Hub API (not the Hub)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import huggingface_hub.constants
import pytest
from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile

from tests.publishing.helpers import make_corpus
from tests.publishing.hub_standin import LocalHubStandIn
from worldtrace.publishing.folder import manifest_of, publish_folder
from worldtrace.publishing.hub import SchemaMismatchError, push_to_hub
from worldtrace.schemas import SCHEMA_VERSION

TOKEN = "hf_standin_0123456789_secret"


@pytest.fixture()
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[LocalHubStandIn]:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no stored token leaks in
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    # huggingface_hub sends LFS files through Xet whenever hf_xet is installed; the stand-in
    # speaks the git LFS batch API instead (the constant is read at call time).
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
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
    assert any(p.startswith("data/terminal/train-00000-of-00001-") for p in remote)
    assert "README.md" in remote
    # upload_folder validates the card before hashing the files, create_commit again
    assert hub.validated_cards
    assert set(hub.validated_cards) == {(folder / "README.md").read_text()}
    commits = [c for c in hub.commits if c.summary.startswith("Publish")]
    assert len(commits) == 1 and commits[0].revision == "main"
    assert report.commit == commits[0].oid

    # the token travelled in the Authorization header of every API request, and nowhere else:
    # LFS bytes go to presigned URLs, which must not receive it
    api = [r for r in hub.requests if not r.path.startswith("/lfs-objects/")]
    assert api and all(r.authorization == f"Bearer {TOKEN}" for r in api)
    uploads = [r for r in hub.requests if r.path.startswith("/lfs-objects/")]
    assert uploads and all(r.authorization is None for r in uploads)
    assert not any(TOKEN in str(r.query) for r in hub.requests)
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
    api = [r for r in hub.requests if not r.path.startswith("/lfs-objects/")]
    assert all(r.authorization == f"Bearer {TOKEN}" for r in api)
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
    assert json.loads(files["meta/schema.json"])["schema_version"] == SCHEMA_VERSION
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


def test_shards_are_uploaded_through_the_lfs_batch_api(hub: LocalHubStandIn, folder: Path) -> None:
    push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    shards = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.parquet"))
    oids = {path: hashlib.sha256((folder / path).read_bytes()).hexdigest() for path in shards}
    assert any(p.startswith("data/web/train-00000-of-00001-") for p in shards)
    # .gitattributes sends *.parquet through LFS: batch request, one PUT per object, verify
    assert any(r.path == "/datasets/org/corpus.git/info/lfs/objects/batch" for r in hub.requests)
    puts = sorted(r.path for r in hub.requests if r.method == "PUT")
    assert puts == sorted(f"/lfs-objects/{oid}" for oid in set(oids.values()))
    assert hub.repos["org/corpus"].lfs["main"] == set(shards)
    remote = hub.files("org/corpus")
    assert all(remote[path] == (folder / path).read_bytes() for path in shards)

    # the tree reports them as LFS files, by sha256, the rest as git blobs
    tree = {
        entry.path: entry
        for entry in HfApi(endpoint=hub.endpoint, token=TOKEN).list_repo_tree(
            "org/corpus", recursive=True, repo_type="dataset"
        )
        if isinstance(entry, RepoFile)
    }
    for path in shards:
        lfs = tree[path].lfs
        assert lfs is not None and lfs.sha256 == oids[path]
    assert tree["README.md"].lfs is None

    # compared by sha256, nothing changed: no second upload
    seen = len(hub.requests)
    assert push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint).noop
    assert not [r for r in hub.requests[seen:] if r.method == "PUT"]


def test_large_files_go_through_lfs_whatever_their_name(hub: LocalHubStandIn, folder: Path) -> None:
    hub.lfs_threshold = (folder / "meta" / "manifest.json").stat().st_size
    push_to_hub(folder, "org/corpus", token=TOKEN, endpoint=hub.endpoint)
    stored_as_lfs = hub.repos["org/corpus"].lfs["main"]
    assert "meta/manifest.json" in stored_as_lfs
    small = [
        path
        for path in manifest_of(folder)
        if not path.endswith(".parquet") and (folder / path).stat().st_size < hub.lfs_threshold
    ]
    assert small and not stored_as_lfs & set(small)
    manifest = (folder / "meta" / "manifest.json").read_bytes()
    assert hub.files("org/corpus")["meta/manifest.json"] == manifest
