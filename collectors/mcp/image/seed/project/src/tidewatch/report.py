"""Monthly summary of one station's readings."""

from statistics import mean

from tidewatch.readings import Reading, find_gaps, find_spikes


def monthly_report(station_id: str, readings: list[Reading]) -> dict:
    heights = [reading.height_m for reading in readings]
    return {
        "station": station_id,
        "readings": len(readings),
        "mean_m": round(mean(heights), 3),
        "highest_m": max(heights),
        "lowest_m": min(heights),
        "gaps": len(find_gaps(readings)),
        "spikes": len(find_spikes(readings)),
    }
