"""The ``pipeline`` Prefect flow: collect → curate → publish, from one config file.

Example ``pipeline.yaml``::

    collect:                  # the collection config (see flows/config.py)
      domain: terminal
      episodes: 8
      workers: 2
      out: runs/
    curate:                   # the curation config (see curation/config.py); {} = defaults
      {}
    corpus: corpora/terminal  # where the curated corpus goes
    publish:
      to: dist/terminal       # a Hub-layout folder
      repo: null              # or org/name to upload as well
      private: false
      revision: null
      shard_size_mb: 500

Every stage resumes: running the same file again finishes only what is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from curation.config import CurationConfig
from curation.pipeline import curate
from flows.collect import collect
from flows.config import CollectConfig, ConfigError
from publishing.hub import push_to_hub
from publishing.layout import publish_folder


class PublishTarget(BaseModel):
    """Where the curated corpus is published."""

    model_config = ConfigDict(extra="forbid")

    to: Path | None = Field(default=None, description="write the Hub layout to this folder")
    repo: str | None = Field(default=None, description="upload to this Hub dataset repo")
    private: bool = Field(default=False, description="create the repo private")
    revision: str | None = Field(default=None, description="branch to upload to")
    shard_size_mb: int = Field(default=500, ge=1, description="target parquet shard size")


class PipelineConfig(BaseModel):
    """collect → curate → publish."""

    model_config = ConfigDict(extra="forbid")

    collect: CollectConfig
    curate: CurationConfig = Field(default_factory=CurationConfig)
    corpus: Path = Field(description="folder of the curated corpus")
    publish: PublishTarget = Field(default_factory=PublishTarget)


def load_pipeline_config(path: Path) -> PipelineConfig:
    """Read and validate a pipeline YAML file; errors name the bad fields."""
    try:
        data = yaml.safe_load(Path(path).read_text())
        return PipelineConfig.model_validate(data)
    except FileNotFoundError:
        raise ConfigError(f"pipeline file {path} does not exist") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from None
    except ValidationError as error:
        problems = [
            f"  {'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in error.errors()
        ]
        raise ConfigError("invalid pipeline config:\n" + "\n".join(problems)) from None


@task(name="curate", cache_policy=NO_CACHE)
def curate_run(run_dir: Path, corpus: Path, config: CurationConfig) -> dict[str, Any]:
    """Curate the collected run into the corpus folder."""
    return curate(run_dir, corpus, config).model_dump(mode="json")


@task(name="publish", cache_policy=NO_CACHE)
def publish_corpus(corpus: Path, target: PublishTarget) -> dict[str, Any]:
    """Write the Hub layout and upload it if a repo is given."""
    folder = target.to or corpus.parent / f"{corpus.name}-dataset"
    result: dict[str, Any] = {"folder": str(folder)}
    result["layout"] = repr(publish_folder(corpus, folder, shard_size_mb=target.shard_size_mb))
    if target.repo:
        pushed = push_to_hub(folder, target.repo, private=target.private, revision=target.revision)
        result["push"] = repr(pushed)
    return result


@flow(name="pipeline", log_prints=False)
def pipeline(config: PipelineConfig) -> dict[str, Any]:
    """Run the three stages in order; each one resumes if it ran before."""
    runner = ThreadPoolTaskRunner(max_workers=config.collect.workers)
    collected = collect.with_options(task_runner=runner)(config.collect)
    curated = curate_run(config.collect.run_dir, config.corpus, config.curate)
    published = publish_corpus(config.corpus, config.publish)
    return {"collect": collected, "curate": curated, "publish": published}
