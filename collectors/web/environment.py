"""The web environment: a fresh browser context on a freshly reset site, per episode.

Each episode starts the site's sandbox from its seeded image (so its data is the same every
time) inside the network namespace of the thread's browser
(:mod:`worldtrace.collectors.web.browser`),
so the site is all the browser can reach; opens a new Chromium context, whose request routing
refuses and records everything but the site's origin; and loads the site's start page. A step
runs one BrowserGym action, waits for the page to settle, and reads the page
(:mod:`worldtrace.collectors.web.observation`). Everything that happens around the action — dialogs,
pop-ups, downloads, blocked requests, a crashed renderer — is recorded in the observation.
None of it can hang the worker: every wait has a cap, every read of the page a timeout, and a
step that still overruns its time (a page stuck in a key handler) has its browser killed by a
watchdog and ends the episode with the reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from playwright.sync_api import BrowserContext, CDPSession, Dialog, Download, Page, Request, Route
from playwright.sync_api import Error as PlaywrightError
from pydantic import AwareDatetime, Field, field_validator

from worldtrace.collectors.base import Environment, EnvironmentConfig, StepOutcome
from worldtrace.collectors.web.actions import ActionRefused, run_action
from worldtrace.collectors.web.axtree import flatten_axtree
from worldtrace.collectors.web.browser import (
    DEFAULT_MEMORY_MB,
    ThreadBrowser,
    chromium_version,
    deadline,
    thread_browser,
)
from worldtrace.collectors.web.observation import (
    FrameLoads,
    TagsToMark,
    page_state,
    page_title,
    read_page,
    responsive,
)
from worldtrace.collectors.web.tasks import PageCheck, WebTask
from worldtrace.sandboxes.sites import site_definition
from worldtrace.sandboxes.websites import BrowserNetwork, start_site
from worldtrace.schemas import Action, EnvironmentRef
from worldtrace.schemas.raw import RawObservation

ACTION_GRACE_S = 0.05
"""After an action, how long settling waits for a request the action may still start."""

DATA_CHECK_PATIENCE_S = 5.0
"""How long a data check keeps asking before it counts as failed."""

WATCHDOG_GRACE_S = 2.0
"""How far past its timeout a step may run before its browser is killed."""

READ_BUDGET_S = 60.0
"""What reading a page may take on top of loading it, in a reset or a task's page check."""

TITLE_TIMEOUT_MS = 2000
"""How long a tab's title may take to read; a tab busy longer shows no title."""

TEXT_VERSION = "4"
"""Version of what a web observation records. 1: every element marked, no visibility.
2: BrowserGym's marking (``tags_to_mark``), elements' visibility (``visible`` marks), the
browser clock started at ``clock_start``, pages laid out beside a classic scrollbar (as
BrowserGym launches Chromium). 3: pages read once settled by the page's own state (no
navigation requested or loading, documents complete, no running animation, a still DOM: see
``WebEnvironment._settle``), ``settle_waiting`` says what an unsettled read still awaited, and
``goto`` refuses ``data:``, ``blob:``, ``javascript:``, ``file:`` and ``about:`` URLs other
than ``about:blank``. 4: also the one-shot page timers due within a second when the page
first reads as done have fired (on the episode clock), and the settle cap is 15 s. In
:meth:`WebEnvironment.describe`, so runs of the versions are told apart."""

BROWSERGYM_REFERENCE = "browsergym-core==0.14.3"
"""The BrowserGym release whose marking and tree text the web domain reproduces (and is tested
against, see tests/web/test_web_browsergym.py)."""


class WebConfig(EnvironmentConfig):
    """Configuration of the web environment (the ``environment:`` block of a web run)."""

    site: str = Field(default="trac", description="site to visit (see `worldtrace tasks web`)")
    viewport_width: int = Field(default=1280, ge=320, le=3840, description="viewport pixels")
    viewport_height: int = Field(default=720, ge=240, le=2160, description="viewport pixels")
    screenshot: bool = Field(default=True, description="keep a PNG of the viewport per step")
    quiet_ms: int = Field(
        default=150, ge=0, le=5000, description="network silence that counts as settled"
    )
    # 15 s, as long as a navigation may take to commit: a starved Trac took 5-8 s to load
    # /newticket at a load average of 3, and a 5 s cap recorded it half-loaded (busy, without
    # the toolbar its scripts add) in one run of two.
    settle_cap_s: float = Field(
        default=15.0, gt=0, le=60, description="longest wait for a page to settle after an action"
    )
    navigation_timeout_s: float = Field(
        default=15.0, gt=0, le=120, description="limit for a navigation to commit"
    )
    dialogs: Literal["accept", "dismiss"] = Field(
        default="accept", description="answer to alert/confirm/prompt dialogs"
    )
    max_tree_nodes: int = Field(
        default=30000, ge=100, description="accessibility nodes kept per observation"
    )
    site_startup_timeout_s: float = Field(
        default=90.0, gt=0, description="limit for the site's server to answer"
    )
    browser_memory_mb: int = Field(
        default=DEFAULT_MEMORY_MB,
        ge=256,
        description=(
            "memory cap of the browser, all its processes and its private /tmp together (MiB); "
            "a page that reaches it has its renderer killed and ends the episode"
        ),
    )
    tags_to_mark: TagsToMark = Field(
        default="standard_html",
        description=(
            "elements given a bid, as BrowserGym's tags_to_mark: 'standard_html' (BrowserGym's "
            "default: same bids, same tree) or 'all' (every element; changes the tree around "
            "inline SVG, the marking of runs before web text version 2)"
        ),
    )
    inline_text_boxes: bool = Field(
        default=False,
        description=(
            "print Chromium's InlineTextBox nodes in the text, as BrowserGym does on this "
            "Chromium; off by default, as in BrowserGym's rows from its own pinned Chromium"
        ),
    )
    clock_start: AwareDatetime | None = Field(
        default=datetime(2024, 1, 15, 9, 0, tzinfo=UTC),
        description=(
            "instant the clocks of the page (Date, timers, performance) and of the site's "
            "server start at in every episode, then run normally; none: the machine's clock. "
            "A week after the seeded sites' first day, so their dates read as recent"
        ),
    )

    @field_validator("site")
    @classmethod
    def _known_site(cls, site: str) -> str:
        site_definition(site)  # an unknown site is a config error, before anything starts
        return site


class SiteHandle(Protocol):
    """A running site as the environment needs it (``sandboxes.websites.RunningSite``)."""

    origin: str
    """Scheme and host (and port, if not the default) the browser reaches the site on."""

    def url(self, path: str) -> str:
        """Absolute URL of ``path`` on the site."""
        ...

    def versions(self) -> dict[str, str]:
        """Versions of the app and its image."""
        ...

    def close(self) -> None:
        """Stop the site."""
        ...


SiteStarter = Callable[[WebConfig, BrowserNetwork], tuple[SiteHandle, str]]
"""Starts a fresh site for an episode in the browser's network; returns it and its start
path."""


def start_registered_site(config: WebConfig, network: BrowserNetwork) -> tuple[SiteHandle, str]:
    """Start ``config.site`` from the site registry in a fresh sandbox (the reset)."""
    definition = site_definition(config.site)
    site = start_site(definition, config.site_startup_timeout_s, network, config.clock_start)
    return site, definition.start_path


class WebEnvironment(Environment[WebConfig, WebTask]):
    """Chromium on one site: BrowserGym actions in, accessibility trees and screenshots out."""

    def __init__(self, config: WebConfig | None = None, start_site: SiteStarter | None = None):
        self.config = config or WebConfig()
        self._start_site = start_site or start_registered_site
        self.site: SiteHandle | None = None
        self.browser: ThreadBrowser | None = None
        self.context: BrowserContext | None = None
        self._page: Page | None = None
        self._cdp: dict[int, CDPSession] = {}
        self._loads: dict[int, FrameLoads] = {}  # per page, beside its DevTools session
        self._inflight = 0
        self._last_network = 0.0
        self._events: dict[str, list[dict[str, Any]]] = _no_events()
        self._broken: str | None = None  # why the page can no longer be observed
        self._previous_state: tuple[str, str] | None = None

    # --- BrowserTabs, for the actions ---------------------------------------------------------

    @property
    def page(self) -> Page:
        """The active tab."""
        if self._page is None:
            raise RuntimeError("the web environment is not reset")
        return self._page

    def pages(self) -> list[Page]:
        """Open tabs in opening order."""
        return list(self.context.pages) if self.context else []

    def new_tab(self) -> Page:
        """Open a new tab in the episode's browser context."""
        if self.context is None:
            raise RuntimeError("the web environment is not reset")
        return self.context.new_page()

    def activate(self, page: Page) -> None:
        """Bring ``page`` to the front and make actions go to it."""
        self._page = page
        # closed in the meantime; the next observation shows what is left
        with contextlib.suppress(PlaywrightError):
            page.bring_to_front()

    def check_url(self, url: str) -> None:
        """Refuse (and record) a ``goto`` anywhere but the episode's site and ``about:blank``.

        Pages the site never served are refused too: ``data:`` and ``blob:`` pages (written by
        the agent, they would run its script in the browser), ``javascript:``, ``file:``, and
        ``about:`` pages other than ``about:blank`` (a world-model corpus of a site has little
        use for them). The refusal is the action's error, as for any off-site URL.
        """
        if url == "about:blank" or self._on_site(url):
            return
        scheme = urlsplit(url).scheme.lower()
        reason = "off-site navigation" if scheme in ("http", "https") else f"{scheme}: page"
        self._events["blocked"].append({"url": url, "reason": reason})
        raise ActionRefused(
            f"navigation to {url!r} is blocked: only {self._origin()} (and about:blank) is open"
        )

    # --- Environment --------------------------------------------------------------------------

    def reset(self, seed: int, task: WebTask | None) -> RawObservation:
        """Start a fresh site and context, open the start page (or the task's), observe it."""
        self.close()
        browser = self.browser = thread_browser(self.config.browser_memory_mb)
        self.site, start_path = self._start_site(self.config, browser.network)
        start_path = (task.start_path if task else None) or start_path
        limit_s = self.config.navigation_timeout_s + self.config.settle_cap_s + READ_BUDGET_S
        with deadline(browser, limit_s, f"opening the start page took over {limit_s:g} s"):
            try:
                observation = self._open(start_path)
            except PlaywrightError as error:
                if browser.alive():
                    raise
                observation = None
                self._broken = self._why_browser_gone(error)
        if self._broken is not None:
            raise RuntimeError(f"the start page of {self.config.site} broke: {self._broken}")
        assert observation is not None
        return observation

    def _open(self, start_path: str) -> RawObservation:
        assert self.browser is not None and self.site is not None
        context = self.browser.browser.new_context(
            viewport={"width": self.config.viewport_width, "height": self.config.viewport_height},
            accept_downloads=True,
            service_workers="block",
        )
        self.context = context
        if self.config.clock_start is not None:
            # Pages read the time (TiddlyWiki stamps edits, pages print dates): each episode's
            # browser clock starts at the same instant and then runs normally.
            context.clock.install(time=self.config.clock_start)
        context.set_default_timeout(self.config.settle_cap_s * 1000)
        context.set_default_navigation_timeout(self.config.navigation_timeout_s * 1000)
        context.route("**/*", self._guard)
        context.on("page", self._adopt)
        context.on("request", self._on_request_start)
        context.on("requestfinished", self._on_request_end)
        context.on("requestfailed", self._on_request_end)
        page = context.new_page()
        self._page = page
        started = time.perf_counter()
        site = self.site
        error = self._attempt(lambda: page.goto(site.url(start_path)))
        if error is not None and self.browser.alive():
            raise RuntimeError(f"the start page of {self.config.site} did not load: {error}")
        return self._observe({"action_s": round(time.perf_counter() - started, 6)})

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Run one action, let the page settle, and observe it, within about ``timeout_s``.

        A step still running :data:`WATCHDOG_GRACE_S` after ``timeout_s`` (a page that blocks
        in a key handler, a frame that never answers) has its browser killed: the episode
        ends there, truncated, with the reason as the step's error.
        """
        browser = self.browser
        if browser is None or self._page is None:
            raise RuntimeError("the web environment is not reset")
        started = time.perf_counter()
        reason = f"step timed out: still running {timeout_s:g} s after the action started"
        with deadline(browser, timeout_s + WATCHDOG_GRACE_S, reason):
            try:
                return self._step(action, timeout_s, started)
            except PlaywrightError as error:
                if browser.alive():
                    raise
                self._broken = self._why_browser_gone(error)
                observation = self._broken_observation({})
                return StepOutcome(
                    observation, time.perf_counter() - started, truncated=True, error=self._broken
                )

    def _step(self, action: Action, timeout_s: float, started: float) -> StepOutcome:
        self._events = _no_events()
        error = None
        if action.name in ("send_msg_to_user", "report_infeasible"):
            self._events["messages"].append({"action": action.name, **action.arguments})
        else:
            error = self._attempt(lambda: run_action(action, self))
            # A key press or click may start its navigation just after it returns: settling
            # waits at least ACTION_GRACE_S for a request to start before it may call the
            # page settled (without making every scroll wait the full quiet period).
            grace_start = time.perf_counter() - self.config.quiet_ms / 1000 + ACTION_GRACE_S
            self._last_network = max(self._last_network, grace_start)
        action_s = time.perf_counter() - started
        # The step's own limit caps settling too, so a step returns within about timeout_s.
        settle_cap_s = max(0.1, min(self.config.settle_cap_s, timeout_s - action_s))
        observation = self._observe({"action_s": round(action_s, 6)}, settle_cap_s)
        if self._broken is not None:
            # The episode cannot go on: end it here, with the reason as the step's error.
            latency = time.perf_counter() - started
            return StepOutcome(observation, latency, truncated=True, error=self._broken)
        return StepOutcome(
            observation,
            time.perf_counter() - started,
            terminated=action.name == "report_infeasible",
            error=error,
        )

    def evaluate(self, task: WebTask | None) -> float | None:
        """Run the task's check: 1.0 if it passes, 0.0 if not, None for a task without one."""
        check = task.check if task else None
        if check is None or self.site is None:
            return None
        if isinstance(check, PageCheck):
            browser = self.browser
            if browser is None or self._page is None or self._broken is not None:
                return 0.0
            limit_s = READ_BUDGET_S
            with deadline(
                browser, limit_s, f"reading the page for the check took over {limit_s:g} s"
            ):
                try:
                    if self._page.is_closed():
                        return 0.0
                    content = read_page(
                        self.page, self._cdp_for(self.page), False, self.config.tags_to_mark
                    )
                except PlaywrightError:
                    if browser.alive():
                        raise
                    return 0.0  # a page that cannot be read does not pass
            # Checks look for names and roles, not for what is in view: no visibility marks.
            text = flatten_axtree(content["axtree"])
            return 1.0 if check.passes(self.page.url, text) else 0.0
        read_data = getattr(self.site, "read_data", None)
        if read_data is None:
            return None
        # Some apps write to disk a moment after answering (TiddlyWiki saves after ~1 s).
        give_up_at = time.monotonic() + DATA_CHECK_PATIENCE_S
        while True:
            passed = check.passes(read_data(check.query))
            if passed or time.monotonic() >= give_up_at:
                return 1.0 if passed else 0.0
            time.sleep(0.25)

    def describe(self) -> EnvironmentRef:
        """Return the site's and the browser's versions."""
        site_versions = self.site.versions() if self.site else {}
        components = {
            "site": self.config.site,
            "chromium": chromium_version(),
            "playwright": importlib.metadata.version("playwright"),
            "text_version": TEXT_VERSION,
            "marking": f"{BROWSERGYM_REFERENCE} tags_to_mark={self.config.tags_to_mark}",
            "inline_text_boxes": str(self.config.inline_text_boxes).lower(),
            "clock_start": self.config.clock_start.isoformat() if self.config.clock_start else "",
            **site_versions,
        }
        version = ";".join(f"{key}={components[key]}" for key in sorted(components))
        return EnvironmentRef(
            name=f"web/{self.config.site}",
            version=hashlib.sha256(version.encode()).hexdigest()[:16],
            components=components,
            config_hash=self.config.config_hash(),
        )

    def close(self) -> None:
        """Close the context and stop the site; safe to call more than once."""
        if self.context is not None and self.browser is not None:
            limit_s = self.config.settle_cap_s + READ_BUDGET_S
            # (PlaywrightError: the browser died, and its context went with it.)
            with (
                deadline(self.browser, limit_s, f"closing the context took over {limit_s:g} s"),
                contextlib.suppress(PlaywrightError),
            ):
                self.context.close()
        self.context = None
        self.browser = None
        self._page = None
        self._cdp.clear()
        self._loads.clear()
        self._broken = None
        self._previous_state = None
        if self.site is not None:
            self.site.close()
            self.site = None

    # --- internals ----------------------------------------------------------------------------

    def _origin(self) -> str:
        return self.site.origin if self.site else ""

    def _on_site(self, url: str) -> bool:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}" == self._origin()

    def _allowed(self, request: Request) -> bool:
        """Whether a request the page made may go out: the site's, or an inline resource."""
        url = request.url
        if self._on_site(url):
            return True
        # Inline images and fonts (data:) and the site's own object URLs are the site's
        # content; a document from them would be a page the site never served. (Chromium
        # itself refuses top-frame data:, file: and about: navigations a page starts.)
        inline = url.startswith("data:") or url.startswith(f"blob:{self._origin()}/")
        return inline and request.resource_type != "document"

    def _guard(self, route: Route, request: Request) -> None:
        if self._allowed(request):
            route.continue_()
            return
        self._events["blocked"].append(
            {"url": request.url, "reason": "off-site request", "type": request.resource_type}
        )
        route.abort("blockedbyclient")

    def _adopt(self, page: Page) -> None:
        # A pop-up or a link opened in a new tab becomes the active tab, as in BrowserGym.
        page.on("dialog", self._on_dialog)
        page.on("download", self._on_download)
        page.on("crash", self._on_crash)
        if self._page is not None and page.opener() is not None:
            self._events["popups"].append({"url": page.url})
            self._page = page

    def _on_dialog(self, dialog: Dialog) -> None:
        self._events["dialogs"].append(
            {"type": dialog.type, "message": dialog.message, "answer": self.config.dialogs}
        )
        # the page went away with its dialog
        with contextlib.suppress(PlaywrightError):
            dialog.accept() if self.config.dialogs == "accept" else dialog.dismiss()

    def _on_download(self, download: Download) -> None:
        # Playwright keeps the file in its own temporary folder, deleted with the context.
        self._events["downloads"].append(
            {"url": download.url, "filename": download.suggested_filename}
        )

    def _on_crash(self, page: Page) -> None:
        # The kernel killed the renderer at the browser's memory cap: the page's doing.
        over_cap = self.browser.over_memory_cap() if self.browser is not None else None
        self._broken = f"renderer crashed: {over_cap}" if over_cap else "renderer crashed"

    def _on_request_start(self, request: Request) -> None:
        self._inflight += 1
        self._last_network = time.perf_counter()

    def _on_request_end(self, request: Request) -> None:
        self._inflight = max(0, self._inflight - 1)
        self._last_network = time.perf_counter()

    def _why_browser_gone(self, error: PlaywrightError | None = None) -> str:
        """Why the browser can no longer be used, for the step's error."""
        if self.browser is not None and self.browser.killed is not None:
            return self.browser.killed
        over_cap = self.browser.over_memory_cap() if self.browser is not None else None
        if over_cap:
            return f"browser closed: {over_cap}"
        detail = str(error.message).strip().splitlines()[0] if error is not None else ""
        return f"browser closed: {detail}" if detail else "browser closed"

    def _browser_lost(self) -> bool:
        """Whether the browser was killed or died; if so, that is why the episode ends."""
        if self.browser is None or self.browser.alive():
            return False
        # A kill explains whatever the page seemed to do before (stuck, crashed).
        if self.browser.killed is not None or self._broken is None:
            self._broken = self._why_browser_gone()
        return True

    def _attempt(self, run: Callable[[], Any]) -> str | None:
        """Run an action; return its failure as text (the action_error), None on success."""
        try:
            run()
        except ActionRefused as error:
            return str(error)
        except PlaywrightError as error:
            # Playwright appends a call log; its first line is what went wrong.
            return str(error.message).strip().splitlines()[0]
        return None

    def _settle(self, cap_s: float) -> tuple[float, bool, list[str]]:
        """Wait until the page is done, up to the cap; return the time, whether, and for what.

        Done means, all at once: the network quiet for ``quiet_ms``; no frame with a navigation
        requested or a document loading (:class:`FrameLoads`, which sees the navigation a key
        press or mouse click set off after Playwright's call returned); every readable document
        ``complete``; no finite CSS animation or transition running (TiddlyWiki's story river
        slides tiddlers in and out); none of the one-shot page timers due within a second at
        the first such read still pending (TiddlyWiki applies an edit 400 ms after typing stops,
        re-rendering what shows it; the timers those set are not waited for, so an editor's
        endless 100 ms input poll does not hold the page); and two reads
        of the page in a row with the same number of elements (a page that removes what it
        animated out, a moment after). The last list names what was still awaited at the cap
        (empty when settled).
        """
        started = time.perf_counter()
        deadline = started + cap_s
        page = self.page
        loads = self._loads_for(page)
        # a page that never finishes loading is observed as it is at the cap
        with contextlib.suppress(PlaywrightError):
            page.wait_for_load_state("load", timeout=cap_s * 1000)
        quiet_s = self.config.quiet_ms / 1000
        waiting = ["network"]
        elements: int | None = None  # the element count of the last read that found it done
        awaited_timers: frozenset[str] | None = None
        while self._broken is None and not page.is_closed():
            now = time.perf_counter()
            waiting = []
            if self._inflight or now - self._last_network < quiet_s:
                waiting.append("network")
            if loads.navigating(now):
                waiting.append("navigation")
            if not waiting:
                read_at = time.perf_counter()
                remaining_ms = max(100.0, (deadline - read_at) * 1000)
                state = page_state(self._cdp_for(page), remaining_ms)
                # The read let queued tasks run: a navigation or request they started counts.
                if loads.navigating():
                    waiting.append("navigation")
                elif self._inflight or self._last_network > read_at:
                    waiting.append("network")
                elif state is None:
                    waiting.append("page")  # replaced while read, or busy past the cap
                else:
                    if not state.ready or state.navigating:
                        awaited_timers = None  # a new document: its own timers count
                    elif awaited_timers is None:
                        # Waited for: the short timers pending at the first read of the done
                        # page, not the ones they set again (an editor's 100 ms input poll).
                        awaited_timers = state.timers
                    waiting += [
                        reason
                        for reason, holds in (
                            ("loading", not state.ready),
                            ("animations", state.animations > 0),
                            ("navigation", state.navigating),
                            ("timers", bool((awaited_timers or frozenset()) & state.timers)),
                        )
                        if holds
                    ]
                    if not waiting and elements != state.elements:
                        waiting.append("dom")  # done once this count holds for one more read
                        elements = state.elements
            if not waiting:
                break
            if waiting != ["dom"]:
                elements = None  # start the count over once the rest is done again
            if time.perf_counter() >= deadline:
                break
            try:
                page.wait_for_timeout(25)  # lets Playwright deliver the network and page events
            except PlaywrightError:
                break
        if page.is_closed() or self._broken is not None:
            waiting = waiting or ["page"]
        return time.perf_counter() - started, not waiting, waiting

    def _title(self, page: Page) -> str:
        # Over DevTools with a timeout: page.title() waits forever on a tab whose JavaScript
        # is busy.
        if page.is_closed():
            return ""
        try:
            return page_title(self._cdp_for(page), TITLE_TIMEOUT_MS)
        except PlaywrightError:
            return ""  # closed meanwhile

    def _cdp_for(self, page: Page) -> CDPSession:
        key = id(page)
        if key not in self._cdp:
            cdp = self._cdp[key] = self.page.context.new_cdp_session(page)
            # From its first read on, the page's navigations are followed (see _settle).
            self._loads[key] = FrameLoads(cdp)
        return self._cdp[key]

    def _loads_for(self, page: Page) -> FrameLoads:
        self._cdp_for(page)
        return self._loads[id(page)]

    def _observe(
        self, timing: dict[str, float], settle_cap_s: float | None = None
    ) -> RawObservation:
        if self._browser_lost():  # during the action: nothing more can be read
            return self._broken_observation(timing)
        if self.page.is_closed():
            remaining = self.pages()
            self.activate(remaining[-1] if remaining else self.new_tab())
        settle_s, settled, waiting = self._settle(settle_cap_s or self.config.settle_cap_s)
        page = self.page
        cdp = self._cdp_for(page)
        if self._broken is None and not responsive(cdp, self.config.settle_cap_s * 1000):
            # A crash while it was asked (its event may come later) is the reason, not the wait.
            if self._broken is None and self.browser and self.browser.over_memory_cap():
                self._on_crash(page)
            self._broken = self._broken or (
                f"page unresponsive: its JavaScript was busy for {self.config.settle_cap_s} s"
            )
        if self._browser_lost() or self._broken is not None:
            return self._broken_observation(timing)
        content = read_page(page, cdp, self.config.screenshot, self.config.tags_to_mark)
        nodes = content["axtree"]["nodes"]
        truncated = len(nodes) > self.config.max_tree_nodes
        if truncated:
            content["axtree"]["nodes"] = nodes[: self.config.max_tree_nodes]
        text = flatten_axtree(
            content["axtree"], content["visibility"], self.config.inline_text_boxes
        )
        text_hash = hashlib.sha256(text.encode()).hexdigest()
        state = (page.url, text_hash)
        unchanged = state == self._previous_state
        self._previous_state = state
        tabs = self.pages()
        titles = [self._title(tab) for tab in tabs]
        return {
            "url": page.url,
            "title": titles[tabs.index(page)] if page in tabs else self._title(page),
            "tabs": [
                {"url": tab.url, "title": title} for tab, title in zip(tabs, titles, strict=True)
            ],
            "active_tab": tabs.index(page) if page in tabs else 0,
            **content,
            "inline_text_boxes": self.config.inline_text_boxes,
            "tree_nodes": len(nodes),
            "tree_truncated": truncated,
            "settled": settled,
            "settle_waiting": waiting,
            "unchanged": unchanged,
            "events": self._events,
            "timing": {**timing, "settle_s": round(settle_s, 6), **content["timing"]},
        }

    def _broken_observation(self, timing: dict[str, float]) -> RawObservation:
        # Nothing can be read from a dead or stuck page; say so rather than wait for it.
        return {
            "url": self._page.url if self._page else "",
            "title": "",
            "tabs": [],
            "active_tab": 0,
            "axtree": {"nodes": []},
            "focused_bid": "",
            "marked_elements": 0,
            "tags_to_mark": self.config.tags_to_mark,
            "visibility": {},
            "inline_text_boxes": self.config.inline_text_boxes,
            "screenshot_png": None,
            "tree_nodes": 0,
            "tree_truncated": False,
            "settled": False,
            "settle_waiting": ["page"],
            "unchanged": False,
            "crashed": (self._broken or "").startswith("renderer crashed"),
            "unresponsive": not (self._broken or "renderer crashed").startswith("renderer crashed"),
            "events": self._events,
            "timing": timing,
        }


def _no_events() -> dict[str, list[dict[str, Any]]]:
    return {"blocked": [], "dialogs": [], "popups": [], "downloads": [], "messages": []}
