"""An image's programs and libraries read into the host's page cache before its sandboxes run.

The resident size ``ps`` and ``top`` show the agent counts the pages of a process's programs
and libraries that are mapped, and at each page fault the kernel also maps the neighbouring
pages that are already in the page cache (fault-around). Which pages are cached depends on what
every other process of the machine read before, so the same ``sleep`` measured 2364 kB in one
episode and 2380 kB in the next while other sandboxes ran, and 2372 to 2384 kB around a cache
drop. With every mapped file of the image wholly cached, every episode maps the same pages
(2384 kB each time, before and after a cache drop).

The files are read on the host from the image's layer folders, once per image and process:
pages the host reads are charged to the host's memory group, so no container's memory limit
evicts them either. A machine under memory pressure may still evict them; an engine on
another machine (``sandbox_host``), an engine without overlay2 layer folders, or folders this
process may not read leave the cache as it is (logged once).
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from docker.models.images import Image

logger = logging.getLogger(__name__)

_warmed: set[str] = set()
_lock = threading.Lock()


def layer_folders(image: Image) -> list[Path]:
    """The overlay2 folders holding ``image``'s files, topmost first; [] for another driver."""
    driver = image.attrs.get("GraphDriver") or {}
    if driver.get("Name") != "overlay2":
        return []
    data = driver.get("Data") or {}
    folders = [data.get("UpperDir") or "", *(data.get("LowerDir") or "").split(":")]
    return [Path(folder) for folder in folders if folder]


def mapped_files(folder: Path) -> Iterator[str]:
    """The files under ``folder`` a process maps.

    Programs (any execute bit), shared objects and the locale archive.
    """
    folders = [str(folder)]
    while folders:
        try:
            entries = list(os.scandir(folders.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                folders.append(entry.path)
            elif entry.is_file(follow_symlinks=False) and (
                ".so" in entry.name
                or entry.name == "locale-archive"
                or entry.stat(follow_symlinks=False).st_mode & 0o111
            ):
                yield entry.path


def warm(image: Image) -> None:
    """Read ``image``'s mapped files into the page cache, once per image in this process."""
    with _lock:
        if image.id in _warmed:
            return
        _warmed.add(image.id)
        folders = layer_folders(image)
        if not folders:
            logger.info("image %s: no overlay2 layer folders, page cache left as it is", image.id)
            return
        unreadable = sum(1 for folder in folders if not os.access(folder, os.R_OK | os.X_OK))
        for folder in folders:
            for path in mapped_files(folder):
                try:
                    _populate(path)
                except OSError:
                    unreadable += 1
        if unreadable:
            logger.warning(
                "image %s: %d layer folders, programs or libraries could not be read into the "
                "page cache; "
                "resident sizes shown in its sandboxes may differ between episodes",
                image.id,
                unreadable,
            )


def _populate(path: str) -> None:
    """Bring every page of ``path`` into the page cache.

    A read-only mapping populated when made: no copy of the content, and pages already cached
    cost only their page table entries.
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            return
        flags = mmap.MAP_SHARED | mmap.MAP_POPULATE
        mmap.mmap(file.fileno(), size, flags=flags, prot=mmap.PROT_READ).close()
