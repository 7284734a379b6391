"""A Docker engine that can go away and come back: the real engine behind a cuttable socket.

Restarting the machine's Docker daemon would break every other test running on it, so tests
point ``DOCKER_HOST`` at :class:`EngineProxy`, a Unix socket that forwards every byte to the
real engine's socket. :meth:`EngineProxy.cut` does to the client what a daemon restart does:
open connections (an exec's attached stream included) are closed and the socket file is gone,
so new connections fail with ``FileNotFoundError``; :meth:`EngineProxy.restore` brings it back.
The containers keep running behind it, as they would not after a real restart, which only
makes the test stricter: the set-aside attempt's container must still be cleaned up.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

ENGINE_SOCKET = "/var/run/docker.sock"


class EngineProxy:
    """A Unix socket at ``path`` forwarding to the real engine while it is not cut."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """The ``DOCKER_HOST`` value that reaches the engine through the proxy."""
        return f"unix://{self.path}"

    def restore(self) -> None:
        """Listen (again): clients reach the engine."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Close every connection and remove the socket, as a stopping daemon does."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self.path.unlink(missing_ok=True)
        with self._lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            engine.connect(ENGINE_SOCKET)
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    engine.close()
                    return
                self._connections |= {client, engine}
            for source, target in ((client, engine), (engine, client)):
                threading.Thread(target=_pump, args=(source, target), daemon=True).start()


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy bytes one way until either side closes; then close the write side of the other."""
    try:
        while data := source.recv(65536):
            target.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)
