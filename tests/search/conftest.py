"""Shared fixtures of the search tests: the image, built once per session, and environments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from worldtrace.sandboxes.images import ensure_image


@pytest.fixture(scope="session")
def search_image() -> str:
    """Ensure the ``worldtrace/search`` image (minutes to build, instant when current)."""
    from worldtrace.collectors.search.image_definition import IMAGE

    return ensure_image(IMAGE)


@pytest.fixture(scope="module")
def search_env(search_image: str) -> Iterator[object]:
    """One search environment for a module's tests; each test resets it (a fresh container)."""
    from worldtrace.collectors.search.environment import SearchEnvironment

    environment = SearchEnvironment()
    try:
        yield environment
    finally:
        environment.close()
