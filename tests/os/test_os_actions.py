"""The desktop's action space: pyautogui code accepted, refused, and written canonically."""

from __future__ import annotations

import pytest

from worldtrace.collectors.os import OsCollector
from worldtrace.collectors.os.actions import (
    ActionSyntaxError,
    action_calls,
    click,
    hotkey,
    parse_action,
    parse_code,
    press,
    script,
    scroll,
    special,
    write,
)
from worldtrace.collectors.os.render import OsRenderer
from worldtrace.schemas import Action
from worldtrace.schemas.errors import InputError


@pytest.mark.parametrize(
    ("code", "name", "calls", "text"),
    [
        (
            "pyautogui.click(100, 200)",
            "click",
            [{"function": "click", "args": [100, 200], "kwargs": {}}],
            "pyautogui.click(100, 200)",
        ),
        (
            'pyautogui.click(x=5,y=6, button="right")',
            "click",
            [{"function": "click", "args": [], "kwargs": {"x": 5, "y": 6, "button": "right"}}],
            "pyautogui.click(x=5, y=6, button='right')",
        ),
        (
            "pyautogui.hotkey('ctrl', 'shift', 's')",
            "hotkey",
            [{"function": "hotkey", "args": ["ctrl", "shift", "s"], "kwargs": {}}],
            "pyautogui.hotkey('ctrl', 'shift', 's')",
        ),
        (
            "pyautogui.scroll(-3)",
            "scroll",
            [{"function": "scroll", "args": [-3], "kwargs": {}}],
            "pyautogui.scroll(-3)",
        ),
        (
            "pyautogui.press(('tab', 'enter'), interval=0.1)",
            "press",
            [{"function": "press", "args": [["tab", "enter"]], "kwargs": {"interval": 0.1}}],
            "pyautogui.press(['tab', 'enter'], interval=0.1)",
        ),
        (
            "pyautogui.dragTo(300, 400, duration=0.5, mouseDownUp=True)",
            "dragTo",
            [
                {
                    "function": "dragTo",
                    "args": [300, 400],
                    "kwargs": {"duration": 0.5, "mouseDownUp": True},
                }
            ],
            "pyautogui.dragTo(300, 400, duration=0.5, mouseDownUp=True)",
        ),
        ("  WAIT  ", "WAIT", [{"function": "WAIT", "args": [], "kwargs": {}}], "WAIT"),
        ("DONE", "DONE", [{"function": "DONE", "args": [], "kwargs": {}}], "DONE"),
        (
            "pyautogui.write('it\\'s \"here\"\\n'); pyautogui.press('enter')\n\n",
            "script",
            [
                {"function": "write", "args": ['it\'s "here"\n'], "kwargs": {}},
                {"function": "press", "args": ["enter"], "kwargs": {}},
            ],
            "pyautogui.write('it\\'s \"here\"\\n')\npyautogui.press('enter')",
        ),
    ],
)
def test_allowed_code_parses_to_calls_and_canonical_text(
    code: str, name: str, calls: list[dict[str, object]], text: str
) -> None:
    action = parse_action(code)
    assert action.name == name
    assert action.arguments == {"calls": calls}
    assert action.text == text
    # The canonical text reads back as the same action.
    assert parse_action(action.text) == action


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import os", "not Import"),
        ("import pyautogui; pyautogui.click(1, 2)", "not Import"),
        ("pyautogui.click(x, 2)", "not Name 'x'"),
        ("pyautogui.click(os.getpid(), 2)", "not Call 'os.getpid()'"),
        ("pyautogui.write(open('/etc/passwd').read())", "not Call"),
        ("pyautogui.click(1 + 2, 3)", "not BinOp '1 + 2'"),
        ("pyautogui.write(f'{x}')", "not JoinedStr"),
        ("pyautogui.write((lambda: 'x')())", "not Call"),
        ("pyautogui.press(keys=lambda: 1)", "not Lambda"),
        ("pyautogui.press(key='a')", "press has no argument 'key'"),
        ("pyautogui.write([c for c in 'ab'])", "not ListComp"),
        ("pyautogui.write(b'x')", "bytes literals are not allowed"),
        ("pyautogui.write({'a': 1})", "not Dict"),
        ("pyautogui.screenshot()", "pyautogui.screenshot is not an allowed function"),
        ("pyautogui.FAILSAFE = False", "not Assign"),
        ("os.system('id')", "only pyautogui.<function>(...) calls are allowed, not 'os.system'"),
        ("click(1, 2)", "only pyautogui.<function>(...) calls are allowed, not 'click'"),
        ("pyautogui.pyautogui.click(1, 2)", "only pyautogui.<function>(...) calls"),
        ("pyautogui.click(1, 2, 1, 0.1, 'left', 0.2, 9)", "at most 6 positional arguments"),
        ("pyautogui.click(1, 2, tween=None)", "click has no argument 'tween'"),
        ("pyautogui.click(1, 2, x=3)", "got argument 'x' twice"),
        ("pyautogui.click(*[1, 2])", "*arguments are not allowed"),
        ("pyautogui.click(**{'x': 1})", "**arguments are not allowed"),
        ("pyautogui.hotkey()", "hotkey takes one or more key names"),
        ("pyautogui.hotkey('ctrl', 1)", "hotkey takes one or more key names"),
        ("pyautogui.click(1, 2); DONE", "DONE must be the whole action"),
        ("WAIT()", "pyautogui.<function>(...) calls are allowed, not 'WAIT'"),
        ("STOP", "not Name 'STOP'"),
        ("for i in range(3): pyautogui.click(1, 2)", "not For"),
        ("time.sleep(1)", "not 'time.sleep'"),
        ("", "the action is empty"),
        ("pyautogui.click(1,", "not Python"),
        ("pyautogui.write('" + "a" * 20_001 + "')", "characters long"),
    ],
)
def test_refused_code_names_the_problem(code: str, message: str) -> None:
    with pytest.raises(ActionSyntaxError) as raised:
        parse_action(code)
    assert message in str(raised.value)
    # A user-facing error (exit 2 at the command line) and a ValueError for policy factories.
    assert isinstance(raised.value, InputError) and isinstance(raised.value, ValueError)


def test_builders_give_the_canonical_actions() -> None:
    assert click(10, 20).text == "pyautogui.click(10, 20)"
    assert click(10, 20, clicks=2, button="right").text == (
        "pyautogui.click(10, 20, clicks=2, button='right')"
    )
    assert write("a\tb").text == "pyautogui.write('a\\tb')"
    assert hotkey("ctrl", "s").text == "pyautogui.hotkey('ctrl', 's')"
    assert press("down", presses=7).text == "pyautogui.press('down', presses=7)"
    assert scroll(-2, 300, 400).text == "pyautogui.scroll(-2, 300, 400)"
    assert special("FAIL").name == "FAIL"
    with pytest.raises(ActionSyntaxError, match="not one of WAIT, DONE, FAIL"):
        special("STOP")
    joined = script(click(1, 2), write("x"))
    assert joined.name == "script"
    assert joined.text == "pyautogui.click(1, 2)\npyautogui.write('x')"


def test_a_recorded_action_is_run_from_its_text_not_its_arguments() -> None:
    # An object whose arguments were tampered with cannot bring in a call its text lacks.
    forged = Action(
        name="click",
        arguments={"calls": [{"function": "screenshot", "args": [], "kwargs": {}}]},
        text="pyautogui.click(1, 2)",
    )
    assert action_calls(forged) == [{"function": "click", "args": [1, 2], "kwargs": {}}]
    bad = Action(name="x", arguments={}, text="import os")
    with pytest.raises(ActionSyntaxError):
        action_calls(bad)


def test_the_collector_reads_replayed_code_and_objects() -> None:
    collector = OsCollector()
    assert collector.parse_action("pyautogui.press('enter')") == press("enter")
    as_object = {"name": "press", "arguments": {}, "text": "pyautogui.press('enter')"}
    assert collector.parse_action(as_object) == press("enter")
    with pytest.raises(ValueError, match="pyautogui code as text"):
        collector.parse_action({"name": "press", "arguments": {}})
    with pytest.raises(ActionSyntaxError):
        collector.parse_action("pyautogui.press(enter)")


def test_the_renderer_rewrites_the_text_from_the_calls() -> None:
    action = click(3, 4).model_copy(update={"text": "pyautogui.click( 3,4 )"})
    assert OsRenderer().action(action).text == "pyautogui.click(3, 4)"
    assert parse_code("pyautogui.mouseDown(); pyautogui.mouseUp()") == [
        {"function": "mouseDown", "args": [], "kwargs": {}},
        {"function": "mouseUp", "args": [], "kwargs": {}},
    ]
