"""Find collectors by domain name through the ``worldtrace.collectors`` entry points.

A domain is registered by one entry point in this group, and everything else — collection,
rendering, curation hints, setup and the doctor's checks — asks its collector. worldtrace
registers its own domains in ``pyproject.toml``; another package adds a domain by declaring
an entry point in the same group, with no change to this project.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from worldtrace.collectors.base import Collector
from worldtrace.schemas.errors import InputError

ENTRY_POINT_GROUP = "worldtrace.collectors"


class UnknownDomainError(InputError, LookupError):
    """No collector is registered for the requested domain."""


def available_domains() -> list[str]:
    """Return the domains that have a registered collector."""
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def get_collector(domain: str) -> Collector[Any, Any]:
    """Return a new collector for ``domain``; the error lists the domains that exist."""
    matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == domain]
    if not matches:
        known = ", ".join(available_domains()) or "none"
        raise UnknownDomainError(f"no collector for domain {domain!r} (available: {known})")
    collector_class = matches[0].load()
    return collector_class()


def registered_collectors() -> list[Collector[Any, Any]]:
    """Return a collector of every registered domain, in domain order."""
    return [get_collector(domain) for domain in available_domains()]
