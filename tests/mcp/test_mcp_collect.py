"""`worldtrace collect mcp` end to end: real servers, then curate, publish, load with `datasets`
and export, with the same commands as every other domain."""

from __future__ import annotations

import json
import re
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
from worldtrace.collectors.mcp.tasks import load_tasks
from worldtrace.flows.cli import app

pytestmark = pytest.mark.docker


def test_collect_mcp_scripts_then_curate_publish_load_and_export(
    tmp_path: Path, mcp_image: str
) -> None:
    invoke(
        "collect", "mcp", "--env", "server=memory", "--episodes", "2", "--workers", "2",
        "--out", str(tmp_path / "runs"), "--run-name", "mcp",
    )  # fmt: skip
    run_dir = tmp_path / "runs" / "mcp"
    # Both scripted tasks were done: their checks hold against the real memory file.
    assert episode_rewards(run_dir) == [1.0, 1.0]
    rows = rows_of(run_dir, "mcp")
    assert {row.task for row in rows} == {t.instruction for t in load_tasks("memory")[:2]}
    tools: dict[str, list[str]] = {}
    for row in rows:
        assert row.next_observation.format == "tool-result"
        assert json.loads(row.action.text) == {
            "name": row.action.name,
            "arguments": row.action.arguments,
        }
        assert row.env.name == "mcp/memory"
        assert row.env.components["sdk_version"] == "2.3.0"
        assert {"state", "state_diff", "is_error"} <= set(row.next_observation.meta)
        if row.step == 0:
            tools[row.episode_id] = [t["name"] for t in row.observation.meta["tools"]]
    assert len(tools) == 2 and all("create_entities" in names for names in tools.values())
    changed = [r for r in rows if r.next_observation.meta["state_diff"]["changed"]]
    assert changed and all(r.action.name not in {"read_graph", "search_nodes"} for r in changed)

    dataset = curate_and_publish(run_dir, tmp_path, "mcp")
    assert dataset.num_rows == len(rows)  # curation keeps episodes whole
    assert set(dataset["domain"]) == {"mcp"}

    agentworld, chats = export_both(tmp_path / "dist", tmp_path, "mcp", dataset)
    for row, chat in zip(agentworld, chats, strict=True):
        assert '{"name": "create_entities"' in row["system_str"]
        assert chat["messages"][0]["content"] == row["system_str"]  # the tools, for the model
        assert "**Action:**\n```json\n{" in row["current_prompt"]


def test_explore_from_defaults_is_reproducible_from_its_seed(
    tmp_path: Path, mcp_image: str
) -> None:
    outputs = []
    for name in ("first", "second"):
        output = invoke(
            "collect", "mcp", "--policy", "explore", "--episodes", "1", "--max-steps", "12",
            "--seed", "7", "--out", str(tmp_path), "--run-name", name,
        )  # fmt: skip
        outputs.append(output)
    first, second = (rows_of(tmp_path / name, "mcp") for name in ("first", "second"))
    assert len(first) == 12
    assert [r.action.text for r in first] == [r.action.text for r in second]
    # A result the server flagged isError is a failed action, in the rows and in the summary.
    failed = [r for r in first if r.next_observation.meta.get("is_error")]
    assert failed and all(r.action_error for r in failed)
    errors = sum(r.action_error is not None for r in first)
    assert re.search(rf"│ errors\s+│ {errors}\s+│", outputs[0]), outputs[0]
    # The default server is the filesystem one; the walk chains into its world.
    assert {r.env.name for r in first} == {"mcp/filesystem"}
    assert any("/srv/project/" in r.action.text for r in first[1:])


def test_a_replay_records_the_real_results_of_given_calls(tmp_path: Path, mcp_image: str) -> None:
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    calls = [
        '{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}',
        {"name": "convert_time", "arguments": {"source_timezone": "Nowhere/City"}},
    ]
    config = validate_config(
        {
            "domain": "mcp",
            "episodes": 1,
            "out": str(tmp_path),
            "run_name": "replay",
            "environment": {"server": "time"},
            "policy": {"kind": "replay", "params": {"actions": calls}},
        }
    )
    run_collection(config)
    rows = sorted(rows_of(tmp_path / "replay", "mcp"), key=lambda row: row.step)
    assert [row.action.name for row in rows] == ["get_current_time", "convert_time"]
    assert '"timezone": "Asia/Tokyo"' in rows[0].next_observation.text
    # The invalid call went to the server, whose own error is the recorded answer.
    assert rows[1].next_observation.meta["schema_problems"]
    assert rows[1].next_observation.meta["is_error"] or rows[1].action_error


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "server=nope"], "no MCP server 'nope'"),
        (["--env", "server=time", "--env", "transport=http"], "runs over stdio"),
        (["--policy", "replay"], "replay policy takes `actions`"),
    ],
)
def test_bad_configs_are_refused_before_anything_runs(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["collect", "mcp", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not any(tmp_path.iterdir())
