"""Tide-gauge stations and their datum offsets."""

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Station:
    id: str
    name: str
    country: str
    latitude: float
    longitude: float
    datum_offset_m: float


def load_stations(path: Path) -> dict[str, Station]:
    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    return {item["id"]: Station(**item) for item in raw["stations"]}
