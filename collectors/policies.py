"""Policies shared by every domain: play a task's script, or replay given actions."""

from __future__ import annotations

from collections.abc import Sequence

from worldtrace.collectors.base import HistoryItem, Policy, RawObservation, Task
from worldtrace.schemas import Action


class ScriptPolicy(Policy):
    """Plays the ``steps`` of a scripted task in order, whatever the environment shows."""

    kind = "script"
    name = "task-script"

    def __init__(self) -> None:
        self._steps: tuple[Action, ...] = ()

    def reset(self, seed: int, task: Task | None) -> None:
        """Load the task's steps; a task without steps is an error."""
        steps = getattr(task, "steps", None)
        if not steps:
            raise ValueError(f"the script policy needs a task with steps, got {task!r}")
        self._steps = tuple(steps)

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the step after the ones already taken, or None at the end of the script."""
        return self._steps[len(history)] if len(history) < len(self._steps) else None


class ReplayPolicy(Policy):
    """Re-executes a given list of actions to record the ground-truth next states."""

    kind = "replay"
    name = "replay"

    def __init__(self, actions: Sequence[Action]) -> None:
        self._actions = tuple(actions)

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next recorded action, or None when all were replayed."""
        return self._actions[len(history)] if len(history) < len(self._actions) else None
