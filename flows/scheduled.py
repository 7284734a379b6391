"""The flows ``worldtrace deploy`` deploys: a scheduled collection, or a scheduled pipeline.

A deployment's parameters are the absolute path of its config file, the sha256 of the file's
bytes taken when it was deployed, and a run-name prefix; the configuration itself never
reaches Prefect (as for the ``collect`` and ``pipeline`` flows). A file edited after deploying
is refused at run time with a message saying to deploy again.

**One run directory per scheduled time.** A run of a deployment records into
``<out>/<prefix>-<scheduled time, UTC, %Y%m%dT%H%M%SZ>``, where the prefix is the config's
``run_name`` or else the deployment's name, and the time is the flow run's *expected* start
time: for a run the scheduler created, the time of its schedule slot; for a run started by
hand, when it was created. Prefect keeps that time when a flow run is scheduled again, so a
crashed or killed run that is retried (the UI's retry, or setting it back to Scheduled) finds
its own run directory and resumes it exactly as ``worldtrace collect`` does: sealed episodes
are kept, half-recorded ones set aside and recorded again, nothing collected twice. The next
scheduled time starts a run of its own and never touches an earlier one. Each scheduled run
collects the config's episodes with the config's seeds: the same plan recorded again against
the environment as it is at that time (its version is part of every row).

**Parts.** ``worldtrace deploy --parts N`` registers N deployments with the same schedule,
``NAME-p<k>of<N>``: at each scheduled time every worker of the pool may take one part, and part
k records its contiguous share of the episodes (with their own seeds) into
``<prefix>-<stamp>-p<k>of<N>``. The parts never share an episode or a run directory, so no
claiming is needed; ``worldtrace curate <out>/<prefix>-<stamp>-p*`` merges them.

A scheduled pipeline collects its run as above, then curates *every* normalized run of the
deployment so far (``<out>/<prefix>-*``) into ``<corpus>/<run name>`` (duplicates across runs
removed by curation), and publishes that corpus to ``<publish.to>/<run name>`` (default
``<corpus>-dataset/<run name>``), and to the Hub repo if the file names one: each run
publishes everything collected so far.

Relative paths in a config file are relative to the folder ``worldtrace deploy`` ran in: the
deployment runs its flows there (the process work pool's ``working_dir``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fsspec.core import url_to_fs
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from worldtrace.collectors.episode import stop_requested
from worldtrace.curation.pipeline import curate
from worldtrace.flows.collect import run_collection
from worldtrace.flows.config import CollectConfig, load_config, validate_config
from worldtrace.flows.pipeline import (
    default_publish_folder,
    file_sha256,
    load_pipeline_config,
    publish_to_target,
)
from worldtrace.schemas.errors import ConfigError
from worldtrace.schemas.storage import join

STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


def run_stamp(when: datetime) -> str:
    """The scheduled time as it appears in run names: UTC, to the second."""
    return when.astimezone(UTC).strftime(STAMP_FORMAT)


def part_of(episodes: int, part: int, parts: int) -> tuple[int, int]:
    """Episodes and seed offset of part ``part`` (1-based) of ``parts``: contiguous, disjoint."""
    if not 1 <= part <= parts <= episodes:
        raise ConfigError(f"part {part} of {parts} does not fit a run of {episodes} episode(s)")
    size, extra = divmod(episodes, parts)
    offset = (part - 1) * size + min(part - 1, extra)
    return size + (part <= extra), offset


def scheduled_run_config(
    config: CollectConfig, prefix: str, when: datetime, part: int = 1, parts: int = 1
) -> CollectConfig:
    """The collection config of the run scheduled at ``when``: its own run directory.

    With ``parts`` > 1 it is part ``part`` of the run: a run directory of its own
    (``<prefix>-<stamp>-p<part>of<parts>``) holding its share of the episodes with their own
    seeds, so parts recorded by different workers never share an episode or a directory.
    """
    episodes, offset = part_of(config.episodes, part, parts)
    name = f"{prefix}-{run_stamp(when)}" + (f"-p{part}of{parts}" if parts > 1 else "")
    return validate_config(
        config.model_dump(mode="json")
        | {"run_name": name, "episodes": episodes, "seed": config.seed + offset}
    )


def _scheduled_time() -> datetime:
    """The flow run's expected start time (kept by Prefect when the run is rescheduled)."""
    from prefect.runtime import flow_run

    return flow_run.scheduled_start_time


def _check_pinned(path: Path, sha256: str) -> None:
    """Refuse a config file whose bytes changed since it was deployed."""
    try:
        current = file_sha256(path)
    except OSError as error:
        raise ConfigError(f"cannot read the deployed config file {path}: {error}") from None
    if current != sha256:
        raise ConfigError(
            f"{path} changed after it was deployed; run `worldtrace deploy` again to use it"
        )


@flow(name="scheduled-collect", log_prints=False, persist_result=False)
def scheduled_collect(
    config_file: str, config_sha256: str, run_prefix: str, part: int = 1, parts: int = 1
) -> dict[str, Any]:
    """Collect the config's episodes (or part ``part`` of ``parts``) for this scheduled time.

    Resumable: the run directory is this scheduled time's (see the module's docstring).
    """
    _check_pinned(Path(config_file), config_sha256)
    config = scheduled_run_config(
        load_config(Path(config_file)), run_prefix, _scheduled_time(), part, parts
    )
    return run_collection(config)


def deployment_runs(out: str, prefix: str) -> list[str]:
    """The normalized runs of a deployment under ``out`` (``<prefix>-<stamp>``), oldest first.

    ``out`` may be a path or an fsspec URL; so are the runs returned. Only names of the form
    ``<prefix>-<stamp>[-p<k>of<N>]`` count: another deployment whose name starts with this
    one's (``nightly-eu`` beside ``nightly``) keeps its runs.
    """
    fs, root = url_to_fs(out)
    tables = fs.glob(f"{root.rstrip('/')}/{prefix}-*/episodes.parquet")
    names = sorted(table.rstrip("/").split("/")[-2] for table in tables)
    own = re.compile(rf"{re.escape(prefix)}-\d{{8}}T\d{{6}}Z(-p\d+of\d+)?")
    return [join(out, name) for name in names if own.fullmatch(name)]


@task(name="curate-scheduled", cache_policy=NO_CACHE, persist_result=False)
def curate_scheduled(pipeline_file: str, sha256: str, prefix: str, run_name: str) -> dict[str, Any]:
    """Curate every normalized run of the deployment into ``<corpus>/<run name>``."""
    config = load_pipeline_config(Path(pipeline_file), sha256)
    runs = deployment_runs(config.collect.out, prefix)
    report = curate(runs, join(config.corpus, run_name), config.curate)
    return {
        "corpus": str(report.output_dir),
        "runs": len(runs),
        "rows_in": report.rows_in,
        "rows_out": report.rows_out,
        "targets": report.targets,
        "quarantined_rows": report.quarantined_rows,
    }


@task(name="publish-scheduled", cache_policy=NO_CACHE, persist_result=False)
def publish_scheduled(pipeline_file: str, sha256: str, run_name: str) -> dict[str, Any]:
    """Publish ``<corpus>/<run name>`` to a folder of its own, and to the Hub if asked."""
    config = load_pipeline_config(Path(pipeline_file), sha256)
    target, corpus = config.publish, config.corpus
    folder = join(target.to or default_publish_folder(corpus), run_name)
    return publish_to_target(join(corpus, run_name), folder, target)


@flow(name="scheduled-pipeline", log_prints=False, persist_result=False)
def scheduled_pipeline(pipeline_file: str, sha256: str, run_prefix: str) -> dict[str, Any]:
    """Collect this scheduled time's run, curate all the deployment's runs, publish them."""
    config = load_pipeline_config(Path(pipeline_file), sha256)
    collect_config = scheduled_run_config(config.collect, run_prefix, _scheduled_time())
    collected = run_collection(collect_config)
    if stop_requested():
        return {"collect": collected}
    run_name = collect_config.resolved_run_name()
    curated = curate_scheduled(pipeline_file, sha256, run_prefix, run_name)
    published = publish_scheduled(pipeline_file, sha256, run_name)
    return {"collect": collected, "curate": curated, "publish": published}
