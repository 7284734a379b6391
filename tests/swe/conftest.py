"""Shared fixtures of the swe tests: the repository images, built once per session."""

from __future__ import annotations

import pytest

from worldtrace.collectors.swe.repos import IMAGES
from worldtrace.sandboxes.images import ensure_image


@pytest.fixture(scope="session")
def swe_images() -> dict[str, str]:
    """Ensure the image of every swe repository; return ``{image tag: image id}``.

    Builds what is missing or stale (about 30 s an image, the shared apt layer once), a few
    hundred milliseconds when all are current.
    """
    return {definition.tag: ensure_image(definition) for definition in IMAGES}
