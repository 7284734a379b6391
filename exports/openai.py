"""Export transitions as OpenAI chat SFT lines, one conversation per transition.

Each domain becomes ``<out_dir>/<domain>.jsonl`` holding ``{"messages": [...]}`` lines: the
domain's world-model system prompt, then one user/assistant pair per turn shown. The user turn
holds the current state and the action (the first one also the task), the assistant turn the
next state rendered as :func:`worldtrace.exports.prompts.render_response` does (an ``**Error:**``
line when
the environment rejected the action, then the observation verbatim). The last pair is the
transition the line is for; with ``history`` only that many earlier turns precede it
(``None``: the whole episode so far).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worldtrace.exports.prompts import render_response, render_user_turn, system_prompt
from worldtrace.exports.source import Step, export_domains, window_start


def openai_rows(
    domain: str, episodes: Iterator[list[Step]], history: int | None = None
) -> Iterator[dict[str, Any]]:
    """Yield the chat SFT lines of ``episodes``, one per transition."""
    system = {"role": "system", "content": system_prompt(domain)}
    for episode in episodes:
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


def export_openai(source: Path, out_dir: Path, history: int | None = None) -> dict[str, int]:
    """Write ``<out_dir>/<domain>.jsonl`` chat SFT lines for each domain in ``source``.

    ``source`` holds ``data/<domain>/*.parquet`` or ``transitions/<domain>/*.parquet``.
    Returns the number of lines written per domain.
    """
    return export_domains(source, out_dir, openai_rows, "{domain}.jsonl", history)
