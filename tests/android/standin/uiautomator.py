"""The stand-in's uiautomator server: the HTTP JSON-RPC that ``u2.jar`` serves on the device.

uiautomator2 launches it over ``shell:`` (``app_process ... com.wetest.uia2.Main -p 9008``)
and reaches it through adb's ``tcp:9008`` stream: ``GET /ping`` answers ``pong``, ``POST
/jsonrpc/0`` takes JSON-RPC 2.0 calls. The methods are the ones uiautomator2's device calls
use, with the parameters it sends: ``deviceInfo``, ``dumpWindowHierarchy(compressed,
maxDepth)``, ``click(x, y[, ms])``, ``injectInputEvent(action, x, y, meta)``, ``swipe(fx, fy,
tx, ty, steps)``, ``pressKey(name)``, ``pressKeyCode(code)``, ``setClipboard(label, text)``,
``getClipboard``, ``pasteClipboard``, ``clearInputText``, ``takeScreenshot(scale, quality)``
(base64 JPEG). An unknown method is JSON-RPC error -32601, as the real server answers.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.android.standin import screens
from tests.android.standin.adb import Stream
from tests.android.standin.device import StandinDevice
from tests.android.standin.shell import KEY_CODES

SERVER_VERSION = "3.7.1-standin"
"""What ``deviceInfo`` reports as the server's version (u2.jar of uiautomator2 3.7.1)."""


def rpc_methods(device: StandinDevice) -> dict[str, Callable[..., Any]]:
    """The JSON-RPC methods of a server on ``device``."""

    def device_info() -> dict[str, Any]:
        return {
            "currentPackageName": device.foreground()[0],
            "displayWidth": screens.WIDTH,
            "displayHeight": screens.HEIGHT,
            "displayRotation": 0,
            "displaySizeDpX": screens.WIDTH * 160 // screens.DENSITY,
            "displaySizeDpY": screens.HEIGHT * 160 // screens.DENSITY,
            "naturalOrientation": True,
            "productName": "standin",
            "screenOn": True,
            "sdkInt": 34,
            "serverVersion": SERVER_VERSION,
        }

    def dump(compressed: bool = False, max_depth: int = 50, *_: Any) -> str:
        return screens.hierarchy_xml(device.windows())

    def click(x: int, y: int, duration_ms: int = 0) -> bool:
        return device.tap(int(x), int(y))

    def paste() -> bool:
        if device.state.clipboard:
            device.type_text(device.state.clipboard)
        return True

    def set_clipboard(label: str | None, text: str) -> None:
        device.state.clipboard = text

    def screenshot(scale: float = 1, quality: int = 80) -> str:
        image = screens.screenshot(device.windows(), "JPEG", int(quality))
        return base64.b64encode(image).decode()

    return {
        "deviceInfo": device_info,
        "dumpWindowHierarchy": dump,
        "click": click,
        "injectInputEvent": lambda action, x, y, meta=0: device.touch(int(action), int(x), int(y)),
        "swipe": lambda fx, fy, tx, ty, steps=10: device.swipe(int(fx), int(fy), int(tx), int(ty)),
        "pressKey": lambda name: device.key(str(name)),
        "pressKeyCode": lambda code, meta=0: device.key(KEY_CODES.get(str(code), str(code))),
        "setClipboard": set_clipboard,
        "getClipboard": lambda: device.state.clipboard,
        "pasteClipboard": paste,
        "clearInputText": device.clear_text,
        "takeScreenshot": screenshot,
    }


def _handler(methods: dict[str, Callable[..., Any]]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # a device logs nothing to the host

        def do_GET(self) -> None:
            if self.path == "/ping":
                self._send(200, b"pong", "text/plain")
            else:
                self._send(404, b"not found", "text/plain")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if not self.path.startswith("/jsonrpc/0"):
                self._send(404, b"not found", "text/plain")
                return
            try:
                call = json.loads(self.rfile.read(length))
            except ValueError:
                self._reply(None, error={"code": -32700, "message": "Parse error"})
                return
            method = methods.get(call.get("method"))
            if method is None:
                error = {"code": -32601, "message": f"Method not found: {call.get('method')}"}
                self._reply(call.get("id"), error=error)
                return
            params = call.get("params") or []
            try:
                result = method(**params) if isinstance(params, dict) else method(*params)
            except (TypeError, ValueError, IndexError) as failure:
                error = {
                    "code": -32001,
                    "message": f"java.lang.IllegalArgumentException: {failure}",
                }
                self._reply(call.get("id"), error=error)
                return
            self._reply(call.get("id"), result=result)

        def _reply(self, call_id: Any, **outcome: Any) -> None:
            body = json.dumps({"jsonrpc": "2.0", "id": call_id, **outcome}).encode()
            self._send(200, body, "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


class UiautomatorServers:
    """The uiautomator servers running on a device, by the device port each listens on."""

    def __init__(self, device: StandinDevice) -> None:
        self._device = device
        self._running: dict[int, ThreadingHTTPServer] = {}
        self._lock = threading.Lock()
        device.uiautomator = self.serve

    def serve(self, port: int, stream: Stream) -> None:
        """Serve on the device's ``port`` until ``stream`` (the launching shell) closes."""
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(rpc_methods(self._device)))
        server.daemon_threads = True
        with self._lock:
            if port in self._running:
                stream.write(b"java.net.BindException: Address already in use\n")
                server.server_close()
                return
            self._running[port] = server
        thread = threading.Thread(target=server.serve_forever, name="uiautomator", daemon=True)
        thread.start()
        try:
            while stream.read():
                pass  # the server runs until the host ends the shell that started it
        finally:
            with self._lock:
                self._running.pop(port, None)
            server.shutdown()
            server.server_close()

    def connect(self, port: int) -> socket.socket | None:
        """A connection to the server on the device's ``port``; None if none runs there."""
        with self._lock:
            server = self._running.get(port)
        if server is None:
            return None
        connection = socket.create_connection(server.server_address[:2], timeout=30)
        connection.settimeout(None)  # a request may wait as long as the host lets it
        return connection

    def stop(self) -> None:
        """Stop every server."""
        with self._lock:
            servers, self._running = list(self._running.values()), {}
        for server in servers:
            server.shutdown()
            server.server_close()
