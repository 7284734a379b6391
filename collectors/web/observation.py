"""What the browser shows, read off a live page: the marked accessibility tree and the rest.

Reading the tree is three steps: give every element of every frame a bid
(``mark_elements.js``, frame by frame because a script cannot reach into another frame's
document), ask Chromium for each frame's accessibility tree over the DevTools protocol and
pull the bids out of the ARIA fields, then remove the ARIA copies again
(``unmark_elements.js``). The per-frame trees are merged by hanging each frame's root under
its ``Iframe`` node, so :func:`collectors.web.axtree.flatten_axtree` prints one tree.
"""

from __future__ import annotations

import base64
import time
from functools import cache
from pathlib import Path
from typing import Any

from playwright.sync_api import CDPSession, Frame, Page
from playwright.sync_api import Error as PlaywrightError

from collectors.web.axtree import take_bid

_HERE = Path(__file__).parent


@cache
def _script(name: str) -> str:
    return (_HERE / name).read_text()


def mark_frames(page: Page) -> tuple[int, str]:
    """Give every element of every frame a bid; return how many, and the focused element's bid.

    Frames are visited parents first, so a frame's element in its parent already has the bid
    the frame's own ids are prefixed with. Focus is followed from the top document into the
    frame its active element holds; '' when nothing has focus.
    """
    marked = 0
    focus_in: dict[str, tuple[str, bool]] = {}
    pending: list[Frame] = [page.main_frame]
    while pending:
        frame = pending.pop(0)
        try:
            result = frame.evaluate(_script("mark_elements.js"))
        except PlaywrightError:
            result = None  # navigated or detached meanwhile; the next observation marks it
        if result is None:
            continue  # sandboxed or unreachable: its content has no ids, as in BrowserGym
        count, prefix, active_bid, active_is_frame = result
        marked += int(count)
        focus_in[prefix] = (active_bid, bool(active_is_frame))
        pending.extend(child for child in frame.child_frames if not child.is_detached())
    return marked, _follow_focus(focus_in)


def _follow_focus(focus_in: dict[str, tuple[str, bool]]) -> str:
    bid, is_frame = focus_in.get("", ("", False))
    while is_frame and bid in focus_in:
        bid, is_frame = focus_in[bid]
    return bid


def unmark_frames(page: Page) -> None:
    """Remove the ARIA copies of bids from every frame (the bids themselves stay)."""
    for frame in page.frames:
        try:
            frame.evaluate(_script("unmark_elements.js"))
        except PlaywrightError:
            continue


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


def read_page(page: Page, cdp: CDPSession, screenshot: bool) -> dict[str, Any]:
    """Read the page's tree, focus and (optionally) screenshot, with the time each took."""
    started = time.perf_counter()
    marked, focus = mark_frames(page)
    try:
        tree = merged_axtree(cdp)
    finally:
        unmark_frames(page)
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
        "screenshot_png": png,
        "timing": {"extract_s": round(tree_s, 6), "screenshot_s": round(shot_s, 6)},
    }
