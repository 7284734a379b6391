"""Progress events from running episodes to whoever displays them (the CLI's progress bar).

Episodes run as Prefect tasks in threads of the flow's process; they report here and any
subscribed listener is called. With no listener, reporting costs nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from worldtrace.collectors.episode import EpisodeResult


class ProgressListener(Protocol):
    """Receives progress events; called from worker threads."""

    def on_step(self, episode_id: str, step: int, error: str | None) -> None:
        """A step was recorded."""

    def on_episode(self, result: EpisodeResult) -> None:
        """An episode was sealed."""


_listeners: list[ProgressListener] = []
_lock = threading.Lock()


@contextmanager
def listening(listener: ProgressListener) -> Iterator[None]:
    """Subscribe ``listener`` for the duration of the block."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


def step_done(episode_id: str, step: int, error: str | None) -> None:
    """Report a recorded step."""
    for listener in list(_listeners):
        listener.on_step(episode_id, step, error)


def episode_done(result: EpisodeResult) -> None:
    """Report a sealed episode."""
    for listener in list(_listeners):
        listener.on_episode(result)
