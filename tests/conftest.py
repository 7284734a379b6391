"""Shared fixtures. Tests marked ``docker`` need the engine and images from `make setup`.

Every cache a test touches is this session's own: Prefect's home (its database), the
``datasets`` cache (it caches local folders by name, so a stale entry would return old rows)
and the Hugging Face home. They are set before anything imports Prefect or datasets, and
subprocesses started by tests inherit them.
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
os.environ["HF_DATASETS_CACHE"] = str(_CACHES / "datasets")
os.environ["HF_HOME"] = str(_CACHES / "hf")
# Prefect logs its temporary API server stopping after pytest closed the captured streams.
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def terminal_image() -> str:
    """The terminal sandbox image, built if its definition changed."""
    from worldtrace.sandboxes.images import ensure_image

    ensure_image("terminal", client=None)
    return "worldtrace/terminal:latest"


@pytest.fixture(scope="session")
def site_images() -> None:
    """Every web site image, built if its definition changed; skips only without Docker."""
    from worldtrace.sandboxes.docker import SandboxError, docker_client
    from worldtrace.sandboxes.images import ensure_image
    from worldtrace.sandboxes.websites import SITES

    try:
        docker_client()
    except SandboxError as error:
        pytest.skip(f"Docker is unavailable: {error}")
    for definition in SITES.values():
        ensure_image(definition.image.split("/", 1)[1].split(":", 1)[0])
