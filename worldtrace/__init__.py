"""worldtrace: real software environments recorded as world-model training corpora.

This package is the installed face of the repository: its subpackages are the top-level
folders, which are the architecture (see ``setup.py``, which maps them here):
``worldtrace.schemas``, ``worldtrace.sandboxes``, ``worldtrace.collectors``,
``worldtrace.normalizers``, ``worldtrace.curation``, ``worldtrace.publishing``,
``worldtrace.exports`` and ``worldtrace.flows``. Installing the project claims this one
import name and no other.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("worldtrace")
except PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
