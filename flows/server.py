"""A real Prefect server run by worldtrace as a managed background process.

``worldtrace server start`` serves on loopback (``127.0.0.1``) unless ``--host`` says otherwise,
and refuses another address unless Prefect's API authentication is configured
(:data:`SERVER_AUTH_ENV`, see :func:`check_exposure` and docs/deployments.md): anyone who
reaches the API can create flow runs. It runs ``prefect server start`` detached (its own session: it
outlives the command) with its own Prefect home, ``$XDG_STATE_HOME/worldtrace/prefect-server``
(``~/.local/state/…`` by default; :data:`SERVER_HOME_ENV` moves it, which tests do). The home
holds the SQLite database (unless ``--database`` gives a PostgreSQL URL,
``postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DATABASE``, which needs the ``asyncpg`` package;
Prefect installs it), the server's log file and a small state file (pid, URL, database with
its password hidden, start time). The command returns once the server answers its health
check, and starting a running server only says so. ``server stop`` sends SIGTERM to the
server's process group, then SIGKILL after a grace period; ``server status`` says whether it
runs, where, on which database, since when, and exits 0 either way (``--check`` exits
:data:`NOT_RUNNING_EXIT` when it is not running and healthy, for scripts).

Every other command calls :func:`select_api` before anything imports Prefect: when the managed
server runs and answers, ``PREFECT_API_URL`` points at it, so flow runs, deployments and
schedules live there and the UI shows them; when it does not, Prefect's temporary local API
runs inside the command as before. A ``PREFECT_API_URL`` the user set (in the environment or
the active Prefect profile) always wins. A server that requires authentication is sent
:data:`CLIENT_AUTH_ENV`, taken from :data:`SERVER_AUTH_ENV` when only that is set. The
commands that run flows (:data:`FLOW_COMMANDS`) print the one line :func:`select_api`
returns, dimmed on stderr, so a run's records are never somewhere the user did not expect.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated

import typer

from worldtrace.flows.logs import state_home

# worldtrace.schemas.errors is imported where an error is raised: the schemas package imports
# datasets (a second, and it reads its log settings on import), and the command line imports
# this module before it configures logging.

SERVER_HOME_ENV = "WORLDTRACE_SERVER_HOME"
SERVER_AUTH_ENV = "PREFECT_SERVER_API_AUTH_STRING"
"""Prefect's own setting for the server's HTTP basic authentication, ``user:password``."""
CLIENT_AUTH_ENV = "PREFECT_API_AUTH_STRING"
"""Prefect's own setting for what its clients send to a server that requires authentication."""
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4200
START_TIMEOUT_S = 120.0
"""Measured on 2 cores: 4 to 14 s to healthy when idle (a first start migrates the database),
31 to 68 s at load averages of 6 to 13."""
STOP_TIMEOUT_S = 15.0
HEALTH_TIMEOUT_S = 1.0
"""Only asked of a live process: a refused connection answers at once, a hung server in 1 s."""
SLOT_WAIT_S = 2
"""Longest wait the server tells a sandbox slot request to take before asking again (Prefect's
default: 30 s)."""
LOG_TAIL_LINES = 20
NOT_RUNNING_EXIT = 3
"""``server status --check`` when no healthy server runs (LSB's "program is not running")."""
FLOW_COMMANDS = frozenset({"collect", "run", "deploy", "deployments", "worker"})
"""Commands that talk to Prefect and so say which API they use (``curate`` and ``publish``
run datatrove and the Hub client without Prefect)."""
DATABASE_SCHEMES = ("postgresql+asyncpg", "sqlite+aiosqlite")
EPHEMERAL_LINE = (
    "Prefect: a temporary local API (no server running: `worldtrace server start` keeps runs "
    "and schedules)"
)


def server_home() -> Path:
    """The managed server's Prefect home: database, log file and state file."""
    configured = os.environ.get(SERVER_HOME_ENV)
    if configured:
        return Path(configured)
    return state_home() / "prefect-server"


def state_path() -> Path:
    """The state file of the running server (absent when none was started)."""
    return server_home() / "server.json"


def log_path() -> Path:
    """The server's log file (every start appends to it)."""
    return server_home() / "server.log"


def hide_password(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part replaced by ``***``."""
    return re.sub(r"(://[^/@:]*:)[^/@]*@", r"\1***@", url)


@dataclass(frozen=True)
class ServerState:
    """What the state file says about a server worldtrace started."""

    pid: int
    host: str
    port: int
    database: str
    """The connection URL with its password hidden: the state file never holds a secret."""
    started_at: str
    """ISO 8601, UTC."""
    process_start: int | None
    """The process's start time in clock ticks since boot (Linux), so a reused pid is not
    taken for the server."""
    auth: bool = False
    """Whether the API requires authentication (:data:`SERVER_AUTH_ENV` was set when it
    started); the string itself is never written here. Absent from older state files."""

    @property
    def url(self) -> str:
        """The server's address on this machine (the UI)."""
        return _local_url(self.host, self.port)

    @property
    def api_url(self) -> str:
        """The address ``PREFECT_API_URL`` takes."""
        return f"{self.url}/api"

    def uptime_s(self) -> float:
        """Seconds since the server was started."""
        return (datetime.now(UTC) - datetime.fromisoformat(self.started_at)).total_seconds()


def _local_url(host: str, port: int) -> str:
    """How this machine reaches a server listening on ``host``: on every address, by loopback."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address only this machine reaches (``localhost`` counts)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any address


def check_exposure(host: str) -> bool:
    """Refuse to serve beyond this machine without authentication; return whether it is on.

    Anyone who reaches the API can create deployments and flow runs; a server on another
    address than loopback therefore needs Prefect's API authentication
    (:data:`SERVER_AUTH_ENV`), which its clients then send (:data:`CLIENT_AUTH_ENV`).
    """
    from worldtrace.schemas.errors import InputError

    auth = bool(os.environ.get(SERVER_AUTH_ENV))
    if not is_loopback(host) and not auth:
        raise InputError(
            f"--host {host} would serve the Prefect API beyond this machine with no "
            "authentication, so anyone who reaches it could create deployments and flow runs; "
            f"set {SERVER_AUTH_ENV}=USER:PASSWORD (Prefect's API authentication) to require it "
            f"(clients then set {CLIENT_AUTH_ENV} to the same string), or serve on "
            f"{DEFAULT_HOST} (the default)"
        )
    return auth


def _load_state() -> ServerState | None:
    """The state file's content, or None; OSError, ValueError or TypeError if unreadable."""
    try:
        return ServerState(**json.loads(state_path().read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None


def read_state() -> ServerState | None:
    """The state file's content, or None when no server was started."""
    try:
        return _load_state()
    except (OSError, ValueError, TypeError) as error:
        from worldtrace.schemas.errors import SetupError

        path = state_path()
        raise SetupError(
            f"cannot read the Prefect server's state file {path} ({error}); stop the server "
            "if it runs (its pid is in the file) and remove the file"
        ) from None


def _write_state(state: ServerState) -> None:
    path = state_path()
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(asdict(state), indent=2) + "\n", encoding="utf-8")
    partial.replace(path)


def _process_start(pid: int) -> int | None:
    """Start time of a live process in clock ticks since boot; None if it is gone or a zombie.

    Raises :class:`OSError` when there is no ``/proc`` (not Linux).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its end.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def alive(state: ServerState) -> bool:
    """Whether the process the state file names still runs (and is the same process)."""
    try:
        started = _process_start(state.pid)
    except OSError:
        try:
            os.kill(state.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return started is not None and started == state.process_start


def healthy(api_url: str, timeout_s: float = HEALTH_TIMEOUT_S) -> bool:
    """Whether the Prefect API at ``api_url`` answers its health check."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout_s) as response:
            return response.status == 200 and response.read().strip() == b"true"
    except (OSError, urllib.error.URLError, ValueError):
        return False


def database_url(given: str | None, home: Path) -> str:
    """The connection URL the server uses: SQLite in ``home`` unless ``given``, validated."""
    from worldtrace.schemas.errors import InputError, SetupError

    if given is None:
        return f"sqlite+aiosqlite:///{home / 'prefect.db'}"
    scheme, separator, rest = given.partition("://")
    if not separator or not rest.strip("/") or scheme not in DATABASE_SCHEMES:
        hint = ""
        if scheme in ("postgresql", "postgres", "postgresql+psycopg2", "postgresql+psycopg"):
            hint = " (Prefect talks to PostgreSQL through asyncpg: write postgresql+asyncpg://)"
        raise InputError(
            f"--database {hide_password(given)!r} is not a database URL Prefect can use{hint}; "
            "give postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DATABASE, or "
            "sqlite+aiosqlite:///PATH (the default is SQLite in the server's home)"
        )
    if scheme == "sqlite+aiosqlite" and rest.startswith("/") and not rest.startswith("//"):
        # A relative path: relative to where the command runs, not to the server's home.
        return f"{scheme}:///{Path(rest[1:]).resolve()}"
    if scheme == "postgresql+asyncpg" and find_spec("asyncpg") is None:
        raise SetupError(
            "a PostgreSQL database needs the asyncpg package: .venv/bin/pip install asyncpg"
        )
    return given


def _log_tail(since: int) -> str:
    """The last lines the server wrote to its log after byte ``since``."""
    try:
        with log_path().open("rb") as log:
            log.seek(since)
            text = log.read().decode("utf-8", errors="replace")
    except OSError as error:
        return f"(cannot read the log: {error})"
    lines = [line for line in text.splitlines() if line.strip()]
    return "\n".join(lines[-LOG_TAIL_LINES:]) or "(the log is empty)"


def _terminate(state: ServerState, timeout_s: float) -> None:
    """SIGTERM the server's process group, SIGKILL it if it has not ended within the timeout."""
    from worldtrace.schemas.errors import SetupError

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            # Its own session: the group id is its pid, and the group holds any helpers.
            os.killpg(state.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not alive(state):
                return
            time.sleep(0.05)
    raise SetupError(f"the Prefect server (pid {state.pid}) did not end after SIGKILL")


def _check_port_free(host: str, port: int) -> None:
    """Fail at once when something listens there: its health check would pass for ours."""
    from worldtrace.schemas.errors import SetupError

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            # As uvicorn binds: a port whose last connections are in TIME_WAIT is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as error:
        what = (
            "another Prefect server, not the one worldtrace manages here, answers there"
            if healthy(f"{_local_url(host, port)}/api")
            else f"cannot listen there: {error.strerror or error}"
        )
        raise SetupError(
            f"cannot start the Prefect server at {host}:{port}: {what}; "
            "give another --port, or stop what uses it"
        ) from None


def _server_environment(home: Path, database: str) -> dict[str, str]:
    environment = dict(os.environ)
    # The server serves the API: it must not be pointed at another one, nor at another database.
    for name in ("PREFECT_API_URL", "PREFECT_API_DATABASE_CONNECTION_URL", "PREFECT_PROFILE"):
        environment.pop(name, None)
    environment["PREFECT_HOME"] = str(home)
    environment["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = database
    environment.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # An episode waiting for a sandbox slot (flows/slots.py) is told to ask again after up to
    # this long; Prefect's 30 s would leave sandboxes idle between short episodes.
    environment.setdefault(
        "PREFECT_SERVER_CONCURRENCY_MAXIMUM_CONCURRENCY_SLOT_WAIT_SECONDS", str(SLOT_WAIT_S)
    )
    return environment


def start(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    database: str | None = None,
    timeout_s: float = START_TIMEOUT_S,
) -> tuple[ServerState, bool]:
    """Start the server unless it runs; return its state and whether this call started it.

    Raises :class:`InputError` for a bad database URL or a running server with other
    settings, and :class:`SetupError` (with the end of the server's log) when the server exits
    or does not answer within ``timeout_s``.
    """
    from worldtrace.schemas.errors import InputError

    auth = check_exposure(host)
    home = server_home()
    url = database_url(database, home)
    shown_database = hide_password(url)
    running = read_state()
    if running is not None and alive(running):
        if (running.host, running.port, running.database) != (host, port, shown_database):
            raise InputError(
                f"a Prefect server already runs at {running.url} on {running.database}; "
                "`worldtrace server stop` it first to start one with other settings"
            )
        _wait_until_healthy(running, None, 0, timeout_s)
        return running, False
    state_path().unlink(missing_ok=True)
    _check_port_free(host, port)

    home.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", host]
    with log_path().open("ab") as log:
        since = log.tell()
        header = f"--- worldtrace server start {datetime.now(UTC).isoformat()} {host}:{port}"
        log.write(f"{header} {shown_database}\n".encode())
        log.flush()
        process = subprocess.Popen(
            [*command, "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=home,
            env=_server_environment(home, url),
            start_new_session=True,
        )
    try:
        process_start = _process_start(process.pid)
    except OSError:
        process_start = None
    state = ServerState(
        pid=process.pid,
        host=host,
        port=port,
        database=shown_database,
        started_at=datetime.now(UTC).isoformat(),
        process_start=process_start,
        auth=auth,
    )
    # Written before the wait, so a `server stop` from elsewhere finds a server still starting.
    _write_state(state)
    try:
        _wait_until_healthy(state, process, since, timeout_s)
    except BaseException:
        _terminate(state, STOP_TIMEOUT_S)
        state_path().unlink(missing_ok=True)
        raise
    # Not ours to wait for: the server outlives this command. Marking it reaped keeps Python
    # from warning that a child still runs when the Popen object goes.
    process.returncode = 0
    return state, True


def _wait_until_healthy(
    state: ServerState, process: subprocess.Popen[bytes] | None, since: int, timeout_s: float
) -> None:
    from worldtrace.schemas.errors import SetupError

    deadline = time.monotonic() + timeout_s
    while not healthy(state.api_url):
        if process is not None and process.poll() is not None:
            how = f"it exited with status {process.returncode}"
        elif process is None and not alive(state):
            how = "it ended"
        else:
            how = None
        if how is not None:
            raise SetupError(
                f"the Prefect server did not start at {state.url}: {how}. The end of its log "
                f"{log_path()}:\n{_log_tail(since)}"
            )
        if time.monotonic() > deadline:
            raise SetupError(
                f"the Prefect server at {state.url} did not answer within {timeout_s:.0f} s. "
                f"The end of its log {log_path()}:\n{_log_tail(since)}"
            )
        time.sleep(0.2)


def stop(timeout_s: float = STOP_TIMEOUT_S) -> ServerState | None:
    """Stop the managed server; return the state it had, or None if none was running."""
    state = read_state()
    if state is not None and alive(state):
        _terminate(state, timeout_s)
        state_path().unlink(missing_ok=True)
        return state
    state_path().unlink(missing_ok=True)
    return None


def _profile_setting(name: str) -> str | None:
    """Setting ``name`` of the active Prefect profile, read without importing Prefect."""
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect")
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active")
    settings = profiles.get("profiles", {}).get(active, {})
    value = settings.get(name) if isinstance(settings, dict) else None
    return value if isinstance(value, str) and value else None


def kill_temporary_api() -> None:
    """Kill Prefect's temporary local API, if this command started one.

    It holds nothing of ours (runs are in their run directories), but at exit Prefect stops it
    gracefully and waits up to 5 s, most of the time a stopped command took to end (9 s after
    SIGTERM at a load average of 29, 1 s of it the run's own stop), and its services, cancelled
    mid-flush, printed pages of ``CancelledError`` tracebacks after the command's summary. A
    command that was asked to stop kills it instead. ``SubprocessASGIServer._instances`` is
    Prefect's registry of its temporary servers (prefect is pinned: pyproject.toml).
    """
    # Not imported means no temporary API was started (and importing it costs seconds).
    started = sys.modules.get("prefect.server.api.server")
    if started is None:
        return
    for temporary in list(started.SubprocessASGIServer._instances.values()):
        process = temporary.server_process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()


def select_api() -> str:
    """Point Prefect at the managed server if it runs; return a line saying which API is used.

    Must run before anything imports Prefect (Prefect reads its settings once, at import). A
    ``PREFECT_API_URL`` the user set, in the environment or the active profile, is kept as it
    is. Cheap when no server runs: one missing file, no network.
    """
    user_url = os.environ.get("PREFECT_API_URL") or _profile_setting("PREFECT_API_URL")
    if user_url:
        return f"Prefect API at {user_url} (your PREFECT_API_URL)"
    try:
        state = _load_state()
    except (OSError, ValueError, TypeError) as error:
        return f"{EPHEMERAL_LINE}; cannot read {state_path()}: {error}"
    if state is None or not alive(state):
        return EPHEMERAL_LINE
    if not healthy(state.api_url):
        return (
            f"Prefect: a temporary local API (the server at {state.url} does not answer: "
            "`worldtrace server status`)"
        )
    os.environ["PREFECT_API_URL"] = state.api_url
    if state.auth and not (os.environ.get(CLIENT_AUTH_ENV) or _profile_setting(CLIENT_AUTH_ENV)):
        # The string the server was started with, when this shell has it: send it.
        if not os.environ.get(SERVER_AUTH_ENV):
            return (
                f"Prefect server at {state.url} (it requires authentication: set {CLIENT_AUTH_ENV})"
            )
        os.environ[CLIENT_AUTH_ENV] = os.environ[SERVER_AUTH_ENV]
    return f"Prefect server at {state.url}"


def _uptime(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return (f"{days}d " if days else "") + f"{hours}:{minutes:02d}:{secs:02d}"


def register(app: typer.Typer) -> None:
    """Add the ``server`` command group (start, stop, status) to ``app``."""
    server_app = typer.Typer(
        help="Run a Prefect server in the background: runs, schedules and the UI outlive a "
        "command, and commands that run flows use it."
    )

    @server_app.command("start")
    def start_command(
        port: Annotated[int, typer.Option(help="port to serve on")] = DEFAULT_PORT,
        host: Annotated[
            str,
            typer.Option(
                help=f"address to serve on; another than loopback needs {SERVER_AUTH_ENV}"
            ),
        ] = DEFAULT_HOST,
        database: Annotated[
            str | None,
            typer.Option(
                help="postgresql+asyncpg://USER:PASSWORD@HOST:PORT/DATABASE (needs asyncpg); "
                "default: SQLite in the server's home",
                show_default=False,
            ),
        ] = None,
        timeout: Annotated[
            float, typer.Option(help="seconds to wait for the server to answer")
        ] = START_TIMEOUT_S,
    ) -> None:
        """Start the Prefect server in the background (nothing to do if it runs)."""
        from rich.console import Console

        began = time.monotonic()
        with Console(stderr=True).status("starting the Prefect server…"):
            state, started = start(host, port, database, timeout)
        if started:
            typer.echo(
                f"Prefect server started at {state.url} in {time.monotonic() - began:.1f} s "
                f"(pid {state.pid}, database {state.database}); log: {log_path()}"
            )
            if state.auth:
                typer.echo(
                    f"it requires authentication ({SERVER_AUTH_ENV}): clients send the same "
                    f"string as {CLIENT_AUTH_ENV} (worldtrace commands on this machine do when "
                    f"{SERVER_AUTH_ENV} is set)"
                )
        else:
            typer.echo(f"Prefect server already running at {state.url} (pid {state.pid})")

    @server_app.command("stop")
    def stop_command(
        timeout: Annotated[
            float, typer.Option(help="seconds between SIGTERM and SIGKILL")
        ] = STOP_TIMEOUT_S,
    ) -> None:
        """Stop the Prefect server (not running is not an error)."""
        state = stop(timeout)
        if state is None:
            typer.echo("Prefect server not running")
        else:
            typer.echo(f"Prefect server at {state.url} stopped (pid {state.pid})")

    @server_app.command("status")
    def status_command(
        check: Annotated[
            bool,
            typer.Option(
                "--check",
                help=f"exit {NOT_RUNNING_EXIT} unless the server runs and answers (for scripts)",
            ),
        ] = False,
    ) -> None:
        """Say whether the Prefect server runs, where, on which database and since when."""
        state = read_state()
        if state is None or not alive(state):
            typer.echo("Prefect server: stopped")
            typer.echo(f"home: {server_home()}")
            if check:
                raise typer.Exit(NOT_RUNNING_EXIT)
            return
        answers = healthy(state.api_url)
        typer.echo(
            "Prefect server: running" + ("" if answers else " but not answering (see its log)")
        )
        for key, value in (
            ("url", state.url),
            ("api", state.api_url),
            ("database", state.database),
            ("authentication", "required" if state.auth else "none (loopback only)"),
            ("pid", state.pid),
            ("uptime", _uptime(state.uptime_s())),
            ("log", log_path()),
        ):
            typer.echo(f"{key}: {value}")
        if check and not answers:
            raise typer.Exit(NOT_RUNNING_EXIT)

    app.add_typer(server_app, name="server")
