"""The swe action space: tool calls, one pydantic model per tool.

An action is ``Action(name=<tool>, arguments={...}, text=<canonical JSON>)``. The canonical
text is ``{"name": ..., "arguments": ...}`` as JSON with the arguments in the model's field
order and every default filled in, so one call has one text however it was written.

The tools (all run as the unprivileged ``user`` in ``/home/user/repo``; relative paths are
relative to it):

- ``run_shell_command(command, timeout=60)``: ``bash -c command``; stdout and stderr
  interleaved; killed (its whole process group) after ``timeout`` seconds. Every command
  starts afresh in the repository: a ``cd`` or an ``export`` does not outlive its call.
- ``read_file(path, start_line=None, end_line=None)``: the file with line numbers.
- ``write_file(path, content)``: create or overwrite a file, making its folders.
- ``str_replace(path, old, new)``: replace the one occurrence of ``old``; an error (and the file
  untouched) when ``old`` is absent or occurs more than once.
- ``search(pattern, path=".", glob=None)``: ``grep -rn`` for an extended regular expression.
- ``list_dir(path=".")``: the entries of a folder, folders with a trailing ``/``.
- ``run_tests(selector=None)``: the repository's tests (or those ``selector`` names).

A call that names no tool or has bad arguments is not sent anywhere: the environment returns it
as the step's error (an ``action_error`` transition) with the state unchanged.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from worldtrace.schemas import Action
from worldtrace.schemas.errors import validation_problems

MAX_TIMEOUT_S = 600.0
"""The longest a shell command may ask to run (the step timeout caps it further)."""


class _Tool(BaseModel):
    """Base of the tool models: unknown arguments are errors, types are not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @field_validator("*")
    @classmethod
    def _text(cls, value: Any, info: Any) -> Any:
        if not isinstance(value, str):
            return value
        # A NUL cannot travel in a path, an argument or a command line.
        if "\x00" in value and info.field_name in _NO_NUL:
            raise ValueError("must not contain a NUL character")
        # Files and commands are UTF-8: a lone surrogate has no bytes to write.
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode text (it holds a lone surrogate)") from None
        return value


_NO_NUL = frozenset({"command", "path", "pattern", "glob", "selector"})


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


class RunShellCommand(_Tool):
    """Run ``command`` with ``bash -c`` in the repository; killed after ``timeout`` seconds."""

    command: str = Field(min_length=1, description="a bash command line")
    timeout: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT_S, description="seconds")

    _command = field_validator("command")(_not_blank)

    @field_validator("timeout")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number of seconds")
        return float(value)


class ReadFile(_Tool):
    """Show a file with line numbers, all of it or lines ``start_line``..``end_line``."""

    path: str = Field(min_length=1)
    start_line: int | None = Field(default=None, ge=1, description="first line, 1-based")
    end_line: int | None = Field(default=None, ge=1, description="last line, inclusive")

    _path = field_validator("path")(_not_blank)

    @model_validator(mode="after")
    def _ordered(self) -> ReadFile:
        start, end = self.start_line, self.end_line
        if start is not None and end is not None and end < start:
            raise ValueError(f"end_line ({end}) is before start_line ({start})")
        return self


class WriteFile(_Tool):
    """Create or overwrite the file at ``path`` with ``content`` (folders are made)."""

    path: str = Field(min_length=1)
    content: str

    _path = field_validator("path")(_not_blank)


class StrReplace(_Tool):
    """Replace the single occurrence of ``old`` in the file with ``new``."""

    path: str = Field(min_length=1)
    old: str = Field(min_length=1, description="text that occurs exactly once in the file")
    new: str

    _path = field_validator("path")(_not_blank)


class Search(_Tool):
    """Search files under ``path`` for an extended regular expression, like ``grep -rn``."""

    pattern: str = Field(min_length=1, description="an extended regular expression")
    path: str = Field(default=".", min_length=1)
    glob: str | None = Field(default=None, min_length=1, description="only files matching it")

    _path = field_validator("path")(_not_blank)


class ListDir(_Tool):
    """List a folder's entries, sorted, folders with a trailing ``/`` (``.git`` hidden)."""

    path: str = Field(default=".", min_length=1)

    _path = field_validator("path")(_not_blank)


class RunTests(_Tool):
    """Run the repository's tests, or those ``selector`` names (pytest node ids or files).

    ``selector`` is split like a shell would (several ids separated by spaces, quotes kept).
    """

    selector: str | None = Field(default=None, min_length=1)

    @field_validator("selector")
    @classmethod
    def _splits(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                words = shlex.split(value)
            except ValueError as error:
                raise ValueError(f"cannot be split into words: {error}") from None
            if not words:
                raise ValueError("must name at least one test, file or folder")
        return value


TOOLS: dict[str, type[_Tool]] = {
    "run_shell_command": RunShellCommand,
    "read_file": ReadFile,
    "write_file": WriteFile,
    "str_replace": StrReplace,
    "search": Search,
    "list_dir": ListDir,
    "run_tests": RunTests,
}
"""Every tool by name, with the model that validates its arguments."""


def _validated(name: object, arguments: object) -> _Tool:
    """Return the validated arguments of a call, or raise ValueError saying what is wrong."""
    if not isinstance(name, str) or name not in TOOLS:
        offered = ", ".join(TOOLS)
        raise ValueError(f"unknown tool {name!r} (the tools are {offered})")
    if not isinstance(arguments, dict):
        raise ValueError(f"the arguments of {name} must be an object, not {arguments!r}")
    try:
        return TOOLS[name].model_validate(arguments)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error, "arguments"))
        raise ValueError(f"bad arguments for {name}: {problems}") from None


def canonical_text(name: str, arguments: dict[str, Any]) -> str:
    """The canonical text of a valid call: its JSON, arguments in field order, defaults in."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def tool_call(name: str, **arguments: Any) -> Action:
    """Return the action calling tool ``name``; a ValueError if the call is not valid."""
    model = _validated(name, arguments)
    dumped = model.model_dump()
    return Action(name=name, arguments=dumped, text=canonical_text(name, dumped))


def parse_tool_call(call: str | dict[str, Any]) -> Action:
    """Read a call given as its canonical JSON text or as a ``{name, arguments}`` object.

    ``arguments`` may be left out when the tool needs none. An object may also carry the
    ``text`` of a recorded action: the text is derived again from the call, so a stale one is
    replaced. Anything else is a ValueError that says what was expected.
    """
    if isinstance(call, str):
        try:
            value = json.loads(call)
        except ValueError:
            raise ValueError(
                f"not a tool call: {call[:200]!r} is not JSON; expected "
                '{"name": <tool>, "arguments": {...}}'
            ) from None
    else:
        value = call
    if not isinstance(value, dict) or "name" not in value:
        raise ValueError(
            f'not a tool call: expected {{"name": <tool>, "arguments": {{...}}}}, got {value!r}'
        )
    unknown = sorted(set(value) - {"name", "arguments", "text"})
    if unknown:
        raise ValueError(f"not a tool call: unexpected keys {unknown}")
    model = _validated(value["name"], value.get("arguments", {}))
    dumped = model.model_dump()
    return Action(name=value["name"], arguments=dumped, text=canonical_text(value["name"], dumped))


def validated_arguments(action: Action) -> _Tool:
    """Return the action's arguments as its tool's model; ValueError if the call is not valid."""
    return _validated(action.name, action.arguments)


def check_tool_call(action: Action) -> str | None:
    """Return why ``action`` is not a valid tool call, or None when it is one."""
    try:
        validated_arguments(action)
    except ValueError as error:
        return str(error)
    return None


__all__ = [
    "MAX_TIMEOUT_S",
    "TOOLS",
    "ListDir",
    "ReadFile",
    "RunShellCommand",
    "RunTests",
    "Search",
    "StrReplace",
    "WriteFile",
    "canonical_text",
    "check_tool_call",
    "parse_tool_call",
    "tool_call",
    "validated_arguments",
]
