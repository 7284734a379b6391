"""What a domain needs on the machine, and how `worldtrace doctor` checks it.

A domain declares its :class:`Requirements` (Debian packages, sandbox images, any further
checks) on its collector; `make setup WORLDTRACE_DOMAINS=<domain>` installs its packages (plain
`make setup` only the core's), the first `worldtrace collect` of a domain builds the images
its configuration uses (``WORLDTRACE_DOMAINS=all`` installs and builds every domain's, for the
tests), and `worldtrace doctor` checks them, so none of them keeps a list of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from worldtrace.sandboxes.docker import require_image
from worldtrace.sandboxes.images import ImageDefinition


@dataclass(frozen=True)
class Check:
    """The outcome of one check: what was checked, whether it passed, and how to fix it."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None


@dataclass(frozen=True)
class Requirements:
    """Debian packages, sandbox images and further checks a domain needs."""

    debian_packages: tuple[str, ...] = ()
    images: tuple[ImageDefinition, ...] = ()
    checks: tuple[Callable[[], Check], ...] = ()
    """Checks beyond packages and images (a browser that launches, say); each never raises."""

    def require_images(self) -> None:
        """Raise ``SandboxError`` naming the first missing image and how to build it.

        Inside ``sandboxes.images.building_on_first_use`` the images are built instead.
        """
        for image in self.images:
            require_image(image.tag)
