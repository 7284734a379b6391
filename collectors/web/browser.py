"""Debian's Chromium through Playwright: one browser per worker thread, closed at exit.

Playwright's sync API is bound to the thread that started it, and a Prefect worker runs many
episodes one after another in the same thread. So each thread launches one browser the first
time it needs one and keeps it; an episode only opens (and closes) a fresh context, which is
cheap and shares nothing with the previous episode (cookies, storage, cache).

Never run ``playwright install``: it downloads a browser from a vendor, which fails here. The
browser is the system's (``apt-get install chromium``) and is launched by path.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from playwright.sync_api import Browser, Playwright, sync_playwright

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
    "--disable-features=Translate,MediaRouter,OptimizationHints,HttpsUpgrades",
    "--disable-dev-shm-usage",
)


class BrowserUnavailable(RuntimeError):
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


@dataclass
class _ThreadBrowser:
    playwright: Playwright
    browser: Browser


# No atexit hook: Playwright's driver process exits when our end of its stdin pipe closes, and
# takes its browser with it, whichever thread started it.
_local = threading.local()


def thread_browser() -> Browser:
    """Return this thread's browser, launching it on first use (or after it crashed)."""
    current: _ThreadBrowser | None = getattr(_local, "browser", None)
    if current is not None and current.browser.is_connected():
        return current.browser
    if current is not None:
        _stop(current)
    try:
        playwright = sync_playwright().start()
    except Exception as error:
        raise BrowserUnavailable(f"cannot start Playwright: {error}") from error
    try:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=list(CHROMIUM_FLAGS)
        )
    except Exception as error:
        playwright.stop()
        raise BrowserUnavailable(f"cannot launch {chromium_path()}: {error}") from error
    _local.browser = _ThreadBrowser(playwright, browser)
    return browser


def close_thread_browser() -> None:
    """Close this thread's browser, if it has one."""
    current: _ThreadBrowser | None = getattr(_local, "browser", None)
    if current is not None:
        _local.browser = None
        _stop(current)


def _stop(entry: _ThreadBrowser) -> None:
    # Closing from the wrong thread or after a crash raises; the process exits anyway.
    with contextlib.suppress(Exception):
        entry.browser.close()
    with contextlib.suppress(Exception):
        entry.playwright.stop()
