"""`worldtrace collect swe` end to end: real containers, real test suites, then curate, publish,
load with `datasets` and export, with the same commands as every other domain."""

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
from worldtrace.collectors.recorder import read_episode
from worldtrace.collectors.swe.tasks import load_tasks
from worldtrace.collectors.swe.tools import TOOLS
from worldtrace.flows.cli import app

pytestmark = pytest.mark.docker


def test_collect_swe_from_defaults_then_curate_publish_load_and_export(
    tmp_path: Path, swe_images: dict[str, str]
) -> None:
    invoke(
        # The defaults: the toolz repository, the script policy (the oracle).
        "collect", "swe", "--episodes", "2", "--workers", "2", "--max-steps", "25",
        "--out", str(tmp_path / "runs"), "--run-name", "swe",
    )  # fmt: skip
    run_dir = tmp_path / "runs" / "swe"
    # The oracle fixed both synthesized bugs: their failing tests pass after the episode.
    assert episode_rewards(run_dir) == [1.0, 1.0]

    rows = rows_of(run_dir, "swe")  # raises on a bad row
    # Scripted episodes cycle the repository's task library from its first task.
    assert {row.task for row in rows} == {t.instruction for t in load_tasks("toolz")[:2]}
    for row in rows:
        assert row.observation.format == row.next_observation.format == "tool-result"
        assert row.action.name in TOOLS
        assert json.loads(row.action.text) == {
            "name": row.action.name,
            "arguments": row.action.arguments,
        }
        assert row.env.name == "swe/toolz"
        assert row.env.components["repo_version"] == "1.0.0"
        assert row.env.components["image_digest"].startswith("sha256:")
        assert {"exit_code", "git_status", "git_diff_stat", "wall_s"} <= set(
            row.next_observation.meta
        )
    fixes = [r for r in rows if r.action.name == "str_replace" and r.action_error is None]
    assert fixes and all(" M " in f" {r.next_observation.meta['git_status']}" for r in fixes)

    dataset = curate_and_publish(run_dir, tmp_path, "swe")
    assert dataset.num_rows == len(rows)  # curation keeps episodes whole
    assert set(dataset["domain"]) == {"swe"}

    agentworld, chats = export_both(tmp_path / "dist", tmp_path, "swe", dataset)
    for row, chat in zip(agentworld, chats, strict=True):
        call = json.loads(row["current_prompt"].split("```json\n")[1].split("\n```")[0])
        assert call["name"] in TOOLS
        assert chat["messages"][-2]["content"] == row["current_prompt"]


def test_collect_swe_refuses_an_unknown_repository(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["collect", "swe", "--env", "repo=nope", "--out", str(tmp_path), "--episodes", "1"]
    )
    assert result.exit_code == 2
    assert "nope" in result.output


def test_a_replay_of_tool_calls_records_their_real_results(
    tmp_path: Path, swe_images: dict[str, str]
) -> None:
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    calls = [
        '{"name": "run_shell_command", "arguments": {"command": "echo out; echo err >&2"}}',
        {"name": "write_file", "arguments": {"path": "notes.txt", "content": "a\nb\n"}},
        {"name": "str_replace", "arguments": {"path": "notes.txt", "old": "z", "new": "y"}},
        '{"name": "read_file", "arguments": {"path": "notes.txt", "start_line": 2}}',
    ]
    config = validate_config(
        {
            "domain": "swe",
            "episodes": 1,
            "out": str(tmp_path),
            "policy": {"kind": "replay", "params": {"actions": calls}},
        }
    )
    summary = run_collection(config)
    assert (summary["collected"], summary["transitions"]) == (1, 4)
    (episode,) = (config.run_dir / "raw" / "episodes").glob("*.jsonl")
    steps = [event for event in read_episode(episode) if event.type == "step"]
    assert [step.action.name for step in steps] == [
        "run_shell_command", "write_file", "str_replace", "read_file",
    ]  # fmt: skip
    shell, written, absent, read = (step.observation for step in steps)
    assert (shell["output"], shell["exit_code"]) == ("out\nerr\n", 0)
    assert "?? notes.txt" in written["git_status"]
    # An edit whose old text is absent is the step's error, and the file stays as written.
    assert steps[2].error == absent["error"] and "not found" in absent["error"]
    assert read["output"] == "     2\tb\n"
    with pytest.raises(ValueError, match="not_a_tool"):
        validate_config(
            {
                "domain": "swe",
                "episodes": 1,
                "out": str(tmp_path),
                "policy": {"kind": "replay", "params": {"actions": [{"name": "not_a_tool"}]}},
            }
        )
