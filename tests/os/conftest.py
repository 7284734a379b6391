"""Shared fixtures of the os tests: the desktop image, built once per session, and environments."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from worldtrace.sandboxes.images import ensure_image


@pytest.fixture(scope="session")
def os_image() -> str:
    """Ensure the ``worldtrace/os`` image (minutes to build, instant when current)."""
    from worldtrace.collectors.os.image_definition import IMAGE

    return ensure_image(IMAGE)


@pytest.fixture(scope="module")
def os_env(os_image: str) -> Iterator[object]:
    """One desktop environment for a module's tests; each test resets it (a fresh container)."""
    from worldtrace.collectors.os.environment import OsEnvironment

    environment = OsEnvironment()
    try:
        yield environment
    finally:
        environment.close()
