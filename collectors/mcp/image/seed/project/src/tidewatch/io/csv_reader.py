"""Parse a gauge CSV export (columns: time, height_m, quality)."""

import csv
from datetime import datetime

from tidewatch.readings import Reading


def read_csv(path: str) -> list[Reading]:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = csv.DictReader(handle)
        return [
            Reading(datetime.fromisoformat(row["time"]), float(row["height_m"]))
            for row in rows
            if row["quality"] != "bad"
        ]
