"""Web raw records → transitions: BrowserGym's accessibility-tree text, the screenshot, facts.

The raw observation keeps the whole DevTools accessibility tree, so the text can be rendered
again (with a newer :func:`collectors.web.axtree.flatten_axtree`) without collecting again.
"""

from __future__ import annotations

import base64
from typing import Any

from collectors.web.actions import action_text
from collectors.web.axtree import flatten_axtree
from normalizers.base import DomainNormalizer
from schemas import Action, Observation

FORMAT = "axtree"

META_FIELDS = (
    "url",
    "title",
    "tabs",
    "active_tab",
    "focused_bid",
    "tree_nodes",
    "tree_truncated",
    "settled",
    "events",
    "timing",
)
"""Raw fields copied into ``meta`` as they are."""


class WebNormalizer(DomainNormalizer):
    """The page as BrowserGym's tree text; URL, tabs, focus, events and timings in meta."""

    domain = "web"

    def observation(self, raw: dict[str, Any]) -> Observation:
        """Render the tree, decode the screenshot, and label a page that did not change."""
        meta = {key: raw.get(key) for key in META_FIELDS}
        # "Nothing changed" is something a world model must learn; say so explicitly.
        meta["noop"] = bool(raw.get("unchanged", False))
        meta["crashed"] = bool(raw.get("crashed", False))
        meta["unresponsive"] = bool(raw.get("unresponsive", False))
        png = raw.get("screenshot_png")
        return Observation(
            format=FORMAT,
            text=flatten_axtree(raw.get("axtree") or {}),
            screenshot=base64.b64decode(png) if png else None,
            meta=meta,
        )

    def action(self, raw: dict[str, Any]) -> Action:
        """Re-render the canonical call string from the arguments."""
        action = Action.parse(raw)
        return action.model_copy(update={"text": action_text(action.name, action.arguments)})  # type: ignore[return-value]
