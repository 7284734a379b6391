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
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.in_process import send_prefect_queues
from tests.prefect_server import ServerProcess

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


_SERVER: list[ServerProcess] = []
"""The session's shared Prefect server, once started (tests/prefect_server.py)."""


def _start_server() -> ServerProcess:
    if not _SERVER:
        _SERVER.append(ServerProcess(Path(tempfile.mkdtemp(prefix="prefect-server-", dir=_CACHES))))
    return _SERVER[0]


def _stop_server() -> None:
    if _SERVER and "prefect" in sys.modules:
        send_prefect_queues()
    while _SERVER:
        _SERVER.pop().stop()


def _uses_server(item: pytest.Item) -> bool:
    return "prefect_server" in getattr(item, "fixturenames", ())


IN_WORKER = "PYTEST_XDIST_WORKER" in os.environ
"""Whether this process is one of the suite's parallel workers (`make test`: ``-n 4``)."""

ONE_GROUP = {"web": "tests/web"}
"""Folders whose modules all run in one worker, one after another: the web tests' host
browsers and site containers (at most one of each at a time, as in a serial run)."""

FIRST = ("tests/web", "tests/flows", "tests/os", "tests/mcp", "tests/swe", "tests/terminal")
"""The folders whose tests take longest, in that order (docs/testing.md): the workers take
them first, so that none is left to run alone at the end."""


def _module(item: pytest.Item) -> str:
    return item.path.relative_to(REPO).as_posix()


def xdist_group(item: pytest.Item) -> str:
    """The work unit ``item`` belongs to under ``--dist loadgroup``: its module, or its folder's
    single group (:data:`ONE_GROUP`). A module is never split, so its shared sandboxes are made
    once."""
    module = _module(item)
    return next(
        (group for group, folder in ONE_GROUP.items() if module.startswith(folder + "/")), module
    )


def _rank(item: pytest.Item) -> int:
    module = _module(item)
    return next(
        (rank for rank, folder in enumerate(FIRST) if module.startswith(folder + "/")), len(FIRST)
    )


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a parallel worker: group the tests by module (:func:`xdist_group`), the longest
    folders first (`make test` passes ``--no-loadscope-reorder`` to keep this order)."""
    if not IN_WORKER:
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))
    items.sort(key=_rank)  # stable: a module's tests keep their order


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the shared Prefect server now if a collected test needs it: its start (seconds of
    imports and a database) then overlaps the tests before, and no test's time limit pays it.

    Not in a parallel worker, which collects every test but runs only those it is sent: there
    the first test that asks starts it."""
    if IN_WORKER or session.config.option.collectonly:
        return
    if any(map(_uses_server, session.items)):
        _start_server()


@pytest.fixture(scope="session")
def prefect_server() -> Iterator[str]:
    """A real Prefect server shared by every test that asks for it; its API URL.

    Started when collection ends (or by the first test that asks, if that missed it) and
    stopped after the last test that uses it (see the teardown hook below), so the tests that
    follow do not share the machine with an idle server.
    """
    try:
        yield _start_server().url()
    finally:
        _stop_server()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared Prefect server once no later test of this session uses it (a parallel
    worker does not know which tests it will be sent: its server stops with the session)."""
    if not _SERVER or IN_WORKER:
        return
    items = item.session.items
    later = items[items.index(item) + 1 :] if item in items else []
    if not any(_uses_server(other) for other in later):
        _stop_server()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Never leave the shared server running (a session stopped early, no test using it)."""
    _stop_server()
