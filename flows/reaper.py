"""The processes a command starts end with it, even when it is killed with SIGKILL.

A command that runs flows without a Prefect server gets Prefect's temporary local API: a
uvicorn process (about 200 MB) that Prefect stops at exit. Killed with SIGKILL, the command can
stop nothing, and the server lived on forever, one per kill. Prefect starts it from whichever
thread first needs the API, so the kernel's "kill me when my parent dies" (which follows the
thread that forked) cannot be asked of it.

So :func:`reap_on_exit` marks the command's environment with a value unique to this process
(every process it starts inherits it: the temporary API, a browser, a pool worker) and starts
a small reaper process that the kernel signals when the command ends, however it ends. The
reaper then stops every process that still carries the mark: SIGTERM, then SIGKILL after a
grace period. Run as ``python -m worldtrace.flows.reaper MARK PARENT_PID``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

MARK_ENV = "WORLDTRACE_REAP_MARK"
"""Environment variable naming the command whose end ends the process that carries it."""
GRACE_S = 5.0
"""How long a marked process has to exit after SIGTERM before it gets SIGKILL."""
_PR_SET_PDEATHSIG = 1

_reaper: subprocess.Popen[bytes] | None = None


def reap_on_exit() -> None:
    """Make every process this one starts from now on end when this one ends (once per process).

    Call it from the main thread: the kernel tells the reaper when the thread that started it
    ends.
    """
    global _reaper
    if _reaper is not None:
        return
    mark = f"{os.getpid()}-{time.time_ns()}"
    os.environ[MARK_ENV] = mark
    _reaper = subprocess.Popen(
        [sys.executable, "-m", "worldtrace.flows.reaper", mark, str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a ^C to the command's group is the command's, not the reaper's
        preexec_fn=_signal_me_when_the_parent_ends,
    )


def _signal_me_when_the_parent_ends() -> None:
    # Ignored until main() handles it (an ignored signal stays ignored through exec): a
    # parent killed while the reaper still starts up must not take the reaper with it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def marked_processes(mark: str) -> list[int]:
    """The processes whose environment carries ``mark``, except this one."""
    needle = f"{MARK_ENV}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):  # gone, or not ours to read
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def reap(mark: str, grace_s: float = GRACE_S) -> None:
    """Stop every process carrying ``mark``: SIGTERM, then SIGKILL after ``grace_s``."""
    for pid in marked_processes(mark):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in marked_processes(mark):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def main(mark: str, parent: int) -> None:
    """Wait for the command to end (this process is then adopted), then reap what it left."""
    # The kernel's SIGTERM only wakes us early; being adopted is what says the parent ended
    # (the signal also comes when the thread that started us ends, the process living on).
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    while os.getppid() == parent:
        time.sleep(0.5)
    reap(mark)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
