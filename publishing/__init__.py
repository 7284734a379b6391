"""Publishing: the Hub-layout folder, its dataset card, the upload, and inspection helpers."""

from worldtrace.publishing.card import render_card
from worldtrace.publishing.folder import PublishError, PublishReport, publish_folder
from worldtrace.publishing.inspect import render, scan, summarize

__all__ = [
    "PublishError",
    "PublishReport",
    "publish_folder",
    "render",
    "render_card",
    "scan",
    "summarize",
]
