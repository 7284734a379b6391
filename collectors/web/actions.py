"""BrowserGym's action space: 21 Python-call strings, parsed safely, run against a page.

A policy (or a trajectory from elsewhere) writes actions as BrowserGym does::

    click('a51')   fill('12', "text")   goto('http://trac.test/wiki')
    scroll(0, 200)   keyboard_press('Enter')   select_option('48', ["red", "blue"])

:func:`parse_action` reads such a string with :mod:`ast` and accepts exactly one call of a
known action whose arguments are literals, checked against the action's signature (the
stubs below, which also document every action). Nothing from the string is ever evaluated
as code. The result is a :class:`worldtrace.schemas.Action` whose ``text`` is the canonical spelling
(defaults left out), so the same action always reads the same in the corpus.

:func:`run_action` executes a parsed action through a :class:`BrowserTabs`, the small part
of the environment that actions need (the active page, opening/closing/switching tabs).
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, Literal, Protocol

from playwright.sync_api import Locator, Page
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from worldtrace.schemas import Action

Bid = Annotated[str, Field(pattern=r"^(?:[a-z][A-Z]*)*[0-9]+$|^(?:[a-z][A-Z]*)+$")]
"""A BrowserGym element id: frame prefixes (``a``, ``aB``…) then a number, or a frame alone."""

Button = Literal["left", "middle", "right"]
Modifier = Literal["Alt", "Control", "ControlOrMeta", "Meta", "Shift"]

ELEMENT_TIMEOUT_MS = 2000
"""How long an element action waits for its element to be actionable (BrowserGym: 500)."""


class ActionSyntaxError(ValueError):
    """An action string that is not one well-formed call of a known action."""


# --- the action space: signatures and documentation ------------------------------------------
# Stubs only: parse_action binds and type-checks arguments against these signatures.


def noop(wait_ms: float = 1000) -> None:
    """Do nothing for ``wait_ms`` milliseconds: ``noop()``, ``noop(500)``."""


def mouse_move(x: float, y: float) -> None:
    """Move the mouse to page coordinates: ``mouse_move(65.2, 158.5)``."""


def mouse_click(x: float, y: float, button: Button = "left") -> None:
    """Click at page coordinates: ``mouse_click(887.2, 68)``, ``mouse_click(56, 71, 'right')``."""


def mouse_dblclick(x: float, y: float, button: Button = "left") -> None:
    """Double-click at page coordinates: ``mouse_dblclick(5, 236)``."""


def mouse_down(x: float, y: float, button: Button = "left") -> None:
    """Move to the coordinates and press a mouse button: ``mouse_down(140.2, 580.1)``."""


def mouse_up(x: float, y: float, button: Button = "left") -> None:
    """Move to the coordinates and release a mouse button: ``mouse_up(250, 120)``."""


def scroll(delta_x: float, delta_y: float) -> None:
    """Scroll with the mouse wheel where the mouse is: ``scroll(0, 200)``."""


def click(bid: Bid, button: Button = "left", modifiers: list[Modifier] | None = None) -> None:
    """Click an element: ``click('a51')``, ``click('48', button='middle', modifiers=['Shift'])``."""


def keyboard_press(key: str) -> None:
    """Press a key or a combination: ``keyboard_press('Enter')``, ``('ControlOrMeta+a')``."""


def keyboard_type(text: str) -> None:
    """Type text into the focused element: ``keyboard_type('Hello world!')``."""


def fill(bid: Bid, value: str, enable_autocomplete_menu: bool = False) -> None:
    """Replace the value of an input, textarea or editable element: ``fill('45', 'text')``.

    With ``enable_autocomplete_menu`` the last character is typed, so an autocomplete opens.
    """


def hover(bid: Bid) -> None:
    """Move the mouse over an element: ``hover('b8')``."""


def tab_focus(index: int) -> None:
    """Bring the tab at ``index`` (0-based, in opening order) to the front: ``tab_focus(2)``."""


def new_tab() -> None:
    """Open a new blank tab and bring it to the front: ``new_tab()``."""


def go_back() -> None:
    """Go back in the active tab's history: ``go_back()``."""


def go_forward() -> None:
    """Go forward in the active tab's history: ``go_forward()``."""


def goto(url: str) -> None:
    """Navigate the active tab: ``goto('http://trac.test/wiki')``."""


def tab_close() -> None:
    """Close the active tab; the last remaining tab is replaced by a blank one: ``tab_close()``."""


def select_option(bid: Bid, options: str | list[str]) -> None:
    """Select one or several options of a select: ``select_option('a48', 'blue')``."""


def send_msg_to_user(text: str) -> None:
    """Say something to the user (recorded, no effect on the page): ``send_msg_to_user('Done')``."""


def report_infeasible(reason: str) -> None:
    """Declare the task impossible; ends the episode: ``report_infeasible('No such field')``."""


ACTIONS: dict[str, Callable[..., None]] = {
    function.__name__: function
    for function in (
        noop,
        mouse_move,
        mouse_click,
        mouse_dblclick,
        mouse_down,
        mouse_up,
        scroll,
        click,
        keyboard_press,
        keyboard_type,
        fill,
        hover,
        tab_focus,
        new_tab,
        go_back,
        go_forward,
        goto,
        tab_close,
        select_option,
        send_msg_to_user,
        report_infeasible,
    )
}
"""The 21 actions by name; their stubs above are the reference for arguments."""

# --- parsing ----------------------------------------------------------------------------------


@cache
def _adapters(name: str) -> dict[str, TypeAdapter[Any]]:
    signature = inspect.signature(ACTIONS[name], eval_str=True)
    strict = ConfigDict(strict=True)
    return {
        parameter.name: TypeAdapter(parameter.annotation, config=strict)
        for parameter in signature.parameters.values()
    }


def _literal(node: ast.expr, text: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        snippet = ast.get_source_segment(text, node) or ast.dump(node)
        raise ActionSyntaxError(f"argument {snippet!r} is not a literal value") from None


def parse_action(text: str) -> Action:
    """Parse one BrowserGym action string into a canonical :class:`Action`.

    Raises :class:`ActionSyntaxError` naming what is wrong: not a call, an unknown action,
    non-literal arguments, missing or extra arguments, or arguments of the wrong type.
    """
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ActionSyntaxError(f"not a Python call: {error.msg} in {text!r}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ActionSyntaxError(f"expected one call like click('12'), got {text!r}")
    name = call.func.id
    if name not in ACTIONS:
        raise ActionSyntaxError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}")
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(
        keyword.arg is None for keyword in call.keywords
    ):
        raise ActionSyntaxError(f"{name}: *args and **kwargs are not allowed")
    args = [_literal(arg, text) for arg in call.args]
    kwargs = {
        keyword.arg: _literal(keyword.value, text) for keyword in call.keywords if keyword.arg
    }
    return make_action(name, *args, **kwargs)


def make_action(name: str, *args: Any, **kwargs: Any) -> Action:
    """Build a canonical action from Python values (what policies use instead of strings)."""
    if name not in ACTIONS:
        raise ActionSyntaxError(f"unknown action {name!r}; known: {', '.join(ACTIONS)}")
    signature = inspect.signature(ACTIONS[name])
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as error:
        raise ActionSyntaxError(f"{name}{signature}: {error}") from None
    adapters = _adapters(name)
    arguments: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        try:
            arguments[key] = adapters[key].validate_python(value)
        except ValidationError as error:
            problem = error.errors()[0]["msg"]
            raise ActionSyntaxError(f"{name}: argument {key}={value!r}: {problem}") from None
    return Action(name=name, arguments=arguments, text=action_text(name, arguments))


def action_text(name: str, arguments: dict[str, Any]) -> str:
    """Return the canonical call string: positional arguments, defaults left out."""
    parameters = inspect.signature(ACTIONS[name]).parameters.values()
    shown: list[str] = []
    skipped_default = False
    for parameter in parameters:
        if parameter.name not in arguments:
            skipped_default = True
            continue
        value = arguments[parameter.name]
        if parameter.default is not inspect.Parameter.empty and value == parameter.default:
            skipped_default = True
            continue
        # After a left-out default the position no longer says which parameter this is.
        shown.append(f"{parameter.name}={value!r}" if skipped_default else repr(value))
    return f"{name}({', '.join(shown)})"


# --- execution --------------------------------------------------------------------------------


class BrowserTabs(Protocol):
    """What actions need from the environment: the active tab and the tab list."""

    @property
    def page(self) -> Page:
        """The active tab."""
        ...

    def pages(self) -> list[Page]:
        """All open tabs in opening order."""
        ...

    def activate(self, page: Page) -> None:
        """Make ``page`` the active tab."""
        ...

    def new_tab(self) -> Page:
        """Open a new tab in the episode's browser context (not yet the active one)."""
        ...

    def check_url(self, url: str) -> None:
        """Raise ``ActionRefused`` (and record it) if ``url`` may not be visited."""
        ...


class ActionRefused(RuntimeError):
    """The environment refused an action (a URL off the episode's site, a bad element id)."""


BID_FRAME = re.compile(r"[a-z][A-Z]*")


def locate(page: Page, bid: str) -> Locator:
    """Find the element with ``bid``, descending into the frames its prefix names."""
    scope: Page | Any = page
    position = 0
    prefix = ""
    # "ab12": frame "a", in it frame "ab", in it element "ab12".
    while position < len(bid) and not bid[position:].isdigit():
        match = BID_FRAME.match(bid, position)
        if match is None:
            raise ActionRefused(f"malformed bid {bid!r}")
        prefix += match.group(0)
        position = match.end()
        if position == len(bid):
            break  # the bid names the frame element itself
        scope = scope.frame_locator(f'[bid="{prefix}"]')
    locator = scope.locator(f'[bid="{bid}"]')
    if locator.count() == 0:
        raise ActionRefused(f"no element with bid {bid!r} on the page")
    return locator.first


def run_action(action: Action, tabs: BrowserTabs) -> None:
    """Execute ``action``; raise on failure (the caller records the message as action_error)."""
    arguments = action.arguments
    page = tabs.page
    mouse = page.mouse
    match action.name:
        case "noop":
            page.wait_for_timeout(float(arguments.get("wait_ms", 1000)))
        case "mouse_move":
            mouse.move(arguments["x"], arguments["y"])
        case "mouse_click":
            mouse.click(arguments["x"], arguments["y"], button=arguments.get("button", "left"))
        case "mouse_dblclick":
            mouse.dblclick(arguments["x"], arguments["y"], button=arguments.get("button", "left"))
        case "mouse_down" | "mouse_up":
            mouse.move(arguments["x"], arguments["y"])
            press = mouse.down if action.name == "mouse_down" else mouse.up
            press(button=arguments.get("button", "left"))
        case "scroll":
            mouse.wheel(arguments["delta_x"], arguments["delta_y"])
        case "click":
            locate(page, arguments["bid"]).click(
                button=arguments.get("button", "left"),
                modifiers=arguments.get("modifiers") or [],
                timeout=ELEMENT_TIMEOUT_MS,
            )
        case "keyboard_press":
            page.keyboard.press(arguments["key"])
        case "keyboard_type":
            page.keyboard.type(arguments["text"])
        case "fill":
            _fill(locate(page, arguments["bid"]), arguments["value"], arguments)
        case "hover":
            locate(page, arguments["bid"]).hover(timeout=ELEMENT_TIMEOUT_MS)
        case "select_option":
            locate(page, arguments["bid"]).select_option(
                arguments["options"], timeout=ELEMENT_TIMEOUT_MS
            )
        case "tab_focus":
            pages = tabs.pages()
            index = arguments["index"]
            if not 0 <= index < len(pages):
                raise ActionRefused(f"no tab {index}: {len(pages)} tab(s) open")
            tabs.activate(pages[index])
        case "new_tab":
            tabs.activate(tabs.new_tab())
        case "tab_close":
            remaining = [other for other in tabs.pages() if other is not page]
            if not remaining:
                remaining = [tabs.new_tab()]
            page.close()
            tabs.activate(remaining[-1])
        case "go_back":
            page.go_back()
        case "go_forward":
            page.go_forward()
        case "goto":
            tabs.check_url(arguments["url"])
            page.goto(arguments["url"])
        case "send_msg_to_user" | "report_infeasible":
            pass  # recorded in the observation's meta by the environment
        case _:
            raise ActionRefused(f"no executor for {action.name!r}")


def _fill(element: Locator, value: str, arguments: dict[str, Any]) -> None:
    if arguments.get("enable_autocomplete_menu") and value:
        element.fill(value[:-1], timeout=ELEMENT_TIMEOUT_MS)
        element.press_sequentially(value[-1], timeout=ELEMENT_TIMEOUT_MS)
    else:
        element.fill(value, timeout=ELEMENT_TIMEOUT_MS)
