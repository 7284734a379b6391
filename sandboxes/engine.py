"""When the container engine stops answering: tell it from a failed episode, wait, clean up.

A Docker daemon restarting (or a remote engine's connection dropping) makes every call of a
running episode fail, with errors that say nothing about the episode: ``ConnectionError``
from the HTTP client, ``FileNotFoundError`` for a socket that is gone. Such an episode did
nothing wrong: it is set aside and collected again once the engine answers
(:mod:`worldtrace.flows.collect`), never sealed as failed. :func:`engine_lost` tells the
two apart by asking the engine itself, :func:`wait_for_engine` waits for it with backoff,
and :func:`remove_left_behind` removes the sandboxes that could not be removed while it was
away.
"""

from __future__ import annotations

import contextlib
import os
import time

import docker
import docker.errors
import requests

from worldtrace.sandboxes.docker import (
    LABEL,
    OWNER_PID_LABEL,
    SandboxError,
    containers_in_use,
    docker_client,
    live_sandboxes,
)


class EngineLost(SandboxError):
    """The engine stopped answering during an episode: the episode is set aside, not failed."""


def engine_answers(host: str | None = None) -> bool:
    """Whether the engine the sandboxes run on (``host``'s, else the current one) answers."""
    try:
        # docker_client pings a local engine itself; a remote host's client is shared, so its
        # timeout is left as it is.
        return bool(docker_client(host).ping())
    except (SandboxError, docker.errors.DockerException, requests.RequestException, OSError):
        return False


def _engine_kind(error: BaseException) -> bool:
    """Whether ``error`` or an error it came from is the kind an engine that went away raises."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(
            current,
            SandboxError
            | docker.errors.DockerException
            | requests.ConnectionError
            | ConnectionError
            | FileNotFoundError,
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def engine_lost(error: BaseException, host: str | None = None) -> bool:
    """Whether ``error`` came from the engine going away (it no longer answers).

    Only errors of the kind a vanished engine raises are checked against the engine, so an
    environment without containers never pays for a health check.
    """
    return _engine_kind(error) and not engine_answers(host)


def wait_for_engine(host: str | None, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for the engine to answer again (1, 2, 4 … 15 s apart)."""
    deadline = time.monotonic() + timeout_s
    pause = 1.0
    while True:
        if engine_answers(host):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, 15.0)


def remove_left_behind(labels: dict[str, str], host: str | None = None) -> list[str]:
    """Remove this process's sandboxes carrying ``labels`` that no episode uses any more.

    They are the ones whose removal failed while the engine was away. Returns their ids.
    """
    client = docker_client(host)
    wanted = [LABEL, f"{OWNER_PID_LABEL}={os.getpid()}", *(f"{k}={v}" for k, v in labels.items())]
    in_use = containers_in_use()
    removed = []
    for container in live_sandboxes(client, wanted):
        if container.id not in in_use:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
            removed.append(container.id)
    return removed
