from tidewatch.units import chart_to_ordnance, metres_to_feet


def test_chart_to_ordnance():
    assert chart_to_ordnance(4.2, -3.65) == 0.55


def test_metres_to_feet():
    assert metres_to_feet(1.0) == 3.281
