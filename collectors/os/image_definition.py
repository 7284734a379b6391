"""The desktop (os) domain's sandbox image: the X11 session, the applications, the driver.

``image/Dockerfile`` installs Xvfb, openbox, the AT-SPI bus, mousepad, gnumeric, pcmanfm,
galculator and lxterminal (a VTE terminal whose screen AT-SPI reads) from Debian and pyautogui
(hash-pinned) into ``/opt/worldtrace/venv``; it
seeds ``/home/user`` from ``image/seed/`` and writes ``/opt/worldtrace/versions.json``.
``image/desktop_driver.py`` is the in-container driver whose docstring is the protocol the
environment speaks; ``image/launcher.py`` is the dock the session starts with.
"""

from __future__ import annotations

from pathlib import Path

from worldtrace.sandboxes.images import DRIVER_RUNTIME, ImageDefinition

IMAGE_FOLDER = Path(__file__).parent / "image"
IMAGE = ImageDefinition(name="os", folder=IMAGE_FOLDER, shared_files=(DRIVER_RUNTIME,))
"""The one sandbox image of the domain."""
IMAGE_TAG = IMAGE.tag
"""``worldtrace/os:latest``."""
DRIVER = ("/opt/worldtrace/venv/bin/python", "/opt/worldtrace/desktop_driver.py")
"""The argv of the in-container driver (add ``--observe`` for the last look)."""
VERSIONS_JSON = "/opt/worldtrace/versions.json"
"""Where the versions of the desktop's parts are inside the image."""
HOME = "/home/user"
"""The session user's home, seeded from ``image/seed/``."""
