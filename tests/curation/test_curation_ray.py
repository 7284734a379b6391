"""The curation run on a local Ray instance gives the local executor's output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

# ray is one of worldtrace's own dependencies (curate --executor ray), not an optional extra:
# an install without it is broken, and this module fails to import rather than skipping.
import ray

from tests.curation.helpers import PROSE, numbers_screen, read_output, step
from worldtrace.curation import CurationConfig, CurationError, curate
from worldtrace.curation.pipeline import _run_stage
from worldtrace.normalizers.shards import ShardWriter
from worldtrace.schemas import Transition


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        yield
    finally:
        ray.shutdown()


def sorted_rows(out: Path) -> pl.DataFrame:
    return read_output(out).sort("id")


def test_ray_output_equals_local(ray_cluster: None, tmp_path: Path) -> None:
    run = tmp_path / "run"
    rows = [
        step("ep-a", 0, PROSE, PROSE + "\nok"),
        step("ep-a", 1, "$ ls", "file.txt"),
        step("ep-b", 0, "$ ls", "file.txt"),  # exact duplicate
        # near duplicate: one word of the state changed, the same line added
        step("ep-b", 1, PROSE.replace("lazy", "sleepy"), PROSE.replace("lazy", "sleepy") + "\nok"),
        step("ep-c", 0, numbers_screen(1), numbers_screen(2)),
        step("ep-c", 1, numbers_screen(3), numbers_screen(4)),
    ]
    with ShardWriter(run / "transitions" / "terminal", Transition, rows_per_shard=3) as writer:
        writer.write(rows)  # type: ignore[arg-type]  # two files, one per task
    # few LSH bands keep the buckets stage (one Ray actor per band) short
    config = CurationConfig(tasks=2, minhash={"num_buckets": 2, "hashes_per_bucket": 8})
    local = curate(run, tmp_path / "local", config, workers=2)
    remote = curate(run, tmp_path / "ray", config, workers=2, executor="ray")
    assert remote.stages_run == local.stages_run
    assert (remote.rows_in, remote.rows_out, remote.targets) == (6, 6, 4)
    assert (local.rows_in, local.rows_out, local.targets) == (6, 6, 4)
    assert sorted_rows(tmp_path / "ray").equals(sorted_rows(tmp_path / "local"))
    assert ray.is_initialized()  # an existing instance is reused, not shut down
    again = curate(run, tmp_path / "ray", config, workers=2, executor="ray")
    assert again.stages_run == []


def test_ray_failed_rank_is_an_error(ray_cluster: None, tmp_path: Path) -> None:
    def fail_on_rank_one(data: object, rank: int = 0, world_size: int = 1) -> Iterator[object]:
        if rank == 1:
            raise RuntimeError("rank 1 breaks")
        yield from ()

    with pytest.raises(CurationError, match=r"'broken' left tasks \[1\] incomplete"):
        _run_stage("broken", [fail_on_rank_one], 2, 2, tmp_path / "logs", "ray")
    assert (tmp_path / "logs" / "broken" / "completions" / "00000").exists()
