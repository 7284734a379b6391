"""Export transitions to the AgentWorldBench JSONL layout, one row per training target.

Each domain becomes ``<out_dir>/<domain>_train.jsonl``, field for field and type for type as
AgentWorldBench's own ``<domain>_test.jsonl``: ``id`` is an integer (the row's position in the
file), ``task`` is the domain key (``terminal``, ``web`` …) by which the reference evaluator
picks its judge prompt and output parser, ``prompt`` and ``response`` are lists of strings,
``turn_idx`` and ``total_turns`` integers. Three keys of ours are added: ``transition_id``
(the row's transition), ``instruction`` (what the agent was doing: the task, or for a
task-less episode "Explore the <env> environment …", the same text as the first prompt's
``**Task:**`` line; see :func:`~worldtrace.exports.prompts.instruction_for`) and
``trimmed_turns`` (how many of the episode's earlier turns the row leaves out).

A row is written for every transition that is a training target (``curation.target``; all
rows of a shard written before curation marked targets). A row is a training example for the
turn of its transition: ``prompt`` lists the action prompts of the turns shown, ending with
this one, ``response`` the observations those actions led to, and the last response is the
target. The AgentWorldBench evaluator builds the chat from ``system_str``, then
``prompt[i]``/``response[i]`` for ``i < turn_idx - 1``, then ``current_prompt``; here
``turn_idx == total_turns`` always, so the target is ``response[turn_idx - 1]``.

Which turns are shown and how (see :mod:`worldtrace.exports.turns`): the history is trimmed,
oldest turns first, to at most ``history`` turns and ``history_tokens`` tokens (default
:data:`~worldtrace.exports.tokens.DEFAULT_HISTORY_TOKENS`, counted by the estimate of
:mod:`worldtrace.exports.tokens` or a local ``tokenizer.json``); the target turn is always
whole. Turns keep their episode numbering (``### Turn k``); the first turn shown carries the
instruction and the state it starts from, a later one its state only where the recorded chain
breaks, so the conversation a row makes shows no state twice (``current_prompt`` is
``prompt[turn_idx - 1]`` again, as in AgentWorldBench's own rows; the evaluator reads one of
the two). A response starts with ``**Error:** …``
exactly when the transition's ``action_error`` is set, as ``system_str`` says.

Tool-calling episodes (observations in the ``tool-result`` format: swe, mcp; or a first
observation that lists the tools: mcp, search) take AgentWorldBench's MCP shape: the action of
each turn is the JSON tool call in a fenced ```` ```json ```` block, and when the episode
lists its tools (an MCP server's ``tools/list``, kept in the first observation's meta)
``system_str`` holds their definitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from worldtrace.exports.prompts import system_prompt
from worldtrace.exports.source import Exporter, ExportOptions, Step
from worldtrace.exports.turns import windows


def agentworld_rows(
    domain: str, episodes: Iterator[list[Step]], options: ExportOptions | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the AgentWorldBench rows of ``episodes``, one per training target."""
    options = options or ExportOptions()
    row_id = 0
    for episode in episodes:
        system_str = system_prompt(domain, episode[0].tools)
        for window in windows(episode, options):
            yield {
                "id": row_id,
                "task": domain,
                "transition_id": window.target.id,
                "instruction": window.target.instruction,
                "prompt": window.prompts,
                "response": window.responses,
                "current_prompt": window.prompts[-1],
                "system_str": system_str,
                "turn_idx": len(window.prompts),
                "total_turns": len(window.prompts),
                "trimmed_turns": window.trimmed_turns,
            }
            row_id += 1


export_agentworld = Exporter(agentworld_rows, "{domain}_train.jsonl")
"""Writes ``<out_dir>/{domain}_train.jsonl`` for each domain of a source (an ``Exporter``)."""
