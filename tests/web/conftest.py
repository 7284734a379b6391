"""The web tests' shared fixtures: the local test pages and listeners on the host's addresses.

The pages are served once per module that asks for them; no page may reach the listeners.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.web.host_listeners import Listeners, host_listeners
from tests.web.web_test_pages import TestPages, serve_test_pages


@pytest.fixture(scope="module")
def pages() -> Iterator[TestPages]:
    """tests/web/web_pages/ on a local HTTP server the browser's network can reach."""
    with serve_test_pages() as served:
        yield served


@pytest.fixture
def listeners() -> Iterator[list[Listeners]]:
    """Listeners on the host's loopback and outward address, recording what arrives."""
    with host_listeners() as started:
        yield started
