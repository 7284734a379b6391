"""Web applications served from sandboxes for a browser, one fresh container per episode.

A :class:`SiteDefinition` says how to serve one: its image (an application installed from a
public registry and its seeded data; the web domain defines its sites and their images in
``sandboxes/sites/``), the server's command and what the start page shows. An episode calls
:func:`start_site`, which starts a *new* container from that image: the seeded data lives in
the image, so a new container is the reset, and nothing an earlier episode wrote survives.

Networking: a site never shares the host's network. It runs in a network namespace that has
nothing but a loopback interface and listens there on :data:`SITE_PORT`: either its own
namespace, or the one of a :class:`BrowserNetwork`, which holds one browser and the site of
its current episode and nothing else, so that whatever a page does, the site is all the
browser can reach. Every site has a stable origin, ``http://<name>.test`` (the ``.test``
domain is reserved and never resolves on the internet): the browser maps ``*.test`` to its
namespace's loopback (:data:`BROWSER_HOST_RULES`), so URLs, links and the ``Host`` header
are the same in every episode and every run. The host reaches a site through a socket opened
inside its namespace (:meth:`RunningSite.connect`): startup waits until the start page
answers 200 with the site's own text that way, and fails with the server's log tail
otherwise.

``RunningSite.read_data`` reads the application's real stored data for tests and task checks:
SQL run read-only inside the container against the app's own SQLite file, or a TiddlyWiki
filter expression run by TiddlyWiki itself over the wiki folder on disk.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Any, Literal

from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.images import BASE_IMAGE
from worldtrace.sandboxes.limits import Limits
from worldtrace.sandboxes.netns import NamespaceError, NetworkNamespace

SERVER_LOG = "/tmp/site-server.log"
"""Where the server's stdout and stderr go inside the container."""

SITE_LABEL = "worldtrace.site"
NETWORK_LABEL = "worldtrace.browser_network"

SITE_PORT = 80
"""Where every site listens, on the loopback of its namespace (a namespace holds one site)."""

SITE_DOMAIN = "test"
"""Every site is ``http://<name>.test``: a reserved domain that never resolves elsewhere."""

BROWSER_HOST_RULES = f"MAP *.{SITE_DOMAIN} 127.0.0.1, MAP * ~NOTFOUND"
"""Chromium's ``--host-resolver-rules`` for a browser in a :class:`BrowserNetwork`: site names
go to the namespace's loopback (the URL's port kept), every other name and address fails to
resolve."""

# A site serves one browser: a core and a few hundred MB are plenty, and the wall clock only
# bounds a container whose owner vanished without closing it.
SITE_LIMITS = Limits(cpus=1.0, memory_mb=768, pids=256, wall_clock_s=6 * 3600)

# The namespace's holder only sleeps. Its wall clock bounds the life of one worker's browser;
# the browser is started again in a new namespace after it (see collectors.web.browser).
NETWORK_LIMITS = Limits(cpus=0.1, memory_mb=16, pids=8, wall_clock_s=24 * 3600, disk_mb=16)


class SiteError(SandboxError):
    """A site that could not be started or read."""


@dataclass(frozen=True)
class SiteDefinition:
    """A web application the browser collector can visit, and how to serve it."""

    name: str
    kind: str
    image: str
    start_path: str
    description: str
    command: tuple[str, ...] = field(default=(), repr=False)
    """Argv of the server inside the container; ``{port}`` is replaced by :data:`SITE_PORT`."""
    ready_text: str = field(default="", repr=False)
    """Text the start page must contain: proves the 200 came from this site's server."""
    data_format: Literal["sqlite", "tiddlywiki"] = field(default="sqlite", repr=False)
    data_path: str = field(default="", repr=False)
    """The SQLite database file, or the TiddlyWiki folder, inside the container."""

    @property
    def host(self) -> str:
        """The site's stable host name, ``<name>.test``."""
        return f"{self.name}.{SITE_DOMAIN}"

    @property
    def origin(self) -> str:
        """The site's stable origin, the same in every episode: ``http://<name>.test``."""
        return f"http://{self.host}"


_JSON_MARKER = b"@@worldtrace-json@@\n"

# Runs inside the container with its own python3: SQLite rows as a JSON list of objects.
# The database is opened read-only, so a check can never change what it checks.
_SQL_READER = r"""
import json, sqlite3, sys
try:
    db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    rows = [dict(row) for row in db.execute(sys.argv[2])]
except sqlite3.Error as error:
    print(f"{type(error).__name__}: {error}", file=sys.stderr)
    sys.exit(3)
json.dump(rows, sys.stdout, default=lambda v: v.decode("utf-8", "replace"))
"""


def _namespace_of(sandbox: DockerSandbox) -> NetworkNamespace:
    container = sandbox.container
    container.reload()  # the pid is known once the container runs
    try:
        return NetworkNamespace(int(container.attrs["State"]["Pid"]))
    except NamespaceError as error:
        raise SiteError(str(error)) from None


class BrowserNetwork:
    """A network namespace holding one browser and the site of its current episode, nothing else.

    A small sandbox with no network (a loopback only) keeps the namespace alive for as long as
    the browser lives. The browser is started inside it (``nsenter --net=`` :attr:`path`) and
    each episode's site joins it (:func:`start_site` with ``network=``) and listens on its
    loopback. Nothing else is in this namespace: no other interface, no route, no host port,
    so no request, WebSocket, WebRTC packet or anything else a page tries reaches anything but
    the site, whatever the browser's own rules say.
    """

    def __init__(self) -> None:
        self.sandbox = DockerSandbox(
            BASE_IMAGE,
            limits=NETWORK_LIMITS,
            network="none",
            hostname="browser",
            labels={NETWORK_LABEL: "1"},
        )
        self._namespace: NetworkNamespace | None = None
        self.site: RunningSite | None = None
        """The site running in this network now (one at a time: they share a port)."""

    def start(self) -> BrowserNetwork:
        """Start the holder; raise :class:`SandboxError` (or :class:`SiteError`) if it fails."""
        self.sandbox.start()
        try:
            self._namespace = _namespace_of(self.sandbox)
        except BaseException:
            self.sandbox.close()
            raise
        return self

    @property
    def namespace(self) -> NetworkNamespace:
        """The namespace, for sockets opened from the host."""
        if self._namespace is None:
            raise SiteError("the browser network is not started")
        return self._namespace

    @property
    def path(self) -> str:
        """A path naming the namespace, for ``nsenter --net=``."""
        return self.namespace.path

    @property
    def docker_network(self) -> str:
        """The ``network`` a sandbox joins this namespace with."""
        return f"container:{self.sandbox.container.id}"

    def alive(self) -> bool:
        """Whether the holder still runs (it stops at its wall-clock limit)."""
        return not self.sandbox.wall_clock_expired and self.sandbox.is_running()

    def close(self) -> None:
        """Remove the holder; the namespace goes once nothing is left in it. Safe twice."""
        namespace, self._namespace = self._namespace, None
        if namespace is not None:
            namespace.close()
        self.sandbox.close()


class RunningSite:
    """A site served by its own fresh container; close it to discard everything it stored."""

    def __init__(
        self,
        definition: SiteDefinition,
        sandbox: DockerSandbox,
        network: BrowserNetwork | None = None,
    ) -> None:
        self.definition = definition
        self.sandbox = sandbox
        self.network = network
        self.origin = definition.origin
        self.namespace = _namespace_of(sandbox)
        self._server: str | None = None
        self._closed = False

    def url(self, path: str) -> str:
        """Return the absolute URL of ``path`` (e.g. ``/newticket``) on this site."""
        return self.origin + (path if path.startswith("/") else "/" + path)

    def connect(self, timeout: float = 10.0) -> socket.socket:
        """Return a TCP connection to the site's server, made inside its network namespace.

        The site is reachable nowhere else; an HTTP client speaking over this connection
        should send ``Host: <definition.host>``, as the browser does.
        """
        return self.namespace.connect(("127.0.0.1", SITE_PORT), timeout)

    def get(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        """GET ``path`` from the server as the browser would; return the status and body."""
        connection = http.client.HTTPConnection(self.definition.host, SITE_PORT, timeout=timeout)
        connection.sock = self.connect(timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read().decode("utf-8", errors="replace")
        finally:
            connection.close()

    def read_data(self, query: str) -> list[dict[str, Any]]:
        """Read the application's stored data.

        * ``trac``, ``datasette``: ``query`` is SQL, run read-only against the app's SQLite
          database (``data_path``); each row is a dict of column name to value.
        * ``tiddlywiki``: ``query`` is a TiddlyWiki filter, e.g. ``[[Lentil Soup]]``,
          ``[tag[Recipe]]`` or ``[all[tiddlers]!is[system]]``, run by TiddlyWiki over the wiki
          folder on disk; each row is one tiddler's fields as strings (``title``, ``text``,
          ``tags``, ``created``, ``modified``, custom fields). A missing title gives ``[]``.
          The server saves edits to disk about a second after answering them.

        A malformed query raises ValueError with the application's message.
        """
        definition = self.definition
        if definition.data_format == "sqlite":
            command = ["python3", "-c", _SQL_READER, definition.data_path, query]
        else:
            command = ["node", "/opt/worldtrace/read_tiddlers.js", definition.data_path, query]
        result = self.sandbox.exec(command, timeout=60)
        if result.exit_code == 3:
            raise ValueError(result.stderr.decode(errors="replace").strip())
        if result.exit_code != 0:
            raise SiteError(
                f"reading {definition.name} data failed (exit {result.exit_code}): "
                f"{result.stderr.decode(errors='replace')[-2000:]}"
            )
        # TiddlyWiki's reader prints its JSON after a marker line (see read_tiddlers.js).
        return json.loads(result.stdout.rpartition(_JSON_MARKER)[2])

    def versions(self) -> dict[str, str]:
        """Return the application's package versions (read from the image) and the image id.

        Probed once per image, not per episode (see ``DockerSandbox.image_versions``).
        """
        known = self.sandbox.image_versions(["/opt/worldtrace/site-versions"])
        return {
            "site": self.definition.name,
            **known,
            "image": self.definition.image,
            "image_id": self.sandbox.image_id,
        }

    def logs(self, lines: int = 200) -> str:
        """Return the last ``lines`` lines of the server's log ("" once the site is closed)."""
        if self._closed or not self.sandbox.is_running():
            return ""
        return self.sandbox.exec(["tail", "-n", str(lines), SERVER_LOG], timeout=15).text

    def close(self) -> None:
        """Remove the container and everything the site stored; safe to call twice."""
        self._closed = True
        if self.network is not None and self.network.site is self:
            self.network.site = None
        self.namespace.close()
        self.sandbox.close()

    def __enter__(self) -> RunningSite:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RunningSite({self.definition.name!r}, {self.origin!r})"

    def _start_server(self) -> None:
        argv = [part.replace("{port}", str(SITE_PORT)) for part in self.definition.command]
        self._server = self.sandbox.start_background(argv, log_path=SERVER_LOG)

    def _wait_ready(self, deadline: float, timeout_s: float) -> None:
        """Poll the start page until it answers 200 with the site's text, or raise."""
        assert self._server is not None
        url = self.url(self.definition.start_path)
        last = "no answer yet"
        while True:
            exit_code = self.sandbox.background_exit_code(self._server)
            if exit_code is not None:
                raise SiteError(
                    f"{self.definition.name} server exited with code {exit_code} before "
                    f"serving {url}; log tail:\n{self.logs(40)}"
                )
            try:
                # One request at a time, given what is left of the start: a slow first page
                # (Trac compiling its templates on a loaded machine) answers late, and each
                # probe given up on would still queue on the server ahead of the next.
                wait_s = max(5.0, deadline - time.monotonic())
                status, body = self.get(self.definition.start_path, timeout=wait_s)
                if status == 200 and self.definition.ready_text in body:
                    return
                last = f"HTTP {status} without {self.definition.ready_text!r}"
            except (OSError, http.client.HTTPException) as error:
                last = str(error) or type(error).__name__
            if time.monotonic() >= deadline:
                raise SiteError(
                    f"{self.definition.name} did not serve {url} within {timeout_s:g}s "
                    f"(last: {last}); server log tail:\n{self.logs(40)}"
                )
            time.sleep(0.1)


def start_site(
    definition: SiteDefinition,
    startup_timeout_s: float = 60.0,
    network: BrowserNetwork | None = None,
    clock_start: datetime | None = None,
) -> RunningSite:
    """Start a site in a fresh container (its reset) and return it once it serves.

    With ``network`` the site joins that browser's namespace; without, it gets a namespace of
    its own (reachable only through :meth:`RunningSite.connect`). ``clock_start`` is where the
    server's clock starts (see sandboxes/clock.py; None: the real clock). Raises :class:`SiteError`
    with the server's log tail if the start page does not answer 200 within
    ``startup_timeout_s`` (the container is removed then), and :class:`SandboxError` if the
    image is missing.
    """
    name = definition.name
    if network is not None and network.site is not None:
        raise SiteError(
            f"cannot start {name}: this browser network still runs {network.site!r}; "
            "close it first (a browser network holds one site at a time)"
        )
    deadline = time.monotonic() + startup_timeout_s
    sandbox = DockerSandbox(
        definition.image,
        limits=SITE_LIMITS,
        network=network.docker_network if network is not None else "none",
        hostname=f"site-{name}",
        labels={SITE_LABEL: name},
        clock_start=clock_start,
    )
    sandbox.start()
    try:
        site = RunningSite(definition, sandbox, network)
    except BaseException:
        sandbox.close()
        raise
    if network is not None:
        network.site = site
    try:
        site._start_server()
        site._wait_ready(deadline, startup_timeout_s)
    except BaseException:
        site.close()
        raise
    return site
