"""Scheduled runs: where a pipeline finds its runs (on any filesystem), how workers poll."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

from worldtrace.flows.scheduled import deployment_runs

NAMES = (
    "nightly-20260102T010000Z",
    "nightly-20260101T010000Z",
    "nightly-20260103T010000Z",
    "nightly-eu-20260101T010000Z",
    "nightly-20260104T010000Z-p2of3",
    "weekly-20260101T010000Z",
)


def test_runs_of_a_deployment_in_a_local_folder(tmp_path: Path) -> None:
    for name in NAMES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
    for name in NAMES[:2] + NAMES[3:]:  # the third run is not normalized yet
        (tmp_path / name / "episodes.parquet").write_bytes(b"")
    found = deployment_runs(str(tmp_path), "nightly")
    assert found == [
        str(tmp_path / "nightly-20260101T010000Z"),
        str(tmp_path / "nightly-20260102T010000Z"),
        str(tmp_path / "nightly-20260104T010000Z-p2of3"),
    ]
    # Another deployment whose name starts with this one's keeps its runs.
    assert deployment_runs(str(tmp_path), "nightly-eu") == [
        str(tmp_path / "nightly-eu-20260101T010000Z")
    ]


def test_runs_of_a_deployment_at_a_url() -> None:
    memory = fsspec.filesystem("memory")
    root = "/wt-scheduled-runs"
    try:
        for name in NAMES:
            memory.pipe(f"{root}/{name}/run.json", b"{}")
        for name in NAMES[:2]:
            memory.pipe(f"{root}/{name}/episodes.parquet", b"")
        assert deployment_runs(f"memory://{root}", "nightly") == [
            f"memory://{root}/nightly-20260101T010000Z",
            f"memory://{root}/nightly-20260102T010000Z",
        ]
    finally:
        memory.rm(root, recursive=True)


def test_a_worker_polls_every_two_seconds_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect.settings import PREFECT_WORKER_QUERY_SECONDS

    from worldtrace.flows.deploy import worker_settings

    monkeypatch.delenv("PREFECT_WORKER_QUERY_SECONDS", raising=False)
    assert worker_settings() == {PREFECT_WORKER_QUERY_SECONDS: 2.0}
    monkeypatch.setenv("PREFECT_WORKER_QUERY_SECONDS", "7")
    assert worker_settings() == {}
