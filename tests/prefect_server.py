"""A real Prefect server for tests, started once and shared by the tests that need one.

Every ``worldtrace collect`` run without a server starts Prefect's temporary local API in a
subprocess of its own (a uvicorn process that imports the whole Prefect server): measured here,
a one-episode collection spends 16 s of CPU on it and 5 s against a running server. Tests whose
subject is not that temporary API point their commands at this server instead
(:func:`client_env`); the conftest starts it in the background as soon as the collected tests
show that one needs it (the ``prefect_server`` fixture waits for it) and stops it after the last
one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

START_TIMEOUT_S = 120
"""About 18 s to healthy on an idle machine (a first start creates the database); minutes at
load averages above 10."""


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """A real Prefect server (SQLite in ``home``) whose scheduler runs every second.

    Started at construction and not waited for, so that its start overlaps other work;
    :meth:`url` waits until it answers. The settings are the deployment tests'
    (tests/flows/test_deploy.py): a scheduler pass every second, and a sandbox slot asked for
    again after at most 1 s (30 s by default, a wait that would dominate a test's few short
    episodes).
    """

    def __init__(self, home: Path) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self._log_path = home / "server.log"
        self._log = self._log_path.open("wb")
        port = free_port()
        self._api = f"http://127.0.0.1:{port}/api"
        self._healthy = False
        env = os.environ | {
            "PREFECT_HOME": str(home),
            "PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_SERVER_CONCURRENCY_MAXIMUM_CONCURRENCY_SLOT_WAIT_SECONDS": "1",
        }
        env.pop("PREFECT_API_URL", None)
        command = [sys.executable, "-m", "prefect", "server", "start", "--host=127.0.0.1"]
        self._process = subprocess.Popen(
            [*command, f"--port={port}"],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._started = time.monotonic()

    def url(self) -> str:
        """The API URL, once the server answers its health check (RuntimeError if it never)."""
        deadline = self._started + START_TIMEOUT_S
        while not self._healthy:
            with (
                suppress(OSError),
                urllib.request.urlopen(f"{self._api}/health", timeout=2) as answer,
            ):
                self._healthy = answer.status == 200
            if self._healthy:
                break
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    "the Prefect server did not come up:\n" + self._log_path.read_text()
                )
            time.sleep(0.2)
        return self._api

    def kill(self) -> None:
        """SIGKILL the server and everything it started, as a crash of its machine would."""
        with suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()

    def stop(self) -> None:
        """Stop the server and everything it started (safe to call more than once)."""
        if self._process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()
        self._log.close()


@contextmanager
def running_server(home: Path) -> Iterator[str]:
    """A :class:`ServerProcess` for the length of the block; its API URL once it answers."""
    server = ServerProcess(home)
    try:
        yield server.url()
    finally:
        server.stop()


def client_env(url: str) -> dict[str, str]:
    """This process's environment with ``worldtrace`` commands pointed at the server ``url``."""
    return os.environ | {"PREFECT_API_URL": url}


WORKER_START_TIMEOUT_S = 180
"""Seconds a ``worldtrace worker`` may take to poll its pool: seconds on an idle machine. In a
full run (load average about 4) one of two workers started together had not polled after 60 s
(the deadline then) while the other already ran a flow: its log held only its first line, and
what it does before polling is a few calls to the shared SQLite server, then busy with the
other worker's run and the other tests. A wait for readiness, not a measure of speed."""


def wait_until_polling(
    process: subprocess.Popen[bytes], log: Path, deadline: float | None = None
) -> None:
    """Wait until the ``worldtrace worker`` ``process`` logging to ``log`` polls its pool
    (Prefect's "started!" line), failing the test if it exits or ``deadline`` passes first
    (default: :data:`WORKER_START_TIMEOUT_S` from now)."""
    if deadline is None:
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
    while b"started!" not in log.read_bytes():  # it polls from now on
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"the worker did not start:\n{log.read_text()}"
        time.sleep(0.1)
