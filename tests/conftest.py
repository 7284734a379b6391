"""Shared fixtures. Tests marked ``docker`` need the engine and images from `make setup`.

Every cache a test touches is this session's own: Prefect's home (its database), the
``datasets`` cache (it caches local folders by name, so a stale entry would return old rows),
the Hugging Face home and Hypothesis's storage. They are set before anything imports Prefect
or datasets, and subprocesses started by tests inherit them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

_CACHES = Path(tempfile.mkdtemp(prefix="worldtrace-test-caches-"))
atexit.register(shutil.rmtree, _CACHES, ignore_errors=True)
os.environ["PREFECT_HOME"] = str(_CACHES / "prefect")
# A Prefect server the developer runs (`worldtrace server start`) is not the tests' to use.
os.environ["WORLDTRACE_SERVER_HOME"] = str(_CACHES / "prefect-server")
os.environ["HF_DATASETS_CACHE"] = str(_CACHES / "datasets")
os.environ["HF_HOME"] = str(_CACHES / "hf")
# The mcp exploring policy's Hypothesis runs cache Unicode tables there.
os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = str(_CACHES / "hypothesis")
# Prefect logs its temporary API server stopping after pytest closed the captured streams.
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

REPO = Path(__file__).resolve().parent.parent


def ensure_domain_images(domain: str) -> list[str]:
    """Build what the registered ``domain`` needs if its definition changed; return the tags."""
    from worldtrace.collectors.registry import get_collector
    from worldtrace.sandboxes.images import ensure_image

    images = get_collector(domain).requirements.images
    for image in images:
        ensure_image(image)
    return [image.tag for image in images]


@pytest.fixture(scope="session")
def terminal_image() -> str:
    """The terminal sandbox image, built if its definition changed."""
    (tag,) = ensure_domain_images("terminal")
    return tag


@pytest.fixture(scope="session")
def site_images() -> list[str]:
    """Every web site image, built if its definition changed."""
    return ensure_domain_images("web")
