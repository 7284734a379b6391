"""Normalizers: raw, domain-native records → the unified transition schema."""

from worldtrace.normalizers.run import NormalizeReport, normalize_run

__all__ = ["NormalizeReport", "normalize_run"]
