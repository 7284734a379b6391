"""The device side of the ADB transport protocol, over TCP: what ``adb connect HOST:PORT`` talks to.

A real device's ``adbd`` speaks it; this is the stand-in's. Messages are a 24-byte header
(command, two arguments, payload length, payload checksum, command XOR 0xffffffff) and a
payload. The host opens with ``CNXN``; the device answers with its own ``CNXN`` and banner
(this one asks for no ``AUTH``, as a device whose ``ro.adb.secure`` is 0). Every service is a
stream: ``OPEN`` names it, ``OKAY`` accepts it, ``WRTE`` carries data one packet at a time,
each acknowledged by an ``OKAY`` before the next is sent, and ``CLSE`` ends it. What a stream
does is the device's business (:class:`Services`); this module only moves bytes.

Reference: ``packages/modules/adb/protocol.txt`` and ``adb.cpp`` in AOSP.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field

A_CNXN = 0x4E584E43
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_AUTH = 0x48545541

A_VERSION = 0x01000001
"""The protocol version with unchecked payload checksums, which every adb since 2016 speaks."""
MAX_PAYLOAD = 256 * 1024
"""The largest payload this device accepts, as Android 9 and later advertise."""

HEADER = struct.Struct("<6I")


@dataclass(frozen=True)
class Message:
    """One ADB packet."""

    command: int
    arg0: int
    arg1: int
    data: bytes = b""

    def pack(self) -> bytes:
        """The packet's bytes on the wire."""
        checksum = sum(self.data) & 0xFFFFFFFF
        magic = self.command ^ 0xFFFFFFFF
        header = HEADER.pack(self.command, self.arg0, self.arg1, len(self.data), checksum, magic)
        return header + self.data


def read_message(sock: socket.socket) -> Message | None:
    """The next packet from ``sock``; None when the peer has gone."""
    header = _read_exactly(sock, HEADER.size)
    if header is None:
        return None
    command, arg0, arg1, length, _checksum, magic = HEADER.unpack(header)
    if magic != command ^ 0xFFFFFFFF:
        raise ConnectionError(f"not an ADB packet (command {command:#x}, magic {magic:#x})")
    data = _read_exactly(sock, length) if length else b""
    if data is None:
        return None
    return Message(command, arg0, arg1, data)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks.extend(chunk)
    return bytes(chunks)


class Stream:
    """One open service stream, as the service sees it: bytes in, bytes out, closed."""

    def __init__(self, transport: Transport, local_id: int, remote_id: int) -> None:
        self._transport = transport
        self.local_id = local_id
        self.remote_id = remote_id
        self._incoming = bytearray()
        self._ready = threading.Condition()
        self._acknowledged = threading.Event()
        self._acknowledged.set()
        self.closed = False

    def write(self, data: bytes) -> None:
        """Send ``data`` to the host, one acknowledged packet at a time (ConnectionError if the
        stream closes first)."""
        size = self._transport.max_payload
        for start in range(0, len(data), size):
            self._acknowledged.wait()
            if self.closed:
                raise ConnectionError("the stream was closed")
            self._acknowledged.clear()
            self._transport.send(
                Message(A_WRTE, self.local_id, self.remote_id, data[start : start + size])
            )

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes the host sent (all there are with -1), waiting for at least one;
        b"" once the stream is closed and nothing is left."""
        with self._ready:
            self._ready.wait_for(lambda: self._incoming or self.closed)
            size = len(self._incoming) if size < 0 else min(size, len(self._incoming))
            data = bytes(self._incoming[:size])
            del self._incoming[:size]
            return data

    def read_exactly(self, size: int) -> bytes:
        """Exactly ``size`` bytes (ConnectionError if the stream closes first)."""
        data = bytearray()
        while len(data) < size:
            chunk = self.read(size - len(data))
            if not chunk:
                raise ConnectionError("the stream closed in the middle of a request")
            data.extend(chunk)
        return bytes(data)

    def close(self) -> None:
        """End the stream from the device's side."""
        if not self.closed:
            self._mark_closed()
            self._transport.send(Message(A_CLSE, self.local_id, self.remote_id))
            self._transport.forget(self.local_id)

    def _received(self, data: bytes) -> None:
        with self._ready:
            self._incoming.extend(data)
            self._ready.notify_all()

    def _mark_closed(self) -> None:
        with self._ready:
            self.closed = True
            self._ready.notify_all()
        self._acknowledged.set()


Service = Callable[[Stream], None]
"""What runs a stream: called in a thread of its own with the open stream; closes it."""

Services = Callable[[str], Service | None]
"""What the device offers: the service a name opens (``shell:ls``, ``sync:``, ``tcp:9008``), or
None for a name it refuses."""


@dataclass
class Transport:
    """One host connection: the handshake, then every stream the host opens."""

    sock: socket.socket
    banner: str
    services: Services
    max_payload: int = MAX_PAYLOAD
    _streams: dict[int, Stream] = field(default_factory=dict)
    _send_lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 1

    def send(self, message: Message) -> None:
        """Write one packet (ConnectionError if the host has gone)."""
        with self._send_lock:
            try:
                self.sock.sendall(message.pack())
            except OSError as error:
                raise ConnectionError(str(error)) from error

    def forget(self, local_id: int) -> None:
        """The stream ``local_id`` has ended."""
        self._streams.pop(local_id, None)

    def serve(self) -> None:
        """Read packets until the host goes, then close every stream."""
        try:
            while (message := read_message(self.sock)) is not None:
                self._handle(message)
        except (ConnectionError, OSError):
            pass
        finally:
            for stream in list(self._streams.values()):
                stream._mark_closed()
            self._streams.clear()
            with suppress(OSError):
                self.sock.close()

    def _handle(self, message: Message) -> None:
        if message.command == A_CNXN:
            self.max_payload = min(MAX_PAYLOAD, message.arg1)
            self.send(Message(A_CNXN, A_VERSION, MAX_PAYLOAD, self.banner.encode()))
        elif message.command == A_OPEN:
            self._open(message.arg0, message.data.rstrip(b"\0").decode(errors="replace"))
        elif message.command == A_OKAY:
            if (stream := self._streams.get(message.arg1)) is not None:
                stream.remote_id = message.arg0
                stream._acknowledged.set()
        elif message.command == A_WRTE:
            if (stream := self._streams.get(message.arg1)) is not None:
                stream._received(message.data)
                self.send(Message(A_OKAY, stream.local_id, stream.remote_id))
        elif message.command == A_CLSE and (stream := self._streams.pop(message.arg1, None)):
            stream._mark_closed()

    def _open(self, remote_id: int, name: str) -> None:
        service = self.services(name)
        if service is None:
            self.send(Message(A_CLSE, 0, remote_id))
            return
        local_id, self._next_id = self._next_id, self._next_id + 1
        stream = Stream(self, local_id, remote_id)
        self._streams[local_id] = stream
        self.send(Message(A_OKAY, local_id, remote_id))
        threading.Thread(
            target=_run_service, args=(service, stream), name=f"adb-{name[:20]}", daemon=True
        ).start()


def _run_service(service: Service, stream: Stream) -> None:
    try:
        service(stream)
    except ConnectionError:
        pass  # the host closed the stream or went away
    finally:
        with suppress(ConnectionError):
            stream.close()


class AdbListener:
    """The device's ADB port: every host connection served in a thread of its own."""

    def __init__(self, port: int, banner: str, services: Services, host: str = "127.0.0.1"):
        self._server = socket.create_server((host, port), reuse_port=False)
        self.port = self._server.getsockname()[1]
        self._banner = banner
        self._services = services
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stopped = False

    def serve_forever(self) -> None:
        """Accept host connections until :meth:`disconnect` or :meth:`stop`."""
        while not self._stopped:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._connections.append(sock)
            transport = Transport(sock, self._banner, self._services)
            threading.Thread(target=transport.serve, name="adb-transport", daemon=True).start()

    def drop_connections(self) -> None:
        """Cut every host connection, as a cable pulled out or a network gone would."""
        with self._lock:
            connections, self._connections = self._connections, []
        for sock in connections:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with suppress(OSError):
                sock.close()

    def stop(self) -> None:
        """Stop listening and cut every connection."""
        self._stopped = True
        with suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self.drop_connections()
