"""What every in-sandbox driver shares: its protection, its request loop and its reply channel.

A domain's driver (``collectors/<domain>/image/*_driver.py``) runs inside its sandbox for the
lifetime of an episode and answers the host's requests, one JSON object a line. The plumbing
around the domain's own requests is the same in every domain and lives here:

- :func:`forbid_inspection`: the driver's memory and file descriptors stay root's alone;
- :func:`forks_refused`: how many new processes the container's process limit refused;
- :func:`harness_variable`: the environment variables that are the harness's, not the machine's;
- :func:`private_reply_fd`: a reply channel of the driver's own (nothing a library prints or a
  child inherits reaches it);
- :func:`serve` (and :class:`Answer`, its steps, for a driver with a loop of its own): read
  request lines, call the domain's handler, reply to each (never dying: a failure is a reply
  with the driver's error key), echo the request's ``id``, stop when the host is gone.

The file is copied into every image next to its driver (the image definition's
``shared_files``: :data:`worldtrace.sandboxes.images.DRIVER_RUNTIME`), so a driver imports it as
the plain module ``driver_runtime``; the terminal's SSH hosts get it uploaded beside the driver.
It runs on the sandbox's Debian ``python3`` (3.11) and on an SSH host's (3.9 or newer): the
standard library only, nothing newer than Python 3.9.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import sys
from collections.abc import Callable, Iterator
from typing import Any

PR_SET_DUMPABLE = 4
PIDS_FOLDERS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")
"""Where the container's process limit keeps its files: the pids controller in cgroup v1, v2."""
LIMIT_REACHED = "the process limit was reached: "
"""Put before the error of a request during which the process limit refused a fork."""
IDLE_POLL_S = 0.2
"""How often :func:`serve` calls its ``idle`` callback while no request arrives."""

HARNESS_VARIABLES = frozenset(
    {"PWD", "OLDPWD", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"}
)
"""Variables of the driver's environment that what the agent runs does not get: the shell's
own ones, and the build's certificate bundle for pip and friends."""


def forbid_inspection() -> None:
    """Make this process non-dumpable: its memory and file descriptors are root's alone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def forks_refused(folders: tuple[str, ...] = PIDS_FOLDERS) -> int:
    """Return how many new processes the container's process limit refused so far (0 if unknown).

    Read from the pids controller's ``pids.events`` (``max N``: N forks failed because the
    limit was reached), in the first of ``folders`` that has one.
    """
    for folder in folders:
        try:
            with open(f"{folder}/pids.events") as handle:
                events = handle.read().split()
        except OSError:
            continue
        return int(events[1]) if len(events) > 1 and events[0] == "max" else 0
    return 0


def harness_variable(name: str, value: str, also: frozenset[str] = frozenset()) -> bool:
    """Whether an environment variable belongs to the harness rather than the machine.

    One of :data:`HARNESS_VARIABLES` or of the driver's own ``also``, or any variable whose
    name or value says ``worldtrace``.
    """
    return name in HARNESS_VARIABLES or name in also or "worldtrace" in f"{name}={value}".lower()


def private_reply_fd() -> int:
    """Return a private copy of stdout for the replies, and point fd 1 at stderr.

    From then on a library's print, or a child that inherits fd 1, writes to stderr (which the
    host discards) and can never put a line in the reply channel.
    """
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return reply_fd


def write_reply(reply_fd: int, reply: dict[str, Any], ensure_ascii: bool = True) -> bool:
    """Write ``reply`` as one JSON line to ``reply_fd``; False if the host is gone."""
    data = (json.dumps(reply, ensure_ascii=ensure_ascii) + "\n").encode("utf-8")
    try:
        while data:
            data = data[os.write(reply_fd, data) :]
    except OSError:  # the reading end is closed: nobody to serve
        return False
    return True


def read_lines(
    fd: int, idle: Callable[[], None] | None = None, idle_s: float = IDLE_POLL_S
) -> Iterator[bytes]:
    """Yield the lines of ``fd`` (without their newline) until it closes.

    With ``idle``, it is called every ``idle_s`` seconds while no line arrives. A last line
    without a newline is yielded too.
    """
    buffer = b""
    while True:
        if idle is not None and not select.select([fd], [], [], idle_s)[0]:
            idle()
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            if buffer.strip():
                yield buffer
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line


class RequestFailed(Exception):
    """A request that failed with a message of its own and fields to add to the error reply.

    The reply's error is the message as it is (no exception type before it), and ``fields``
    are added to the reply (what a server that would not start wrote, for instance).
    """

    def __init__(self, message: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.fields = dict(fields or {})


class Answer:
    """The answer to one request line, in three steps: the request, a reply or a failure, done.

    :func:`serve` goes through them for every line; a driver whose loop is its own (an async
    one) does the same::

        answer = Answer(line, "driver_error")
        try:
            reply = await handle(answer.request())
        except Exception as error:
            reply = answer.failed(error)
        write_reply(reply_fd, answer.done(reply))
    """

    def __init__(self, line: bytes | str, error_key: str = "error", count_forks: bool = False):
        self.line = line
        self.error_key = error_key
        self.request_id: Any = None
        self.refused_before = forks_refused() if count_forks else None

    def request(self) -> dict[str, Any]:
        """The request the line holds; raises ValueError unless it is a JSON object."""
        request = json.loads(self.line)
        if not isinstance(request, dict):
            raise ValueError("a request must be a JSON object")
        self.request_id = request.get("id")
        return request

    def failed(self, error: Exception) -> dict[str, Any]:
        """The reply to a request that raised ``error``: the error key says what happened."""
        if isinstance(error, RequestFailed):
            return {self.error_key: str(error), **error.fields}
        return {self.error_key: f"{type(error).__name__}: {error}"}

    def done(self, reply: dict[str, Any]) -> dict[str, Any]:
        """Add the common fields to ``reply``: ``forks_refused`` (when counted) and ``id``.

        A request during which the process limit refused forks (a fork bomb) is reported as
        such, and an error then says so first: the sandbox cannot be trusted to run the next.
        """
        if self.refused_before is not None:
            refused = forks_refused() - self.refused_before
            if refused and self.error_key in reply:
                reply[self.error_key] = LIMIT_REACHED + str(reply[self.error_key])
            reply["forks_refused"] = refused
        reply["id"] = self.request_id
        return reply


def serve(
    handle: Callable[[dict[str, Any]], dict[str, Any]],
    reply_fd: int,
    *,
    error_key: str = "error",
    count_forks: bool = False,
    idle: Callable[[], None] | None = None,
    complete: Callable[[dict[str, Any]], None] | None = None,
    ensure_ascii: bool = True,
    input_fd: int = 0,
) -> None:
    """Answer the request lines of ``input_fd`` with ``handle`` until it closes or the host goes.

    Every non-blank line gets exactly one JSON line on ``reply_fd``: ``handle(request)``'s
    reply, or, when the line is not a JSON object or ``handle`` raises, ``{error_key: "Type:
    message"}`` (reply, never die: the host decides what an error means). ``complete`` may add
    the driver's own fields to every reply, errors included; then come ``forks_refused`` (with
    ``count_forks``: the new processes the process limit refused during the request) and the
    request's ``id`` (None when it could not be read). ``idle`` is called while no request
    arrives. Returns when the input closes or the reply channel is closed (the host is gone).
    """
    for line in read_lines(input_fd, idle):
        if not line.strip():
            continue
        answer = Answer(line, error_key, count_forks)
        try:
            reply = handle(answer.request())
        except Exception as error:  # reply, never die: the host decides what an error means
            reply = answer.failed(error)
        if complete is not None:
            complete(reply)
        if not write_reply(reply_fd, answer.done(reply), ensure_ascii):
            return
