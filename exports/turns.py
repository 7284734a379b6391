"""The turns one export row shows: its history, trimmed to a budget, and its target turn.

Both formats are built from the same windows, so an ``agentworld`` row and an ``openai`` line
of the same transition hold the same texts.

- **Targets.** Only steps whose row is a training target (``curation.target``) get a window.
  Every step of the episode, target or not, can be a history turn of a later window: a
  duplicate step 0 still gives the initial state.
- **A turn** is a prompt and a response. The prompt is ``### Turn k`` (the episode's step
  count, 1-based) and the action (a tool call as a fenced ```` ```json ```` block); the
  response is :func:`~worldtrace.exports.prompts.render_response` of the next observation.
- **States are given once.** The first turn shown carries the instruction and the state it
  starts from. A later turn carries its state only where the recorded chain breaks (a missing
  step, or an observation that differs from the previous next observation,
  :func:`~worldtrace.exports.source.continues`); otherwise its state is the previous turn's
  response, which is not repeated.
- **The target turn is kept whole**: its action and response, and its state when it is the
  first turn shown or follows a break.
- **History is trimmed oldest first** to at most ``history`` turns and at most
  ``history_tokens`` tokens (:mod:`worldtrace.exports.tokens`; default
  :data:`~worldtrace.exports.tokens.DEFAULT_HISTORY_TOKENS`). The tokens counted are those of
  the history turns' prompts and responses as shown (the first one with its instruction and
  state); the system prompt and the target turn are not counted. ``trimmed_turns`` is the
  number of the episode's earlier turns left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate

from worldtrace.exports.prompts import render_action_prompt, render_response
from worldtrace.exports.source import ExportOptions, Step, continues


@dataclass(frozen=True, slots=True)
class Window:
    """The turns of one export row, oldest first; the last one is the target."""

    target: Step
    prompts: list[str]
    responses: list[str]
    trimmed_turns: int
    """How many of the episode's turns before the first one shown were left out."""


def action_text(step: Step) -> str:
    """The action as a turn shows it: a tool call as a fenced JSON block, else its text."""
    return f"```json\n{step.action}\n```" if step.is_tool_call else step.action


def turn_prompt(episode: list[Step], index: int, *, first_shown: bool) -> str:
    """The prompt of the turn at ``index``, as the first turn shown or as a later one."""
    step = episode[index]
    previous = episode[index - 1] if index > 0 else None
    show_state = first_shown or not continues(previous, step)
    return render_action_prompt(
        step.step + 1,
        action_text(step),
        task=step.instruction if first_shown else None,
        observation=step.observation if show_state else None,
        initial=step.step == 0,
    )


def windows(episode: list[Step], options: ExportOptions) -> Iterator[Window]:
    """Yield the window of every training target of ``episode``, in step order."""
    responses = [render_response(s.next_observation, s.action_error) for s in episode]
    later = [turn_prompt(episode, i, first_shown=False) for i in range(len(episode))]
    heads: dict[int, str] = {}

    def head(index: int) -> str:
        if index not in heads:
            heads[index] = turn_prompt(episode, index, first_shown=True)
        return heads[index]

    budget = options.history_tokens
    count = options.count_tokens
    head_costs: dict[int, int] = {}
    # The tokens of turns a .. b-1 shown as later turns: later_sums[b] - later_sums[a].
    later_sums: list[int] = []
    if budget is not None and any(step.target for step in episode):
        later_costs = [count(p) + count(r) for p, r in zip(later, responses, strict=True)]
        later_sums = [0, *accumulate(later_costs)]

    def fits(start: int, index: int) -> bool:
        """Whether turns ``start .. index - 1`` fit the token budget as history."""
        if budget is None or start == index:
            return True
        if start not in head_costs:
            head_costs[start] = count(head(start)) + count(responses[start])
        return head_costs[start] + later_sums[index] - later_sums[start + 1] <= budget

    for index, step in enumerate(episode):
        if not step.target:
            continue
        lowest = 0 if options.history is None else max(0, index - options.history)
        start = next(s for s in range(lowest, index + 1) if fits(s, index))
        yield Window(
            target=step,
            prompts=[head(start), *later[start + 1 : index + 1]],
            responses=responses[start : index + 1],
            trimmed_turns=start,
        )
