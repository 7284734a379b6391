"""``worldtrace`` commands run in the test's process, as a process of their own would run them.

A ``worldtrace`` process spends seconds of CPU importing Prefect, datasets and the models
before it does anything (about 4-6 s); the test process has them already. For the tests whose
subject is what a command does, not its process (what a process prints through handlers made
before the command ran, such as Prefect's console, is not captured: such tests start one).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from click.testing import Result

COMMAND_LOGGERS = ("", "prefect", "datasets", "huggingface_hub", "httpx", "urllib3")
"""The loggers a command gives its log file (worldtrace/flows/logs.py), the root first."""


def worldtrace_here(
    prefect_server: str, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> Result:
    """``worldtrace ARGS`` in this process through typer's runner, against ``prefect_server``.

    Run in ``cwd`` with ``env`` added to the environment. Prefect reads its settings once, at
    import, so they are overridden too. Afterwards the environment, the folder and the loggers
    the command set up for itself are as they were, and the logs and events Prefect queued are
    sent (at this process's exit the server may be gone, and Prefect's client would try it
    again for a minute). An exception the command's error boundary does not turn into a
    message is raised with its traceback, as a crashed process would print it.
    """
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from typer.testing import CliRunner

    from worldtrace.flows.cli import app

    with (
        _loggers_restored(),
        mock.patch.dict(os.environ),
        contextlib.chdir(cwd or Path.cwd()),
        temporary_settings({PREFECT_API_URL: prefect_server}),
    ):
        try:
            return CliRunner().invoke(
                app,
                list(args),
                env={"PREFECT_API_URL": prefect_server, **(env or {})},
                catch_exceptions=False,
            )
        finally:
            send_prefect_queues()


def send_prefect_queues() -> None:
    """Send the logs and events this process's flows queued for the Prefect server, now, while
    it answers: at this process's exit Prefect's client would try a gone server for a minute.

    From a thread of its own: in a thread whose asyncio loop is marked running (one that drove
    Playwright's sync API, as the web tests do) ``drain_all`` returns a coroutine instead of
    waiting.
    """
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    def drain() -> None:
        APILogWorker.drain_all()
        EventsWorker.drain_all()

    sender = threading.Thread(target=drain, name="send-prefect-queues")
    sender.start()
    sender.join()


@contextlib.contextmanager
def _loggers_restored() -> Iterator[None]:
    """The command's loggers as they were before the block (their handlers closed if new): the
    tests that follow in this process keep pytest's log capture and their own levels."""
    loggers = [logging.getLogger(name) for name in COMMAND_LOGGERS]
    kept = [(logger, logger.level, list(logger.handlers)) for logger in loggers]
    try:
        yield
    finally:
        for logger, level, handlers in kept:
            for handler in set(logger.handlers) - set(handlers):
                handler.close()
            logger.handlers[:] = handlers
            logger.setLevel(level)
