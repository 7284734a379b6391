"""A worldtrace domain from another package: SQL statements against a real SQLite database.

Everything the pipeline needs comes through the collector registered in this package's
``pyproject.toml``; worldtrace's own files know nothing about it. The environment is a real
SQLite database in a temporary file per episode (no sandbox: this is a test of the plugin
seam, and SQLite is the real thing), the action a SQL statement, the observation the rows it
returned or the error SQLite gave, and the tables' contents after it.
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from worldtrace.collectors.base import (
    Collector,
    Environment,
    EnvironmentConfig,
    Renderer,
    ScriptedTask,
    StepOutcome,
)
from worldtrace.schemas import Action, EnvironmentRef, Observation


def sql(statement: str) -> Action:
    """The action that runs ``statement``."""
    return Action(name="sql", arguments={"statement": statement}, text=statement)


class SqliteConfig(EnvironmentConfig):
    """The database every episode starts from."""

    seed_rows: int = Field(default=3, ge=0, description="rows of the seeded `items` table")


@dataclass(frozen=True)
class SqliteTask(ScriptedTask):
    """A task: statements to run and a query whose single value must be 1 afterwards."""

    check: str = "select 1"


TASKS = (
    SqliteTask(
        name="add-item",
        instruction="Add an item called 'lamp' and count the items.",
        category="write",
        steps=(sql("insert into items(name) values ('lamp')"), sql("select count(*) from items")),
        check="select count(*) = 1 from items where name = 'lamp'",
    ),
    SqliteTask(
        name="typo",
        instruction="List the items (with a typo first).",
        category="errors",
        steps=(sql("selct * from items"), sql("select name from items order by id")),
    ),
)


class SqliteEnvironment(Environment[SqliteConfig, SqliteTask]):
    """A fresh SQLite database file per episode."""

    def __init__(self, config: SqliteConfig) -> None:
        self.config = config
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._db: sqlite3.Connection | None = None

    def reset(self, seed: int, task: SqliteTask | None) -> dict[str, Any]:
        """Seed a new database and observe its tables."""
        self.close()
        self._folder = tempfile.TemporaryDirectory()
        self._db = sqlite3.connect(Path(self._folder.name) / "db.sqlite", isolation_level=None)
        self._db.execute("create table items (id integer primary key, name text)")
        for index in range(self.config.seed_rows):
            self._db.execute("insert into items(name) values (?)", (f"item-{seed}-{index}",))
        return self._observe(rows=None, error=None)

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Run one statement; SQLite's error is the action's error."""
        assert self._db is not None
        started = time.monotonic()
        try:
            rows = [list(row) for row in self._db.execute(action.arguments["statement"])]
            error = None
        except sqlite3.Error as failure:
            rows, error = None, f"{type(failure).__name__}: {failure}"
        return StepOutcome(self._observe(rows, error), time.monotonic() - started, error=error)

    def evaluate(self, task: SqliteTask | None) -> float | None:
        """1.0 when the task's check query returns 1."""
        if task is None or self._db is None:
            return None
        return float(self._db.execute(task.check).fetchone()[0] == 1)

    def describe(self) -> EnvironmentRef:
        """SQLite's version is the world's version."""
        return EnvironmentRef(
            name="sqlite",
            version=sqlite3.sqlite_version,
            components={"sqlite": sqlite3.sqlite_version},
            config_hash=self.config.config_hash(),
        )

    def close(self) -> None:
        """Drop the database."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def _observe(self, rows: list[list[Any]] | None, error: str | None) -> dict[str, Any]:
        assert self._db is not None
        items = [list(row) for row in self._db.execute("select id, name from items order by id")]
        return {"rows": rows, "error": error, "items": items}


class SqliteRenderer(Renderer):
    """The result, then the table, as text."""

    def observation(self, raw: dict[str, Any]) -> Observation:
        """``rows: …`` or ``error: …``, then one line per item."""
        head = f"error: {raw['error']}" if raw.get("error") else f"rows: {raw.get('rows')}"
        lines = [head, *(f"{item_id}\t{name}" for item_id, name in raw["items"])]
        digest = hashlib.sha256(repr(raw["items"]).encode()).hexdigest()[:8]
        return Observation(format="sqlite-result", text="\n".join(lines), meta={"table": digest})


class SqliteCollector(Collector[SqliteConfig, SqliteTask]):
    """The registry entry: all the pipeline asks of the domain."""

    domain = "sqlite"
    environment_config = SqliteConfig
    read_only_actions = frozenset({"select"})

    def make_environment(self, config: SqliteConfig) -> SqliteEnvironment:
        """A fresh database per episode."""
        return SqliteEnvironment(config)

    def renderer(self) -> Renderer:
        """Results and tables as text."""
        return SqliteRenderer()

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """A replayed action is a SQL statement."""
        return sql(action) if isinstance(action, str) else super().parse_action(action)

    def task_library(self, environment: SqliteConfig | None = None) -> Sequence[SqliteTask]:
        """The two scripted tasks."""
        return TASKS
