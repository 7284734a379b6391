r"""Run one MCP server inside the sandbox and speak to it with the official Python SDK.

Runs as root with ``/opt/mcp-venv/bin/python`` (Python 3.11, the ``mcp`` SDK and its own
dependencies only) for the lifetime of an episode. One JSON request per stdin line, exactly one
JSON reply per stdout line; a reply echoes its request's ``id``. Nothing else is ever written to
stdout: the reply channel is a private copy of the original stdout and fd 1 is pointed at
stderr, so a library's print or a child that inherits fd 1 cannot corrupt it.

Requests and replies:
  {"id", "op": "start", "server": NAME, "transport": "stdio"|"http", "timeout": s,
   "command": [...] (optional: run this argv instead of the manifest's, e.g. a user's own
   stdio server in the image; it gets the manifest entry's env, services and state)}
      -> {"server", "transport", "server_info" (the initialize result's serverInfo as sent),
          "protocol_version", "sdk_version", "capabilities" (as sent), "instructions"
          (str|null), "tools" (every page of tools/list, each definition exactly as sent),
          "server_pid", "messages", "garbage", "stderr", "state", "start_s"}
      The manifest entry's ``services`` are started first (``postgres`` runs
      /opt/worldtrace/start_postgres.sh; ``site`` is the host's business), then the server is
      launched as ``user`` (uid 1000) with the image's environment (minus the build's and the
      harness's variables: ``server_env``) plus the entry's ``env``, in
      its own process group, cwd the entry's ``cwd`` or the user's home. The session speaks
      the initialize handshake (``initialize``, ``notifications/initialized``), then
      ``tools/list``. Everything within ``timeout`` (default 60 s).
  {"id", "op": "call", "name": TOOL, "arguments": any, "timeout": s}
      -> {"result" (the JSON-RPC result exactly as sent: camelCase, nothing dropped) | null,
          "protocol_error" ({"code", "message", "data"?} as sent) | null,
          "result_problem" (why the SDK refused the result, e.g. not a CallToolResult) | null,
          "timed_out", "server_exited" ({"code"}) | null, "messages", "garbage", "stderr",
          "state" (snapshot after the call), "call_s" (the SDK request alone), "wall_s"}
      ``tools/call`` goes out whatever the name and arguments (``arguments`` is sent as given,
      even when not an object): the SDK's typed ``call_tool`` is not used, so neither its
      input nor its output-schema validation can stop a call or hide the server's answer. At
      the timeout the SDK sends ``notifications/cancelled`` and ``timed_out`` is true. A server
      that exits before or during the call gives ``server_exited`` at once; later calls give it
      again without sending anything.
  {"id", "op": "observe"} -> {"state"}
  {"id", "op": "stop"} -> {"stopped": true, "server_exited", "messages", "garbage", "stderr"}
      Closes the session, then the server: a stdio server's stdin is closed and it gets
      STOP_GRACE_S to exit; then its process group gets SIGTERM (an HTTP server's at once) and
      after another STOP_GRACE_S SIGKILL. Stdin EOF does the same.
A request the driver could not serve gets {"id", "driver_error": "..."} (for a failed start
also "messages", "garbage" and "stderr"; the error names the stderr tail).
``mcp_driver.py --observe --server NAME`` prints one {"state": ...} line and exits (the host's
last look when the driver is lost). ``--servers PATH`` (or WORLDTRACE_MCP_SERVERS) names the
manifest, default /opt/worldtrace/servers.json.

Fields common to replies:
  "messages": every JSON-RPC message since the previous reply, in order, as
      {"dir": "send"|"recv", "line": text}. stdio: ``line`` is one line exactly as written to
      or read from the server's pipe, without its "\n" (a "\r" stays); bytes that are not
      UTF-8 are kept as surrogate escapes, so ``line.encode("utf-8", "surrogateescape")`` gives
      the wire bytes. A send that could not be written carries "write_error". http: a "send"
      is one POST body (one JSON-RPC message, byte for byte); a "recv" is a response body
      with content type application/json, or the data of one server-sent event (its ``data:``
      lines joined by "\n", as the SSE standard defines the event's data) from a POST's or the
      GET stream's text/event-stream response. HTTP headers, SSE ids, events without data
      (priming events, keep-alives) and bodies of other requests (GET, DELETE) are not kept.
  "garbage": lines from the server's stdout (http: response payloads) that are not JSON-RPC
      messages, in order. They never reach the session, which goes on.
  "stderr": the server's stderr since the previous reply (http: its stdout and stderr, which
      share one pipe), at most the last STDERR_KEEP_BYTES with a marker naming the bytes not
      kept. A task drains the pipe all the time, so a chatty server never blocks on it.
  "state": a snapshot of the server's world, by the manifest's ``state.kind``:
      files {"kind", "root", "files": {"relative/path": sha256[:16] | "dir" | "link:<target>" |
      "other"}}; git {"kind", "root", "head", "branch" (null when detached), "branches",
      "tags" (name -> the object the tag ref names), "status" (porcelain v1 lines)}; memory
      {"kind", "path", "entities", "relations", "observations", "entity_names" {name: type},
      "invalid_lines"}; postgres {"kind", "database", "tables" {"schema.table": rows}};
      none {"kind"}. A snapshot that cannot be taken has "error" (and the fields it could not
      fill as null). Snapshots only read: git runs with --no-optional-locks, postgres counts
      rows with psql as the ``postgres`` user over the local socket in a read-only session.
      That psql is started at the first postgres snapshot and kept until stop (a new process
      and connection per step cost ~50 ms); one that dies or hangs is replaced by a fresh psql
      within the snapshot's time limit.
  "server_exited": {"code": exit status, or minus the signal number that killed it (null if
      not known)}.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import pwd
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import driver_runtime as runtime
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import TypeAdapter, ValidationError

MANIFEST = os.environ.get("WORLDTRACE_MCP_SERVERS", "/opt/worldtrace/servers.json")
SERVER_USER = os.environ.get("WORLDTRACE_MCP_USER", "user")
START_POSTGRES = "/opt/worldtrace/start_postgres.sh"
PSQL = "psql"
DEFAULT_START_TIMEOUT_S = 60.0
DEFAULT_CALL_TIMEOUT_S = 30.0
STDERR_KEEP_BYTES = 64 * 1024
"""Most stderr bytes a reply carries: the last ones; the rest is counted."""
STOP_GRACE_S = 1.0
"""How long a stopping server gets after its stdin closes, and again after SIGTERM."""
EXIT_DRAIN_S = 0.3
"""How long stdout is still read after a stdio server exits (its last lines), before calls end."""
CALL_GRACE_S = 2.0
"""How long past its timeout a call may take (the cancel notification) before it is abandoned."""
CANCEL_POST_S = 0.5
"""How long a timed-out HTTP call waits for its notifications/cancelled to be POSTed."""
SNAPSHOT_TIMEOUT_S = 10.0
"""The longest a snapshot may take; past it the snapshot reports an error."""
PSQL_SESSION_TIMEOUT_S = 5.0
"""How long a postgres snapshot waits for the kept psql before a fresh psql takes over."""
READ_CHUNK = 65536

RAW_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
"""The result of a request as the server sent it (the SDK's typed models rename and drop)."""
ToolsCallRequest = types.Request[dict[str, Any], str]
"""A tools/call request whose params go out as given (no typed CallToolRequestParams)."""


def load_spec(manifest_path: str, name: str) -> dict[str, Any]:
    """The manifest entry of server ``name`` (ValueError for an unknown name)."""
    with open(manifest_path, encoding="utf-8") as handle:
        servers = json.load(handle)["servers"]
    if name not in servers:
        raise ValueError(f"unknown server {name!r}; the manifest has {sorted(servers)}")
    return servers[name]


# --- state snapshots ------------------------------------------------------------------------------


def read_unnoticed(path: str, flags: int) -> int:
    """Open ``path`` for reading without touching its access time.

    The snapshot reads every file after every call; with an ordinary open, each read would
    set the file's access time, and server-filesystem's get_file_info would show when our
    snapshot ran ("accessed: ..."), not what the agent did. O_NOATIME needs the file's owner
    or root (the driver); anyone else falls back to an ordinary open.
    """
    try:
        return os.open(path, flags | os.O_NOATIME)
    except PermissionError:
        return os.open(path, flags)


def files_state(root: str) -> dict[str, Any]:
    """Every path under ``root``: a regular file's sha256 (first 16 hex), "dir", a link's target."""
    files: dict[str, str] = {}
    if not os.path.isdir(root):
        return {"kind": "files", "root": root, "files": None, "error": f"{root} is not a folder"}
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + names):
            path = os.path.join(folder, name)
            relative = os.path.relpath(path, root)
            if os.path.islink(path):
                files[relative] = f"link:{os.readlink(path)}"
            elif name in dirs:
                files[relative] = "dir"
            elif os.path.isfile(path):
                digest = hashlib.sha256()
                try:
                    with open(path, "rb", opener=read_unnoticed) as handle:
                        while chunk := handle.read(1 << 20):
                            digest.update(chunk)
                    files[relative] = digest.hexdigest()[:16]
                except OSError as error:
                    files[relative] = f"unreadable:{error.strerror}"
            else:
                files[relative] = "other"
    return {"kind": "files", "root": root, "files": dict(sorted(files.items()))}


def git_state(root: str) -> dict[str, Any]:
    """HEAD, branch, branches, tags and ``git status`` of the repository at ``root``."""
    git = ["git", "-c", "safe.directory=*", "--no-optional-locks", "-C", root]
    argvs = (
        [*git, "show-ref", "--head"],
        [*git, "symbolic-ref", "-q", "--short", "HEAD"],
        [*git, "status", "--porcelain=v1", "--untracked-files=all"],
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "HOME": "/"}
    # All three at once: a snapshot waits for the slowest, not for the sum.
    started = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for argv in argvs
    ]
    outputs = []
    for process in started:
        out, err = process.communicate(timeout=SNAPSHOT_TIMEOUT_S)
        outputs.append((process.returncode, out.decode("utf-8", "replace"), err.decode()))
    (refs_code, refs, refs_err), (_, branch, _), (status_code, status, status_err) = outputs
    state: dict[str, Any] = {"kind": "git", "root": root, "head": None, "branch": None}
    state.update(branches={}, tags={}, status=None)
    if status_code != 0:
        state["error"] = status_err.strip() or f"git status exited {status_code}"
        return state
    state["status"] = status.splitlines()
    state["branch"] = branch.strip() or None
    # show-ref exits 1 when there are no refs (a repository without commits).
    if refs_code not in (0, 1):
        state["error"] = refs_err.strip()
    for line in refs.splitlines():
        sha, _, ref = line.partition(" ")
        if ref == "HEAD":
            state["head"] = sha
        elif ref.startswith("refs/heads/"):
            state["branches"][ref.removeprefix("refs/heads/")] = sha
        elif ref.startswith("refs/tags/"):
            state["tags"][ref.removeprefix("refs/tags/")] = sha
    return state


def memory_state(path: str) -> dict[str, Any]:
    """Counts of server-memory's JSONL graph file (empty when the file is absent)."""
    entities: dict[str, str] = {}
    relations = observations = invalid = 0
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            invalid += 1
            continue
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "entity":
            entities[str(item.get("name"))] = str(item.get("entityType"))
            observations += len(item.get("observations") or [])
        elif kind == "relation":
            relations += 1
        else:
            invalid += 1
    return {
        "kind": "memory",
        "path": path,
        "entities": len(entities),
        "relations": relations,
        "observations": observations,
        "entity_names": dict(sorted(entities.items())),
        "invalid_lines": invalid,
    }


# Exact row counts of every user table as one JSON line (query_to_xml runs a count per table), so
# the kept psql's output needs no parsing of names that may hold tabs or newlines.
COUNT_ROWS_SQL = """
SELECT coalesce(json_object_agg(name, rows ORDER BY name), '{}') FROM (
  SELECT table_schema || '.' || table_name AS name, (xpath('/row/c/text()', query_to_xml(
    format('SELECT count(*) AS c FROM %I.%I', table_schema, table_name), false, true, '')
  ))[1]::text::bigint AS rows
  FROM information_schema.tables
  WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')
) AS counted
"""


def psql_command(database: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of a psql that can only read ``database``.

    The session is read-only from its first statement (PGOPTIONS apply at connection start)
    and the server itself ends a statement at the snapshot timeout, so a psql killed while its
    count waits on a lock leaves no backend waiting behind it.
    """
    argv = [PSQL, "-X", "-A", "-t", "-q", "-d", database]
    timeout_ms = int(SNAPSHOT_TIMEOUT_S * 1000)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C.UTF-8",
        "HOME": "/",
        "PGOPTIONS": f"-c default_transaction_read_only=on -c statement_timeout={timeout_ms}",
    }
    return argv, env


class PsqlLost(Exception):
    """The kept psql exited, closed its pipes or did not answer in time."""


class PsqlSession:
    r"""One psql process as ``postgres``, connected to one database and kept for the episode.

    A query goes to its stdin followed by ``\echo`` of a fresh marker; its answer is everything
    psql writes (stdout and stderr share one pipe, so an error's text is the answer) up to the
    marker's line. A new process and connection per snapshot cost ~50 ms; this costs ~1 ms.
    """

    def __init__(self, database: str) -> None:
        argv, env = psql_command(database)
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            user="postgres",
            cwd="/",
            env=env,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin.fileno()
        self.stdout = self.process.stdout.fileno()
        # Never block on a wedged psql: every wait below is a select with the deadline.
        os.set_blocking(self.stdin, False)
        os.set_blocking(self.stdout, False)

    def query(self, sql: str, deadline: float) -> str:
        """What psql writes for ``sql`` (PsqlLost if it cannot answer by ``deadline``)."""
        marker = f"worldtrace-snapshot-{secrets.token_hex(8)}"
        pending = f"{sql.strip().rstrip(';')};\n\\echo {marker}\n".encode()
        end = f"{marker}\n".encode()
        answer = b""
        try:
            while pending:
                self._wait(deadline, write=True)
                pending = pending[os.write(self.stdin, pending) :]
            while not (answer == end or answer.endswith(b"\n" + end)):
                self._wait(deadline, write=False)
                chunk = os.read(self.stdout, READ_CHUNK)
                if not chunk:  # psql exited; what it wrote last says why (e.g. no connection)
                    raise PsqlLost(answer.decode("utf-8", "replace").strip() or "psql exited")
                answer += chunk
        except (BlockingIOError, InterruptedError):
            raise PsqlLost("psql pipe not ready after select") from None
        except OSError as error:  # a closed pipe: psql is gone
            raise PsqlLost(f"psql pipe: {error}") from error
        return answer[: -len(end)].decode("utf-8", "replace")

    def _wait(self, deadline: float, write: bool) -> None:
        """Return when the pipe is ready to write (or read); PsqlLost at ``deadline``."""
        left = max(deadline - time.monotonic(), 0)
        fds = [self.stdin] if write else [self.stdout]
        readable, writable, _ = select.select([] if write else fds, fds if write else [], [], left)
        if not (readable or writable):
            raise PsqlLost("psql did not answer in time")

    def close(self) -> None:
        """End psql (it holds no transaction between queries, so killing it loses nothing)."""
        self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class PsqlSessions:
    """The kept psql of each database snapshotted in this episode (started at first use)."""

    def __init__(self) -> None:
        self.sessions: dict[str, PsqlSession] = {}

    def query(self, database: str, sql: str, deadline: float) -> str:
        """Run ``sql`` in the database's kept psql; a psql that fails is ended and forgotten."""
        session = self.sessions.get(database)
        if session is None:
            session = self.sessions[database] = PsqlSession(database)
        try:
            return session.query(sql, deadline)
        except PsqlLost:
            del self.sessions[database]
            session.close()
            raise

    def close(self) -> None:
        """End every kept psql."""
        while self.sessions:
            self.sessions.popitem()[1].close()


def postgres_state(database: str, sessions: PsqlSessions | None = None) -> dict[str, Any]:
    """Row counts of every table in ``database``, read with psql as ``postgres``.

    ``sessions``: the episode's kept psql processes; without it a psql is started for this
    snapshot alone. A kept psql that has died or does not answer within PSQL_SESSION_TIMEOUT_S
    is ended and a new one (kept from then on) gets the rest of SNAPSHOT_TIMEOUT_S.
    """
    own = sessions is None
    kept = PsqlSessions() if sessions is None else sessions
    deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
    try:
        if database in kept.sessions:
            try:
                text = kept.query(
                    database,
                    COUNT_ROWS_SQL,
                    min(deadline, time.monotonic() + PSQL_SESSION_TIMEOUT_S),
                )
            except PsqlLost:
                text = kept.query(database, COUNT_ROWS_SQL, deadline)
        else:
            text = kept.query(database, COUNT_ROWS_SQL, deadline)
    except (PsqlLost, OSError, subprocess.SubprocessError) as error:
        return {"kind": "postgres", "database": database, "tables": None, "error": str(error)}
    finally:
        if own:
            kept.close()
    try:
        tables = json.loads(text)
        if not isinstance(tables, dict) or not all(isinstance(n, int) for n in tables.values()):
            raise ValueError("not an object of counts")
    except ValueError:
        return {"kind": "postgres", "database": database, "tables": None, "error": text.strip()}
    return {"kind": "postgres", "database": database, "tables": tables}


def snapshot(spec: dict[str, Any], psql: PsqlSessions | None = None) -> dict[str, Any]:
    """The state of the server's world named by the manifest entry's ``state``.

    ``psql``: the episode's kept psql processes (postgres snapshots); without it each postgres
    snapshot starts its own psql.
    """
    state = spec.get("state") or {"kind": "none"}
    kind = state.get("kind")
    try:
        if kind == "files":
            return files_state(state["root"])
        if kind == "git":
            return git_state(state["root"])
        if kind == "memory":
            return memory_state(state["path"])
        if kind == "postgres":
            return postgres_state(state["database"], psql)
        if kind == "none":
            return {"kind": "none"}
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as error:
        return {"kind": kind, "error": f"{type(error).__name__}: {error}"}
    return {"kind": kind, "error": f"unknown state kind {kind!r}"}


# --- what the server wrote ------------------------------------------------------------------------


class StderrBuffer:
    """A server's stderr since the last reply: the last STDERR_KEEP_BYTES, the rest counted."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        """Keep ``chunk``, dropping the oldest bytes past the limit."""
        self.data += chunk
        excess = len(self.data) - STDERR_KEEP_BYTES
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess

    def take(self) -> str:
        """The kept text (with a marker for bytes not kept); empties the buffer."""
        text = bytes(self.data).decode("utf-8", errors="replace")
        if self.dropped:
            text = f"[... {self.dropped} bytes of stderr not kept ...]\n{text}"
        self.data.clear()
        self.dropped = 0
        return text


def wire_text(data: bytes) -> str:
    """Bytes as text, invalid UTF-8 kept as surrogate escapes (reversible)."""
    return data.decode("utf-8", errors="surrogateescape")


def parse_message(data: bytes) -> types.JSONRPCMessage | None:
    """The JSON-RPC message in ``data``, or None when it is not one."""
    try:
        return types.jsonrpc_message_adapter.validate_json(data, by_name=False)
    except ValueError:
        return None


class Tap:
    """The messages, garbage and stderr of one server since the previous reply."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.garbage: list[str] = []
        self.stderr = StderrBuffer()

    def take(self) -> dict[str, Any]:
        """The reply fields for everything recorded so far; starts afresh."""
        taken = {"messages": self.messages, "garbage": self.garbage, "stderr": self.stderr.take()}
        self.messages, self.garbage = [], []
        return taken


def response_to(messages: list[dict[str, Any]], method: str) -> dict[str, Any] | None:
    """The response (parsed) to the last request of ``method`` sent among ``messages``."""
    request_id: Any = None
    for entry in messages:
        if entry["dir"] == "send":
            message = json.loads(entry["line"])
            if message.get("method") == method and "id" in message:
                request_id = message["id"]
    if request_id is None:
        return None
    for entry in messages:
        if entry["dir"] == "recv":
            message = json.loads(entry["line"])
            if message.get("id") == request_id and ("result" in message or "error" in message):
                return message
    return None


# --- HTTP tap -------------------------------------------------------------------------------------


class TapStream(httpx2.AsyncByteStream):
    """A response body passed through unchanged, its JSON-RPC payloads recorded on the way."""

    def __init__(self, inner: Any, tap: Tap, event_stream: bool) -> None:
        self.inner = inner
        self.tap = tap
        self.event_stream = event_stream
        self.pending = bytearray()

    def record(self, payload: bytes) -> None:
        """Record one payload: a message, or garbage."""
        if parse_message(payload) is None:
            self.tap.garbage.append(wire_text(payload))
        else:
            self.tap.messages.append({"dir": "recv", "line": wire_text(payload)})

    def record_events(self) -> None:
        """Record every complete server-sent event in the pending bytes."""
        text = self.pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        *events, rest = text.split(b"\n\n")
        self.pending = bytearray(rest)
        for event in events:
            data = [
                line[5:].removeprefix(b" ")
                for line in event.split(b"\n")
                if line == b"data" or line.startswith(b"data:")
            ]
            payload = b"\n".join(data)
            # An event with empty data is never dispatched (the SSE standard): priming events.
            if payload:
                self.record(payload)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """Yield the body's chunks, recording before the client sees them."""
        async for chunk in self.inner:
            self.pending += chunk
            if self.event_stream:
                self.record_events()
            yield chunk
        if not self.event_stream and self.pending.strip():
            self.record(bytes(self.pending))
        self.pending.clear()

    async def aclose(self) -> None:
        """Close the underlying body."""
        await self.inner.aclose()


class TapTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport that records request bodies and JSON-RPC response payloads."""

    def __init__(self, tap: Tap) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.tap = tap

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Send ``request`` through the real transport, tapping both bodies."""
        body = await request.aread()
        if body:
            self.tap.messages.append({"dir": "send", "line": wire_text(body)})
        response = await self.inner.handle_async_request(request)
        content_type = response.headers.get("content-type", "").lower()
        response.stream = TapStream(
            response.stream, self.tap, content_type.startswith("text/event-stream")
        )
        return response

    async def aclose(self) -> None:
        """Close the real transport."""
        await self.inner.aclose()


# --- the server -----------------------------------------------------------------------------------


def server_account() -> pwd.struct_passwd:
    """The account servers run as."""
    return pwd.getpwnam(SERVER_USER)


# Variables of the image's environment that are the build's, beyond the harness's own
# (runtime.harness_variable: the shell's, pip's certificate bundle, anything naming worldtrace,
# the driver's own settings among them): the certificate bundle npm trusted behind the machine's
# proxy and apt's build setting. A server must not see them: one that prints its environment
# (server-everything's get-env) would show them to the agent.
BUILD_VARIABLES = frozenset({"NODE_EXTRA_CA_CERTS", "DEBIAN_FRONTEND"})


def server_env(spec: dict[str, Any], account: pwd.struct_passwd) -> dict[str, str]:
    """The image's environment as the server user, minus ours, plus the manifest entry's own.

    What stays is what a login as the user would have (PATH, locale, TZ, and the image's
    fixed git dates and hash seed, which keep the servers' answers the same in every run).
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not runtime.harness_variable(key, value, also=BUILD_VARIABLES)
    }
    env.update(HOME=account.pw_dir, USER=account.pw_name, LOGNAME=account.pw_name)
    env.update({key: str(value) for key, value in (spec.get("env") or {}).items()})
    return env


Outgoing = tuple[dict[str, Any], bytes]
"""A message on its way to a stdio server: its record in the tap and its line's bytes."""


class RecordingWriteStream:
    """The session's write stream for stdio: serializes and records each message as it is sent.

    Recording in the sender's own task (not in the pipe writer) puts a message into the reply of
    the op that sent it, e.g. the notifications/cancelled of a call that timed out.
    """

    def __init__(self, inner: MemoryObjectSendStream[Outgoing], tap: Tap) -> None:
        self.inner = inner
        self.tap = tap

    async def send(self, item: SessionMessage, /) -> None:
        """Record ``item`` exactly as it will be written, and pass it to the pipe writer."""
        # The SDK's own stdio transport serializes the same way.
        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        entry: dict[str, Any] = {"dir": "send", "line": text}
        self.tap.messages.append(entry)
        await self.inner.send((entry, text.encode() + b"\n"))

    async def aclose(self) -> None:
        """Close the stream to the pipe writer."""
        await self.inner.aclose()

    async def __aenter__(self) -> RecordingWriteStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to the non-blocking ``fd``, waiting while the pipe is full."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await anyio.wait_writable(fd)


async def read_chunk(fd: int) -> bytes:
    """The next bytes of the non-blocking ``fd`` (b"" at EOF)."""
    while True:
        try:
            return os.read(fd, READ_CHUNK)
        except BlockingIOError:
            await anyio.wait_readable(fd)


class Connection:
    """One running server, its tap, and an SDK client session over stdio or streamable HTTP."""

    def __init__(self, name: str, spec: dict[str, Any], transport: str, argv: list[str]) -> None:
        self.name = name
        self.spec = spec
        self.transport = transport
        self.argv = argv
        self.tap = Tap()
        self.session: ClientSession | None = None
        self.session_error: BaseException | None = None
        self.ready = anyio.Event()
        self.closing = anyio.Event()
        self.session_done = anyio.Event()
        self.exited = anyio.Event()
        self.stdout_done = anyio.Event()
        self.pumps_done = anyio.Event()
        self.exit_code: int | None = None
        self._exit_scopes: set[anyio.CancelScope] = set()
        self._task_group: anyio.abc.TaskGroup | None = None
        self.process = self._launch()
        self.pidfd = os.pidfd_open(self.process.pid)

    def _launch(self) -> subprocess.Popen[bytes]:
        account = server_account()
        cwd = self.spec.get("cwd") or account.pw_dir
        if not os.path.isdir(cwd):
            cwd = "/"
        as_user: dict[str, Any] = {}
        if os.geteuid() == 0:
            groups = os.getgrouplist(account.pw_name, account.pw_gid)
            as_user = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": groups}
        process = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=server_env(self.spec, account),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # http: the server's stdout is not the protocol; it shares the stderr pipe.
            stderr=subprocess.PIPE if self.transport == "stdio" else subprocess.STDOUT,
            process_group=0,
            close_fds=True,
            **as_user,
        )
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                os.set_blocking(pipe.fileno(), False)
        return process

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Pump the server's pipes and hold the session until the connection is closed."""
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        outgoing, write_reader = anyio.create_memory_object_stream[Outgoing](0)
        write_stream = RecordingWriteStream(outgoing, self.tap)
        try:
            await self._run_pumps(read_writer, read_stream, write_stream, write_reader, task_status)
        finally:
            # Closed only here, when no task waits on them any more.
            for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            os.close(self.pidfd)
            self.pumps_done.set()

    async def _run_pumps(
        self,
        read_writer: MemoryObjectSendStream[SessionMessage | Exception],
        read_stream: MemoryObjectReceiveStream[SessionMessage | Exception],
        write_stream: RecordingWriteStream,
        write_reader: MemoryObjectReceiveStream[Outgoing],
        task_status: anyio.abc.TaskStatus[None],
    ) -> None:
        async with anyio.create_task_group() as group:
            self._task_group = group
            group.start_soon(self._watch_exit)
            if self.transport == "stdio":
                assert self.process.stderr is not None
                group.start_soon(self._read_stderr, self.process.stderr.fileno())
                group.start_soon(self._read_stdout, read_writer)
                group.start_soon(self._write_stdin, write_reader)
                group.start_soon(self._hold_session, (read_stream, write_stream))
            else:
                assert self.process.stdout is not None
                group.start_soon(self._read_stderr, self.process.stdout.fileno())
                group.start_soon(self._hold_session, None)
            task_status.started()

    async def _watch_exit(self) -> None:
        await anyio.wait_readable(self.pidfd)
        self.exit_code = self.process.wait()
        self.exited.set()
        if self.transport == "stdio":
            # The last lines the server wrote before exiting still count.
            with anyio.move_on_after(EXIT_DRAIN_S):
                await self.stdout_done.wait()
        for scope in list(self._exit_scopes):
            scope.cancel()

    async def _read_stderr(self, fd: int) -> None:
        while chunk := await read_chunk(fd):
            self.tap.stderr.add(chunk)

    async def _read_stdout(
        self, read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        pending = bytearray()
        async with read_writer:
            while chunk := await read_chunk(fd):
                pending += chunk
                while (end := pending.find(b"\n")) >= 0:
                    line = bytes(pending[:end])
                    del pending[: end + 1]
                    await self._deliver(line, read_writer)
            if pending:
                await self._deliver(bytes(pending), read_writer)
        self.stdout_done.set()

    async def _deliver(
        self, line: bytes, read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    ) -> None:
        message = parse_message(line)
        if message is None:
            self.tap.garbage.append(wire_text(line))
            return
        self.tap.messages.append({"dir": "recv", "line": wire_text(line)})
        # The session may be gone (stopping); the line is recorded and the pipe kept drained.
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await read_writer.send(SessionMessage(message))

    async def _write_stdin(self, write_reader: MemoryObjectReceiveStream[Outgoing]) -> None:
        assert self.process.stdin is not None
        fd = self.process.stdin.fileno()
        broken: str | None = None
        async with write_reader:
            async for entry, data in write_reader:
                if broken is None:
                    try:
                        await write_all(fd, data)
                    except OSError as error:
                        broken = f"{type(error).__name__}: {error.strerror or error}"
                if broken is not None:
                    entry["write_error"] = broken

    async def _hold_session(self, streams: tuple[Any, Any] | None) -> None:
        """Enter and leave the transport and the session in this one task (the SDK needs it)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                if streams is None:
                    client = httpx2.AsyncClient(
                        transport=TapTransport(self.tap),
                        timeout=httpx2.Timeout(30.0, read=300.0),
                    )
                    await stack.enter_async_context(client)
                    url = self.spec["transports"]["http"]["url"]
                    streams = await stack.enter_async_context(
                        streamable_http_client(url, http_client=client)
                    )
                self.session = await stack.enter_async_context(ClientSession(*streams))
                self.ready.set()
                await self.closing.wait()
        except Exception as error:  # reported by the op that waits for the session
            self.session_error = error
        finally:
            self.ready.set()
            self.session_done.set()

    @contextlib.contextmanager
    def until_exit(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope that is cancelled when the server exits."""
        with anyio.CancelScope() as scope:
            self._exit_scopes.add(scope)
            if self.exited.is_set():
                scope.cancel()
            try:
                yield scope
            finally:
                self._exit_scopes.discard(scope)

    async def wait_port(self, deadline: float) -> None:
        """Wait until the HTTP server's port accepts connections (or it exits)."""
        url = urlsplit(self.spec["transports"]["http"]["url"])
        host, port = url.hostname or "127.0.0.1", url.port or 80
        while not self.exited.is_set():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"port {port} did not open")
            try:
                with anyio.fail_after(max(deadline - time.monotonic(), 0.01)):
                    stream = await anyio.connect_tcp(host, port)
                await stream.aclose()
                return
            except OSError:
                await anyio.sleep(0.05)
        raise ProcessLookupError("the server exited")

    async def cancel_posted(self) -> None:
        """Wait (briefly) until the SDK has POSTed the cancel of a timed-out call.

        Over HTTP the SDK's own writer task sends it after the call returned; waiting puts it
        into the reply of the call it cancels, as on stdio.
        """
        with anyio.move_on_after(CANCEL_POST_S):
            while not any(
                entry["dir"] == "send" and '"notifications/cancelled"' in entry["line"]
                for entry in self.tap.messages
            ):
                await anyio.sleep(0.005)

    def exit_reply(self) -> dict[str, Any]:
        """The ``server_exited`` value."""
        code = self.exit_code
        return {"code": code}

    async def wait_exit(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the server to exit."""
        with anyio.move_on_after(timeout):
            await self.exited.wait()

    async def close(self) -> None:
        """End the session, then the server (stdin closed, SIGTERM, SIGKILL), then the pumps."""
        self.closing.set()
        with anyio.move_on_after(STOP_GRACE_S):
            await self.session_done.wait()
        # End of input: the MCP way to ask a stdio server to exit (an HTTP server gets SIGTERM).
        if self.transport == "stdio" and self.process.stdin is not None:
            # The fd stays valid (now /dev/null) for a writer still waiting on it.
            null = os.open(os.devnull, os.O_RDONLY)
            with contextlib.suppress(OSError):
                os.dup2(null, self.process.stdin.fileno())
            os.close(null)
            await self.wait_exit(STOP_GRACE_S)
        for signum in (signal.SIGTERM, signal.SIGKILL):
            if self.exited.is_set():
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signum)
            await self.wait_exit(STOP_GRACE_S)
        # Whatever the server left behind in its group goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
        with anyio.move_on_after(STOP_GRACE_S):
            await self.pumps_done.wait()


# --- the driver -----------------------------------------------------------------------------------


class Driver:
    """Serves requests; holds at most one server connection."""

    def __init__(self, task_group: anyio.abc.TaskGroup, manifest: str) -> None:
        self.task_group = task_group
        self.manifest = manifest
        self.connection: Connection | None = None
        self.psql = PsqlSessions()

    async def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Execute one request and return its reply."""
        op = request.get("op")
        if op == "start":
            return await self.start(request)
        if op == "call":
            return await self.call(request)
        if op == "observe":
            connection = self._connection()
            return {"state": snapshot(connection.spec, self.psql)}
        if op == "stop":
            return await self.stop()
        raise ValueError(f"unknown op {op!r}")

    def _connection(self) -> Connection:
        if self.connection is None:
            raise RuntimeError("no server was started")
        return self.connection

    async def start(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start the server's services and the server, initialize, list its tools."""
        if self.connection is not None:
            raise RuntimeError(f"server {self.connection.name!r} is running; stop it first")
        started = time.monotonic()
        name = request["server"]
        transport = request.get("transport", "stdio")
        timeout = float(request.get("timeout") or DEFAULT_START_TIMEOUT_S)
        deadline = started + timeout
        spec = load_spec(self.manifest, name)
        if transport not in (spec.get("transports") or {}) and not (
            transport == "stdio" and request.get("command")
        ):
            raise ValueError(f"server {name!r} has no {transport!r} transport")
        argv = request.get("command") or spec["transports"][transport]["command"]
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"command must be a non-empty list of strings, not {argv!r}")
        for service in spec.get("services") or []:
            await self.start_service(service, deadline)
        connection = Connection(name, spec, transport, argv)
        self.connection = connection
        await self.task_group.start(connection.run)
        try:
            reply = await self.connect(connection, deadline, timeout)
        except BaseException:
            await self.stop()
            raise
        reply["start_s"] = round(time.monotonic() - started, 6)
        return reply

    async def start_service(self, service: str, deadline: float) -> None:
        """Start one service the server needs."""
        if service == "postgres":
            timeout = max(deadline - time.monotonic(), 0.1)
            result = await anyio.to_thread.run_sync(
                lambda: subprocess.run([START_POSTGRES], capture_output=True, timeout=timeout)
            )
            if result.returncode != 0:
                tail = (result.stdout + result.stderr).decode("utf-8", "replace")[-2000:]
                raise RuntimeError(f"{START_POSTGRES} exited {result.returncode}: {tail}")
        elif service != "site":  # the site runs on the host's side; nothing to do here
            raise ValueError(f"unknown service {service!r}")

    async def connect(
        self, connection: Connection, deadline: float, timeout: float
    ) -> dict[str, Any]:
        """Initialize the session and list the tools; the start reply."""
        failure: str | None = None
        tools: list[dict[str, Any]] = []
        with connection.until_exit() as scope, anyio.move_on_after(deadline - time.monotonic()):
            try:
                if connection.transport == "http":
                    await connection.wait_port(deadline)
                await connection.ready.wait()
                session = connection.session
                if session is None:
                    error = connection.session_error
                    raise RuntimeError(f"the session could not start: {error!r}")
                left = max(deadline - time.monotonic(), 0.01)
                # The server's answer is the data: its wire text is taken from the tap below.
                with anyio.fail_after(left):
                    await session.initialize()
                cursor = None
                for _ in range(1000):
                    page = await session.send_request(
                        types.ListToolsRequest(
                            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
                        ),
                        RAW_RESULT,
                        request_read_timeout_seconds=max(deadline - time.monotonic(), 0.01),
                    )
                    tools.extend(page.get("tools") or [])
                    cursor = page.get("nextCursor")
                    if not cursor:
                        break
                state = snapshot(connection.spec, self.psql)
                taken = connection.tap.take()
                initialize = response_to(taken["messages"], "initialize") or {}
                result = initialize.get("result") or {}
                return {
                    "server": connection.name,
                    "transport": connection.transport,
                    "server_info": result.get("serverInfo"),
                    "protocol_version": session.protocol_version,
                    "sdk_version": importlib.metadata.version("mcp"),
                    "capabilities": result.get("capabilities"),
                    "instructions": result.get("instructions"),
                    "tools": tools,
                    "server_pid": connection.process.pid,
                    **taken,
                    "state": state,
                }
            except (MCPError, RuntimeError, TimeoutError, OSError, ValidationError) as error:
                failure = f"{type(error).__name__}: {error}"
        # A server that exits ends its output first: the session may fail before the exit is seen.
        await connection.wait_exit(EXIT_DRAIN_S)
        if scope.cancelled_caught or connection.exited.is_set():
            failure = f"the server exited with code {connection.exit_code} while starting"
        elif failure is None:
            failure = f"the server did not finish initialize and tools/list within {timeout:g}s"
        taken = connection.tap.take()
        tail = taken["stderr"][-2000:]
        raise StartFailed(f"{failure}; stderr: {tail!r}", taken)

    async def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one tools/call, whatever it holds, and report what came back."""
        started = time.monotonic()
        connection = self._connection()
        timeout = float(request.get("timeout") or DEFAULT_CALL_TIMEOUT_S)
        reply: dict[str, Any] = {
            "result": None,
            "protocol_error": None,
            "result_problem": None,
            "timed_out": False,
            "server_exited": None,
        }
        params: dict[str, Any] = {"name": request["name"]}
        if "arguments" in request:
            params["arguments"] = request["arguments"]
        call_s = 0.0
        error: MCPError | None = None
        if connection.exited.is_set() or connection.session is None:
            reply["server_exited"] = connection.exit_reply()
        else:
            session = connection.session
            call_request = ToolsCallRequest(method="tools/call", params=params)
            with connection.until_exit() as exit_scope:
                with anyio.move_on_after(timeout + CALL_GRACE_S) as outer:
                    call_started = time.perf_counter()
                    try:
                        await session.send_request(
                            call_request,
                            RAW_RESULT,
                            request_read_timeout_seconds=timeout,
                        )
                    except MCPError as raised:
                        error = raised
                    except ValidationError as raised:
                        # Not a CallToolResult: the wire text below is still the data.
                        reply["result_problem"] = str(raised)
                    call_s = time.perf_counter() - call_started
            if exit_scope.cancelled_caught:
                call_s = time.perf_counter() - call_started
        messages = connection.tap.messages
        answer = response_to(messages, "tools/call") if reply["server_exited"] is None else None
        if answer is not None:
            if "error" in answer:
                reply["protocol_error"] = answer["error"]
            else:
                reply["result"] = answer["result"]
        elif reply["server_exited"] is None:
            if connection.exited.is_set() or (
                error is not None and error.code == types.CONNECTION_CLOSED
            ):
                await connection.wait_exit(EXIT_DRAIN_S)
                reply["server_exited"] = connection.exit_reply()
            elif (error is not None and error.code == types.REQUEST_TIMEOUT) or (
                outer.cancelled_caught
            ):
                reply["timed_out"] = True
                if connection.transport == "http":
                    await connection.cancel_posted()
            elif error is not None:
                # An answer the SDK made up (an HTTP error status turned into JSON-RPC).
                reply["protocol_error"] = error.error.model_dump(mode="json", exclude_none=True)
        reply.update(connection.tap.take())
        reply["state"] = snapshot(connection.spec, self.psql)
        reply["call_s"] = round(call_s, 6)
        reply["wall_s"] = round(time.monotonic() - started, 6)
        return reply

    async def stop(self) -> dict[str, Any]:
        """Close the session and the server."""
        connection = self.connection
        self.connection = None
        self.psql.close()
        if connection is None:
            return {"stopped": True, "server_exited": None}
        await connection.close()
        return {"stopped": True, "server_exited": connection.exit_reply(), **connection.tap.take()}


class StartFailed(runtime.RequestFailed):
    """A server that would not start; the reply carries what it wrote.

    The error names its stderr's tail; ``fields`` are its messages, garbage and stderr.
    """


async def serve(manifest: str, reply_fd: int) -> None:
    """Serve requests from stdin until it closes."""
    async with anyio.create_task_group() as group:
        driver = Driver(group, manifest)
        while True:
            # A thread reads stdin, so the session's tasks run while the host is silent.
            line = await anyio.to_thread.run_sync(sys.stdin.buffer.readline, abandon_on_cancel=True)
            if not line:
                break
            if not line.strip():
                continue
            # runtime.serve's steps, with the handler awaited.
            answer = runtime.Answer(line, error_key="driver_error")
            try:
                reply = await driver.handle(answer.request())
            except Exception as error:  # reply, never die: the host decides what an error means
                reply = answer.failed(error)
            if not runtime.write_reply(reply_fd, answer.done(reply)):
                break  # the host is gone: nobody to serve
        await driver.stop()
        group.cancel_scope.cancel()


def main() -> None:
    """Serve requests, or with ``--observe`` print one state snapshot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--observe", action="store_true", help="print one state snapshot")
    parser.add_argument("--server", help="the server whose state --observe reads")
    parser.add_argument("--servers", default=MANIFEST, help="the manifest (servers.json)")
    args = parser.parse_args()
    if args.observe:
        if not args.server:
            parser.error("--observe needs --server NAME")
        print(json.dumps({"state": snapshot(load_spec(args.servers, args.server))}))
        return
    anyio.run(serve, args.servers, runtime.private_reply_fd())


if __name__ == "__main__":
    runtime.forbid_inspection()
    main()
