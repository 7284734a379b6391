"""Export transitions to world-model training formats.

``EXPORTERS`` maps a format name to its exporter. Every exporter takes the source folder
(``data/<domain>/`` or ``transitions/<domain>/`` parquet), the output folder, an optional cap
on the past turns of a row (``history``) and, by keyword, a token budget for them
(``history_tokens``, default :data:`DEFAULT_HISTORY_TOKENS` = 16,384, counted as one token per
3 bytes of UTF-8 unless ``tokenizer`` names a local ``tokenizer.json``). It writes one JSONL
file per domain, one row per training target (``curation.target``), and returns the rows
written per domain. In both formats the environment is the speaker: the state and the action
go in, the next observation is the target (:mod:`worldtrace.exports.turns`).
"""

from __future__ import annotations

from worldtrace.exports.agentworld import export_agentworld
from worldtrace.exports.openai import export_openai
from worldtrace.exports.source import Exporter
from worldtrace.exports.tokens import DEFAULT_HISTORY_TOKENS

EXPORTERS: dict[str, Exporter] = {
    "agentworld": export_agentworld,
    "openai": export_openai,
}

__all__ = [
    "DEFAULT_HISTORY_TOKENS",
    "EXPORTERS",
    "Exporter",
    "export_agentworld",
    "export_openai",
]
