"""Shared fixtures of the swe tests: the repository images, built once per session."""

from __future__ import annotations

import pytest

from worldtrace.collectors.swe.repos import IMAGES, image_definition
from worldtrace.sandboxes.images import ensure_image


@pytest.fixture(scope="session")
def swe_images() -> dict[str, str]:
    """Ensure the image of every swe repository; return ``{image tag: image id}``.

    Builds what is missing or stale (about 30 s an image, the shared apt layer once), a few
    hundred milliseconds when all are current.
    """
    return {definition.tag: ensure_image(definition) for definition in IMAGES}


@pytest.fixture(scope="session")
def toolz_image() -> str:
    """The toolz repository image (the tests' task repository), built if its definition changed."""
    definition = image_definition("toolz")
    ensure_image(definition)
    return definition.tag
