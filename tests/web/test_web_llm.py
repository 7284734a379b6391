"""`worldtrace collect web --policy llm`: a model (the stand-in server) drives real Chromium.

The stand-in (tests/llm_server.py) answers with the actions a model would write, read off the
observation it was sent (the bids of the page in front of it), so the episode really clicks
and fills the site; the run is then normalized, curated, published and exported like any.
What every domain's llm run shows is checked by tests/llm_collecting.py; here, what the page
did.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.llm_collecting import (
    assert_replies_kept,
    collect_completed,
    collect_invalid_replies,
    publish_and_export,
)
from worldtrace.collectors.web.prompt import SYSTEM
from worldtrace.collectors.web.site_tasks import TASKS

pytestmark = pytest.mark.docker

TASK = next(task for task in TASKS if task.name == "datasette-add-review")
SITE_AND_TASK = ("--site", "datasette", "--task", TASK.name)


def shown(body: dict[str, Any]) -> str:
    """The last observation a request showed the model."""
    return str(body["messages"][-1]["content"])


def bid_of(text: str, role: str, name: str) -> str:
    """The bid of the element ``role 'name'`` in an observation text."""
    match = re.search(rf"\[([a-zA-Z]*\d+)\] {role} '{re.escape(name)}'", text)
    assert match, f"no {role} {name!r} in:\n{text}"
    return match.group(1)


def test_a_model_clicks_and_fills_a_real_site_and_the_run_is_published(
    tmp_path: Path, site_images: list[str], prefect_server: str
) -> None:
    replies: list[str] = []

    def click_add_review(body: dict[str, Any]) -> dict[str, Any]:
        replies.append(f"click('{bid_of(shown(body), 'link', 'Add a review')}')")
        return {"content": replies[-1]}

    def fill_book_id(body: dict[str, Any]) -> dict[str, Any]:
        action = f"fill('{bid_of(shown(body), 'textbox', 'book_id')}', '35')"
        replies.append(
            "The form is open. I will enter the book first.\n"
            f"```python\n{action}\n```\nThen the reviewer."
        )
        return {"content": replies[-1]}

    # Every call reports 3 cached and 2 reasoning tokens; the closing DONE is counted too.
    run = collect_completed(
        tmp_path, prefect_server, "web",
        [click_add_review, fill_book_id], [(1200, 9), (1500, 31)],
        ({"content": "DONE"}, (1800, 1)), instruction=TASK.instruction, system=SYSTEM,
        cached=3, reasoning=2, args=SITE_AND_TASK, max_steps=5,
    )  # fmt: skip
    rows = run.rows
    assert [row.action.name for row in rows] == ["click", "fill"]
    assert rows[0].action.text == replies[0]
    # The action of the fenced block, not the prose around it.
    assert rows[1].action.text in replies[1] and rows[1].action.text.startswith("fill(")
    # The real page changed: the click opened the form, the fill wrote into it.
    assert "textbox 'book_id'" not in rows[0].observation.text
    assert "textbox 'book_id' value='35'" in rows[1].next_observation.text
    assert rows[0].next_observation.text == rows[1].observation.text
    assert_replies_kept(run, replies)
    # What the model was shown: the rendered tree text.
    assert rows[0].observation.text.startswith("RootWebArea")

    _, agentworld = publish_and_export(run, tmp_path, "web")
    assert any(row["current_prompt"].count("fill(") for row in agentworld)


def test_unparseable_replies_are_recorded_without_touching_the_page_then_end_the_episode(
    tmp_path: Path, site_images: list[str], prefect_server: str
) -> None:
    replies = ["click('12'", "The review form is linked:\n```\nopen_link('12')\n```"]
    # The environment was not touched: the page the model saw is the page after.
    run = collect_invalid_replies(
        tmp_path, prefect_server, "web", replies, "click('1')",
        args=SITE_AND_TASK, max_steps=5,
    )  # fmt: skip
    rows = run.rows
    assert rows[0].action_error and "not a Python call" in rows[0].action_error
    assert rows[1].action_error and "unknown action 'open_link'" in rows[1].action_error
    assert all(row.observation.text.startswith("RootWebArea") for row in rows)
