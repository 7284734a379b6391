"""A collection whose Prefect server went away stops within seconds, resumable, in one line.

Every task and flow state of a collection goes through the Prefect API. When the server
behind it dies mid-run (killed, its machine rebooted), Prefect's clients retry each call and
log every failure with its payload: the command printed minutes of errors and a traceback,
then exited 1. :func:`watching_the_server` checks the server's health endpoint every
:data:`CHECK_EVERY_S` while episodes run; once it has not answered for :data:`LOST_AFTER_S`,
the collection is stopped as SIGTERM stops it (episodes asked to stop, this process's
sandboxes removed, the episodes in flight set aside, not sealed), and the process exits
with :data:`SERVER_LOST_EXIT` after one line saying what happened and that the same command
resumes the run. Any answer, even an error status, means the server is there; only a refused
or timed-out connection counts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from worldtrace.collectors.episode import request_stop
from worldtrace.curation.logs import LOG_FILE_ENV
from worldtrace.flows.stopping import tear_down

CHECK_EVERY_S = 2.0
LOST_AFTER_S = 10.0
"""How long the server may not answer before the run stops (a restart of a busy server takes
a few seconds; more than this is not a hiccup)."""
SET_ASIDE_WAIT_S = 20.0
"""How long the episodes in flight get to set themselves aside once their sandboxes are gone;
an attempt still open after that is set aside when the run resumes."""
SERVER_LOST_EXIT = 3


def api_url() -> str | None:
    """The Prefect API this process talks to, if it is a server (not Prefect's in-process one)."""
    from prefect.settings import get_current_settings

    url = get_current_settings().api.url
    return url.rstrip("/") if url else None


def answers(url: str, timeout_s: float = 3.0) -> bool:
    """Whether anything answers HTTP at ``url``'s health endpoint (any status counts)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s):
            return True
    except urllib.error.HTTPError:
        return True  # a 401 or a 500 is a server that is there
    except (OSError, ValueError):
        return False


def _watch(url: str, partial: Path, done: threading.Event) -> None:
    silent_since: float | None = None
    while not done.wait(CHECK_EVERY_S):
        if answers(url):
            silent_since = None
            continue
        if silent_since is None:
            silent_since = time.monotonic()
            _prefect_errors_to_the_log_file()
        if time.monotonic() - silent_since >= LOST_AFTER_S:
            _stop_for_lost_server(url, partial)


def _prefect_errors_to_the_log_file() -> None:
    """Send what Prefect's services print about an unreachable API to the log file only.

    Its events worker logs each event it could not send, payload and traceback, on a console
    handler of its own, and its API log handler writes each failed batch to stderr: pages of
    noise for one fact this module reports in a line.
    """
    logging.raiseExceptions = False  # the API log handler's stderr report checks it
    log_file = os.environ.get(LOG_FILE_ENV)
    handler = logging.FileHandler(log_file) if log_file else logging.NullHandler()
    logging.getLogger("prefect._internal").handlers = [handler]


def _stop_for_lost_server(url: str, partial: Path) -> None:
    request_stop()
    tear_down()
    deadline = time.monotonic() + SET_ASIDE_WAIT_S
    while any(partial.glob("*.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.2)
    # Prefect's own shutdown would retry every call against the dead API for minutes.
    stream = sys.stderr
    if stream.isatty():
        stream.write("\x1b[?25h")  # the progress bar hid the cursor
    stream.write(
        f"\nerror: the Prefect server at {url} stopped answering; the episodes in flight were "
        "set aside: run the same command again to resume (with the server back, or without "
        "one)\n"
    )
    stream.flush()
    os._exit(SERVER_LOST_EXIT)


@contextlib.contextmanager
def watching_the_server(run_dir: Path) -> Iterator[None]:
    """Within the block, a Prefect server that stops answering stops the run (see above)."""
    url = api_url()
    if url is None:
        yield
        return
    done = threading.Event()
    watcher = threading.Thread(
        target=_watch,
        args=(url, run_dir / "raw" / "partial", done),
        name="worldtrace-server-watch",
        daemon=True,
    )
    watcher.start()
    try:
        yield
    finally:
        done.set()
