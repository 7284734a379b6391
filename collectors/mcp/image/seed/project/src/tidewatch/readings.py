"""Checks on a series of readings: gaps and spikes."""

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Reading:
    time: datetime
    height_m: float


@dataclass(frozen=True)
class Gap:
    start: datetime
    end: datetime


def find_gaps(readings: list[Reading], max_gap: timedelta = timedelta(minutes=30)) -> list[Gap]:
    gaps = []
    for before, after in zip(readings, readings[1:]):
        if after.time - before.time > max_gap:
            gaps.append(Gap(before.time, after.time))
    return gaps


def find_spikes(readings: list[Reading], threshold_m: float = 0.5) -> list[Reading]:
    spikes = []
    for index, reading in enumerate(readings):
        neighbours = readings[max(index - 1, 0) : index] + readings[index + 1 : index + 2]
        if any(abs(reading.height_m - other.height_m) > threshold_m for other in neighbours):
            spikes.append(reading)
    return spikes
