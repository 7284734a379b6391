"""The container engine sandboxes run on: which one, and telling when it stops answering.

:func:`docker_client` connects to the engine in effect: a sandbox host's
(:mod:`worldtrace.sandboxes.remote`) or this machine's. Every module that talks to an engine
gets its client here, so the choice is made in one place.

A Docker daemon restarting (or a remote engine's connection dropping) makes every call of a
running episode fail, with errors that say nothing about the episode: ``ConnectionError``
from the HTTP client, ``FileNotFoundError`` for a socket that is gone. Such an episode did
nothing wrong: it is set aside and collected again once the engine answers
(:mod:`worldtrace.flows.collect`), never sealed as failed. :func:`engine_lost` tells the
two apart by asking the engine itself, :func:`wait_for_engine` waits for it with backoff,
and :func:`worldtrace.sandboxes.docker.remove_left_behind` removes the sandboxes that could
not be removed while it was away.
"""

from __future__ import annotations

import time

import docker
import docker.errors
import requests

from worldtrace.sandboxes import remote
from worldtrace.sandboxes.errors import SandboxError


def docker_client(host: str | None = None) -> docker.DockerClient:
    """Connect to the engine sandboxes run on, or raise a :class:`SandboxError` saying why.

    That engine is ``host``'s (a sandbox host URL: ``ssh://user@host``, ``tcp://host:port``,
    see :mod:`worldtrace.sandboxes.remote`), else the one in effect for this run or worker
    (:func:`~worldtrace.sandboxes.remote.current_host`), else this machine's.
    """
    host = host or remote.current_host()
    if host:
        return remote.client_for(host)
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as error:
        raise SandboxError(
            f"cannot reach the Docker engine ({error}); run `make setup` or start it with "
            "`dockerd --bridge=none --iptables=false --ip-forward=false &`"
        ) from None
    return client


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
