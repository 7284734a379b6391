"""Datum and unit conversions."""

FEET_PER_METRE = 3.28084


def chart_to_ordnance(height_m: float, datum_offset_m: float) -> float:
    return round(height_m + datum_offset_m, 3)


def metres_to_feet(height_m: float) -> float:
    return round(height_m * FEET_PER_METRE, 3)
