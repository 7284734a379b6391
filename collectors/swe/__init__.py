"""The swe domain: real Python repositories in Docker, driven through tool calls."""
