"""pytest plugin of the swe images: each test's outcome under its exact node id, as JSON.

Installed into the image's venv and loaded only by ``run_tests.py`` (``-p
pytest_outcome_log``), so an agent's own ``pytest`` never sees it. Its module name, options and
messages name no harness: the agent can list the venv's site-packages. With
``--outcome-log=PATH`` it writes ``{"passed", "failed", "errors", "skipped"}`` to PATH
when the session ends. The ids are pytest's own ``nodeid``s, so any of them can be passed back
to pytest as a selector (a junit report only has a class name and a test name to rebuild them
from). Per test, in the order the tests ran:

- ``errors``: its setup or teardown failed (a collection error is listed under the id of the
  file or folder that failed to collect);
- ``failed``: its call failed (a strict ``xfail`` that passed included);
- ``skipped``: skipped in setup or call, and every other ``xfail``-marked test whether it
  failed or passed (its outcome is expected to vary, so it is never counted as passing);
- ``passed``: the rest.

``--outcome-log-offline`` refuses, inside the test process, every connection to an address that
is not the loopback and every name lookup of a host that is not local, as a sandbox without a
network would: the baseline runs at image build time, where the network is the host's. The
errors say so (:data:`OFFLINE`), so that they can be told from a real network's.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
from typing import Any

import pytest

OFFLINE = "no network at the recorded baseline"
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", ""}


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the plugin's two options."""
    group = parser.getgroup("outcome-log")
    group.addoption("--outcome-log", metavar="PATH", help="write test outcomes to PATH")
    group.addoption(
        "--outcome-log-offline", action="store_true", help="refuse non-loopback network access"
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the recorder and, when asked, cut the network of this process."""
    path = config.getoption("--outcome-log")
    if path:
        config.pluginmanager.register(_Recorder(path), "outcome-log-recorder")
    if config.getoption("--outcome-log-offline"):
        _cut_network()


class _Recorder:
    """Collects the outcome of every test and writes them at the end of the session."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.outcomes: dict[str, str] = {}  # node id -> outcome, in the order tests ran
        self.collection_errors: list[str] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors.append(report.nodeid or str(report.fspath))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = report.nodeid
        current = self.outcomes.get(node)
        expected_to_fail = hasattr(report, "wasxfail")
        if report.when == "call":
            if report.failed:
                outcome = "failed"
            elif report.skipped or expected_to_fail:
                outcome = "skipped"
            else:
                outcome = "passed"
            # A failed setup never reaches the call; a teardown error comes after it.
            self.outcomes[node] = outcome
        elif report.failed:  # setup or teardown
            self.outcomes[node] = "errors"
        elif report.when == "setup" and report.skipped:
            self.outcomes[node] = "skipped"
        elif current is None and report.when == "setup":
            self.outcomes[node] = "passed"  # until the call says otherwise

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        result: dict[str, list[str]] = {"passed": [], "failed": [], "errors": [], "skipped": []}
        for node, outcome in self.outcomes.items():
            result[outcome].append(node)
        result["errors"] = self.collection_errors + result["errors"]
        temporary = self.path + ".part"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        os.replace(temporary, self.path)


def _is_local(host: Any) -> bool:
    if not isinstance(host, str):
        return True  # not an internet address (a unix socket path as bytes, say)
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a host name that is not one of the local ones


def _cut_network() -> None:
    """Make connect() and getaddrinfo() fail for anything beyond this machine's loopback."""
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def address_is_local(self: socket.socket, address: Any) -> bool:
        if self.family not in (socket.AF_INET, socket.AF_INET6):
            return True
        return _is_local(address[0] if isinstance(address, tuple) else address)

    def connect(self: socket.socket, address: Any) -> None:
        if not address_is_local(self, address):
            raise OSError(errno.ENETUNREACH, f"{os.strerror(errno.ENETUNREACH)} ({OFFLINE})")
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not address_is_local(self, address):
            return errno.ENETUNREACH
        return original_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, bytes):
            host = host.decode("idna")
        if host is not None and not _is_local(host):
            raise socket.gaierror(
                socket.EAI_AGAIN, f"Temporary failure in name resolution ({OFFLINE})"
            )
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo
