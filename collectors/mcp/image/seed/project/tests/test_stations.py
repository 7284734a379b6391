from pathlib import Path

from tidewatch.stations import load_stations


def test_brest_is_known():
    stations = load_stations(Path(__file__).parents[1] / "data" / "stations.json")
    assert stations["brest"].country == "FR"
