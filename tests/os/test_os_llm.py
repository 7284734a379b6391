"""`worldtrace collect os --policy llm`: a model (the stand-in server) drives the real desktop.

The stand-in (tests/llm_server.py) answers with the pyautogui code a model would write for the
first editing task, so the episode really edits and saves the file in the container and its
check passes; the run is then normalized, curated, published and exported like any. What every
domain's llm run shows is checked by tests/llm_collecting.py; here, what the desktop did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.collecting import episode_rewards
from tests.llm_collecting import (
    assert_replies_kept,
    collect_completed,
    collect_invalid_replies,
    publish_and_export,
)
from worldtrace.collectors.os.prompt import SYSTEM
from worldtrace.collectors.os.tasks import load_tasks

pytestmark = pytest.mark.docker

TASK = next(task for task in load_tasks() if task.name == "mousepad-append-todo-item")


def test_a_model_edits_and_saves_a_file_on_the_desktop_and_the_run_is_published(
    tmp_path: Path, os_image: str, prefect_server: str
) -> None:
    write = "pyautogui.write('5. Pay the rent\\n')"
    replies = [
        "pyautogui.hotkey('ctrl', 'End')",
        f"The caret is at the end of the list now. I type the item:\n```python\n{write}\n```\n"
        "and save next.",
        "pyautogui.hotkey('ctrl', 's')",
    ]
    # Every call reports 4 cached and 1 reasoning token; the closing DONE is counted too.
    run = collect_completed(
        tmp_path, prefect_server, "os",
        [{"content": reply} for reply in replies], [(2100, 12), (2600, 40), (3100, 12)],
        ({"content": "DONE"}, (3600, 1)), instruction=TASK.instruction, system=SYSTEM,
        cached=4, reasoning=1, args=("--task", TASK.name), max_steps=6,
    )  # fmt: skip
    rows = run.rows
    # The actions are the model's code (of the fenced block, not the prose around it).
    assert [row.action.text for row in rows] == [replies[0], write, replies[2]]
    assert [row.action.name for row in rows] == ["hotkey", "write", "hotkey"]
    # The real desktop did it: the item is in the editor and the task's check passed.
    assert "5. Pay the rent" not in rows[0].observation.text
    assert "5. Pay the rent" in rows[1].next_observation.text
    assert episode_rewards(run.run_dir) == [1.0]
    assert_replies_kept(run, replies)
    # What the model was shown: the desktop's rendered text.
    assert rows[0].observation.text.startswith("[window 1] ")

    _, agentworld = publish_and_export(run, tmp_path, "os")
    assert any("pyautogui.hotkey('ctrl', 's')" in row["current_prompt"] for row in agentworld)


def test_unparseable_code_is_recorded_without_touching_the_desktop_then_ends_the_episode(
    tmp_path: Path, os_image: str, prefect_server: str
) -> None:
    replies = [
        "pyautogui.click(640, 400",
        "First the imports:\n```python\nimport os\nos.system('ls')\n```",
    ]
    # The desktop was not touched: the screen the model saw is the screen after.
    run = collect_invalid_replies(
        tmp_path, prefect_server, "os", replies, "WAIT",
        args=("--task", TASK.name), max_steps=5,
    )  # fmt: skip
    rows = run.rows
    assert rows[0].action_error and "not Python: '(' was never closed" in rows[0].action_error
    assert rows[1].action_error and "import os" in rows[1].action_error
    assert all(row.observation.text.startswith("[window 1] ") for row in rows)
