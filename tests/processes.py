"""The machine's processes as tests look at them: read from /proc, no library in between."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def process_stats() -> Iterator[tuple[int, list[str]]]:
    """Each live process's pid and the fields of its ``/proc/PID/stat`` after the command name.

    The fields start with the state (``Z`` for a zombie), then the parent pid, the process
    group and the session; a process gone while it is read is left out.
    """
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        yield int(entry.name), stat[stat.rindex(")") + 2 :].split()
