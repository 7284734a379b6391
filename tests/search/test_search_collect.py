"""`worldtrace collect search` end to end: the real engine, then curate, publish, load with
`datasets` and export, with the same commands as every other domain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.collecting import (
    curate_and_publish,
    episode_rewards,
    export_both,
    invoke,
    rows_of,
)
from worldtrace.collectors.search.tasks import load_tasks
from worldtrace.flows.cli import app

pytestmark = pytest.mark.docker


def test_collect_search_scripts_then_curate_publish_load_and_export(
    tmp_path: Path, search_image: str
) -> None:
    invoke(
        "collect", "search", "--episodes", "3", "--workers", "2",
        "--out", str(tmp_path / "runs"), "--run-name", "search",
    )  # fmt: skip
    run_dir = tmp_path / "runs" / "search"
    # Every scripted question was answered: its check holds against the real final memory.
    assert episode_rewards(run_dir) == [1.0, 1.0, 1.0]
    rows = rows_of(run_dir, "search")
    assert {row.task for row in rows} == {t.instruction for t in load_tasks()[:3]}
    formats = {row.action.name: row.next_observation.format for row in rows}
    assert formats == {
        "web_search": "search-results",
        "web_extractor": "markdown",
        "dict_memory": "tool-result",
    }
    for row in rows:
        assert json.loads(row.action.text) == {
            "name": row.action.name,
            "arguments": row.action.arguments,
        }
        assert row.env.name == "search/docs"
        assert row.env.components["engine"] == "xapian"
        assert len(row.env.components["index_sha256"]) == 64
        assert {"memory", "state_diff"} <= set(row.next_observation.meta)
        if row.step == 0:
            assert [t["name"] for t in row.observation.meta["tools"]] == [
                "web_search",
                "web_extractor",
                "dict_memory",
            ]
        if row.action.name == "web_search":
            assert row.next_observation.text.startswith("[1] http://docs.localhost/")
    changed = [r for r in rows if r.next_observation.meta["state_diff"]["changed"]]
    assert changed and all(r.action.name == "dict_memory" for r in changed)

    dataset = curate_and_publish(run_dir, tmp_path, "search")
    assert dataset.num_rows == len(rows)  # curation keeps episodes whole
    assert set(dataset["domain"]) == {"search"}

    agentworld, chats = export_both(tmp_path / "dist", tmp_path, "search", dataset)
    for row, chat in zip(agentworld, chats, strict=True):
        assert '{"name": "web_search"' in row["system_str"]
        assert chat["messages"][0]["content"] == row["system_str"]
        assert "**Action:**\n```json\n{" in row["current_prompt"]


def test_explore_is_reproducible_from_its_seed_and_a_replay_records_real_answers(
    tmp_path: Path, search_image: str
) -> None:
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    for name in ("first", "second"):
        invoke(
            "collect", "search", "--policy", "explore", "--episodes", "1", "--max-steps", "15",
            "--seed", "7", "--out", str(tmp_path), "--run-name", name,
        )  # fmt: skip
    first, second = (
        sorted(rows_of(tmp_path / n, "search"), key=lambda r: r.step) for n in ("first", "second")
    )
    assert len(first) == 15
    assert [r.action.text for r in first] == [r.action.text for r in second]
    assert [r.next_observation.text for r in first] == [r.next_observation.text for r in second]

    calls = [
        '{"name": "web_search", "arguments": {"query": "git stash untracked", "num_results": 2}}',
        {"name": "dict_memory", "arguments": {"action": "retrieve", "key": "missing"}},
    ]
    config = validate_config(
        {
            "domain": "search",
            "episodes": 1,
            "out": str(tmp_path),
            "run_name": "replay",
            "policy": {"kind": "replay", "params": {"actions": calls}},
        }
    )
    run_collection(config)
    rows = sorted(rows_of(tmp_path / "replay", "search"), key=lambda row: row.step)
    assert [row.action.name for row in rows] == ["web_search", "dict_memory"]
    assert rows[0].next_observation.text.count("\nTitle: ") == 2
    assert rows[1].action_error == "no key 'missing' in memory"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "max_markdown_chars=5"], "max_markdown_chars"),
        (["--env", "engine=tantivy"], "engine"),
        (["--policy", "replay"], "replay policy takes `actions`"),
    ],
)
def test_bad_configs_are_refused_before_anything_runs(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["collect", "search", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not any(tmp_path.iterdir())
