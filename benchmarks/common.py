"""What every benchmark records about the machine, and how it saves its report."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any


def loadavg() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return []


def machine_info(loadavg_start: list[float]) -> dict[str, Any]:
    """CPU count, Python, platform and the load at the start and end of the run."""
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": loadavg_start,
        "loadavg_end": loadavg(),
    }


def write_report(path: Path, report: dict[str, Any]) -> None:
    """Save a report as JSON (benchmarks/results/ is git-ignored)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")


def log(message: str) -> None:
    """Progress goes to stderr, so stdout holds only the report tables."""
    print(message, file=sys.stderr, flush=True)
