"""The ``pipeline`` Prefect flow: collect → curate → publish, from one config file.

Example ``pipeline.yaml``::

    collect:                  # the collection config (see flows/config.py)
      domain: terminal
      episodes: 8
      workers: 2
      out: runs/
    curate:                   # the curation config (see curation/config.py); {} = defaults
      {}
    corpus: corpora/terminal  # where the curated corpus goes (a path or an fsspec URL)
    publish:
      to: dist/terminal       # a Hub-layout folder (a path or an fsspec URL)
      repo: null              # or org/name to upload as well
      private: false
      revision: null
      shard_size_mb: 500

Every stage resumes: running the same file again finishes only what is missing.

Like the collect flow, the pipeline flow takes the file's path and the sha256 of its bytes,
never the configuration itself, so nothing in it (a replay policy's actions) reaches Prefect's
database; its tasks return counts and paths only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldtrace.collectors.episode import stop_requested
from worldtrace.curation.config import CurationConfig
from worldtrace.curation.pipeline import curate
from worldtrace.flows.collect import collect
from worldtrace.flows.config import CollectConfig, claim_run
from worldtrace.publishing.folder import publish_anywhere
from worldtrace.publishing.hub import push_to_hub
from worldtrace.schemas.errors import ConfigError, validation_problems


class PublishTarget(BaseModel):
    """Where the curated corpus is published."""

    model_config = ConfigDict(extra="forbid")

    to: str | None = Field(
        default=None,
        description="write the Hub layout to this folder (a path or an fsspec URL); "
        "default: the corpus folder's name plus -dataset, beside it",
    )
    repo: str | None = Field(default=None, description="upload to this Hub dataset repo")
    private: bool = Field(default=False, description="create the repo private")
    revision: str | None = Field(default=None, description="branch to upload to")
    shard_size_mb: int = Field(default=500, ge=1, description="target parquet shard size")


class PipelineConfig(BaseModel):
    """collect → curate → publish."""

    model_config = ConfigDict(extra="forbid")

    collect: CollectConfig
    curate: CurationConfig = Field(default_factory=CurationConfig)
    corpus: str = Field(description="folder of the curated corpus (a path or an fsspec URL)")
    publish: PublishTarget = Field(default_factory=PublishTarget)


def default_publish_folder(corpus: str) -> str:
    """Where a corpus is published when the config names no folder: ``<corpus>-dataset``."""
    return f"{corpus.rstrip('/')}-dataset"


def file_sha256(path: Path) -> str:
    """Return the sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_pipeline_config(path: Path, sha256: str | None = None) -> PipelineConfig:
    """Read and validate a pipeline YAML file; errors name the bad fields.

    With ``sha256`` the file must still hold exactly the bytes that digest was taken of.
    """
    try:
        raw = Path(path).read_bytes()
        if sha256 is not None and hashlib.sha256(raw).hexdigest() != sha256:
            raise ConfigError(f"{path} changed after the pipeline was started; start it again")
        data = yaml.safe_load(raw)
        return PipelineConfig.model_validate(data)
    except FileNotFoundError:
        raise ConfigError(f"pipeline file {path} does not exist") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from None
    except ValidationError as error:
        problems = validation_problems(error, "pipeline")
        raise ConfigError("invalid pipeline config:\n  " + "\n  ".join(problems)) from None


@task(name="curate", cache_policy=NO_CACHE, persist_result=False)
def curate_run(pipeline_file: str, sha256: str) -> dict[str, Any]:
    """Curate the collected run into the corpus folder; return the row counts."""
    config = load_pipeline_config(Path(pipeline_file), sha256)
    report = curate(config.collect.run_location, config.corpus, config.curate)
    return {
        "corpus": str(report.output_dir),
        "rows_in": report.rows_in,
        "rows_out": report.rows_out,
        "targets": report.targets,
        "episodes_dropped": report.episodes_dropped,
        "quarantined_rows": report.quarantined_rows,
    }


@task(name="publish", cache_policy=NO_CACHE, persist_result=False)
def publish_corpus(pipeline_file: str, sha256: str) -> dict[str, Any]:
    """Write the Hub layout and upload it if a repo is given; return what was written."""
    config = load_pipeline_config(Path(pipeline_file), sha256)
    folder = config.publish.to or default_publish_folder(config.corpus)
    return publish_to_target(config.corpus, folder, config.publish)


def publish_to_target(corpus: str, folder: str, target: PublishTarget) -> dict[str, Any]:
    """Publish ``corpus`` to ``folder``, and to the target's Hub repo if it names one."""
    report, local_folder = publish_anywhere(corpus, folder, shard_size_mb=target.shard_size_mb)
    result: dict[str, Any] = {"folder": folder, "rows": report.rows}
    if target.repo:
        pushed = push_to_hub(
            local_folder, target.repo, private=target.private, revision=target.revision
        )
        result |= {"repo": pushed.repo_id, "uploaded": len(pushed.uploaded), "noop": pushed.noop}
    return result


@flow(name="pipeline", log_prints=False, persist_result=False)
def pipeline(pipeline_file: str, sha256: str) -> dict[str, Any]:
    """Run the three stages of the file in order; each one resumes if it ran before."""
    config = load_pipeline_config(Path(pipeline_file), sha256)
    run_sha256 = claim_run(config.collect)
    # TaskRunner[Any]: with_options wants a TaskRunner[PrefectFuture], and Prefect's TaskRunner is
    # invariant in its future type, so its own ThreadPoolTaskRunner would not pass as typed.
    runner: TaskRunner[Any] = ThreadPoolTaskRunner(max_workers=config.collect.workers)
    collected = collect.with_options(task_runner=runner)(
        config.collect.run_location,
        run_sha256,
        retries=config.collect.retries,
        normalize=True,
        sandbox_host=config.collect.sandbox_host,
    )
    if stop_requested():
        return {"collect": collected}
    curated = curate_run(pipeline_file, sha256)
    published = publish_corpus(pipeline_file, sha256)
    return {"collect": collected, "curate": curated, "publish": published}
