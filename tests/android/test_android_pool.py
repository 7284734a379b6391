"""The device pool across processes: a device another process drives is busy, until it dies.

Two collections on one machine (two commands, a worker's runs) must never drive one device at
once; the pool's loan holds a lock on a file named after the device (collectors/android/
pool.py). The other process here is a real one that borrows from a pool of its own.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.prefect_server import free_port
from worldtrace.collectors.android.pool import DevicePool, NoDeviceError

HOLDER = """
import sys
from worldtrace.collectors.android.pool import DevicePool
print(DevicePool().borrow([sys.argv[1]], 10, 60), flush=True)
sys.stdin.read()  # hold the device until stdin closes or the process is killed
"""


@contextmanager
def held_elsewhere(serial: str) -> Iterator[subprocess.Popen[str]]:
    """A process of its own that has borrowed ``serial``; killed at the end."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, serial], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == serial
        yield holder
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_device_another_process_drives_is_busy_until_that_process_dies() -> None:
    # serials of free ports: no other test's device has them
    first, second = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    pool = DevicePool()
    with held_elsewhere(first) as holder:
        # every loan goes to the device nobody else holds, round robin or not
        for _ in range(3):
            assert pool.borrow([first, second], 5, 60) == second
            pool.give_back(second)
        with pytest.raises(NoDeviceError, match=f"in use by another process: {first}"):
            pool.borrow([first], 0.5, 60)
        holder.send_signal(signal.SIGKILL)  # a killed collection: the kernel drops its lock
        holder.wait(timeout=30)
        assert pool.borrow([first], 10, 60) == first
    pool.give_back(first)
