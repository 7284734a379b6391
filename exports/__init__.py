"""Export transitions to world-model training formats.

``EXPORTERS`` maps a format name to its exporter; every exporter takes the source folder
(``data/<domain>/`` or ``transitions/<domain>/`` parquet), the output folder and an optional
history window, writes one JSONL file per domain and returns the rows written per domain.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from worldtrace.exports.agentworld import export_agentworld
from worldtrace.exports.openai import export_openai

Exporter = Callable[[Path, Path, int | None], dict[str, int]]

EXPORTERS: dict[str, Exporter] = {
    "agentworld": export_agentworld,
    "openai": export_openai,
}

__all__ = ["EXPORTERS", "Exporter", "export_agentworld", "export_openai"]
