"""A domain from another package goes through the whole pipeline with no file of ours changed.

The package (``tests/collectors/toy_domain``: SQL statements against a real SQLite database)
is installed the way any plugin is — built by pip into a folder that is then on the path —
and registers itself with one entry point. Collecting, normalizing, curating, publishing and
exporting it then work through the same commands as for every built-in domain.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from datasets import load_dataset

from tests.conftest import REPO
from tests.prefect_server import client_env
from tests.toy_plugin import install_toy_domain


def _repository_state() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin, built and installed by pip into a folder of its own (not into our tree)."""
    return install_toy_domain(tmp_path_factory.mktemp("plugin"))


@pytest.fixture
def api_env(prefect_server: str) -> dict[str, str]:
    """The commands' environment: the session's Prefect server, so that each ``collect`` does
    not start Prefect's temporary local API (most of its cost; not this test's subject)."""
    return client_env(prefect_server)


def worldtrace(
    plugin_path: Path, cwd: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    env = {**env, "PYTHONPATH": str(plugin_path)}
    command = [sys.executable, "-m", "worldtrace.flows.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_domain_from_another_package_is_collected_curated_published_and_exported(
    plugin_path: Path, tmp_path: Path, api_env: dict[str, str]
) -> None:
    before = _repository_state()

    listed = worldtrace(plugin_path, tmp_path, api_env, "tasks", "sqlite")
    assert listed.returncode == 0, listed.stderr
    assert "add-item" in listed.stdout

    collected = worldtrace(
        plugin_path, tmp_path, api_env, "collect", "sqlite", "--episodes", "2", "--run-name", "toy"
    )
    assert collected.returncode == 0, collected.stderr
    replayed = worldtrace(
        plugin_path, tmp_path, api_env, "collect", "--config", str(_replay_config(tmp_path)),
        "--run-name", "again", "--env", "seed_rows=1",
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr

    curated = worldtrace(plugin_path, tmp_path, api_env, "curate", "runs/toy", "--out", "corpus")
    assert curated.returncode == 0, curated.stderr
    published = worldtrace(plugin_path, tmp_path, api_env, "publish", "corpus", "--to", "dist")
    assert published.returncode == 0, published.stderr
    exported = worldtrace(
        plugin_path, tmp_path, api_env, "export", "dist", "--format", "agentworld", "--out", "sft"
    )
    assert exported.returncode == 0, exported.stderr

    dataset = load_dataset(str(tmp_path / "dist"), "sqlite", split="train")
    rows = dataset.to_list()
    assert len(rows) == 4  # two statements in each of the two scripted episodes
    assert {row["domain"] for row in rows} == {"sqlite"}
    typo = next(row for row in rows if row["action"]["text"] == "selct * from items")
    assert typo["action_error"].startswith("OperationalError")
    assert typo["next_observation"]["text"].startswith("error: OperationalError")
    inserted = next(row for row in rows if row["action"]["text"].startswith("insert"))
    assert "\tlamp" in inserted["next_observation"]["text"]
    assert inserted["next_observation"]["format"] == "sqlite-result"
    lines = (tmp_path / "sft" / "sqlite_train.jsonl").read_text().splitlines()
    assert len(lines) == 4 and {json.loads(line)["task"] for line in lines} == {"sqlite"}
    replay_rows = (tmp_path / "runs" / "again" / "transitions" / "sqlite").glob("*.parquet")
    assert list(replay_rows)

    assert _repository_state() == before  # nothing of this repository was touched


def _replay_config(folder: Path) -> Path:
    config = folder / "replay.yaml"
    config.write_text(
        "domain: sqlite\nepisodes: 1\n"
        "policy: {kind: replay, params: {actions: ['select count(*) from items']}}\n"
    )
    return config
