"""The devices of a pool, lent to one episode at a time on this machine.

An episode borrows a device and gives it back when it ends; a device that was lost during an
episode is set aside (for ``retry_after_s``, then tried again), so the next episode takes the
next device of the pool. A loan also holds an exclusive lock on a file named after the device
in the temporary folder, so that the collections of other processes on this machine (two
``worldtrace collect`` commands, a worker's runs) never drive the same device at once: a
device locked elsewhere is busy, and the kernel drops the lock of a process that dies, so a
killed collection leaves no device held. Across machines, a device is one sandbox slot of the
domain's limits (flows/slots.py), as every sandbox is.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import threading
import time
from collections.abc import Sequence

from worldtrace.sandboxes.errors import SandboxError

LOCK_POLL_S = 0.2
"""How often a borrower waiting for a device that another process holds looks again."""


def lock_path(serial: str) -> str:
    """The file whose lock a loan of the device ``serial`` holds."""
    name = re.sub(r"[^A-Za-z0-9.-]", "_", serial)
    return os.path.join(tempfile.gettempdir(), f"worldtrace-android-device-{name}.lock")


class NoDeviceError(SandboxError):
    """No device of the pool can be lent; the message says why."""


class DevicePool:
    """Which devices are lent and which were lost, for every environment of this process."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._lent: set[str] = set()
        self._lost: dict[str, tuple[float, str]] = {}
        self._locks: dict[str, int] = {}
        self._next = 0

    def borrow(self, serials: Sequence[str], timeout_s: float, retry_after_s: float) -> str:
        """Lend the next free device of ``serials``, waiting up to ``timeout_s`` for one."""
        if not serials:
            raise NoDeviceError("the pool has no devices")
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                now = time.monotonic()
                usable = [s for s in serials if not self._set_aside(s, now, retry_after_s)]
                if not usable:
                    reasons = "; ".join(f"{s}: {self._lost[s][1]}" for s in serials)
                    raise NoDeviceError(f"every device of the pool was lost ({reasons})")
                free = [s for s in usable if s not in self._lent]
                start = self._next % len(free) if free else 0
                elsewhere = []
                for serial in free[start:] + free[:start]:
                    if self._lock(serial):
                        self._next += 1
                        self._lent.add(serial)
                        return serial
                    elsewhere.append(serial)
                if now > deadline:
                    busy = ", ".join(serials)
                    held = (
                        f"; in use by another process: {', '.join(elsewhere)}" if elsewhere else ""
                    )
                    raise NoDeviceError(
                        f"no device of the pool was free for {timeout_s:.0f} s ({busy}{held})"
                    )
                # another process gives a device back without notifying: look again soon
                wait_s = LOCK_POLL_S if elsewhere else 1.0
                self._changed.wait(timeout=min(wait_s, max(0.0, deadline - now)))

    def give_back(self, serial: str, lost: str | None = None) -> None:
        """End the loan; ``lost`` says why the device is set aside, if it was lost."""
        with self._changed:
            self._lent.discard(serial)
            fd = self._locks.pop(serial, None)
            if fd is not None:
                os.close(fd)  # closing the file drops its lock
            if lost is not None:
                self._lost[serial] = (time.monotonic(), lost)
            else:
                self._lost.pop(serial, None)
            self._changed.notify_all()

    def _lock(self, serial: str) -> bool:
        """Take the device's machine-wide lock; False if another process holds it."""
        fd = os.open(lock_path(serial), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._locks[serial] = fd
        return True

    def _set_aside(self, serial: str, now: float, retry_after_s: float) -> bool:
        lost = self._lost.get(serial)
        return lost is not None and now - lost[0] < retry_after_s


POOL = DevicePool()
"""This process's pool."""
