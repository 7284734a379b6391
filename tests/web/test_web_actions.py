"""BrowserGym action strings: parsed safely, checked against signatures, spelled canonically."""

from __future__ import annotations

import pytest

from worldtrace.collectors.web.actions import ACTIONS, ActionSyntaxError, action_text, parse_action

# One valid example per action, in BrowserGym's own argument conventions.
EXAMPLES = {
    "noop": "noop(500)",
    "mouse_move": "mouse_move(65.2, 158.5)",
    "mouse_click": "mouse_click(56, 712.56, 'right')",
    "mouse_dblclick": "mouse_dblclick(5, 236)",
    "mouse_down": "mouse_down(140.2, 580.1)",
    "mouse_up": "mouse_up(250, 120, button='middle')",
    "scroll": "scroll(-50.2, -100.5)",
    "click": "click('a51', button='middle', modifiers=['Shift'])",
    "keyboard_press": "keyboard_press('ControlOrMeta+a')",
    "keyboard_type": "keyboard_type('Hello world!')",
    "fill": "fill('b534', \"Montre\", True)",
    "hover": "hover('b8')",
    "tab_focus": "tab_focus(2)",
    "new_tab": "new_tab()",
    "go_back": "go_back()",
    "go_forward": "go_forward()",
    "goto": "goto('http://trac.test/wiki')",
    "tab_close": "tab_close()",
    "select_option": "select_option('c48', ['red', 'green', 'blue'])",
    "send_msg_to_user": 'send_msg_to_user("The city was built in 1751.")',
    "report_infeasible": "report_infeasible('There is no e-mail field.')",
}


def test_the_action_space_is_browsergyms_21_actions() -> None:
    assert sorted(ACTIONS) == sorted(EXAMPLES)
    assert len(ACTIONS) == 21


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_action_parses_and_its_canonical_text_parses_back(name: str) -> None:
    action = parse_action(EXAMPLES[name])
    assert action.name == name
    again = parse_action(action.text)
    assert again.arguments == action.arguments
    assert again.text == action.text


def test_arguments_are_bound_by_name_and_defaults_are_left_out_of_the_text() -> None:
    action = parse_action("click('12', button='left')")
    assert action.arguments == {"bid": "12", "button": "left"}
    assert action.text == "click('12')"
    assert parse_action("fill('3', 'x', enable_autocomplete_menu=False)").text == "fill('3', 'x')"
    # After a left-out default, later arguments must be named to keep their meaning.
    assert action_text("click", {"bid": "4", "modifiers": ["Shift"]}) == (
        "click('4', modifiers=['Shift'])"
    )
    assert parse_action("noop()").text == "noop()"
    assert parse_action(" scroll(0, 200) ").arguments == {"delta_x": 0, "delta_y": 200}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os').system('touch /tmp/pwned')", "expected one call"),
        ("click(open('/etc/passwd').read())", "not a literal"),
        ("exec('import os')", "unknown action 'exec'"),
        ("click('1'); goto('http://x')", "not a Python call"),
        ("click", "expected one call"),
        ("page.click('1')", "expected one call"),
        ("click()", "missing a required argument"),
        ("click('1', 'left', [], 'extra')", "too many positional arguments"),
        ("click(bid='1', colour='red')", "unexpected keyword argument"),
        ("click(12)", "bid=12"),
        ("click('1 or 1')", "bid='1 or 1'"),
        ("click('1', button='top')", "button='top'"),
        ("tab_focus('2')", "index='2'"),
        ("scroll('down', 1)", "delta_x='down'"),
        ("fill('1', 5)", "value=5"),
        ("click(*['1'])", "*args"),
        ("click(**{'bid': '1'})", "*args and **kwargs"),
        ("noop(wait_ms=True)", "wait_ms=True"),
    ],
)
def test_malformed_or_unsafe_actions_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(ActionSyntaxError) as raised:
        parse_action(text)
    assert message in str(raised.value)
