"""Whether the process that made something still runs: the test behind every orphan sweep.

Sandboxes, their disks, the browser's launch folders and memory cgroups all record the pid of
the process that made them; a sweep removes what a dead process left (a SIGKILL, a crash).
"""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (one owned by another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
