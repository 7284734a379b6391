"""A conversation with a driver process inside a sandbox: one JSON line each way per request.

Domains whose environment is run by an in-container driver (the terminal's tmux driver, the
swe tool server) speak to it over one exec stream for the whole episode, so a step costs one
round trip instead of one ``docker exec``. Each request carries an id (a random token of this
channel and a sequence number) that the driver echoes. A line on the stream that is not the
reply to the pending request, whatever wrote it, is skipped and counted
(:attr:`DriverChannel.skipped`), so a step is never paired with another step's reply.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, Protocol

from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.errors import SandboxDied, SandboxError

DRIVER_GRACE_S = 15.0
"""How long past a request's own time limit a driver may take before it counts as lost."""


class LineStream(Protocol):
    """A driver process spoken to line by line: ``ExecStream`` (Docker), ``SshStream`` (SSH)."""

    def send_line(self, line: str) -> None:
        """Write one line to the process's stdin."""

    def read_line(self, timeout: float) -> str:
        """The next line of its stdout, within ``timeout`` seconds."""

    def close(self) -> None:
        """End the process's stream."""


def json_object(line: str) -> dict[str, Any] | None:
    """Return a line holding a JSON object as a dict, or None for anything else."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def last_look(sandbox: DockerSandbox, argv: list[str], timeout_s: float) -> dict[str, Any] | None:
    """The last line a second driver process (``argv``) prints, as a JSON object.

    How a domain looks into a sandbox whose driver stopped answering. None when nothing can run
    there any more, or nothing sensible came back.
    """
    try:
        result = sandbox.exec(argv, timeout=timeout_s)
    except SandboxError:
        return None
    if result.exit_code != 0:
        return None
    return json_object(result.text.strip().rsplit("\n", 1)[-1])


class DriverChannel:
    """Requests to an in-container driver over an exec stream, each reply matched by its id."""

    def __init__(self, stream: LineStream, name: str, grace_s: float = DRIVER_GRACE_S) -> None:
        self.stream = stream
        self.name = name
        self.grace_s = grace_s
        self.skipped = 0
        """Lines skipped while waiting for the latest reply."""
        self._token = secrets.token_hex(16)
        self._sequence = 0

    def request(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send ``request`` and return the driver's reply to it, without its id.

        The driver has ``timeout_s`` plus the grace to answer; past that the sandbox is taken
        for lost (:class:`SandboxDied`).
        """
        self._sequence += 1
        request_id = f"{self._token}:{self._sequence}"
        self.stream.send_line(json.dumps({**request, "id": request_id}))
        limit_s = timeout_s + self.grace_s
        deadline = time.monotonic() + limit_s
        self.skipped = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise TimeoutError
                line = self.stream.read_line(remaining)
            except TimeoutError:
                raise SandboxDied(f"the {self.name} did not answer within {limit_s:.0f}s") from None
            reply = json_object(line)
            if reply is not None and reply.get("id") == request_id:
                del reply["id"]
                return reply
            self.skipped += 1

    def close(self) -> None:
        """End the stream (the driver sees its stdin close)."""
        self.stream.close()
