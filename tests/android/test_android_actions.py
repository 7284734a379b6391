"""AndroidWorld's JSON actions: what parses, and a clear reason for what does not."""

from __future__ import annotations

import pytest

from worldtrace.collectors.android.actions import ActionError, parse_action


def test_an_action_keeps_its_fields_in_order_and_its_canonical_text() -> None:
    action = parse_action('{"index": 3, "text": "Ada", "action_type": "input_text"}')
    assert action.name == "input_text"
    assert action.arguments == {"text": "Ada", "index": 3}
    assert action.text == '{"action_type": "input_text", "text": "Ada", "index": 3}'
    assert parse_action(action.text) == action


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("click 3", "one JSON object"),
        ("[1]", "one JSON object with an action_type"),
        ('{"action_type": "tap", "index": 1}', "unknown action_type 'tap'"),
        ('{"action_type": "click"}', "click needs an index or x and y"),
        ('{"action_type": "click", "index": -1}', "index must be a whole number"),
        ('{"action_type": "click", "index": true}', "index must be a whole number"),
        ('{"action_type": "click", "x": 5}', "needs both x and y"),
        ('{"action_type": "click", "index": 1, "x": 5, "y": 5}', "not both"),
        ('{"action_type": "scroll", "direction": "sideways"}', "needs a direction"),
        ('{"action_type": "input_text", "index": 2}', "input_text needs a text"),
        ('{"action_type": "open_app", "app_name": ""}', "open_app needs an app_name"),
        ('{"action_type": "status", "goal_status": "done"}', "complete, infeasible"),
        ('{"action_type": "navigate_back", "index": 1}', "takes no fields"),
    ],
)
def test_what_is_not_an_action_is_refused_with_its_reason(given: str, reason: str) -> None:
    with pytest.raises(ActionError, match=reason):
        parse_action(given)
