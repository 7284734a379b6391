"""Helpers that put OSWorld's own tree code beside the os domain's (tests/os/test_os_osworld.py)."""
