"""Export transitions to the AgentWorldBench JSONL layout, one row per turn.

Each domain becomes ``<out_dir>/<domain>_train.jsonl``, field for field and type for type as
AgentWorldBench's own ``<domain>_test.jsonl``: ``id`` is an integer (the row's position in the
file), ``task`` is the domain key (``terminal``, ``web`` …) by which the reference evaluator
picks its judge prompt and output parser, ``prompt`` and ``response`` are lists of strings,
``turn_idx`` and ``total_turns`` integers. Two keys of ours are added: ``transition_id`` (the
row's transition) and ``instruction`` (the task the policy pursued, or null).

Tool-calling episodes (observations in the ``tool-result`` format: swe, mcp; or a first
observation that lists the tools: mcp, search) take
AgentWorldBench's MCP shape: the action of each turn is the JSON tool call in a fenced
```` ```json ```` block, and when the episode lists its tools (an MCP server's ``tools/list``,
kept in the first observation's meta) ``system_str`` holds their definitions.

A row is a training example for the turn of its transition: ``prompt`` lists the action
prompts of the episode's turns up to and including this one, ``response`` the observations
those actions led to, and the last response is the target. The AgentWorldBench evaluator
builds the chat from ``system_str``, then ``prompt[i]``/``response[i]`` for
``i < turn_idx - 1``, then ``current_prompt``; here ``turn_idx == total_turns`` always, so
the target is ``response[turn_idx - 1]``.

With ``history`` the lists keep only the last ``history`` turns before this one; the turns keep
their episode numbering (``### Turn k``), and the first turn shown carries the task and the
state it started from, so the window is self-contained. The state is likewise repeated
whenever the recorded chain breaks (a missing step, or an observation that differs from the
previous next observation).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.exports.prompts import render_action_prompt, render_response, system_prompt
from worldtrace.exports.source import Step, continues, export_domains, window_start


def _turn_prompt(episode: list[Step], index: int, first_shown: int) -> str:
    step = episode[index]
    previous = episode[index - 1] if index > 0 else None
    show_state = index == first_shown or not continues(previous, step)
    action = f"```json\n{step.action}\n```" if step.is_tool_call else step.action
    return render_action_prompt(
        index + 1,
        action,
        task=step.task if index == first_shown or index == 0 else None,
        observation=step.observation if show_state else None,
        initial=index == 0,
    )


def agentworld_rows(
    domain: str, episodes: Iterator[list[Step]], history: int | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the AgentWorldBench rows of ``episodes``, one per transition."""
    row_id = 0
    for episode in episodes:
        system_str = system_prompt(domain, episode[0].tools)
        responses = [render_response(s.next_observation, s.action_error) for s in episode]
        for index, step in enumerate(episode):
            start = window_start(index, history)
            prompts = [_turn_prompt(episode, i, start) for i in range(start, index + 1)]
            yield {
                "id": row_id,
                "task": domain,
                "transition_id": step.id,
                "instruction": step.task,
                "prompt": prompts,
                "response": responses[start : index + 1],
                "current_prompt": prompts[-1],
                "system_str": system_str,
                "turn_idx": len(prompts),
                "total_turns": len(prompts),
            }
            row_id += 1


def export_agentworld(source: Path, out_dir: Path, history: int | None = None) -> dict[str, int]:
    """Write ``<out_dir>/<domain>_train.jsonl`` for each domain in ``source``.

    ``source`` holds ``data/<domain>/*.parquet`` or ``transitions/<domain>/*.parquet``;
    ``history`` limits each row to that many past turns (``None``: the whole episode so far).
    Returns the number of rows written per domain.
    """
    return export_domains(source, out_dir, agentworld_rows, "{domain}_train.jsonl", history)
