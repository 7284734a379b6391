"""`worldtrace collect os` end to end: the real desktop, then curate, publish, load with
`datasets` and export, with the same commands as every other domain."""

from __future__ import annotations

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
from worldtrace.collectors.os.tasks import load_tasks
from worldtrace.flows.cli import app

pytestmark = pytest.mark.docker


def test_collect_os_scripts_then_curate_publish_load_and_export(
    tmp_path: Path, os_image: str
) -> None:
    invoke(
        "collect", "os", "--episodes", "2", "--workers", "2",
        "--out", str(tmp_path / "runs"), "--run-name", "os",
    )  # fmt: skip
    run_dir = tmp_path / "runs" / "os"
    # Both scripted tasks were done: their checks hold against the files in the container.
    assert episode_rewards(run_dir) == [1.0, 1.0]
    rows = rows_of(run_dir, "os")
    tasks = load_tasks()[:2]
    assert {row.task for row in rows} == {task.instruction for task in tasks}
    assert len(rows) == sum(len(task.steps) for task in tasks)
    for row in rows:
        assert row.observation.format == row.next_observation.format == "a11y-linear"
        # The windows and the focus, then OSWorld's table (issue 23).
        assert row.next_observation.text.startswith("[window 1] ")
        assert "\n[focus] " in row.next_observation.text
        assert "\ntag\tname\ttext\tclass\tdescription\tposition" in row.next_observation.text
        assert row.next_observation.screenshot and row.next_observation.screenshot[:4] == b"\x89PNG"
        assert row.next_observation.meta["focused"]["app"] == "mousepad"
        assert row.action.text.startswith("pyautogui.")
        assert row.env.name == "os/desktop" and row.env.components["mousepad"]
        assert row.env.components["observation"] == "2"
        assert row.action_error is None
    saves = [row for row in rows if row.action.text == "pyautogui.hotkey('ctrl', 's')"]
    assert len(saves) == 2

    dataset = curate_and_publish(run_dir, tmp_path, "os")
    assert dataset.num_rows == len(rows)  # curation keeps episodes whole
    assert set(dataset["domain"]) == {"os"}
    assert dataset[0]["next_observation"]["screenshot"].size == (1280, 800)

    agentworld, _ = export_both(tmp_path / "dist", tmp_path, "os", dataset)
    for row in agentworld:
        assert "pyautogui." in row["current_prompt"]
        assert "tag\tname\ttext" in row["response"][-1] or row["turn_idx"] == 1


def test_explore_walks_real_widgets_and_a_replay_records_real_states(
    tmp_path: Path, os_image: str
) -> None:
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    invoke(
        "collect", "os", "--policy", "explore", "--episodes", "1", "--max-steps", "12",
        "--seed", "7", "--out", str(tmp_path), "--run-name", "explore",
    )  # fmt: skip
    walk = sorted(rows_of(tmp_path / "explore", "os"), key=lambda r: r.step)
    assert len(walk) == 12
    # Only the step limit ends the walk: no action lost the sandbox.
    assert [row.truncated for row in walk] == [False] * 11 + [True]
    assert all(row.action_error is None or "sandbox" not in row.action_error for row in walk)
    # From the bare desktop it opened an application from the launcher dock.
    assert walk[0].action.name == "click"
    apps = {row.next_observation.meta["focused"]["app"] for row in walk}
    assert apps - {None, "launcher"}, apps

    codes = [
        "pyautogui.click(70, 23)",
        "pyautogui.write('hello')",
        "pyautogui.press('nosuchkey')",
    ]
    config = validate_config(
        {
            "domain": "os",
            "episodes": 1,
            "out": str(tmp_path),
            "run_name": "replay",
            "policy": {"kind": "replay", "params": {"actions": codes}},
        }
    )
    run_collection(config)
    rows = sorted(rows_of(tmp_path / "replay", "os"), key=lambda row: row.step)
    assert [row.action.text for row in rows] == codes
    assert rows[0].next_observation.meta["focused"]["app"] == "mousepad"
    assert "hello" in rows[1].next_observation.text
    assert rows[2].action_error and "nosuchkey" in rows[2].action_error
    assert rows[2].next_observation.text == rows[1].next_observation.text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "quiet_s=0"], "quiet_s"),
        (["--env", "desktop=kde"], "desktop"),
        (["--policy", "replay"], "replay policy takes `actions`"),
    ],
)
def test_bad_configs_are_refused_before_anything_runs(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["collect", "os", *args, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert not any(tmp_path.iterdir())
