"""Normalizers: raw, domain-native records → the unified transition schema."""

from worldtrace.normalizers.run import NormalizeReport, get_normalizer, normalize_run

__all__ = ["NormalizeReport", "get_normalizer", "normalize_run"]
