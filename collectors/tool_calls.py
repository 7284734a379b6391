"""Tool calls as actions: one call ``{name, arguments}`` (the mcp and search domains).

An action is ``Action(name=<tool>, arguments={...}, text=<canonical JSON>)``. The canonical
text is ``{"name": ..., "arguments": ...}`` as JSON with the argument keys sorted (at every
depth), non-ASCII kept, so one call has one text however it was written.

Arguments are checked against the tool's input schema (JSON Schema, as an MCP server's
``tools/list`` gives it) by :func:`schema_problems`, but a call is sent whatever the check
says: what a server answers to an unknown tool or a bad argument is data a tool world model
must learn. The problems go into the step's raw record beside the server's answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema
import jsonschema.exceptions

from worldtrace.schemas import Action
from worldtrace.schemas.errors import InputError


def canonical_text(name: str, arguments: Mapping[str, Any]) -> str:
    """The canonical JSON text of a tool call."""
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, sort_keys=True)


def tool_call(name: object, arguments: Mapping[str, Any] | None = None) -> Action:
    """Build the action calling tool ``name`` with ``arguments`` (any JSON object).

    ``name`` is checked here (a non-empty string), so a parsed call passes whatever it holds.
    """
    if not isinstance(name, str) or not name:
        raise InputError(f"a tool call needs a tool name (a non-empty string), not {name!r}")
    arguments = dict(arguments or {})
    try:
        text = canonical_text(name, arguments)
    except (TypeError, ValueError) as error:
        raise InputError(f"the arguments of {name!r} are not JSON: {error}") from None
    # Round-trip so the stored arguments are exactly what the text says (tuples become lists).
    return Action(name=name, arguments=json.loads(text)["arguments"], text=text)


def parse_tool_call(call: str | Mapping[str, Any]) -> Action:
    """Read a tool call from its JSON text or a ``{name, arguments}`` object.

    A ``{name, arguments, text}`` object (a recorded action) is read from its name and
    arguments; its text is made again.
    """
    if isinstance(call, str):
        try:
            value = json.loads(call)
        except ValueError as error:
            raise InputError(f"a tool call must be a JSON object: {error}") from None
    else:
        value = call
    if not isinstance(value, Mapping):
        raise InputError(f"a tool call must be a JSON object, not {type(value).__name__}")
    unknown = set(value) - {"name", "arguments", "text"}
    if unknown:
        raise InputError(
            f"a tool call has only 'name' and 'arguments', not {', '.join(sorted(unknown))}"
        )
    arguments = value.get("arguments", {})
    if not isinstance(arguments, Mapping):
        raise InputError(f"the arguments of a tool call must be an object, not {arguments!r}")
    return tool_call(value.get("name"), arguments)


def schema_problems(action: Action, tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """What is wrong with ``action`` against the server's tool list (empty when nothing).

    ``tools`` are the tool definitions as ``tools/list`` gave them (``name``,
    ``inputSchema`` …). An unknown tool is one problem; otherwise each schema violation is
    one, located by its JSON path (``$.path: 3 is not of type 'string'``).
    """
    tool = next((t for t in tools if t.get("name") == action.name), None)
    if tool is None:
        names = ", ".join(sorted(str(t.get("name")) for t in tools))
        return [f"unknown tool {action.name!r} (the server has: {names})"]
    schema = tool.get("inputSchema") or {"type": "object"}
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator = validator_class(schema)
        errors = sorted(validator.iter_errors(action.arguments), key=lambda e: list(e.path))
    except jsonschema.exceptions.SchemaError as error:
        return [f"the server's input schema of {action.name!r} is invalid: {error.message}"]
    return [f"{error.json_path}: {error.message}" for error in errors]


__all__ = ["canonical_text", "parse_tool_call", "schema_problems", "tool_call"]
