"""Publishing: the Hub-layout folder, its dataset card, the upload, and inspection helpers."""

from publishing.card import render_card
from publishing.inspect import render, scan, summarize
from publishing.layout import PublishError, PublishReport, publish_folder

__all__ = [
    "PublishError",
    "PublishReport",
    "publish_folder",
    "render",
    "render_card",
    "scan",
    "summarize",
]
