"""A stand-in for an OpenAI-compatible model server: a test double, named as such.

No model server can run on these machines (a vLLM server needs a GPU, a hosted API needs the
network), so the tests of the ``llm`` policy talk to this one: a real HTTP server on loopback
that speaks the chat-completions wire protocol (``POST /v1/chat/completions``,
``GET /v1/models``), so the real ``openai`` client talks to it unmodified. The real path
(``vllm serve``, a hosted API) is documented in ``docs/llm-policy.md``.

It answers with scripted replies, in order, then ``then`` for every later request. A reply is
a dict:

- ``{"content": "ls<Enter>"}``: a message; with ``"reasoning_content"`` beside it, a reasoning
  text as vLLM's reasoning parsers return it; ``"usage"`` overrides the computed counts;
- ``{"tool_calls": [{"name": ..., "arguments": {...} or "raw text"}]}``: function calls;
- ``{"status": 429, "headers": {"Retry-After": "1"}}``, ``{"status": 500}``: an error reply;
- ``{"sleep": 3.0, ...}``: wait that long first (longer than the client's timeout: a timeout);
- ``{"drop": True}``: close the connection without answering;
- ``{"html": True}``: a 200 whose body is an HTML page (a proxy's), ``{"no_choices": True}``: a
  completion without choices, ``"finish_reason"`` beside a reply: how it says it ended,
  ``"object_arguments": True``: tool-call arguments sent as an object, not as JSON text.

A reply may also be a function of the request body returning one of these. Every request is
kept (``requests``: bodies; ``authorizations``: the ``Authorization`` headers), and every
completion sent (``completions``).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
Responder = Callable[[dict[str, Any]], Reply]

MODEL = "stand-in/model-1"


def estimated_usage(body: dict[str, Any], completion: str) -> dict[str, Any]:
    """Counts a server could report: 4 characters a token, nothing cached or reasoned."""
    prompt_chars = sum(len(json.dumps(message)) for message in body.get("messages", []))
    prompt = max(prompt_chars // 4, 1)
    done = max(len(completion) // 4, 1)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": done,
        "total_tokens": prompt + done,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


class StandInModelServer:
    """The double: ``url`` is the base URL to configure (``…/v1``)."""

    def __init__(
        self,
        replies: Sequence[Reply | Responder] = (),
        then: Reply | Responder | None = None,
        model: str = MODEL,
    ) -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.completions: list[dict[str, Any]] = []
        """The chat completions sent, in order (their ``usage`` is what a test expects)."""
        self._replies = list(replies)
        self._then = then if then is not None else {"content": "DONE"}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL, as ``policy.params.base_url`` takes it."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> StandInModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the chat-completions requests received, in order."""
        with self._lock:
            return [body for body in self.requests if "messages" in body]

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(body)
            reply = self._replies.pop(0) if self._replies else self._then
        return reply(body) if callable(reply) else reply

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two sends: with Nagle's algorithm on, the body waits
            # for the client's delayed ACK (about 40 ms on loopback), which no model server adds.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                with server._lock:
                    server.authorizations.append(self.headers.get("Authorization"))
                if self.path.rstrip("/") == "/v1/models":
                    model = {"id": server.model, "object": "model", "owned_by": "stand-in"}
                    self._send(200, {"object": "list", "data": [model]}, {})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.authorizations.append(self.headers.get("Authorization"))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                reply = server._next_reply(body)
                if reply.get("sleep"):
                    time.sleep(float(reply["sleep"]))
                if reply.get("drop"):
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                if reply.get("html"):  # a proxy's page where a completion belongs
                    page = b"<html><body>502 Bad Gateway</body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                if "status" in reply:
                    error = {"error": {"message": reply.get("message", "stand-in error")}}
                    self._send(int(reply["status"]), error, dict(reply.get("headers") or {}))
                    return
                completion = server.completion(body, reply)
                with server._lock:
                    server.completions.append(completion)
                self._send(200, completion, {})

        return Handler

    def completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        """The chat-completion object answering ``body`` with ``reply``."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        calls = reply.get("tool_calls") or []
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{index}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"]
                        if isinstance(call["arguments"], str) or reply.get("object_arguments")
                        else json.dumps(call["arguments"]),
                    },
                }
                for index, call in enumerate(calls)
            ]
        if "reasoning_content" in reply:
            message["reasoning_content"] = reply["reasoning_content"]
        text = (reply.get("content") or "") + json.dumps(calls)
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 1_800_000_000,
            "model": self.model,
            "choices": []
            if reply.get("no_choices")
            else [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": reply.get("finish_reason")
                    or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": reply.get("usage") or estimated_usage(body, text),
        }
