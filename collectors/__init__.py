"""Collectors: environments, policies, the episode loop and the raw recorder."""
