"""An engine that stops answering mid-run loses no episode: set aside, waited for, collected."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import docker
import polars as pl
import pytest

import worldtrace.flows.collect as collect_module
from tests.sandboxes.engine_proxy import EngineProxy
from worldtrace.collectors.recorder import read_episode
from worldtrace.flows.collect import run_collection
from worldtrace.flows.config import validate_config
from worldtrace.sandboxes.docker import RUN_LABEL
from worldtrace.sandboxes.errors import SandboxError

pytestmark = pytest.mark.docker


def wait_for_a_step(partial: Path, timeout_s: float = 300) -> None:
    """Until the half-recorded episode at ``partial`` holds its start and a step."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if partial.exists() and len(partial.read_bytes().splitlines()) >= 2:
            return
        time.sleep(0.05)
    raise AssertionError(f"{partial} never recorded a step")


def test_an_engine_that_goes_away_sets_episodes_aside_and_never_seals_them_failed(
    tmp_path: Path, terminal_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = EngineProxy(tmp_path / "engine.sock")
    proxy.restore()
    monkeypatch.setenv("DOCKER_HOST", proxy.url)
    monkeypatch.setattr(collect_module, "ENGINE_WAIT_S", 8.0)
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 2,
            "out": str(tmp_path),
            "run_name": "lost",
            "policy": {"kind": "script", "tasks": ["word-frequency"]},
        }
    )
    partial = tmp_path / "lost" / "raw" / "partial"

    def outages() -> None:
        # The first episode's engine comes back within the wait (a daemon restart)...
        wait_for_a_step(partial / "lost-s000000.jsonl")
        proxy.cut()
        time.sleep(2)
        proxy.restore()
        # ...the second's does not.
        wait_for_a_step(partial / "lost-s000001.jsonl")
        proxy.cut()

    cutter = threading.Thread(target=outages, daemon=True)
    cutter.start()
    try:
        with pytest.raises(SandboxError, match="did not come back within 8 s"):
            run_collection(config)
    finally:
        cutter.join(timeout=60)
        proxy.cut()
        proxy.restore()
    run_dir = tmp_path / "lost"
    sealed = sorted(p.stem for p in (run_dir / "raw" / "episodes").glob("*.jsonl"))
    assert sealed == ["lost-s000000"]  # collected again after the first outage
    set_aside = sorted((run_dir / "raw" / "interrupted").glob("*.jsonl"))
    assert [p.name.split(".")[0] for p in set_aside] == ["lost-s000000", "lost-s000001"]
    reasons = [getattr(list(read_episode(p))[-1], "reason", "") for p in set_aside]
    assert all("engine stopped answering" in reason for reason in reasons), reasons

    resumed = run_collection(config)
    assert resumed["failed"] == 0 and resumed["collected"] == 1
    episodes = pl.read_parquet(run_dir / "episodes.parquet")
    assert sorted(episodes["episode_id"]) == ["lost-s000000", "lost-s000001"]
    assert set(episodes["status"]) == {"completed"}
    engine = docker.from_env()
    left = engine.containers.list(all=True, filters={"label": f"{RUN_LABEL}=lost"})
    assert left == []  # the containers of the lost attempts are gone too
