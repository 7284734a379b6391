"""The desktop's action space: pyautogui code as OSWorld's agents write it, parsed, never run.

An action is Python text of one or more statements, each either a call of an allowed pyautogui
function with literal arguments or one of OSWorld's three special words::

    pyautogui.click(640, 400)
    pyautogui.write('hello'); pyautogui.press('enter')
    pyautogui.hotkey('ctrl', 's')
    WAIT

:func:`parse_code` reads the text with :mod:`ast` and accepts only that: a statement is an
expression whose value is ``pyautogui.<function>(...)`` with a function of :data:`SIGNATURES`,
positional arguments up to the function's parameters (``hotkey`` takes any number of keys)
and keyword arguments among its parameter names; an argument is a literal (a number, possibly
negative, a string, ``True``/``False``/``None``, or a list or tuple of those). Names,
attributes, calls, operators, comprehensions, lambdas, ``import`` and every other statement are
refused with an :class:`ActionSyntaxError` that says what was found and where. Nothing is
evaluated: the literals are read with :func:`ast.literal_eval` after their shape was checked.

The parsed action is a :class:`~worldtrace.schemas.Action`: ``name`` is the function of a
single call (``click``, ``WAIT``…) or :data:`SCRIPT_NAME` for several statements;
``arguments`` is ``{"calls": [{"function", "args", "kwargs"}, ...]}`` (what the driver's
``act`` request takes, one per statement, in order); ``text`` is the canonical code
(:func:`code_text`): one statement per line, ``pyautogui.`` before each function, Python's
``repr`` of every literal, keyword arguments in the order written. The driver checks the values
(coordinates on the screen, key names it can press, limits) and refuses a call it cannot run
with an error and no input.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from worldtrace.schemas import Action
from worldtrace.schemas.errors import InputError

SPECIAL = ("WAIT", "DONE", "FAIL")
"""OSWorld's special actions: pause and observe, declare success, declare failure."""

SIGNATURES: dict[str, tuple[str, ...]] = {
    "click": ("x", "y", "clicks", "interval", "button", "duration"),
    "doubleClick": ("x", "y", "interval", "button", "duration"),
    "rightClick": ("x", "y", "duration"),
    "moveTo": ("x", "y", "duration"),
    "dragTo": ("x", "y", "duration", "button", "mouseDownUp"),
    "write": ("message", "interval"),
    "typewrite": ("message", "interval"),
    "press": ("keys", "presses", "interval"),
    "hotkey": ("interval",),
    "scroll": ("clicks", "x", "y"),
    "keyDown": ("key",),
    "keyUp": ("key",),
    "mouseDown": ("x", "y", "button", "duration"),
    "mouseUp": ("x", "y", "button", "duration"),
}
"""The pyautogui functions an action may call and the parameter names each accepts, in
positional order (``hotkey`` takes its keys positionally and only ``interval`` by name)."""

SCRIPT_NAME = "script"
"""The action name of code with several statements."""

MAX_CODE_CHARS = 20_000
"""Longest action text accepted (the driver caps a ``write`` message at 10,000 characters)."""


class ActionSyntaxError(InputError, ValueError):
    """Action text that is not allowed pyautogui code; the message says what and where."""


def _where(node: ast.AST) -> str:
    return f"line {getattr(node, 'lineno', '?')}, column {getattr(node, 'col_offset', -1) + 1}"


def _literal(node: ast.expr, function: str) -> Any:
    """The value of a literal argument; anything else is an ActionSyntaxError."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, (bytes, complex)) or node.value is Ellipsis:
            raise ActionSyntaxError(
                f"{function}: {type(node.value).__name__} literals are not allowed ({_where(node)})"
            )
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        return ast.literal_eval(node)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item, function) for item in node.elts]
    found = type(node).__name__
    shown = ast.unparse(node)
    raise ActionSyntaxError(
        f"{function}: arguments must be literals (numbers, strings, True/False/None or lists "
        f"of them), not {found} {shown!r} ({_where(node)})"
    )


def _call(node: ast.Call) -> dict[str, Any]:
    """One checked ``pyautogui.<function>(...)`` call as a driver call."""
    func = node.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id == "pyautogui"
    ):
        raise ActionSyntaxError(
            f"only pyautogui.<function>(...) calls are allowed, not {ast.unparse(func)!r} "
            f"({_where(node)})"
        )
    function = func.attr
    parameters = SIGNATURES.get(function)
    if parameters is None:
        raise ActionSyntaxError(
            f"pyautogui.{function} is not an allowed function (allowed: "
            f"{', '.join(SIGNATURES)}; or WAIT, DONE, FAIL alone) ({_where(node)})"
        )
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise ActionSyntaxError(f"{function}: *arguments are not allowed ({_where(node)})")
    args = [_literal(arg, function) for arg in node.args]
    if function != "hotkey" and len(args) > len(parameters):
        raise ActionSyntaxError(
            f"{function} takes at most {len(parameters)} positional arguments "
            f"({', '.join(parameters)}), got {len(args)}"
        )
    kwargs: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise ActionSyntaxError(f"{function}: **arguments are not allowed ({_where(node)})")
        if keyword.arg not in parameters:
            raise ActionSyntaxError(
                f"{function} has no argument {keyword.arg!r} "
                f"(its arguments: {', '.join(parameters)})"
            )
        positional = parameters.index(keyword.arg) < len(args) and function != "hotkey"
        if keyword.arg in kwargs or positional:
            raise ActionSyntaxError(f"{function} got argument {keyword.arg!r} twice")
        kwargs[keyword.arg] = _literal(keyword.value, function)
    if function == "hotkey" and (not args or not all(isinstance(key, str) for key in args)):
        raise ActionSyntaxError(f"hotkey takes one or more key names (strings), got {args!r}")
    return {"function": function, "args": args, "kwargs": kwargs}


def parse_code(code: str) -> list[dict[str, Any]]:
    """The driver calls of pyautogui ``code``, one per statement; ActionSyntaxError if refused."""
    if not isinstance(code, str):
        raise ActionSyntaxError(f"an action is pyautogui code as a string, not {code!r}")
    if len(code) > MAX_CODE_CHARS:
        raise ActionSyntaxError(
            f"the action is {len(code):,} characters long (at most {MAX_CODE_CHARS:,})"
        )
    try:
        module = ast.parse(code.strip(), mode="exec")
    except SyntaxError as error:
        raise ActionSyntaxError(
            f"not Python: {error.msg} (line {error.lineno}, column {error.offset})"
        ) from None
    if not module.body:
        raise ActionSyntaxError("the action is empty: write pyautogui code, WAIT, DONE or FAIL")
    calls = []
    for statement in module.body:
        value = statement.value if isinstance(statement, ast.Expr) else None
        if isinstance(value, ast.Name) and value.id in SPECIAL:
            calls.append({"function": value.id, "args": [], "kwargs": {}})
        elif isinstance(value, ast.Call):
            calls.append(_call(value))
        else:
            kind = type(value if value is not None else statement).__name__
            raise ActionSyntaxError(
                f"each statement must be one pyautogui.<function>(...) call or WAIT, DONE, FAIL, "
                f"not {kind} {ast.unparse(statement)!r} ({_where(statement)})"
            )
    special = [call["function"] for call in calls if call["function"] in SPECIAL]
    if special and len(calls) > 1:
        raise ActionSyntaxError(f"{special[0]} must be the whole action, not one of its statements")
    return calls


def call_text(call: Mapping[str, Any]) -> str:
    """The canonical code of one driver call (``pyautogui.click(100, 200)``, ``WAIT``)."""
    function = str(call["function"])
    if function in SPECIAL:
        return function
    parts = [_literal_text(value) for value in call.get("args") or ()]
    kwargs = call.get("kwargs") or {}
    parts += [f"{name}={_literal_text(value)}" for name, value in kwargs.items()]
    return f"pyautogui.{function}({', '.join(parts)})"


def _literal_text(value: Any) -> str:
    # Lists (tuples arrive as lists from JSON) are written as lists so the text is stable.
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal_text(item) for item in value) + "]"
    return repr(value)


def code_text(calls: Sequence[Mapping[str, Any]]) -> str:
    """The canonical code of an action's calls, one statement per line."""
    return "\n".join(call_text(call) for call in calls)


def action_of(calls: Sequence[Mapping[str, Any]]) -> Action:
    """The :class:`Action` of checked driver calls (its name, arguments and canonical text)."""
    calls = [
        {
            "function": str(c["function"]),
            "args": list(c.get("args") or []),
            "kwargs": dict(c.get("kwargs") or {}),
        }
        for c in calls
    ]
    name = calls[0]["function"] if len(calls) == 1 else SCRIPT_NAME
    return Action(name=name, arguments={"calls": calls}, text=code_text(calls))


def parse_action(code: str) -> Action:
    """Read pyautogui code as an :class:`Action`; ActionSyntaxError when it is not allowed."""
    return action_of(parse_code(code))


def action_calls(action: Action) -> list[dict[str, Any]]:
    """The checked driver calls of a recorded or replayed action (from its canonical text).

    An action is trusted only as far as its text: the calls are parsed again from
    ``action.text`` so an object built elsewhere cannot smuggle in a call the parser refuses.
    """
    return parse_code(action.text)


# --- builders for scripts (each returns a parsed, canonical Action) --------------------------


def _build(function: str, *args: Any, **kwargs: Any) -> Action:
    return parse_action(call_text({"function": function, "args": list(args), "kwargs": kwargs}))


def click(x: int, y: int, clicks: int = 1, button: str = "left") -> Action:
    """``pyautogui.click(x, y)`` (with ``clicks`` and ``button`` when not the defaults)."""
    kwargs: dict[str, Any] = {}
    if clicks != 1:
        kwargs["clicks"] = clicks
    if button != "left":
        kwargs["button"] = button
    return _build("click", x, y, **kwargs)


def double_click(x: int, y: int) -> Action:
    """``pyautogui.doubleClick(x, y)``."""
    return _build("doubleClick", x, y)


def right_click(x: int, y: int) -> Action:
    """``pyautogui.rightClick(x, y)``."""
    return _build("rightClick", x, y)


def move_to(x: int, y: int) -> Action:
    """``pyautogui.moveTo(x, y)``."""
    return _build("moveTo", x, y)


def drag_to(x: int, y: int, duration: float = 0.5) -> Action:
    """``pyautogui.dragTo(x, y, duration=…)`` (a drag needs time for the app to see motion)."""
    return _build("dragTo", x, y, duration=duration)


def write(text: str, interval: float = 0.0) -> Action:
    """``pyautogui.write(text)``: type ``text`` key by key (``interval`` s between keys)."""
    return _build("write", text, interval=interval) if interval else _build("write", text)


def press(key: str, presses: int = 1) -> Action:
    """``pyautogui.press(key)`` (``presses`` times)."""
    return _build("press", key, presses=presses) if presses != 1 else _build("press", key)


def hotkey(*keys: str) -> Action:
    """``pyautogui.hotkey(*keys)``: press the keys in order, release them in reverse."""
    return _build("hotkey", *keys)


def scroll(clicks: int, x: int | None = None, y: int | None = None) -> Action:
    """``pyautogui.scroll(clicks)``, at ``(x, y)`` when given (negative scrolls down)."""
    return _build("scroll", clicks, x, y) if x is not None else _build("scroll", clicks)


def special(word: str) -> Action:
    """``WAIT``, ``DONE`` or ``FAIL``."""
    if word not in SPECIAL:
        raise ActionSyntaxError(f"{word!r} is not one of {', '.join(SPECIAL)}")
    return parse_action(word)


def script(*actions: Action) -> Action:
    """One action of several single-call actions' statements, in order."""
    return action_of([call for action in actions for call in action_calls(action)])


__all__ = [
    "SIGNATURES",
    "SPECIAL",
    "ActionSyntaxError",
    "action_calls",
    "action_of",
    "call_text",
    "click",
    "code_text",
    "double_click",
    "drag_to",
    "hotkey",
    "move_to",
    "parse_action",
    "parse_code",
    "press",
    "right_click",
    "script",
    "scroll",
    "special",
    "write",
]
