"""A sandbox's network namespace, entered from the host: sockets and programs inside it.

A sandbox started with ``network="none"`` has a network namespace of its own holding nothing
but a loopback interface. The host reaches a server listening there (a web site in its
sandbox) through a socket *created inside* that namespace: a socket belongs to the namespace
of the thread that made it, for its whole life, so :meth:`NetworkNamespace.run` makes sockets
in a short-lived thread that first joins the namespace (``setns``), and the socket is then
used from any thread. A program is started inside it with ``nsenter --net=<path>``.

Joining a network namespace needs ``CAP_SYS_ADMIN`` (root), as the sandboxes' disks do.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

from worldtrace.schemas.errors import SetupError

T = TypeVar("T")

CLONE_NEWNET = 0x40000000


class NamespaceError(SetupError, RuntimeError):
    """A network namespace that cannot be opened or joined; the message says why."""


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python 3.12+
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


class NetworkNamespace:
    """The network namespace of a process, held open by a file descriptor.

    Holding the descriptor keeps the namespace reachable by the same handle even if the
    process's pid is reused; :attr:`path` names it for ``nsenter``.
    """

    def __init__(self, pid: int) -> None:
        try:
            self._fd: int | None = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError as error:
            raise NamespaceError(
                f"cannot open the network namespace of pid {pid}: {error}"
            ) from None

    @property
    def fd(self) -> int:
        """The open descriptor of the namespace."""
        if self._fd is None:
            raise NamespaceError("the network namespace handle is closed")
        return self._fd

    @property
    def path(self) -> str:
        """A path naming the namespace while this process holds it (for ``nsenter --net=``)."""
        return f"/proc/{os.getpid()}/fd/{self.fd}"

    def identity(self) -> str:
        """The kernel's name of the namespace, e.g. ``net:[4026532276]`` (equal: same one)."""
        return os.readlink(self.path)

    def run(self, function: Callable[[], T]) -> T:
        """Call ``function`` in a thread inside the namespace and return what it returns.

        Sockets it creates stay in the namespace. Its exceptions are raised here.
        """
        fd = self.fd
        errors: list[BaseException] = []
        values: list[T] = []

        def inside() -> None:
            try:
                _setns(fd)
            except OSError as error:
                errors.append(
                    NamespaceError(
                        f"cannot enter a sandbox's network namespace ({error}); this needs root"
                    )
                )
                return
            try:
                values.append(function())
            except BaseException as error:  # handed to the caller's thread
                errors.append(error)

        # The thread ends with the call, and its namespace with it: no thread of this process
        # stays inside.
        thread = threading.Thread(target=inside, name="netns", daemon=True)
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
        return values[0]

    def connect(self, address: tuple[str, int], timeout: float) -> socket.socket:
        """Return a TCP connection to ``address`` made inside the namespace."""
        return self.run(lambda: socket.create_connection(address, timeout=timeout))

    def close(self) -> None:
        """Let go of the namespace; safe to call twice."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
