"""Look inside a corpus: a flattened polars view, a summary, and rich tables of it.

:func:`scan` accepts a corpus folder (``transitions/<domain>/*.parquet``), a published
Hub-layout folder (``data/<domain>/*.parquet``), a single parquet file, or an
``hf://datasets/org/name`` path (read natively by polars). The nested record columns are
flattened to top-level columns named ``<column>_<field>`` (``observation_text``,
``action_name``, ``env_version``, ``policy_kind`` …); screenshot bytes are dropped from the
flattened view and replaced by an ``…_has_screenshot`` flag.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from polars.datatypes import DataTypeClass
from rich.table import Table

from worldtrace.schemas.errors import InputError
from worldtrace.schemas.layouts import open_layout, transition_glob

QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)


def parquet_glob(path: str) -> str:
    """Return the parquet glob that holds the transitions under ``path``."""
    if path.startswith("hf://"):
        base = path.rstrip("/")
        return base if base.endswith(".parquet") else f"{base}/data/*/*.parquet"
    local = Path(path)
    if local.is_file():
        with local.open("rb") as file:
            if file.read(4) != b"PAR1":
                raise InputError(f"{path} is a file but not a parquet file of transitions")
        return str(local)
    return transition_glob(local)


def _is_image_struct(dtype: pl.DataType | DataTypeClass) -> bool:
    if not isinstance(dtype, pl.Struct):
        return False
    names = {field.name for field in dtype.fields}
    return names == {"bytes", "path"}


def flatten(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Flatten the struct columns of a transitions frame into ``<column>_<field>`` columns."""
    expressions: list[pl.Expr] = []
    for name, dtype in frame.collect_schema().items():
        if not isinstance(dtype, pl.Struct):
            expressions.append(pl.col(name))
            continue
        for field in dtype.fields:
            column = pl.col(name).struct.field(field.name)
            if _is_image_struct(field.dtype):
                has = (
                    column.struct.field("bytes").is_not_null()
                    | column.struct.field("path").is_not_null()
                )
                expressions.append(has.fill_null(False).alias(f"{name}_has_{field.name}"))
            else:
                expressions.append(column.alias(f"{name}_{field.name}"))
    return frame.select(expressions)


def scan(path: str) -> pl.LazyFrame:
    """Return a lazy, flattened view of every transition under ``path``.

    ``path`` is a corpus folder, a published Hub-layout folder, a parquet file or an
    ``hf://datasets/org/name`` path. Nothing is read until the frame is collected.
    """
    # One scan over every shard (polars expands the glob itself), not a concat of per-file
    # scans; the shard folders are domain names, not key=value hive partitions.
    return flatten(pl.scan_parquet(parquet_glob(str(path)), hive_partitioning=False))


# The per-row inputs of :func:`summarize`. Publishing computes them with pyarrow from the
# batches it writes (:func:`arrow_row_stats`) instead of reading the shards back.
ENV_KEYS: tuple[str, ...] = ("env_name", "env_version", "env_config_hash", "env_components")
STAT_COLUMNS: tuple[str, ...] = (
    "domain",
    "episode_id",
    *ENV_KEYS,
    "_obs_len",
    "_noop",
    "_error",
    "_target",
)


def row_stats(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Return the :data:`STAT_COLUMNS` of a flattened transitions frame (see :func:`scan`).

    Shards of schema 1.0 have no ``curation`` column: their rows are all targets.
    """
    names = frame.collect_schema().names()
    target = pl.col("curation_target") if "curation_target" in names else pl.lit(True)
    return frame.select(
        "domain",
        "episode_id",
        *ENV_KEYS,
        pl.col("observation_text").str.len_chars().alias("_obs_len"),
        (pl.col("observation_text") == pl.col("next_observation_text")).alias("_noop"),
        pl.col("action_error").is_not_null().alias("_error"),
        target.alias("_target"),
    )


def arrow_row_stats(table: pa.Table) -> pa.Table:
    """Return the :data:`STAT_COLUMNS` of a nested Transition table, as :func:`row_stats` does.

    The environment columns are dictionary-encoded: they repeat on every row, and the stats
    of a whole corpus are held in memory until it is summarized.
    """
    observation = pc.struct_field(table["observation"], "text")
    after = pc.struct_field(table["next_observation"], "text")
    env = table["env"]
    columns = {
        "domain": table["domain"],
        "episode_id": table["episode_id"],
        **{
            key: pc.dictionary_encode(pc.struct_field(env, key.removeprefix("env_")))
            for key in ENV_KEYS
        },
        # utf8_length counts code points, like polars' str.len_chars.
        "_obs_len": pc.utf8_length(observation).cast(pa.uint32()),
        "_noop": pc.equal(observation, after),
        "_error": pc.is_valid(table["action_error"]),
        "_target": pc.struct_field(table["curation"], "target"),
    }
    return pa.table(columns)


def summarize(path: str | pl.LazyFrame) -> dict[str, Any]:
    """Return the headline numbers of a corpus.

    ``path`` is anything :func:`scan` accepts, or an already flattened frame. Keys: ``rows``,
    ``targets`` (rows that are training targets: ``curation.target``), ``episodes``,
    ``noop_rate``, ``action_error_rate``, ``domains`` (per domain: rows, targets, episodes,
    mean and quantile observation lengths in characters, no-op and action error rates) and
    ``environments`` (one entry per distinct environment version with its row
    count). A no-op is a transition whose next observation text equals its observation text.
    """
    return summarize_stats(row_stats(path if isinstance(path, pl.LazyFrame) else scan(path)))


def summarize_stats(stats: pl.LazyFrame | pl.DataFrame) -> dict[str, Any]:
    """Return :func:`summarize`'s result from per-row :data:`STAT_COLUMNS`."""
    frame = stats.lazy()
    overall = frame.select(
        pl.len().alias("rows"),
        pl.col("_target").sum().alias("targets"),
        pl.col("episode_id").n_unique().alias("episodes"),
        pl.col("_noop").mean().alias("noop_rate"),
        pl.col("_error").mean().alias("action_error_rate"),
    )
    per_domain = (
        frame.group_by("domain")
        .agg(
            pl.len().alias("rows"),
            pl.col("_target").sum().alias("targets"),
            pl.col("episode_id").n_unique().alias("episodes"),
            pl.col("_obs_len").mean().alias("obs_len_mean"),
            *[
                pl.col("_obs_len")
                .quantile(q, interpolation="nearest")
                .cast(pl.Int64)
                .alias(f"obs_len_p{round(q * 100)}")
                for q in QUANTILES
            ],
            pl.col("_obs_len").max().cast(pl.Int64).alias("obs_len_max"),
            pl.col("_noop").mean().alias("noop_rate"),
            pl.col("_error").mean().alias("action_error_rate"),
        )
        .sort("domain")
    )
    environments = (
        frame.group_by(*ENV_KEYS)
        .agg(
            pl.len().alias("rows"),
            pl.col("episode_id").n_unique().alias("episodes"),
            pl.col("domain").unique().sort().alias("domains"),
        )
        # Publishing's stats carry dictionary-encoded (categorical) keys: sort as text.
        .with_columns(pl.col(*ENV_KEYS).cast(pl.String))
        .sort(*ENV_KEYS)
    )
    # One plan for the three queries: polars reads the shards once, not three times.
    totals, domains, envs = pl.collect_all([overall, per_domain, environments])
    head = totals.row(0, named=True) if totals.height else {}
    rows = int(head.get("rows") or 0)
    return {
        "rows": rows,
        "targets": int(head.get("targets") or 0),
        "episodes": int(head.get("episodes") or 0),
        "noop_rate": float(head["noop_rate"]) if rows else 0.0,
        "action_error_rate": float(head["action_error_rate"]) if rows else 0.0,
        "domains": {row.pop("domain"): row for row in domains.to_dicts()},
        "environments": envs.to_dicts(),
    }


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


DOMAIN_COLUMNS: tuple[str, ...] = (
    "domain",
    "rows",
    "targets",
    "episodes",
    "obs len mean",
    *(f"obs len p{round(q * 100)}" for q in QUANTILES),
    "no-op",
    "action errors",
)


def domain_cells(name: str, row: dict[str, Any]) -> list[str]:
    """Return one domain's statistics as table cells, in :data:`DOMAIN_COLUMNS` order."""
    return [
        name,
        f"{row['rows']:,}",
        f"{row['targets']:,}",
        f"{row['episodes']:,}",
        f"{row['obs_len_mean']:.0f}",
        *[f"{row[f'obs_len_p{round(q * 100)}']}" for q in QUANTILES],
        _rate(row["noop_rate"]),
        _rate(row["action_error_rate"]),
    ]


def render(summary: dict[str, Any]) -> list[Table]:
    """Return rich tables of a :func:`summarize` result: overview, domains, environments."""
    overview = Table(title="Corpus")
    for column in (
        "rows",
        "targets",
        "episodes",
        "domains",
        "environment versions",
        "no-op",
        "action errors",
    ):
        overview.add_column(column, justify="right")
    overview.add_row(
        f"{summary['rows']:,}",
        f"{summary['targets']:,}",
        f"{summary['episodes']:,}",
        str(len(summary["domains"])),
        str(len(summary["environments"])),
        _rate(summary["noop_rate"]),
        _rate(summary["action_error_rate"]),
    )

    domains = Table(title="Domains")
    for index, column in enumerate(DOMAIN_COLUMNS):
        domains.add_column(column, justify="left" if index == 0 else "right")
    for name, row in summary["domains"].items():
        domains.add_row(*domain_cells(name, row))

    environments = Table(title="Environment versions")
    for column in ("name", "version", "config hash", "components", "domains"):
        environments.add_column(column)
    environments.add_column("rows", justify="right")
    for env in summary["environments"]:
        environments.add_row(
            env["env_name"],
            env["env_version"],
            env["env_config_hash"],
            env["env_components"],
            ", ".join(env["domains"]),
            f"{env['rows']:,}",
        )
    tables = [overview, domains, environments]
    if summary.get("usage"):
        tables.append(render_usage(summary["usage"]))
    return tables


# What a model-driven policy spent (the ``usage`` column of the episodes table, schema 1.3).
USAGE_SUMS: tuple[str, ...] = (
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "reasoning_tokens",
)
USAGE_COLUMNS: tuple[str, ...] = (
    "model",
    "domain",
    "episodes",
    "calls",
    "prompt tokens",
    "completion tokens",
    "cached tokens",
    "reasoning tokens",
    "model time (s)",
    "cost (USD)",
)


def episodes_table_of(path: str) -> str | None:
    """Where the episodes table of a run, corpus or published folder is; None if it has none.

    A single parquet file of transitions has no episodes table; an ``hf://`` dataset's is its
    ``meta/episodes.parquet`` (read by polars when asked, like its shards).
    """
    if path.startswith("hf://"):
        base = path.rstrip("/")
        return None if base.endswith(".parquet") else f"{base}/meta/episodes.parquet"
    local = Path(path)
    if local.is_file():
        return None
    layout = open_layout(local)
    table = layout.episodes_table
    return str(table) if table.is_file() else None


def usage_totals(episodes: str | pl.DataFrame | None) -> list[dict[str, Any]]:
    """Return what the model-driven episodes spent, one dict per model and domain.

    ``episodes`` is an episodes table (a parquet path or a frame with ``domain`` and
    ``usage`` columns). Each dict holds ``model``, ``domain``, ``episodes`` (those with usage),
    the :data:`USAGE_SUMS`, ``latency_s`` (model time) and ``cost_usd`` (None when no episode
    had prices). An empty list when no episode has usage: tables of older schemas have no
    ``usage`` column, and the other policies leave it null.
    """
    if episodes is None:
        return []
    frame = episodes.lazy() if isinstance(episodes, pl.DataFrame) else pl.scan_parquet(episodes)
    if "usage" not in frame.collect_schema().names():
        return []
    usage = pl.col("usage")
    cost = usage.struct.field("cost_usd")
    totals = (
        frame.filter(usage.is_not_null())
        .group_by(usage.struct.field("model").alias("model"), "domain")
        .agg(
            pl.len().alias("episodes"),
            *[usage.struct.field(name).sum().alias(name) for name in USAGE_SUMS],
            usage.struct.field("latency_s").sum().alias("latency_s"),
            # A sum of nothing but nulls is 0: an unpriced model's cost stays unknown.
            pl.when(cost.is_not_null().any()).then(cost.sum()).alias("cost_usd"),
        )
        .sort("model", "domain")
        .collect()
    )
    return totals.to_dicts()


def usage_sum(totals: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the sum of :func:`usage_totals`' entries over models and domains.

    Keys: ``episodes``, the :data:`USAGE_SUMS`, ``latency_s`` and ``cost_usd`` (None when no
    entry has a cost).
    """
    costs = [row["cost_usd"] for row in totals if row["cost_usd"] is not None]
    return {
        "episodes": sum(row["episodes"] for row in totals),
        **{name: sum(row[name] for row in totals) for name in USAGE_SUMS},
        "latency_s": sum(row["latency_s"] for row in totals),
        "cost_usd": sum(costs) if costs else None,
    }


def usage_cells(row: dict[str, Any]) -> list[str]:
    """Return one :func:`usage_totals` entry as table cells, in :data:`USAGE_COLUMNS` order."""
    cost = row["cost_usd"]
    return [
        str(row["model"]),
        str(row["domain"]),
        f"{row['episodes']:,}",
        *[f"{row[name]:,}" for name in USAGE_SUMS],
        f"{row['latency_s']:,.2f}",
        "-" if cost is None else f"{cost:,.6f}",
    ]


def render_usage(totals: list[dict[str, Any]]) -> Table:
    """Return the "Model usage" table of :func:`usage_totals`' entries."""
    table = Table(title="Model usage")
    for index, column in enumerate(USAGE_COLUMNS):
        table.add_column(column, justify="left" if index < 2 else "right")
    for row in totals:
        table.add_row(*usage_cells(row))
    return table


def inspect_folder(path: str) -> dict[str, Any]:
    """Return :func:`summarize`'s result for ``path`` plus ``usage`` (:func:`usage_totals`).

    The usage comes from the folder's episodes table (a run's or a corpus's
    ``episodes.parquet``, a published folder's ``meta/episodes.parquet``).
    """
    summary = summarize(path)
    table = episodes_table_of(str(path))
    try:
        summary["usage"] = usage_totals(table)
    except (OSError, pl.exceptions.PolarsError):
        if table is None or not table.startswith("hf://"):
            raise
        summary["usage"] = []  # a Hub dataset published without worldtrace's meta/
    return summary
