"""The web tests' local test pages, served once per module that asks for them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.web.web_test_pages import TestPages, serve_test_pages


@pytest.fixture(scope="module")
def pages() -> Iterator[TestPages]:
    """tests/web/web_pages/ on a local HTTP server the browser's network can reach."""
    with serve_test_pages() as served:
        yield served
