"""The dataset card (``README.md``) of a published corpus.

The YAML front matter declares the licence and one ``datasets`` config per domain plus ``all``,
so ``datasets.load_dataset(folder_or_repo, "<domain>")`` reads exactly that domain. The body
documents the schema, per-domain statistics, the environment versions and a polars recipe.
Nothing time-dependent is written, so the same corpus always yields the same card.
"""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from datasets import Image, List, Value
from pydantic import BaseModel

from worldtrace.publishing.inspect import DOMAIN_COLUMNS, USAGE_COLUMNS, domain_cells, usage_cells
from worldtrace.schemas import SCHEMA_VERSION, Transition, features_of
from worldtrace.schemas.records import JsonColumn

ALL_CONFIG = "all"

# Descriptions for fields whose pydantic definition has none (better added in schemas/records.py).
_FALLBACK_DESCRIPTIONS = {
    "id": "stable id `{episode_id}:{step:05d}`",
    "episode_id": "episode the step belongs to (see `meta/episodes.parquet`)",
    "step": "0-based index of the step in its episode",
    "task": "task given to the policy, if any",
    "policy.name": "policy name",
    "action.name": "action kind, e.g. `keys`, `click`",
    "action.arguments": "action arguments",
    "action_error": "error the environment reported for the action, if any",
    "reward": "reward of the step",
    "terminated": "the episode ended in a terminal state after this step",
    "truncated": "the episode was cut off after this step",
    "timing.started_at": "when the step started (UTC)",
    "timing.step_latency_s": "seconds the environment took to respond",
    "source.origin": "`collected`, or `imported:<dataset>`",
    "source.collector_version": "worldtrace version that recorded the row",
    "source.licence": "licence of the row",
    "usage.prompt_tokens": "prompt tokens the server counted for the call",
    "usage.completion_tokens": "completion tokens the server counted for the call",
}

USAGE_TEXT = (
    "What the model-driven episodes spent, per model and domain: the sums of the `usage` "
    "column of `meta/episodes.parquet` (each episode's calls, the reply that ended it "
    "included; a row's own call is its `usage`). Model time is the time to the full reply, "
    "retries included; the cost is computed from the prices the run was given (`-` without)."
)


def configs(shards: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Return the ``configs:`` entries: one per domain and ``all`` (the default).

    Each lists its shard files by name, not by a glob: ``datasets`` keys its cache of a local
    folder by the config's data files as written, so with a glob a folder republished in place
    with other rows loaded its old rows; the shard names carry their content hash.
    """
    paths = {
        domain: [f"data/{domain}/{name}" for name in sorted(names)]
        for domain, names in sorted(shards.items())
    }
    entries: list[dict[str, Any]] = [
        {
            "config_name": ALL_CONFIG,
            "default": True,
            "data_files": [
                {"split": "train", "path": [path for files in paths.values() for path in files]}
            ],
        }
    ]
    for domain, files in paths.items():
        entries.append({"config_name": domain, "data_files": [{"split": "train", "path": files}]})
    return entries


CURATED_TEXT = (
    "Curated with worldtrace (datatrove): episodes are kept or dropped whole, so every "
    "published episode has all its steps, its first state and its final reward. Exact and "
    "near-duplicate transitions, and rows a filter excluded, stay in their episode as "
    "history and are marked `curation.target = false` (with `curation.duplicate_of`, "
    "`curation.duplicate_rule` and `curation.labels` saying why); secrets and personal data "
    "are replaced by typed placeholders; the statistics are in `meta/curation_stats.json`."
)
TARGETS_TEXT = (
    "Every row is a step of a whole episode, for the history a world model reads; train on "
    "the rows whose `curation.target` is true (a duplicate would weigh its transition twice):"
)
UNCURATED_TEXT = (
    "**Not curated.** These transitions were published as collected, with `--uncurated`: no "
    "deduplication, no filtering, and no scrubbing of secrets or personal data. Screens and "
    "actions may hold whatever the environments showed; review them before any use."
)


def front_matter(
    shards: dict[str, list[str]], licence: str | None, name: str | None, curated: bool = True
) -> dict[str, Any]:
    """Return the YAML metadata of the card."""
    meta: dict[str, Any] = {}
    if licence:
        meta["license"] = licence
    if name:
        meta["pretty_name"] = name
    meta["tags"] = ["world-model", "agents", "transitions", "worldtrace"]
    if not curated:
        meta["tags"].append("uncurated")
    meta["configs"] = configs(shards)
    return meta


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if get_origin(annotation) in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _literal_choices(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [str(arg) for arg in get_args(annotation)]
    if get_origin(annotation) in (Union, types.UnionType):
        return [c for arg in get_args(annotation) for c in _literal_choices(arg)]
    return []


def _type_name(feature: Any) -> str:
    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, Image):
        return "image (PNG)"
    if isinstance(feature, List):
        return f"list of {_type_name(feature.feature)}"
    return "struct"


def schema_rows(
    model: type[BaseModel] = Transition, prefix: str = ""
) -> list[tuple[str, str, str]]:
    """Return ``(field path, type, description)`` for every column and nested field."""
    rows: list[tuple[str, str, str]] = []
    features = features_of(model)
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        description = (field.description or _FALLBACK_DESCRIPTIONS.get(path, "")).replace(
            "|", "\\|"
        )
        type_name = _type_name(features[name])
        if any(isinstance(item, JsonColumn) for item in field.metadata):
            type_name = "string (JSON object)"
        choices = _literal_choices(field.annotation)
        if choices and not description:
            description = "one of " + ", ".join(f"`{choice}`" for choice in choices)
        if not field.is_required() and field.default is None:
            type_name += ", nullable"
        rows.append((f"`{path}`", type_name, description))
        nested = _model_of(field.annotation)
        if nested is not None:
            rows.extend(schema_rows(nested, prefix=f"{path}."))
    return rows


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("\n", " ") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _usage_section(usage: list[dict[str, Any]]) -> list[str]:
    """The card's "Model usage" lines (none when no episode was driven by a model)."""
    if not usage:
        return []
    return [
        "## Model usage",
        "",
        USAGE_TEXT,
        "",
        _table(list(USAGE_COLUMNS), [usage_cells(row) for row in usage]),
        "",
    ]


def render_card(
    summary: dict[str, Any],
    shards: dict[str, list[str]],
    licence: str | None = None,
    name: str | None = None,
    curated: bool = True,
    usage: list[dict[str, Any]] | None = None,
) -> str:
    """Return the full ``README.md`` text for a corpus described by ``summary``.

    ``summary`` is :func:`worldtrace.publishing.inspect.summarize`'s result over the published
    data, ``shards`` the shard file names of each domain; ``curated`` says whether the rows
    went through ``worldtrace curate`` (the card says so); ``usage`` is
    :func:`worldtrace.publishing.inspect.usage_totals` of the published episodes (a "Model
    usage" section when it has any entry).
    """
    domains = list(summary["domains"])
    meta = front_matter(shards, licence, name, curated)
    title = name or "worldtrace corpus"
    parts = [
        "---",
        yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {title}",
        "",
        "Transitions recorded from real software environments by "
        "worldtrace: each row is one observation → action → next "
        "observation step, with the environment version it came from.",
        "",
        f"- Rows: {summary['rows']:,} (training targets: {summary['targets']:,})",
        f"- Episodes: {summary['episodes']:,}",
        f"- Domains: {', '.join(sorted(domains)) or '-'}",
        f"- Schema version: {SCHEMA_VERSION}",
        f"- Licence: {licence or 'see each row `source.licence`'}",
        "",
        CURATED_TEXT if curated else UNCURATED_TEXT,
        "",
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'ds = load_dataset("<repo>", "{domains[0] if domains else ALL_CONFIG}", split="train")',
        "```",
        "",
        f"Configs: `{ALL_CONFIG}` (every domain) and one per domain: "
        + ", ".join(f"`{d}`" for d in sorted(domains))
        + ".",
        "",
        "## Training targets",
        "",
        TARGETS_TEXT,
        "",
        "```python",
        'targets = ds.filter(lambda row: row["curation"]["target"])  # datasets',
        'targets = pl.scan_parquet("hf://datasets/<repo>/data/*/*.parquet").filter(',
        '    pl.col("curation").struct.field("target")',
        ")  # polars",
        "```",
        "",
        "`worldtrace export` writes one training example per target, with the episode's "
        "earlier steps as its history.",
        "",
        "## Per-domain statistics",
        "",
        "Observation lengths are in characters. A no-op is a step whose next observation text "
        "equals its observation text.",
        "",
        _table(
            list(DOMAIN_COLUMNS),
            [domain_cells(domain, row) for domain, row in sorted(summary["domains"].items())],
        ),
        "",
        *_usage_section(usage or []),
        "## Environment versions",
        "",
        "Every environment version in the corpus (also in `meta/environments.json`).",
        "",
        _table(
            ["name", "version", "config hash", "components", "domains", "rows"],
            [
                [
                    f"`{env['env_name']}`",
                    f"`{env['env_version']}`",
                    f"`{env['env_config_hash']}`",
                    f"`{env['env_components']}`",
                    ", ".join(env["domains"]),
                    f"{env['rows']:,}",
                ]
                for env in summary["environments"]
            ],
        ),
        "",
        "## Schema",
        "",
        "One row per transition. Object-valued fields are stored as JSON strings so every "
        "domain shares one schema; screenshots are `datasets.Image` columns.",
        "",
        _table(["field", "type", "description"], [list(row) for row in schema_rows()]),
        "",
        "Episode-level facts are in `meta/episodes.parquet` (an episode's `length` counts "
        "its steps published here; its `usage`, null for policies that are no model, sums the "
        "model calls of the episode: `model`, `calls`, `prompt_tokens`, `completion_tokens`, "
        "`cached_tokens`, `reasoning_tokens`, `latency_s`, `cost_usd`); `meta/schema.json` "
        "holds the "
        "schema version and Arrow schema, `meta/manifest.json` the sha256 of every file.",
        "",
        "## Polars recipes",
        "",
        "```python",
        "import polars as pl",
        "",
        'lf = pl.scan_parquet("hf://datasets/<repo>/data/*/*.parquet")',
        "flat = lf.with_columns(",
        '    pl.col("action").struct.field("name").alias("action_name"),',
        '    pl.col("observation").struct.field("text").alias("observation_text"),',
        ")",
        "# filter one domain",
        'terminal = flat.filter(pl.col("domain") == "terminal")',
        "# sample one episode, in order",
        'episode_id = terminal.select("episode_id").unique().head(1).collect().item()',
        'episode = terminal.filter(pl.col("episode_id") == episode_id).sort("step").collect()',
        "# count actions by name",
        'flat.group_by("action_name").len().sort("len", descending=True).collect()',
        "```",
        "",
        "`worldtrace.publishing.inspect.scan(path)` gives the same flattened view "
        "(`observation_text`, `action_text`, `env_version`, …) for local folders and "
        "`hf://` paths.",
        "",
    ]
    return "\n".join(parts)
