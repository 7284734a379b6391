"""Shared fixtures. Tests marked ``docker`` need the engine and images from `make setup`."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def terminal_image() -> str:
    """The terminal sandbox image, built if its definition changed."""
    from sandboxes.images import ensure_image

    ensure_image("terminal", client=None)
    return "worldtrace/terminal:latest"
