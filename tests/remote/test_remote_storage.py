"""Runs, corpora and published folders at an fsspec URL: a real SFTP server (see conftest.py).

The URL is ``sftp://worldtrace@127.0.0.1:<port>/home/worldtrace/store`` on the test's OpenSSH
server, reached through fsspec's SFTP filesystem (paramiko) with the fixture's key. A fresh
staging folder stands for another machine: what it does not have, it must get from the URL.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import fsspec.config
import polars as pl
import pytest
from datasets import load_dataset

from tests.publishing.helpers import make_corpus
from tests.remote.conftest import SshServer
from worldtrace.curation.config import CurationConfig
from worldtrace.curation.pipeline import curate
from worldtrace.flows.collect import run_collection
from worldtrace.flows.config import CollectConfig, validate_config
from worldtrace.publishing.folder import PublishError, publish_anywhere
from worldtrace.schemas.errors import InputError
from worldtrace.schemas.storage import RemoteFolder

pytestmark = pytest.mark.docker

TASK = "git-tag-from-history"


@pytest.fixture
def store(sshd: SshServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """A fresh folder on the SFTP server, as a URL; staging in this test's own folder."""
    monkeypatch.setitem(
        fsspec.config.conf,
        "sftp",
        {"key_filename": str(sshd.key), "look_for_keys": False, "allow_agent": False},
    )
    monkeypatch.setenv("WORLDTRACE_STAGING_HOME", str(tmp_path / "staging"))
    url = f"sftp://{sshd.user}@{sshd.host}:{sshd.port}/home/{sshd.user}/store-{tmp_path.name}"
    yield url
    folder = RemoteFolder(url)
    with contextlib.suppress(FileNotFoundError):
        folder.fs.rm(folder.root, recursive=True)


def run_config(out: str, episodes: int = 2) -> CollectConfig:
    """A small terminal run recorded at ``out``."""
    return validate_config(
        {
            "domain": "terminal",
            "episodes": episodes,
            "workers": 2,
            "out": out,
            "run_name": "remote-run",
            "policy": {"kind": "script", "tasks": [TASK]},
        }
    )


def remote_bytes(folder: RemoteFolder, pattern: str) -> dict[str, bytes]:
    """The contents of the remote files matching ``pattern``."""
    return {
        name: folder.fs.cat_file(f"{folder.root}/{name}")
        for name in sorted(folder.remote_files(pattern))
    }


def forget_staging(tmp_path: Path) -> None:
    """This machine loses its staged copies (another machine takes over)."""
    shutil.rmtree(tmp_path / "staging", ignore_errors=True)


def test_a_run_at_a_url_is_resumed_from_the_url_curated_and_published(
    store: str, terminal_image: str, tmp_path: Path
) -> None:
    config = run_config(f"{store}/runs")
    summary = run_collection(config)
    assert (summary["collected"], summary["failed"]) == (2, 0)
    assert summary["run_dir"] == f"{store}/runs/remote-run"
    run = RemoteFolder(config.run_location)
    sealed = remote_bytes(run, "raw/episodes/*.jsonl")
    assert sorted(sealed) == [f"raw/episodes/{config.episode_id(i)}.jsonl" for i in range(2)]
    assert run.exists("run.json") and run.exists("episodes.parquet")
    assert run.remote_files("transitions/terminal/*.parquet")

    # Another machine, nothing staged: the URL says both episodes are done.
    forget_staging(tmp_path)
    again = run_collection(config)
    assert (again["already_sealed"], again["collected"]) == (2, 0)
    assert remote_bytes(run, "raw/episodes/*.jsonl") == sealed

    # Curation reads the run at its URL (datatrove cannot write its work files over SFTP:
    # see the next test); the corpus is then copied to the server as a user would.
    report = curate(config.run_location, str(tmp_path / "corpus"), CurationConfig())
    # Both episodes played one script: curation keeps one copy of each repeated step.
    assert 0 < report.rows_out <= summary["transitions"]
    corpus = RemoteFolder(f"{store}/corpus")
    for path in sorted((tmp_path / "corpus").rglob("*")):
        target = f"{corpus.root}/{path.relative_to(tmp_path / 'corpus').as_posix()}"
        if path.is_dir():
            corpus.fs.makedirs(target, exist_ok=True)
        else:
            corpus.fs.put_file(str(path), target)
    assert corpus.exists("corpus.json")

    forget_staging(tmp_path)
    published, _ = publish_anywhere(f"{store}/corpus", f"{store}/dataset")
    dataset = RemoteFolder(f"{store}/dataset")
    files = set(dataset.remote_files("**"))
    assert "meta/manifest.json" in files and "README.md" in files
    assert set(published.files) == files
    # Read back what the URL holds, as a training job would after copying it.
    copy = tmp_path / "copy"
    dataset.fs.get(f"{dataset.root}/", str(copy), recursive=True)
    rows = load_dataset("parquet", data_files=str(copy / "data/terminal/*.parquet"))["train"]
    assert rows.num_rows == published.rows == report.rows_out
    assert pl.read_parquet(copy / "meta/episodes.parquet").height == published.episodes >= 1

    # Publishing again sends no shard that is already there, and removes none.
    shards = remote_bytes(dataset, "data/terminal/*.parquet")
    publish_anywhere(f"{store}/corpus", f"{store}/dataset")
    assert remote_bytes(dataset, "data/terminal/*.parquet") == shards


def test_curating_into_sftp_is_refused_before_any_work(store: str) -> None:
    with pytest.raises(InputError, match=r"cannot curate into sftp://.*Curate into a local"):
        curate(f"{store}/no-run", f"{store}/corpus", CurationConfig())
    assert not RemoteFolder(f"{store}/corpus").fs.exists(RemoteFolder(f"{store}/corpus").root)


def test_a_resumed_run_records_only_the_episodes_the_url_lacks(
    store: str, terminal_image: str, tmp_path: Path
) -> None:
    config = run_config(f"{store}/runs")
    run_collection(config)
    run = RemoteFolder(config.run_location)
    kept_name = f"raw/episodes/{config.episode_id(0)}.jsonl"
    kept = run.fs.cat_file(f"{run.root}/{kept_name}")
    # The second episode never reached the URL (its machine died before the upload).
    run.fs.rm_file(f"{run.root}/raw/episodes/{config.episode_id(1)}.jsonl")
    forget_staging(tmp_path)

    summary = run_collection(config)
    assert (summary["already_sealed"], summary["collected"]) == (1, 1)
    assert run.fs.cat_file(f"{run.root}/{kept_name}") == kept
    assert len(run.remote_files("raw/episodes/*.jsonl")) == 2
    episodes = pl.read_parquet(run.fs.open(f"{run.root}/episodes.parquet", "rb"))
    assert sorted(episodes["episode_id"].to_list()) == [config.episode_id(i) for i in range(2)]


def test_the_url_wins_over_a_staged_episode_that_differs(
    store: str, terminal_image: str, tmp_path: Path
) -> None:
    config = run_config(f"{store}/runs", episodes=1)
    run_collection(config)
    name = f"raw/episodes/{config.episode_id(0)}.jsonl"
    run = RemoteFolder(config.run_location)
    staged = run.local / name
    staged.write_bytes(staged.read_bytes() + b"\n")
    assert run.download("raw/episodes/*.jsonl") == [name]
    assert staged.read_bytes() == run.fs.cat_file(f"{run.root}/{name}")


def test_a_url_holding_another_runs_manifest_is_refused(
    store: str, terminal_image: str, tmp_path: Path
) -> None:
    run_collection(run_config(f"{store}/runs", episodes=1))
    forget_staging(tmp_path)
    other = validate_config(
        run_config(f"{store}/runs", episodes=1).model_dump(mode="json") | {"seed": 7}
    )
    with pytest.raises(InputError, match="different configuration"):
        run_collection(other)


def test_an_unknown_protocol_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open nosuch://"):
        RemoteFolder("nosuch://bucket/run")


def test_publishing_to_a_url_keeps_files_someone_added_there(store: str, tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    publish_anywhere(str(corpus), f"{store}/dataset")
    dataset = RemoteFolder(f"{store}/dataset")
    dataset.fs.pipe_file(f"{dataset.root}/NOTES.md", b"my notes")
    forget_staging(tmp_path)  # another machine publishes the next version
    with pytest.raises(PublishError, match=r"NOTES\.md"):
        publish_anywhere(str(corpus), f"{store}/dataset")
    assert dataset.fs.cat_file(f"{dataset.root}/NOTES.md") == b"my notes"
