"""Prefect flows that compose the stages, and the worldtrace command line."""

import os

# Defaults for running Prefect on one machine with no internet; the user's own settings win.
# The first start of the embedded API migrates its database and can take longer than
# Prefect's default 20 s; telemetry would only fail on a closed network.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
