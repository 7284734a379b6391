"""The errors of sandboxes: an infrastructure failure, and a container that died in use.

Every other module of :mod:`worldtrace.sandboxes` may raise them, so this one imports none
of its neighbours.
"""

from __future__ import annotations

from worldtrace.schemas.errors import SetupError


class SandboxError(SetupError, RuntimeError):
    """An infrastructure failure: no engine, a missing image, a container that died."""


class SandboxDied(SandboxError):
    """The container stopped while we were using it."""
