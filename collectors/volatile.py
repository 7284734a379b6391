"""Volatile spans more than one domain renders: durations a test runner measures, addresses.

A domain's renderer lists the patterns its observations can hold in
``Renderer.volatile_patterns`` (see docs/determinism.md); the ones here are shared by the
domains that run programs in a shell (terminal, swe). Each pattern matches only the varying
part, so what a run did (how many tests passed) stays visible to comparisons.
"""

from __future__ import annotations

import re

_PYTEST_DURATION = r" in \d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?"

PYTEST_SUMMARY = (
    # `==== 2 passed in 0.08s ====`: the duration and the padding (its width follows the
    # duration's length), on both sides of the counts.
    re.compile(rf"(?m)^=+ (?=.*{_PYTEST_DURATION} =+$)"),
    re.compile(rf"(?m){_PYTEST_DURATION} =+$"),
)
UNITTEST_SUMMARY = re.compile(r"(?m)^Ran \d+ tests? in (\d+\.\d+s)$")
"""``Ran 3 tests in 0.001s``."""
PYTHON_ADDRESS = re.compile(r"(?<= at )0x[0-9a-f]{4,16}\b")
"""An object's address in its default repr: ``<zip object at 0x7f0d5adcb440>``."""
SHELL_TIME = re.compile(r"(?m)^(?:real|user|sys)\t(\d+m\d+\.\d+s)$")
"""The three lines bash's ``time`` prints."""

FINE_CLOCK_READING = re.compile(
    r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d{3,9}(?: ?[+-]\d\d:?\d\d|Z)?"
)
"""A time to the millisecond or finer (``stat``'s ``2025-03-03 09:00:03.031894970 +0000``):
the episode's clock starts at a fixed instant but then runs, so its fractions never repeat."""

PS_MEASURES = re.compile(
    r"(?m)^\S+ +\d+ +(\d+\.\d) +(\d+\.\d) +(\d+) +(\d+) +\S+ +\S+ +\S+ +(\d+:\d\d) "
)
"""The measured columns of a ``ps aux`` row: %CPU, %MEM, VSZ, RSS and CPU TIME."""

PROGRAM_OUTPUT = (
    *PYTEST_SUMMARY,
    UNITTEST_SUMMARY,
    PYTHON_ADDRESS,
    SHELL_TIME,
    FINE_CLOCK_READING,
    PS_MEASURES,
)
"""Everything above: for a domain showing what programs print."""
