"""The toy domain (tests/collectors/toy_domain) installed the way any plugin package is."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parent / "collectors" / "toy_domain"


def install_toy_domain(root: Path) -> Path:
    """Build and install the toy domain with pip into ``root/site`` (not into our tree)."""
    source = root / "source"
    shutil.copytree(PACKAGE, source)  # pip builds in the source folder: not in ours
    site = root / "site"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--no-build-isolation", "--no-index", "--target", str(site),
            str(source),
        ],
        check=True,
    )  # fmt: skip
    return site
