"""Export transitions as OpenAI chat SFT lines, one conversation per training target.

Each domain becomes ``<out_dir>/<domain>.jsonl``. The environment is the speaker, in every
domain: the user turns hold the state and the agent's action, the assistant turns the next
observation, so a standard chat SFT trainer learns the environment, not the agent. A line
is (texts abbreviated, ``⏎`` standing for a newline)::

    {"messages": [
        {"role": "system", "content": "<the domain's world-model prompt>"},
        {"role": "user",
         "content": "### Turn 1⏎**Task:** …⏎**Initial Observation:**⏎<state>⏎**Action:**⏎<action>"},
        {"role": "assistant", "content": "**Environment Observation:**⏎<state>", "weight": 0},
        …
        {"role": "user", "content": "### Turn k⏎**Action:**⏎<action>"},
        {"role": "assistant", "content": "**Environment Observation:**⏎<state>", "weight": 1}],
     "transition_id": "<episode>:<step>", "instruction": "…", "trimmed_turns": 0}

The user and assistant texts are exactly an ``agentworld`` row's ``prompt`` and ``response``
lists (:mod:`worldtrace.exports.turns`): the first user turn shown carries the instruction
and the state it starts from, a later one only its action (and its state where the recorded
chain breaks), since its state is the assistant message just before it; no state is written
twice. The last assistant message is the transition's target (``weight: 1``); the earlier
ones are history (``weight: 0``, which OpenAI's fine-tuning format reads as "do not train on
this message"; other trainers should take the last assistant message as the target). An
assistant message starts with ``**Error:** …`` exactly when the transition's
``action_error`` is set, as the system prompt says.

A line is written for every transition that is a training target (``curation.target``);
rows that are not targets appear only as history. The history is trimmed, oldest turns
first, to at most ``history`` turns and ``history_tokens`` tokens (default
:data:`~worldtrace.exports.tokens.DEFAULT_HISTORY_TOKENS`); ``trimmed_turns`` says how many of
the episode's earlier turns were left out, and the turn numbers count from the episode's start.

Tool-calling episodes (swe, mcp, search) are no exception: the agent's tool call is the user
turn's action, as a fenced ```` ```json ```` block, and the tool's result is the assistant's
message. There are no ``tool_calls``, no ``role: tool`` messages and no ``tools`` key; the
tool definitions an episode lists (an MCP server's ``tools/list``) are in the system prompt,
which conditions the world model on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from worldtrace.exports.prompts import system_prompt
from worldtrace.exports.source import Exporter, ExportOptions, Step
from worldtrace.exports.turns import windows


def openai_rows(
    domain: str, episodes: Iterator[list[Step]], options: ExportOptions | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the chat SFT lines of ``episodes``, one per training target."""
    options = options or ExportOptions()
    for episode in episodes:
        system = {"role": "system", "content": system_prompt(domain, episode[0].tools)}
        for window in windows(episode, options):
            messages: list[dict[str, Any]] = [system]
            last = len(window.prompts) - 1
            for i, (user, assistant) in enumerate(
                zip(window.prompts, window.responses, strict=True)
            ):
                messages.append({"role": "user", "content": user})
                messages.append(
                    {"role": "assistant", "content": assistant, "weight": int(i == last)}
                )
            yield {
                "messages": messages,
                "transition_id": window.target.id,
                "instruction": window.target.instruction,
                "trimmed_turns": window.trimmed_turns,
            }


export_openai = Exporter(openai_rows, "{domain}.jsonl")
"""Writes ``<out_dir>/{domain}.jsonl`` for each domain of a source (an ``Exporter``)."""
