"""The stand-in device's ADB services: ``shell:``, ``sync:`` and ``tcp:PORT``, as ``adbd`` has them.

- ``shell:COMMAND`` (the version-1 shell: the command's output, then the stream closes; the
  banner offers no ``shell_v2``, as devices before Android 7 did not, so adbutils learns exit
  codes from an ``echo $?`` it appends). A command that keeps running (the uiautomator server)
  keeps its stream open until the host closes it.
- ``sync:``, the file service: ``STAT``, ``LIST``, ``SEND`` (push), ``RECV`` (pull) and
  ``QUIT``, each request a 4-byte id and a little-endian length (``SYNC.TXT`` in AOSP).
- ``tcp:PORT``: a stream to a port the device listens on, which is what ``adb forward`` and
  adbutils' ``create_connection`` open; here the uiautomator server's, once it was launched.
"""

from __future__ import annotations

import socket
import struct
import threading
from contextlib import suppress
from typing import Protocol

from tests.android.standin.adb import Service, Services, Stream

SYNC_DATA_MAX = 64 * 1024
"""The largest ``DATA`` chunk of the sync service."""

S_IFREG = 0o100000
S_IFDIR = 0o040000


class Shell(Protocol):
    """What runs a shell command line on the device."""

    def run(self, command: str, stream: Stream) -> None:
        """Run ``command``, writing its output to ``stream``; a command that keeps running
        (the uiautomator server) returns when the host closes the stream."""
        ...


class Files(Protocol):
    """The device's file system, as the sync service needs it."""

    def stat(self, path: str) -> tuple[int, int, int] | None:
        """Mode, size and modification time of ``path``; None if it does not exist."""
        ...

    def listdir(self, path: str) -> list[str]:
        """The names in the folder ``path``."""
        ...

    def read(self, path: str) -> bytes | None:
        """The content of the file ``path``; None if there is none."""
        ...

    def write(self, path: str, content: bytes, mode: int, mtime: int) -> str | None:
        """Store a file; the reason it cannot be written, or None."""
        ...


class Ports(Protocol):
    """The ports the device listens on."""

    def connect(self, port: int) -> socket.socket | None:
        """A connection to the device's ``port``; None if nothing listens there."""
        ...


def device_services(shell: Shell, files: Files, ports: Ports) -> Services:
    """The ADB services of a device made of ``shell``, ``files`` and ``ports``."""

    def services(name: str) -> Service | None:
        if name.startswith("shell:"):
            command = name[len("shell:") :]
            return lambda stream: shell.run(command, stream)
        if name == "sync:":
            return lambda stream: _sync(files, stream)
        if name.startswith("tcp:"):
            port = name[len("tcp:") :]
            connection = ports.connect(int(port)) if port.isdigit() else None
            if connection is None:
                return None  # adbd refuses the stream: "connection refused"
            return lambda stream: _forward(connection, stream)
        return None

    return services


def _sync(files: Files, stream: Stream) -> None:
    while True:
        request = stream.read_exactly(8)
        kind, length = request[:4], struct.unpack("<I", request[4:])[0]
        argument = stream.read_exactly(length).decode(errors="replace")
        if kind == b"STAT":
            mode, size, mtime = files.stat(argument) or (0, 0, 0)
            stream.write(b"STAT" + struct.pack("<3I", mode, size, mtime))
        elif kind == b"LIST":
            for name in files.listdir(argument):
                mode, size, mtime = files.stat(f"{argument.rstrip('/')}/{name}") or (0, 0, 0)
                encoded = name.encode()
                stream.write(
                    b"DENT" + struct.pack("<4I", mode, size, mtime, len(encoded)) + encoded
                )
            stream.write(b"DONE" + bytes(16))
        elif kind == b"SEND":
            _receive_file(files, argument, stream)
        elif kind == b"RECV":
            content = files.read(argument)
            if content is None:
                _fail(stream, "No such file or directory")
                continue
            for start in range(0, len(content), SYNC_DATA_MAX):
                chunk = content[start : start + SYNC_DATA_MAX]
                stream.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
            stream.write(b"DONE" + struct.pack("<I", 0))
        elif kind == b"QUIT":
            return
        else:
            _fail(stream, f"unknown sync request {kind!r}")
            return


def _receive_file(files: Files, argument: str, stream: Stream) -> None:
    path, _, mode = argument.rpartition(",")
    content = bytearray()
    while True:
        header = stream.read_exactly(8)
        kind, value = header[:4], struct.unpack("<I", header[4:])[0]
        if kind == b"DATA":
            content.extend(stream.read_exactly(value))
        elif kind == b"DONE":
            reason = files.write(path, bytes(content), int(mode or "0") or 0o100644, value)
            if reason is None:
                stream.write(b"OKAY" + bytes(4))
            else:
                _fail(stream, reason)
            return
        else:
            _fail(stream, f"unexpected {kind!r} in a push")
            return


def _fail(stream: Stream, reason: str) -> None:
    encoded = reason.encode()
    stream.write(b"FAIL" + struct.pack("<I", len(encoded)) + encoded)


def _forward(connection: socket.socket, stream: Stream) -> None:
    def device_to_host() -> None:
        try:
            while chunk := connection.recv(65536):
                stream.write(chunk)
        except (OSError, ConnectionError):
            pass
        finally:
            with suppress(ConnectionError):
                stream.close()

    reader = threading.Thread(target=device_to_host, name="adb-forward", daemon=True)
    reader.start()
    try:
        while data := stream.read():
            connection.sendall(data)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            connection.shutdown(socket.SHUT_WR)
        reader.join(timeout=10)
        connection.close()
