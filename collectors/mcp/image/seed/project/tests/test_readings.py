from datetime import datetime, timedelta

from tidewatch.readings import Reading, find_gaps, find_spikes

START = datetime(2024, 3, 1)


def series(heights):
    return [Reading(START + timedelta(minutes=15 * i), h) for i, h in enumerate(heights)]


def test_no_gaps_in_regular_series():
    assert find_gaps(series([1.0, 1.1, 1.2])) == []


def test_spike_is_found():
    assert [r.height_m for r in find_spikes(series([1.0, 2.0, 1.1]))] == [2.0, 1.0, 1.1]
