"""Curation of transition shards with datatrove: dedup, filters, scrubbing, decontamination.

The names below are imported on first use, so that importing a light module of this package
(``curation.logs``, ``curation.config``) does not import datatrove.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CurationConfig": "worldtrace.curation.config",
    "load_curation_config": "worldtrace.curation.config",
    "CurationError": "worldtrace.curation.pipeline",
    "CurationReport": "worldtrace.curation.pipeline",
    "curate": "worldtrace.curation.pipeline",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
