"""Export transitions as OpenAI chat SFT lines, one conversation per transition.

Each domain becomes ``<out_dir>/<domain>.jsonl`` holding ``{"messages": [...]}`` lines: the
domain's world-model system prompt, then one user/assistant pair per turn shown. The user turn
holds the current state and the action (the first one also the task), the assistant turn the
next state rendered as :func:`worldtrace.exports.prompts.render_response` does (an ``**Error:**``
line when
the environment rejected the action, then the observation verbatim). The last pair is the
transition the line is for; with ``history`` only that many earlier turns precede it
(``None``: the whole episode so far).

Episodes of tool-calling domains (their observations are ``tool-result``s: swe, mcp; or
their first observation lists the tools: mcp, search) are written the way chat APIs carry
tool use: the user turn holds the task and the state before the first turn shown, each
action is an assistant message with one entry in ``tool_calls``
(``{"id", "type": "function", "function": {"name", "arguments"}}``, arguments as JSON text),
and each next state is a ``role: tool`` message answering that call's id, with the same
``render_response`` text. The last ``tool`` message is the transition's target. When the
episode lists its tools (an MCP server's ``tools/list``, kept in the first observation's
meta), the line also has ``tools`` in the chat API's form (``{"type": "function", "function":
{"name", "description", "parameters"}}``, the parameters being the tool's input schema) and
the system prompt holds their definitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.exports.prompts import (
    render_response,
    render_state,
    render_user_turn,
    system_prompt,
)
from worldtrace.exports.source import Step, export_domains, window_start


def openai_rows(
    domain: str, episodes: Iterator[list[Step]], history: int | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the chat SFT lines of ``episodes``, one per transition."""
    system = {"role": "system", "content": system_prompt(domain)}
    for episode in episodes:
        if episode[0].is_tool_call:
            yield from _tool_call_rows(domain, episode, history)
            continue
        pairs = [
            (
                render_user_turn(None, step.observation, step.action),
                render_response(step.next_observation, step.action_error),
            )
            for step in episode
        ]
        for index in range(len(episode)):
            start = window_start(index, history)
            messages: list[dict[str, str]] = [system]
            for i in range(start, index + 1):
                user, assistant = pairs[i]
                if i == start:
                    step = episode[i]
                    user = render_user_turn(step.task, step.observation, step.action)
                messages.append({"role": "user", "content": user})
                messages.append({"role": "assistant", "content": assistant})
            yield {"messages": messages}


def _tool_call_rows(
    domain: str, episode: list[Step], history: int | None
) -> Iterator[dict[str, Any]]:
    """The lines of a tool-calling episode: assistant ``tool_calls``, ``role: tool`` results."""
    tools = episode[0].tools
    system = {"role": "system", "content": system_prompt(domain, tools)}
    functions = [_function(tool) for tool in tools]
    calls = [_call_messages(step) for step in episode]
    for index in range(len(episode)):
        start = window_start(index, history)
        first = episode[start]
        state = render_state(first.observation, task=first.task, initial=first.step == 0)
        messages: list[dict[str, Any]] = [system, {"role": "user", "content": state}]
        for i in range(start, index + 1):
            messages.extend(calls[i])
        yield {"messages": messages, "tools": functions} if functions else {"messages": messages}


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    """An MCP tool definition in the chat API's ``tools`` form."""
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool.get("description") or "",
            "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}},
        },
    }


def _call_messages(step: Step) -> list[dict[str, Any]]:
    """One step as an assistant tool call and the tool's answer to it."""
    call_id = f"call_{step.step}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": step.action_name, "arguments": step.action_arguments},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": render_response(step.next_observation, step.action_error),
        },
    ]


def export_openai(source: Path, out_dir: Path, history: int | None = None) -> dict[str, int]:
    """Write ``<out_dir>/<domain>.jsonl`` chat SFT lines for each domain in ``source``.

    ``source`` holds ``data/<domain>/*.parquet`` or ``transitions/<domain>/*.parquet``.
    Returns the number of lines written per domain.
    """
    return export_domains(source, out_dir, openai_rows, "{domain}.jsonl", history)
