"""Write the versions of the desktop's parts to a JSON file, at image build time.

Debian packages from dpkg's database, the PyPI packages from their installed metadata. Every
name must be installed: a missing one fails the build rather than leaving a hole.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

DEBIAN_PACKAGES = (
    "mousepad",
    "gnumeric",
    "pcmanfm",
    "galculator",
    "lxterminal",
    "libvte-2.91-0",
    "xvfb",
    "openbox",
    "at-spi2-core",
    "libatk-bridge2.0-0",
    "python3-pyatspi",
    "python3-xlib",
    "python3-pil",
    "python3-gi",
    "libgtk-3-0",
    "libgtk2.0-0",
    "dbus-daemon",
    "fonts-dejavu-core",
    "python3",
)
PYPI_PACKAGES = ("pyautogui", "pymsgbox", "pytweening", "pyscreeze", "pygetwindow", "pyrect")


def debian_version(package: str) -> str:
    """The installed version of a Debian package (fails when it is not installed)."""
    return subprocess.run(
        ["dpkg-query", "--showformat=${Version}", "--show", package],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def main() -> None:
    """Write {name: version} for every part to the path given as the only argument."""
    versions = {package: debian_version(package) for package in DEBIAN_PACKAGES}
    versions.update({package: metadata.version(package) for package in PYPI_PACKAGES})
    if not all(versions.values()):
        raise SystemExit(f"a version is empty: {versions}")
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(versions, out, indent=1, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    main()
