"""Debian's Chromium through Playwright: one browser per worker thread, each in its own network.

Playwright's sync API is bound to the thread that started it, and a Prefect worker runs many
episodes one after another in the same thread. So each thread launches one browser the first
time it needs one and keeps it; an episode only opens (and closes) a fresh context, which is
cheap and shares nothing with the previous episode (cookies, storage, cache).

Isolation below the page: every browser runs inside its own network namespace
(:class:`worldtrace.sandboxes.websites.BrowserNetwork`), which holds nothing but a loopback
interface and
the site of the current episode. Chromium is started through a small wrapper that enters the
namespace (``nsenter --net=``) before it runs the real binary, and resolves only site names
(``*.test``) to that loopback. Whatever a page does — requests, WebSockets, WebRTC over UDP or
TCP — it reaches the site and nothing else: not the host's ports, not the host's addresses,
not the outside world. Playwright's request routing (in the environment) stays as the second
layer that records what was refused.

No call into a page may hang a worker: Playwright gives ``evaluate``, key presses and mouse
events no timeout, so every step runs under :func:`deadline`, a watchdog that kills the
thread's browser (its whole process group) when the step overruns; the blocked Playwright call
then fails at once, the episode ends with the reason, and the thread's next episode launches a
new browser. :func:`kill_all_browsers` does the same for every browser of the process (on
SIGTERM or Ctrl-C).

Never run ``playwright install``: it downloads a browser from a vendor, which fails here. The
browser is the system's (``apt-get install chromium``) and is launched by path.
"""

from __future__ import annotations

import atexit
import contextlib
import heapq
import itertools
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from playwright.sync_api import Browser, Playwright, sync_playwright

from worldtrace.sandboxes.websites import BROWSER_HOST_RULES, BrowserNetwork
from worldtrace.schemas.errors import SetupError

CHROMIUM_CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
"""Where Debian puts the browser; ``/usr/bin/chromium`` is a shell wrapper around the first."""

CHROMIUM_FLAGS = (
    # Without these a headless browser on a closed network waits on services it cannot reach.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    # HttpsUpgrades would turn a blocked http:// link into an https:// request in the record.
    # Overlay scrollbars off (and Playwright's --hide-scrollbars dropped at launch), as
    # BrowserGym launches Chromium: the page is laid out beside a classic scrollbar, so lines
    # wrap and elements sit where they do under BrowserGym, and the screenshot shows it.
    "--disable-features=Translate,MediaRouter,OptimizationHints,HttpsUpgrades,"
    "OverlayScrollbars,ExtendedOverlayScrollbars",
    "--disable-dev-shm-usage",
    # Site names resolve to the namespace's loopback; nothing else resolves.
    f"--host-resolver-rules={BROWSER_HOST_RULES}",
)

CLOSE_TIMEOUT_S = 10.0
"""How long closing a browser may take before it is killed instead."""


class BrowserUnavailable(SetupError, RuntimeError):
    """Chromium or Playwright cannot be started; the message says how to fix it."""


@cache
def chromium_path() -> str:
    """Return the Chromium binary, or raise with the install command."""
    for candidate in CHROMIUM_CANDIDATES:
        if Path(candidate).is_file():
            return candidate
    found = shutil.which("chromium")
    if found:
        return found
    raise BrowserUnavailable(
        "Chromium is not installed: run `apt-get install chromium` (or `make setup`)"
    )


@cache
def chromium_version() -> str:
    """Return the browser's version string, e.g. ``Chromium 156.0.8078.79``."""
    result = subprocess.run(
        [chromium_path(), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    return result.stdout.strip() or "unknown"


@dataclass(eq=False)
class ThreadBrowser:
    """One worker thread's browser, the network namespace it runs in, and its process."""

    browser: Browser
    network: BrowserNetwork
    pid: int
    """The browser's main process, leader of its process group (renderers and helpers)."""
    folder: Path
    """Holds the launch wrapper and its pid file."""
    killed: str | None = field(default=None)
    """Why the browser was killed (a step overran, the run was interrupted), else None."""

    def alive(self) -> bool:
        """Whether the browser was neither killed nor lost (cheap: no call to anything)."""
        return self.killed is None and self.browser.is_connected()

    def usable(self) -> bool:
        """Whether the browser can take another episode (asks Docker about its network)."""
        return self.alive() and self.network.alive()

    def kill(self, reason: str) -> None:
        """Kill the browser's processes now, from any thread; its pending calls then fail."""
        with _launched_lock:
            # Stopped or killed before: its pid may belong to someone else by now.
            if self not in _launched or self.killed is not None:
                return
            self.killed = reason
        # Playwright starts the browser in a process group of its own (pgid = pid).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)


_launched: set[ThreadBrowser] = set()
"""Every browser of this process that is not stopped yet, whichever thread launched it."""
_launched_lock = threading.Lock()

_local = threading.local()


@atexit.register
def _remove_launch_folders() -> None:
    # Playwright's driver exits when our end of its stdin pipe closes and takes its browser with
    # it, whichever thread started it; the namespaces' holders are sandboxes, removed at exit
    # like every other. What is left is the launch wrappers' folders.
    with _launched_lock:
        entries = list(_launched)
    for entry in entries:
        shutil.rmtree(entry.folder, ignore_errors=True)


def thread_browser() -> ThreadBrowser:
    """Return this thread's browser, launching it (and its network) when it has none.

    A new one replaces a browser that crashed or was killed, or whose network reached its
    wall-clock limit.
    """
    current: ThreadBrowser | None = getattr(_local, "browser", None)
    if current is not None and current.usable():
        return current
    if current is not None:
        _local.browser = None
        _stop(current)
    playwright: Playwright | None = getattr(_local, "playwright", None)
    if playwright is None:
        try:
            playwright = sync_playwright().start()
        except Exception as error:
            raise BrowserUnavailable(f"cannot start Playwright: {error}") from error
        _local.playwright = playwright
    _local.browser = _launch(playwright)
    return _local.browser


def _launch(playwright: Playwright) -> ThreadBrowser:
    binary = chromium_path()
    if os.geteuid() != 0:
        raise BrowserUnavailable(
            "the browser runs in a network namespace of its own, which needs root (nsenter)"
        )
    # A network that cannot start is a sandbox failure (SandboxError): the episode is retried.
    network = BrowserNetwork().start()
    folder = Path(tempfile.mkdtemp(prefix="worldtrace-browser-"))
    pid_file = folder / "pid"
    wrapper = folder / "chromium"
    # `exec` keeps one pid from the shell to Chromium, so the pid file names the browser.
    wrapper.write_text(
        "#!/bin/sh\n"
        f"echo $$ > {shlex.quote(str(pid_file))}\n"
        f'exec nsenter --net={shlex.quote(network.path)} -- {shlex.quote(binary)} "$@"\n'
    )
    wrapper.chmod(0o700)
    try:
        browser = playwright.chromium.launch(
            executable_path=str(wrapper),
            headless=True,
            args=list(CHROMIUM_FLAGS),
            ignore_default_args=["--hide-scrollbars"],
        )
    except Exception as error:
        network.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise BrowserUnavailable(f"cannot launch {binary}: {error}") from error
    entry = ThreadBrowser(browser, network, int(pid_file.read_text()), folder)
    with _launched_lock:
        _launched.add(entry)
    return entry


def close_thread_browser() -> None:
    """Close this thread's browser and its network, and stop its Playwright driver."""
    current: ThreadBrowser | None = getattr(_local, "browser", None)
    if current is not None:
        _local.browser = None
        _stop(current)
    playwright: Playwright | None = getattr(_local, "playwright", None)
    if playwright is not None:
        _local.playwright = None
        # Stopping from the wrong thread or after a crash raises; the process exits anyway.
        with contextlib.suppress(Exception):
            playwright.stop()


def _stop(entry: ThreadBrowser) -> None:
    # A browser that does not close in time is killed (the watchdog), so this cannot hang.
    # (Any error: a dead browser has nothing to close.)
    with deadline(entry, CLOSE_TIMEOUT_S, "closing took too long"), contextlib.suppress(Exception):
        entry.browser.close()
    with _launched_lock:
        _launched.discard(entry)
    entry.network.close()
    shutil.rmtree(entry.folder, ignore_errors=True)


def kill_all_browsers(reason: str) -> int:
    """Kill every browser this process launched, in every thread; return how many.

    Their blocked Playwright calls fail at once; each thread launches a new browser the next
    time it asks :func:`thread_browser` for one.
    """
    with _launched_lock:
        entries = list(_launched)
    for entry in entries:
        entry.kill(reason)
    return len(entries)


class _Watchdog:
    """One thread for the process that kills browsers whose deadline passed."""

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, tuple[ThreadBrowser, str]] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, entry: ThreadBrowser, seconds: float, reason: str) -> int:
        with self._wake:
            token = next(self._tokens)
            self._armed[token] = (entry, reason)
            heapq.heappush(self._heap, (time.monotonic() + seconds, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="browser-watchdog")
                self._thread.daemon = True
                self._thread.start()
            self._wake.notify()
            return token

    def disarm(self, token: int) -> None:
        with self._wake:
            self._armed.pop(token, None)

    def _run(self) -> None:
        while True:
            due: list[tuple[ThreadBrowser, str]] = []
            with self._wake:
                now = time.monotonic()
                while self._heap and (
                    self._heap[0][0] <= now or self._heap[0][1] not in self._armed
                ):
                    _, token = heapq.heappop(self._heap)
                    armed = self._armed.pop(token, None)
                    if armed is not None:
                        due.append(armed)
                if not due:
                    self._wake.wait(self._heap[0][0] - now if self._heap else None)
            for entry, reason in due:
                entry.kill(reason)


_watchdog = _Watchdog()


@contextlib.contextmanager
def deadline(entry: ThreadBrowser, seconds: float, reason: str) -> Iterator[None]:
    """Kill ``entry``'s browser with ``reason`` if the block is still running after ``seconds``."""
    token = _watchdog.arm(entry, seconds, reason)
    try:
        yield
    finally:
        _watchdog.disarm(token)
