"""One ``worldtrace collect`` prepares its run once, however many episodes it has.

Counted in this process, for a collection of a few and of many episodes of a cheap domain (the
toy SQLite domain of tests/collectors/toy_domain, installed the way any plugin is): how often
the collection config is validated, how often a collector is built, and how often an episode
is planned. Validations and collectors must not grow with the number of episodes, and each
episode is planned once (plus the constant the config's own check costs).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.toy_plugin import install_toy_domain
from worldtrace.flows.cli import app
from worldtrace.flows.config import CollectConfig

FEW, MANY = 2, 10


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy domain, built and installed by pip into a folder of its own."""
    return install_toy_domain(tmp_path_factory.mktemp("plugin"))


class _CountingValidator:
    """Stands in front of a pydantic model's core validator and counts the validations.

    Every way a model is validated (``model_validate``, the constructor, ``model_validate_json``)
    goes through the class's ``__pydantic_validator__``, so this sees them all.
    """

    def __init__(self, inner: Any, counts: Counter[str]) -> None:
        self._inner = inner
        self._counts = counts

    def validate_python(self, *args: Any, **kwargs: Any) -> Any:
        self._counts["validations"] += 1
        return self._inner.validate_python(*args, **kwargs)

    def validate_json(self, *args: Any, **kwargs: Any) -> Any:
        self._counts["validations"] += 1
        return self._inner.validate_json(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _count_one_collection(
    monkeypatch: pytest.MonkeyPatch, out: Path, episodes: int
) -> Counter[str]:
    """Run ``worldtrace collect sqlite --episodes N`` in this process; return what it cost."""
    from worldtrace_sqlite_domain import SqliteCollector  # on the path only in this test

    counts: Counter[str] = Counter()
    plan = SqliteCollector.plan

    def counting_init(self: Any) -> None:
        counts["collectors"] += 1

    def counting_plan(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["plans"] += 1
        return plan(self, *args, **kwargs)

    # At the class: every construction and every plan, whichever module asks for it.
    with monkeypatch.context() as patches:
        patches.setattr(SqliteCollector, "__init__", counting_init, raising=False)
        patches.setattr(SqliteCollector, "plan", counting_plan)
        patches.setattr(
            CollectConfig,
            "__pydantic_validator__",
            _CountingValidator(CollectConfig.__pydantic_validator__, counts),
        )
        result = CliRunner().invoke(
            app,
            ["collect", "sqlite", "--episodes", str(episodes), "--out", str(out)],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    sealed = list(out.glob("sqlite-*/raw/episodes/*.jsonl"))
    assert len(sealed) == episodes  # the counts are of a collection that happened
    return counts


def test_a_collection_prepares_its_run_once(
    plugin_path: Path,
    tmp_path: Path,
    prefect_server: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.syspath_prepend(str(plugin_path))  # its entry point is found from here on
    monkeypatch.setenv("PREFECT_API_URL", prefect_server)  # the session's server, not a new one
    with temporary_settings({PREFECT_API_URL: prefect_server}):
        few = _count_one_collection(monkeypatch, tmp_path / "few", FEW)
        many = _count_one_collection(monkeypatch, tmp_path / "many", MANY)
    print(f"{FEW} episodes: {dict(few)}; {MANY} episodes: {dict(many)}")
    assert few["validations"] == many["validations"], (few, many)
    assert few["collectors"] == many["collectors"], (few, many)
    # Each episode plans its own task once; the rest is the config's check, once per run.
    assert few["plans"] - FEW == many["plans"] - MANY, (few, many)
    # What it costs now: the flags checked, and read back from run.json once when claimed;
    # one collector (the one that checked them); one plan per episode plus the check's.
    assert many["validations"] <= 2 and many["collectors"] <= 1 and many["plans"] <= MANY + 1
