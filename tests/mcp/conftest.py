"""Shared fixtures of the mcp tests: the image with every server, built once per session."""

from __future__ import annotations

import pytest

from worldtrace.sandboxes.images import ensure_image


@pytest.fixture(scope="session")
def mcp_image() -> str:
    """Ensure the ``worldtrace/mcp`` image (a few minutes to build, instant when current)."""
    from worldtrace.collectors.mcp.servers import IMAGE

    return ensure_image(IMAGE)


@pytest.fixture(scope="session")
def datasette_image() -> str:
    """Ensure the web domain's datasette site image, which the fetch server reads."""
    from worldtrace.sandboxes.sites import IMAGES

    (definition,) = [image for image in IMAGES if image.name == "site-datasette"]
    return ensure_image(definition)
