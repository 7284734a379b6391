"""Read, check and summarise tide-gauge records."""

__version__ = "0.3.1"
