"""Curation of transition shards with datatrove: dedup, filters, scrubbing, decontamination."""

from worldtrace.curation.config import CurationConfig, load_curation_config
from worldtrace.curation.pipeline import CurationError, CurationReport, curate

__all__ = ["CurationConfig", "CurationError", "CurationReport", "curate", "load_curation_config"]
