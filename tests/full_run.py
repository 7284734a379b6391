"""The suite's one switch between a sample and the whole: ``WORLDTRACE_FULL_TASKS=1``.

`make test` plays a sample of each task library and leaves out scenarios that only repeat what
another test of the same module checks (on another site, with another reader), to stay inside
its time budget (docs/testing.md). With the variable set to 1, every task and every scenario
runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

FULL = os.environ.get("WORLDTRACE_FULL_TASKS") == "1"
"""True when the whole of every library and every repeated scenario is asked for."""

T = TypeVar("T")


def sample_or_all(everything: Sequence[T], sample: Sequence[T]) -> list[T]:
    """``everything`` in a full run, ``sample`` (a part of it) otherwise."""
    assert set(sample) <= set(everything), set(sample) - set(everything)
    return list(everything) if FULL else list(sample)
