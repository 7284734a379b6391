"""`worldtrace collect android` end to end against a stand-in device run as a person would run it
(``python -m tests.android.standin --port PORT``), then curate, publish, load and export with
the same commands as every other domain."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.android.conftest import AdbServer
from tests.android.standin import standin_process
from tests.collecting import curate_and_publish, episode_rewards, export_both, invoke, rows_of
from tests.prefect_server import free_port
from worldtrace.collectors.android.tasks import load_tasks


@pytest.fixture
def standin_port(adb_server: AdbServer) -> Iterator[int]:
    """A stand-in device in a process of its own, in the foreground as the README starts it."""
    port = free_port()
    with standin_process(port) as serial:
        try:
            yield port
        finally:
            adb_server.client.disconnect(serial)


def test_collect_android_then_curate_publish_load_and_export(
    tmp_path: Path, adb_server: AdbServer, standin_port: int
) -> None:
    invoke(
        "collect", "android", "--episodes", str(len(load_tasks())),
        "--env", f"device=127.0.0.1:{standin_port}",
        "--env", f"adb_server=127.0.0.1:{adb_server.port}",
        "--out", str(tmp_path / "runs"), "--run-name", "android",
    )  # fmt: skip
    run_dir = tmp_path / "runs" / "android"
    # Every scripted task's check holds against the device's real state.
    assert episode_rewards(run_dir) == [1.0] * len(load_tasks()) == [1.0] * 6
    rows = rows_of(run_dir, "android")
    assert [row.task for row in rows if row.step == 0] == [t.instruction for t in load_tasks()]
    for row in rows:
        assert row.observation.format == row.next_observation.format == "uia-elements"
        assert row.next_observation.screenshot is not None
        assert json.loads(row.action.text)["action_type"] == row.action.name
        assert row.env.name == "android/device"
        assert row.env.components["model"] == "Stand-in Phone"
        assert row.env.components["android_version"] == "14"
        assert row.next_observation.meta["package"]
    typed = [row for row in rows if row.action.name == "input_text"]
    texts = [row.action.arguments["text"] for row in typed]
    assert texts == ["Ada Lovelace", "555-0100", "7", "30", "Reports"]
    assert all(
        f'text="{row.action.arguments["text"]}"' in row.next_observation.text for row in typed
    )

    dataset = curate_and_publish(run_dir, tmp_path, "android")
    assert dataset.num_rows == len(rows)
    assert set(dataset["domain"]) == {"android"}
    agentworld, _ = export_both(tmp_path / "dist", tmp_path, "android", dataset)
    for row in agentworld:
        assert "an Android phone" in row["system_str"]
        assert "[app] com.android." in row["prompt"][0]  # the state the episode starts from
        assert row["current_prompt"] == row["prompt"][-1]
        assert row["response"][-1].startswith("**Environment Observation:**\n[app] ")


def test_collect_without_an_adb_server_stops_with_one_line_saying_how_to_start_one(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from worldtrace.flows.cli import app

    port = free_port()
    result = CliRunner().invoke(
        app,
        ["collect", "android", "--episodes", "1", "--env", f"adb_server=127.0.0.1:{port}",
         "--out", str(tmp_path / "runs")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert f"no adb server at 127.0.0.1:{port}" in result.output
    assert "adb start-server" in result.output and "Traceback" not in result.output
