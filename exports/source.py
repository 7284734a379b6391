"""Read the transitions of a folder as ordered episodes, one domain at a time.

A source is either a published Hub-layout folder (``data/<domain>/*.parquet``) or a corpus or
run folder (``transitions/<domain>/*.parquet``). Only the columns an export needs are read
(screenshots are never loaded), and each domain's rows come back grouped by episode and
ordered by step.

Every row of an episode is read, training target or not: ``curation.target`` false (a
duplicate, or a row a curation rule excluded) makes a :class:`Step` with ``target=False``,
which an export shows as history but never as a target. Shards written before the
``curation`` column (schema 1.0) read as all targets, also when mixed with newer shards.
Each step carries its episode's instruction: the recorded task, or for a task-less episode
(exploring, replaying) the text :func:`~worldtrace.exports.prompts.instruction_for` derives
from the policy kind and the environment name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from worldtrace.exports.prompts import instruction_for
from worldtrace.exports.tokens import (
    DEFAULT_HISTORY_TOKENS,
    TokenCounter,
    estimate_tokens,
    tokenizer_counter,
)
from worldtrace.schemas.errors import ConfigError
from worldtrace.schemas.layouts import transition_files
from worldtrace.schemas.storage import check_writable_folder

TOOL_RESULT_FORMAT = "tool-result"
"""The observation format of domains whose actions are tool calls."""


@dataclass(frozen=True, slots=True)
class Step:
    """The parts of one transition an export renders."""

    id: str
    episode_id: str
    step: int
    task: str | None
    observation: str
    action: str
    next_observation: str
    action_error: str | None
    action_name: str = ""
    action_arguments: str = "{}"
    """The action's arguments as the JSON text the parquet column holds."""
    next_format: str = ""
    """The next observation's format tag (``tool-result`` for swe and mcp)."""
    tools: tuple[dict[str, Any], ...] = ()
    """The tool definitions the episode's first observation lists in its meta (``tools``, as
    an MCP server's ``tools/list`` gives them); empty for other domains, and for an episode
    whose first step is missing."""
    target: bool = True
    """Whether the row is a training target (``curation.target``; true for 1.0 shards)."""
    instruction: str | None = None
    """What the agent was doing: the task, or for a task-less episode the text
    :func:`~worldtrace.exports.prompts.instruction_for` gives (None only if nothing is known:
    no task, no policy kind, no environment name)."""

    @property
    def is_tool_call(self) -> bool:
        """Whether the action is a tool call answered by the tool's result.

        True for steps answered in the ``tool-result`` format (swe, mcp) and for every step of
        an episode that lists its tools (search, whose results have their own formats).
        """
        return self.next_format == TOOL_RESULT_FORMAT or bool(self.tools)


def _scan(file: Path) -> pl.LazyFrame:
    """The columns an export reads from one shard (``target`` true where it has no curation)."""
    frame = pl.scan_parquet(file)
    columns = frame.collect_schema().names()
    target = (
        pl.col("curation").struct.field("target").fill_null(True)
        if "curation" in columns
        else pl.lit(True)
    )
    return frame.select(
        pl.col("id"),
        pl.col("episode_id"),
        pl.col("step"),
        pl.col("task"),
        pl.col("policy").struct.field("kind").alias("policy_kind"),
        pl.col("env").struct.field("name").alias("env_name"),
        pl.col("observation").struct.field("text").alias("observation"),
        pl.col("action").struct.field("text").alias("action"),
        pl.col("action").struct.field("name").alias("action_name"),
        pl.col("action").struct.field("arguments").alias("action_arguments"),
        pl.col("next_observation").struct.field("text").alias("next_observation"),
        pl.col("next_observation").struct.field("format").alias("next_format"),
        pl.col("action_error"),
        target.cast(pl.Boolean).alias("target"),
        # Only the first observation's meta is read (it lists an episode's tools); the
        # others may hold large state snapshots no export needs.
        pl.when(pl.col("step") == 0)
        .then(pl.col("observation").struct.field("meta"))
        .otherwise(None)
        .alias("first_meta"),
    )


def _steps_frame(files: list[Path]) -> pl.DataFrame:
    return (
        pl.concat([_scan(file) for file in files], how="vertical_relaxed")
        .unique(subset=["id"], keep="first", maintain_order=True)
        .sort(["episode_id", "step"])
        .collect()
    )


def iter_episodes(files: list[Path]) -> Iterator[list[Step]]:
    """Yield the episodes stored in ``files``, each a list of steps ordered by step.

    Rows repeated across shards (the same transition id) are read once.
    """
    episode: list[Step] = []
    tools: tuple[dict[str, Any], ...] = ()
    for row in _steps_frame(files).iter_rows(named=True):
        if episode and episode[-1].episode_id != row["episode_id"]:
            yield episode
            episode = []
            tools = ()
        if row["first_meta"]:
            tools = _tools_of(row["first_meta"])
        step = Step(
            id=row["id"],
            episode_id=row["episode_id"],
            step=row["step"],
            task=row["task"],
            observation=row["observation"] or "",
            action=row["action"] or "",
            next_observation=row["next_observation"] or "",
            action_error=row["action_error"] or None,
            action_name=row["action_name"],
            action_arguments=row["action_arguments"] or "{}",
            next_format=row["next_format"],
            tools=tools,
            target=row["target"],
            instruction=instruction_for(row["task"], row["policy_kind"], row["env_name"]),
        )
        episode.append(step)
    if episode:
        yield episode


def _tools_of(meta: str | dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The ``tools`` list of an observation's meta (JSON text or a dict); empty if none."""
    value = json.loads(meta) if isinstance(meta, str) else meta
    tools = value.get("tools") if isinstance(value, dict) else None
    if not isinstance(tools, list):
        return ()
    return tuple(tool for tool in tools if isinstance(tool, dict) and tool.get("name"))


def iter_domains(source: Path) -> Iterator[tuple[str, Iterator[list[Step]]]]:
    """Yield ``(domain, episodes)`` for every domain present under ``source``."""
    for domain, files in transition_files(Path(source)).items():
        yield domain, iter_episodes(files)


def continues(previous: Step | None, current: Step) -> bool:
    """Whether ``current`` starts from the state ``previous`` ended in (no gap in the chain)."""
    return (
        previous is not None
        and current.step == previous.step + 1
        and current.observation == previous.next_observation
    )


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write ``rows`` as JSON lines to ``path`` atomically; return how many were written.

    The file appears complete or not at all: lines go to a temporary sibling renamed at the end.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    count = 0
    try:
        with partial.open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False))
                handle.write("\n")
                count += 1
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count


@dataclass(frozen=True, slots=True)
class ExportOptions:
    """How much history an export row holds (see :mod:`worldtrace.exports.turns`)."""

    history: int | None = None
    """At most this many turns before the target (``None``: no cap on the number of turns)."""
    history_tokens: int | None = DEFAULT_HISTORY_TOKENS
    """At most this many tokens of history (``None``: no budget); the oldest turns go first."""
    count_tokens: TokenCounter = estimate_tokens
    """How tokens are counted: :func:`~worldtrace.exports.tokens.estimate_tokens` by default."""

    @classmethod
    def of(
        cls,
        history: int | None = None,
        history_tokens: int | None = DEFAULT_HISTORY_TOKENS,
        tokenizer: Path | None = None,
    ) -> ExportOptions:
        """The options of an exporter's arguments; ``tokenizer`` is a local tokenizer.json."""
        count = estimate_tokens if tokenizer is None else tokenizer_counter(tokenizer)
        return cls(history=history, history_tokens=history_tokens, count_tokens=count)

    def __post_init__(self) -> None:
        if self.history is not None and self.history < 0:
            raise ConfigError(f"history must be >= 0 turns, got {self.history}")
        if self.history_tokens is not None and self.history_tokens < 0:
            raise ConfigError(f"history_tokens must be >= 0, got {self.history_tokens}")


RowsOfDomain = Callable[[str, Iterator[list[Step]], ExportOptions], Iterator[dict[str, Any]]]
"""An exporter's rows for one domain: (domain, its episodes, the options) -> rows."""


@dataclass(frozen=True)
class Exporter:
    """An export format: its rows for one domain and the name of each domain's file.

    Calling it writes ``<out_dir>/<file_name>`` (``{domain}`` filled in) for every domain of
    ``source`` (``data/<domain>/*.parquet`` or ``transitions/<domain>/*.parquet``) and returns
    the rows written per domain. ``history`` caps each row's past turns (``None``: no cap),
    ``history_tokens`` their tokens (``None``: no budget), counted with the local
    ``tokenizer.json`` at ``tokenizer`` or else estimated (:mod:`worldtrace.exports.tokens`).
    """

    rows_of: RowsOfDomain
    file_name: str

    def __call__(
        self,
        source: Path,
        out_dir: Path,
        history: int | None = None,
        *,
        history_tokens: int | None = DEFAULT_HISTORY_TOKENS,
        tokenizer: Path | None = None,
    ) -> dict[str, int]:
        """Write one JSONL file per domain of ``source``; return the rows per domain."""
        options = ExportOptions.of(history, history_tokens, tokenizer)
        check_writable_folder(Path(out_dir), "export folder")
        counts: dict[str, int] = {}
        for domain, episodes in iter_domains(Path(source)):
            path = Path(out_dir) / self.file_name.format(domain=domain)
            counts[domain] = write_jsonl(path, self.rows_of(domain, episodes, options))
        return counts
