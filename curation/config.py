"""The curation configuration: every threshold and filter mode, loadable from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldtrace.schemas.errors import ConfigError, validation_problems


def registered_read_only_actions() -> tuple[str, ...]:
    """The read-only actions every registered domain declares, sorted."""
    from worldtrace.collectors.registry import registered_collectors

    return tuple(sorted({a for c in registered_collectors() for a in c.read_only_actions}))


FilterMode = Literal["drop", "exclude", "label", "keep"]
"""What a matched rule does. Curation keeps or drops whole episodes, never single rows:
``drop`` drops the matching row's whole episode; ``exclude`` keeps the row in its episode
(as history) but not as a training target; ``label`` only labels it; ``keep`` ignores the
rule. Every mode but ``keep`` writes the rule into the row's ``curation.labels``."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MinhashSettings(_Strict):
    """Near-duplicate removal with MinHash (datatrove's four stages)."""

    enabled: bool = True
    n_grams: int = Field(default=5, ge=1, description="words per shingle")
    num_buckets: int = Field(default=14, ge=1, description="LSH bands")
    hashes_per_bucket: int = Field(default=8, ge=1, description="hashes per LSH band")
    seed: int = Field(default=1, description="seed of the hash permutations")


class FilterSettings(_Strict):
    """Row and episode filters, each with its own mode."""

    empty_observation: FilterMode = Field(
        default="label",
        description="observation or next observation text empty or truncated (an empty "
        "result, such as an empty directory listing, is a real state: labelled, not removed)",
    )
    truncated_markers: tuple[str, ...] = Field(
        default=("[truncated]", "<truncated>"),
        description="an observation ending with one of these counts as truncated",
    )
    oversize_observation: FilterMode = Field(
        default="exclude", description="observation text longer than max_observation_chars"
    )
    max_observation_chars: int = Field(default=200_000, ge=1)
    error_episode: FilterMode = Field(
        default="label",
        description="episodes whose share of action errors (``action_error``) is too high; "
        "labelled by default, since predicting failures is part of what a world model learns "
        "and an exploring policy's episodes are often mostly failed calls",
    )
    max_error_fraction: float = Field(
        default=0.5, ge=0, le=1, description="an episode above this error share is matched"
    )
    noop: FilterMode = Field(
        default="label", description="next observation text identical to the observation"
    )
    invalid_reply: FilterMode = Field(
        default="exclude",
        description="a model's reply that was no action of the domain (action `invalid_reply`): "
        "the policy refused it and the environment never saw it, so the row shows our "
        "harness, not the environment; kept as its episode's history, not a training target",
    )
    noop_read_only: FilterMode = Field(
        default="label", description="mode for no-ops whose action is read-only"
    )
    read_only_actions: tuple[str, ...] = Field(
        default_factory=lambda: registered_read_only_actions(),
        description="action names that do not change the state on purpose (default: what "
        "every registered domain declares)",
    )


class ScrubSettings(_Strict):
    """Replacement of secrets and personal data by typed placeholders."""

    enabled: bool = True
    emails: bool = True
    ips: bool = True
    terminal_columns: int = Field(
        default=160,
        ge=1,
        description="pane width of terminal rows whose meta has no 'columns' (wrapped lines "
        "are joined before secrets are searched)",
    )


class DecontamSettings(_Strict):
    """Removal of rows overlapping evaluation sets."""

    eval_files: tuple[Path, ...] = Field(
        default=(), description="text files (one sample per blank-line block) or JSONL files"
    )
    jsonl_fields: tuple[str, ...] = Field(
        default=("text", "prompt", "response", "question", "answer", "input", "output"),
        description="fields of JSONL eval rows whose strings are used",
    )
    n_grams: int = Field(default=8, ge=1, description="words per n-gram")
    threshold: float = Field(
        default=0.5, ge=0, le=1, description="drop when this share of a row's n-grams is in evals"
    )


class CurationConfig(_Strict):
    """Everything a curation run can be tuned by."""

    exact_dedup: bool = Field(default=True, description="remove identical transitions")
    minhash: MinhashSettings = Field(default_factory=MinhashSettings)
    filters: FilterSettings = Field(default_factory=FilterSettings)
    scrub: ScrubSettings = Field(default_factory=ScrubSettings)
    decontam: DecontamSettings = Field(default_factory=DecontamSettings)
    tasks: int = Field(
        default=1,
        ge=1,
        le=65535,
        description="datatrove tasks (shards of the input files); exact dedup tells at most "
        "65,535 apart (datatrove's 16-bit priorities)",
    )
    max_output_file_bytes: int = Field(
        default=512 * 2**20, ge=1, description="rotate output shards at about this size"
    )


def load_curation_config(path: Path) -> CurationConfig:
    """Read a :class:`CurationConfig` from a YAML file (an empty file gives the defaults).

    A missing file, invalid YAML or a bad field is a :class:`ConfigError` naming it.
    """
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
        return CurationConfig.model_validate(data)
    except FileNotFoundError:
        raise ConfigError(f"curation config {path} does not exist") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from None
    except ValidationError as error:
        problems = validation_problems(error, "config")
        raise ConfigError("invalid curation config:\n  " + "\n  ".join(problems)) from None
