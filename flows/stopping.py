"""Stopping a collection on SIGTERM or Ctrl-C within seconds, leaving it resumable.

While episodes are being collected (:func:`collecting`), the first signal asks every episode to
stop (:func:`worldtrace.collectors.episode.request_stop`), removes this process's sandboxes and
lets every
domain interrupt what is not a sandbox (a browser on the host), so that blocked steps return at
once; the interrupted episodes are set aside, not sealed, and the same command resumes the run.
A second signal leaves at once. Outside a collection (curating, publishing) signals keep their
usual meaning: those stages resume on their own.

The handlers are installed inside the flow, around the episodes, because Prefect's flow engine
replaces the SIGTERM handler for the duration of a flow run (it would crash the flow run and
leave the episode threads running).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from worldtrace.collectors.episode import clear_stop, request_stop, stop_requested
from worldtrace.collectors.registry import available_domains, get_collector
from worldtrace.sandboxes.docker import close_all

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_received: list[int] = []


def tear_down() -> None:
    """Free blocked steps: remove this process's sandboxes, interrupt every domain."""
    # Each part goes on whatever an earlier one raised: the point is to free blocked steps.
    with contextlib.suppress(Exception):
        close_all()
    for domain in available_domains():
        with contextlib.suppress(Exception):
            get_collector(domain).interrupt()


def _handle(signum: int, frame: FrameType | None) -> None:
    if stop_requested():
        tear_down()
        os._exit(128 + signum)
    _received.append(signum)
    request_stop()
    # Docker calls from a signal handler would run inside whatever the main thread was doing.
    threading.Thread(target=tear_down, name="worldtrace-stop", daemon=True).start()


@contextlib.contextmanager
def collecting() -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT stop the episodes instead of raising.

    Only the main thread can install signal handlers; elsewhere the block changes nothing.
    The previous handlers come back at the end.
    """
    clear_stop()
    _received.clear()
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        previous = {sig: signal.signal(sig, _handle) for sig in _STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def stopped_by() -> int | None:
    """The signal that stopped the last collection of this process, or None."""
    return _received[0] if _received else None
