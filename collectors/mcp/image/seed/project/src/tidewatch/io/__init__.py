"""Reading gauge exports and writing reports."""
