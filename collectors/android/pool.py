"""The devices of a pool, lent to one episode at a time in this process.

An episode borrows a device and gives it back when it ends; a device that was lost during an
episode is set aside (for ``retry_after_s``, then tried again), so the next episode takes the
next device of the pool. Across processes and machines, a device is one sandbox slot of the
domain's limits (flows/slots.py), as every sandbox is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from worldtrace.sandboxes.errors import SandboxError


class NoDeviceError(SandboxError):
    """No device of the pool can be lent; the message says why."""


class DevicePool:
    """Which devices are lent and which were lost, for every environment of this process."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._lent: set[str] = set()
        self._lost: dict[str, tuple[float, str]] = {}
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
                if free:
                    serial = free[self._next % len(free)]
                    self._next += 1
                    self._lent.add(serial)
                    return serial
                if now > deadline:
                    busy = ", ".join(serials)
                    raise NoDeviceError(
                        f"no device of the pool was free for {timeout_s:.0f} s ({busy})"
                    )
                self._changed.wait(timeout=min(1.0, max(0.0, deadline - now)))

    def give_back(self, serial: str, lost: str | None = None) -> None:
        """End the loan; ``lost`` says why the device is set aside, if it was lost."""
        with self._changed:
            self._lent.discard(serial)
            if lost is not None:
                self._lost[serial] = (time.monotonic(), lost)
            else:
                self._lost.pop(serial, None)
            self._changed.notify_all()

    def _set_aside(self, serial: str, now: float, retry_after_s: float) -> bool:
        lost = self._lost.get(serial)
        return lost is not None and now - lost[0] < retry_after_s


POOL = DevicePool()
"""This process's pool."""
