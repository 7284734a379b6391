"""What the browser shows, read off a live page: the marked accessibility tree and the rest.

Reading the tree is three steps: give every element of the page and its frames a bid
(``mark_elements.js``), ask Chromium for each frame's accessibility tree over the DevTools
protocol and pull the bids out of the ARIA fields, then remove the ARIA copies again
(``unmark_elements.js``). The per-frame trees are merged by hanging each frame's root under
its ``Iframe`` node, so :func:`worldtrace.collectors.web.axtree.flatten_axtree` prints one tree.
The marking is BrowserGym's (``tags_to_mark``, standard HTML tags by default) and also
measures, as BrowserGym does, which share of each marked element is inside the viewport; the
raw observation keeps that as ``visibility`` (bid → ratio), from which the text marks
``visible`` elements.

Every call into the page goes over DevTools with a timeout. Playwright's ``evaluate`` has
none, and waits forever for a frame whose document never gets a script context (an
``<iframe src="file:///…">`` that the environment refused): the scripts therefore run once,
in the top document, and reach every frame whose document they may read; a frame they cannot
read is left unmarked instead of waited for.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from playwright.sync_api import CDPSession, Page
from playwright.sync_api import Error as PlaywrightError

from worldtrace.collectors.web.axtree import take_bid

_HERE = Path(__file__).parent


@cache
def _script(name: str) -> str:
    return (_HERE / name).read_text()


CDP_TIMEOUT_MS = 60_000
"""A DevTools call that takes longer than this fails instead of hanging the worker."""


def send(
    cdp: CDPSession,
    method: str,
    params: dict[str, Any] | None = None,
    timeout_ms: float = CDP_TIMEOUT_MS,
) -> Any:
    """``CDPSession.send`` without the sync wrapper's walk over every object of the result.

    The public wrapper maps each dict and list of a reply through Playwright's API layer; for
    an accessibility tree of 25k nodes (13 MB) that walk alone took 6 of 9 s. A DevTools reply
    holds only plain JSON, so the implementation object's result is returned as it is. Falls
    back to the public call if Playwright's internals ever change shape.
    """
    implementation = getattr(cdp, "_impl_obj", None)
    run = getattr(cdp, "_sync", None)
    if implementation is None or run is None:
        return cdp.send(method, params, timeout=timeout_ms)
    return run(implementation.send(method, params or {}, timeout_ms))


def responsive(cdp: CDPSession, timeout_ms: float) -> bool:
    """Return False if the page's JavaScript does not answer within ``timeout_ms``.

    A page stuck in a script (``while (true) {}``) would block every later ``evaluate``
    forever — Playwright gives those no timeout — so the environment asks first.
    """
    try:
        send(cdp, "Runtime.evaluate", {"expression": "0"}, timeout_ms)
    except PlaywrightError:
        return False
    return True


def _call(cdp: CDPSession, script: str, timeout_ms: float, *args: Any) -> Any:
    """Run a ``(...args) => value`` script in the page's top document.

    Returns its value (awaited if it is a promise), None if it failed. ``args`` travel as
    JSON literals.
    """
    arguments = ", ".join(json.dumps(arg) for arg in args)
    try:
        reply = send(
            cdp,
            "Runtime.evaluate",
            {
                "expression": f"({script})({arguments})",
                "returnByValue": True,
                "awaitPromise": True,
            },
            timeout_ms,
        )
    except PlaywrightError:
        return None  # navigated meanwhile, or busy past the timeout
    if "exceptionDetails" in reply:
        return None
    return reply.get("result", {}).get("value")


TagsToMark = Literal["standard_html", "all"]
"""Which elements get a bid, as BrowserGym's ``tags_to_mark``: standard HTML tags only (its
default) or every element."""


def mark_frames(
    cdp: CDPSession, timeout_ms: float = CDP_TIMEOUT_MS, tags_to_mark: TagsToMark = "standard_html"
) -> tuple[int, str, dict[str, float]]:
    """Give the elements of the page and its readable frames a bid, as BrowserGym does.

    Returns how many, the focused element's bid ('' when nothing has focus, or when the
    page could not be marked: the next observation marks it), and each marked element's
    visibility ratio (the share of it inside the viewport, 0 … 1).
    """
    result = _call(cdp, _script("mark_elements.js"), timeout_ms, tags_to_mark)
    if not isinstance(result, list) or len(result) != 3:
        return 0, "", {}
    visibility = result[2] if isinstance(result[2], dict) else {}
    return int(result[0]), str(result[1]), {str(k): float(v) for k, v in visibility.items()}


def unmark_frames(cdp: CDPSession, timeout_ms: float = CDP_TIMEOUT_MS) -> None:
    """Remove the ARIA copies of bids from the page and its frames (the bids themselves stay)."""
    _call(cdp, _script("unmark_elements.js"), timeout_ms)


def page_title(cdp: CDPSession, timeout_ms: float) -> str:
    """The page's title ('' when it has none or does not answer within ``timeout_ms``)."""
    title = _call(cdp, "() => document.title", timeout_ms)
    return title if isinstance(title, str) else ""


SOON_TIMER_MS = 1000
"""A one-shot page timer set for at most this long holds the page unsettled until it fires."""

PAGE_STATE_SCRIPT = """async (soonMs) => {
  // First let the tasks the action queued run (on a starved renderer, the form submission an
  // Enter planned is still a queued task when the key press returns): two message hops go
  // behind them in the page's task queue. Message channels, not timers: the page's timers
  // run on the installed episode clock.
  for (let hop = 0; hop < 2; hop++) {
    await new Promise((resolve) => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => { channel.port1.close(); resolve(); };
      channel.port2.postMessage(0);
    });
  }
  const state = { ready: true, animations: 0, elements: 0, navigating: false, timers: [] };
  const look = (win, path) => {
    let doc;
    try { doc = win.document; doc.readyState; } catch (error) { return; }  // another origin
    state.ready = state.ready && doc.readyState === "complete";
    state.elements += doc.getElementsByTagName("*").length;
    // A navigation the page intercepted (Navigation API) that has not finished.
    if (win.navigation && win.navigation.transition) state.navigating = true;
    for (const animation of doc.getAnimations()) {
      if (animation.playState !== "running") continue;
      const timing = animation.effect ? animation.effect.getComputedTiming() : null;
      // An endless animation (a spinner) never ends: it cannot hold the page unsettled.
      if (timing && Number.isFinite(timing.endTime)) state.animations += 1;
    }
    // One-shot timers the page set to fire soon (an edit applied after a typing pause, a
    // re-render after a debounce), read off Playwright's installed episode clock, which runs
    // the page's timers; a far timer (a poll a minute away) and intervals do not count. Named
    // by frame and id: the reader waits for those it first saw, not for their successors.
    const clock = win.__pwClock && win.__pwClock.controller;
    if (clock && clock._timers instanceof Map) {
      const now = clock.performanceNow();
      for (const timer of clock._timers.values()) {
        if (timer.type === "Timeout" && timer.delay <= soonMs && timer.callAt - now <= soonMs)
          state.timers.push(`${path}${timer.id}`);
      }
    }
    for (let index = 0; index < win.frames.length; index++)
      look(win.frames[index], `${path}${index}/`);
  };
  look(window, "/");
  return state;
}"""
"""Reads whether the page is done: every readable document loaded, no finite CSS animation or
transition running, no intercepted navigation under way, no short page timer pending, and how
many elements it has."""


@dataclass(frozen=True)
class PageState:
    """What :data:`PAGE_STATE_SCRIPT` read off the page."""

    ready: bool
    """Every readable document (top and same-origin frames) has readyState ``complete``."""
    animations: int
    """CSS animations and transitions (and Web Animations) still running, endless ones aside."""
    elements: int
    """Elements in the readable documents: two equal reads in a row mean the DOM stood still."""
    navigating: bool
    """A same-document navigation intercepted with the Navigation API has not finished."""
    timers: frozenset[str] = frozenset()
    """One-shot page timers due within :data:`SOON_TIMER_MS`, each named by its frame and id
    (none where no episode clock is installed: the page's timers are then the browser's own,
    which cannot be read)."""


def page_state(cdp: CDPSession, timeout_ms: float) -> PageState | None:
    """Read :class:`PageState`; None if the page did not answer (it navigated, or was busy)."""
    value = _call(cdp, PAGE_STATE_SCRIPT, timeout_ms, SOON_TIMER_MS)
    if not isinstance(value, dict):
        return None
    return PageState(
        ready=bool(value.get("ready")),
        animations=int(value.get("animations") or 0),
        elements=int(value.get("elements") or 0),
        navigating=bool(value.get("navigating")),
        timers=frozenset(str(name) for name in value.get("timers") or ()),
    )


REQUEST_PATIENCE_S = 2.0
"""How long a requested navigation that never starts loading (one the page cancelled) counts
as pending."""


class FrameLoads:
    """Which frames of a page have a navigation requested or a document loading.

    Kept from the page's own DevTools events on the environment's session, so it also sees
    navigations Playwright's calls do not wait for (``keyboard.press``, ``mouse.click``): a
    renderer-initiated navigation is announced (``Page.frameRequestedNavigation``) before its
    request leaves, and a frame loads from ``Page.frameStartedLoading`` until
    ``Page.frameStoppedLoading``.
    """

    def __init__(self, cdp: CDPSession) -> None:
        self._requested: dict[str, float] = {}
        self._loading: set[str] = set()
        cdp.on("Page.frameRequestedNavigation", self._on_requested)
        cdp.on("Page.frameStartedLoading", self._on_started)
        for done in ("Page.frameStoppedLoading", "Page.frameDetached"):
            cdp.on(done, self._on_stopped)
        for moved in ("Page.frameNavigated", "Page.navigatedWithinDocument"):
            cdp.on(moved, self._on_navigated)
        send(cdp, "Page.enable")

    def navigating(self, now: float | None = None) -> bool:
        """Whether a frame has a navigation requested (recently) or a document loading."""
        now = time.perf_counter() if now is None else now
        for frame_id, since in list(self._requested.items()):
            if now - since > REQUEST_PATIENCE_S:
                del self._requested[frame_id]  # cancelled before it started
        return bool(self._requested or self._loading)

    def _on_requested(self, params: dict[str, Any]) -> None:
        self._requested[str(params.get("frameId"))] = time.perf_counter()

    def _on_started(self, params: dict[str, Any]) -> None:
        frame_id = str(params.get("frameId"))
        self._requested.pop(frame_id, None)
        self._loading.add(frame_id)

    def _on_stopped(self, params: dict[str, Any]) -> None:
        frame_id = str(params.get("frameId"))
        self._requested.pop(frame_id, None)
        self._loading.discard(frame_id)

    def _on_navigated(self, params: dict[str, Any]) -> None:
        frame = params.get("frame") or {}
        self._requested.pop(str(params.get("frameId") or frame.get("id")), None)


def _frame_ids(cdp: CDPSession) -> list[str]:
    tree = send(cdp, "Page.getFrameTree")
    ids: list[str] = []
    pending = [tree["frameTree"]]
    while pending:
        frame = pending.pop()
        ids.append(frame["frame"]["id"])
        pending.extend(frame.get("childFrames", []))
    return ids


def merged_axtree(cdp: CDPSession) -> dict[str, Any]:
    """Return the accessibility trees of all frames as one tree, bids taken out of ARIA."""
    per_frame: dict[str, list[dict[str, Any]]] = {}
    for frame_id in _frame_ids(cdp):
        try:
            per_frame[frame_id] = send(cdp, "Accessibility.getFullAXTree", {"frameId": frame_id})[
                "nodes"
            ]
        except PlaywrightError:
            continue  # an out-of-process or just-detached frame
    merged: list[dict[str, Any]] = []
    for nodes in per_frame.values():
        for node in nodes:
            take_bid(node)
            if (node.get("role") or {}).get("value") == "Iframe" and "backendDOMNodeId" in node:
                _attach_frame(cdp, node, per_frame)
        merged.extend(nodes)
    return {"nodes": merged}


def _attach_frame(
    cdp: CDPSession, iframe_node: dict[str, Any], per_frame: dict[str, list[dict[str, Any]]]
) -> None:
    try:
        described = send(
            cdp, "DOM.describeNode", {"backendNodeId": iframe_node["backendDOMNodeId"]}
        )
    except PlaywrightError:
        return
    frame_id = described.get("node", {}).get("frameId")
    child_nodes = per_frame.get(frame_id or "")
    if child_nodes:
        iframe_node.setdefault("childIds", []).append(child_nodes[0]["nodeId"])


def read_page(
    page: Page, cdp: CDPSession, screenshot: bool, tags_to_mark: TagsToMark = "standard_html"
) -> dict[str, Any]:
    """Read the page's tree, focus, visibility and (optionally) screenshot, with timings.

    ``tags_to_mark`` chooses which elements get a bid (see :data:`TagsToMark`).
    """
    started = time.perf_counter()
    marked, focus, visibility = mark_frames(cdp, tags_to_mark=tags_to_mark)
    try:
        tree = merged_axtree(cdp)
    finally:
        unmark_frames(cdp)
    tree_s = time.perf_counter() - started
    png = None
    shot_s = 0.0
    if screenshot:
        started = time.perf_counter()
        try:
            png = base64.b64encode(page.screenshot(type="png", timeout=5000)).decode("ascii")
        except PlaywrightError:
            png = None  # a page that cannot paint still has a tree
        shot_s = time.perf_counter() - started
    return {
        "axtree": tree,
        "focused_bid": focus,
        "marked_elements": marked,
        "tags_to_mark": tags_to_mark,
        "visibility": visibility,
        "screenshot_png": png,
        "timing": {"extract_s": round(tree_s, 6), "screenshot_s": round(shot_s, 6)},
    }
