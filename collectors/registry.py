"""Find collectors by domain name through the ``worldtrace.collectors`` entry points.

worldtrace registers its own domains in ``pyproject.toml``; another package adds a domain by
declaring an entry point in the same group, with no change to this project.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from worldtrace.collectors.base import Collector

ENTRY_POINT_GROUP = "worldtrace.collectors"


class UnknownDomainError(LookupError):
    """No collector is registered for the requested domain."""


def available_domains() -> list[str]:
    """Return the domains that have a registered collector."""
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


def get_collector(domain: str) -> Collector:
    """Return a new collector for ``domain``; the error lists the domains that exist."""
    matches = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == domain]
    if not matches:
        known = ", ".join(available_domains()) or "none"
        raise UnknownDomainError(f"no collector for domain {domain!r} (available: {known})")
    collector_class = matches[0].load()
    return collector_class()
