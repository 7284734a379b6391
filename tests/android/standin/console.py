"""A stand-in emulator: a stand-in device with the Android Emulator's console, for snapshots.

An emulator listens on two loopback ports in a row: its console on port N (5554 by default)
and adbd on N+1, and the adb server lists it as ``emulator-N``. ``adb -s emulator-N emu CMD``
connects to the console directly (not through the server), sends ``auth`` with the token of
``~/.emulator_console_auth_token`` when that file exists, the command and ``quit``, and
prints what follows the console's first two ``OK`` lines. The console here answers what the
collector and the emulator steps of the docs use: ``auth``, ``avd snapshot save|load|list``,
``help`` and ``quit``, with the emulator's banner and ``OK``/``KO:`` lines. A snapshot is a
copy of the device's state; loading one puts the device back exactly as it was saved.
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress

from tests.android.standin import StandinPhone
from tests.android.standin.device import DeviceState

BANNER = (
    "Android Console: Authentication required\r\n"
    "Android Console: type 'auth <auth_token>' to authenticate\r\n"
    "Android Console: you can find your <auth_token> in \r\n"
    "'~/.emulator_console_auth_token'\r\n"
    "OK\r\n"
)
UNKNOWN = "KO: unknown command, try 'help'\r\n"


class EmulatorConsole:
    """The console of one stand-in emulator, on a listening socket of its own."""

    def __init__(self, server: socket.socket, phone: StandinPhone, auth_token: str) -> None:
        self._server = server
        self._phone = phone
        self._token = auth_token
        self.snapshots: dict[str, DeviceState] = {}
        self._thread = threading.Thread(target=self._serve, name="standin-console", daemon=True)

    def start(self) -> None:
        """Accept console connections in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop listening."""
        with suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=10)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(
                target=self._session, args=(connection,), name="console-session", daemon=True
            ).start()

    def _session(self, connection: socket.socket) -> None:
        with connection, connection.makefile("rwb", buffering=0) as stream:
            stream.write(BANNER.encode())
            authenticated = False
            for raw in stream:
                line = raw.decode(errors="replace").strip()
                if line == "quit":  # closes without a word, as the emulator's console does
                    return
                if line.startswith("auth "):
                    authenticated = line.removeprefix("auth ").strip() == self._token
                    answer = (
                        "Android Console: type 'help' for a list of commands\r\nOK\r\n"
                        if authenticated
                        else "KO: authentication token does not match "
                        "~/.emulator_console_auth_token\r\n"
                    )
                elif not authenticated:
                    answer = UNKNOWN
                else:
                    answer = self._command(line.split())
                stream.write(answer.encode())

    def _command(self, words: list[str]) -> str:
        if words == ["help"]:
            return (
                "Android console commands:\r\n    avd    control virtual device execution\r\nOK\r\n"
            )
        if words[:2] != ["avd", "snapshot"] or len(words) < 3:
            return UNKNOWN
        verb, names = words[2], words[3:]
        device = self._phone.device
        if verb == "list":
            listed = "".join(f"{name}\r\n" for name in sorted(self.snapshots))
            return f"{listed}OK\r\n"
        if verb not in {"save", "load"} or len(names) != 1:
            return "KO: bad sub-command\r\n"
        name = names[0]
        if verb == "save":
            self.snapshots[name] = device.saved_state()
            return "OK\r\n"
        if name not in self.snapshots:
            return f"KO: snapshot '{name}' does not exist\r\n"
        device.restore_state(self.snapshots[name])
        return "OK\r\n"


class StandinEmulator(StandinPhone):
    """A stand-in device as an emulator: console on port N, adb on N+1, serial ``emulator-N``."""

    def __init__(self, auth_token: str) -> None:
        while True:  # a free port whose successor is free too (even ones are the emulator's
            # habit, not the protocol's; Linux hands out odd ones for bind)
            console = socket.create_server(("127.0.0.1", 0))
            console_port = console.getsockname()[1]
            try:
                super().__init__(console_port + 1, serial=f"emulator-{console_port}")
                break
            except OSError:
                console.close()
        self.console_port = console_port
        self.console = EmulatorConsole(console, self, auth_token)

    def start(self) -> StandinEmulator:
        """Serve adb and the console in background threads."""
        super().start()
        self.console.start()
        return self

    def announce(self, adb_server_port: int) -> None:
        """Tell the adb server an emulator runs (``host:emulator:PORT``), as the emulator does
        when it has booted; the server then connects to its adb port."""
        request = f"host:emulator:{self.port}".encode()
        with socket.create_connection(("127.0.0.1", adb_server_port), timeout=10) as sock:
            sock.sendall(b"%04x" % len(request) + request)
            sock.settimeout(2)
            with suppress(OSError):
                sock.recv(4)  # the server answers nothing or OKAY; either way it has heard

    def stop(self) -> None:
        """Stop the console, then the device."""
        self.console.stop()
        super().stop()
