"""Sandbox slots: Prefect global concurrency limits on the sandboxes that run at the same time.

An episode holds one slot of each of these limits, when it exists, while its sandbox lives:

- ``sandboxes-<hostname>``: every sandbox on one machine, whatever the run or the worker: this
  machine, or the one a run's ``sandbox_host`` names (``worldtrace worker --sandboxes N`` sets
  it for the machine the worker's sandboxes run on; so can ``prefect gcl create``);
- ``sandboxes-<domain>``: every sandbox of a domain, on every machine that shares the server.

A limit nobody created costs nothing and changes nothing: without a Prefect server
(``PREFECT_API_URL`` unset, the temporary local API) no request is made at all; with one, the
limits are listed once per episode (one request) and only existing ones are taken. A slot is
leased for :data:`LEASE_SECONDS` and renewed in the background, so the slots of a killed worker
come back within that time.
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

LEASE_SECONDS = 60.0
"""How long a slot outlives a killed holder (Prefect renews the lease while it lives)."""


def _limit_name_part(text: str) -> str:
    """Keep a hostname or domain usable in a limit name (no slashes, no percent signs)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


def machine_limit_name(hostname: str | None = None) -> str:
    """The name of the limit on sandboxes of one machine (default: this one)."""
    return f"sandboxes-{_limit_name_part(hostname or socket.gethostname())}"


def sandbox_machine(sandbox_host: str | None) -> str | None:
    """The machine a sandbox host URL runs sandboxes on (None: this machine's own engine).

    ``ssh://user@build-1:22`` and ``tcp://build-1:2376`` are both the machine ``build-1``, so
    runs reaching one engine by either way share its limit.
    """
    return urlsplit(sandbox_host).hostname if sandbox_host else None


def domain_limit_name(domain: str) -> str:
    """The name of the limit on sandboxes of one domain, across machines."""
    return f"sandboxes-{_limit_name_part(domain)}"


def _server_url() -> str | None:
    """The Prefect server's API URL, or None on the temporary local API."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


def existing_limits(names: list[str]) -> list[str]:
    """Those of ``names`` that exist as global concurrency limits on the server, in order."""
    from prefect.client.orchestration import get_client

    wanted = set(names)
    found: set[str] = set()
    with get_client(sync_client=True) as client:
        offset = 0
        while True:
            page = client.read_global_concurrency_limits(limit=200, offset=offset)
            found |= {limit.name for limit in page if limit.name in wanted}
            if len(page) < 200:
                break
            offset += 200
    return [name for name in names if name in found]


@contextlib.contextmanager
def sandbox_slot(domain: str, sandbox_host: str | None = None) -> Iterator[list[str]]:
    """Hold a slot of the machine's and the domain's sandbox limits, where they exist.

    The machine is the one whose engine runs the sandbox: ``sandbox_host``'s, or this one.
    Blocks until every existing limit has a free slot; yields the names of the limits held
    (empty when there are none or there is no server).
    """
    if _server_url() is None:
        yield []
        return
    machine = machine_limit_name(sandbox_machine(sandbox_host))
    names = existing_limits([machine, domain_limit_name(domain)])
    if not names:
        yield []
        return
    from prefect.concurrency.sync import concurrency

    # strict: the limits were just read, one deleted since is an error rather than a silent
    # no-op; but a lease renewal that failed once (a server restarting) must not end an
    # episode whose sandbox is fine.
    with concurrency(
        names,
        occupy=1,
        lease_duration=LEASE_SECONDS,
        strict=True,
        raise_on_lease_renewal_failure=False,
    ):
        yield names


def set_machine_limit(sandboxes: int, hostname: str | None = None) -> str:
    """Create or update this machine's sandbox limit to ``sandboxes``; return its name."""
    from prefect.client.orchestration import get_client

    name = machine_limit_name(hostname)
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(name, sandboxes)
    return name
