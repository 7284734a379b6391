"""Quiet by default: library logs go to a log file, and to the screen only with ``--verbose``.

Every ``worldtrace`` command writes the logs of the libraries it drives (Prefect, datasets,
huggingface_hub, datatrove's loguru) to one file per invocation under
``$WORLDTRACE_LOG_DIR`` (default ``~/.local/state/worldtrace/logs``, the last
:data:`KEEP_LOGS` kept). The screen shows progress bars, summary tables and warnings; with
``--verbose`` the libraries' INFO lines too. Processes the command starts (datatrove's pool
workers) follow the same choice through the environment.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from worldtrace.curation.logs import LOG_FILE_ENV, VERBOSE_ENV, route_loguru

LOG_DIR_ENV = "WORLDTRACE_LOG_DIR"
KEEP_LOGS = 50
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def state_home() -> Path:
    """The folder of what worldtrace keeps between commands (``$XDG_STATE_HOME/worldtrace``)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "worldtrace"


def log_dir() -> Path:
    """Where the log files go."""
    configured = os.environ.get(LOG_DIR_ENV)
    if configured:
        return Path(configured)
    return state_home() / "logs"


def verbose() -> bool:
    """Whether library logs go to the screen as well (``--verbose``)."""
    return os.environ.get(VERBOSE_ENV) == "1"


def configure(command: str, loud: bool) -> Path:
    """Send this process's library logs to a new log file (and the screen when ``loud``).

    Returns the log file's path. Called once per command, before the command imports the
    libraries whose log levels are read at import (Prefect).
    """
    folder = log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for old in sorted(folder.glob("*.log"))[:-KEEP_LOGS]:
        old.unlink(missing_ok=True)
    path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{command}-{os.getpid()}.log"
    os.environ[LOG_FILE_ENV] = str(path)
    os.environ[VERBOSE_ENV] = "1" if loud else "0"
    # Prefect prints task and flow runs on its own console handler: warnings only, unless
    # asked (the user's own PREFECT_LOGGING_LEVEL wins).
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if loud else "WARNING")
    if not loud:
        # datatrove's dedup stages draw tqdm bars of their own; the command draws its own.
        os.environ.setdefault("TQDM_DISABLE", "1")
    handlers: list[logging.Handler] = [logging.FileHandler(path, encoding="utf-8")]
    if loud:
        handlers.append(logging.StreamHandler(sys.stderr))
    logging.basicConfig(level=logging.INFO, format=FORMAT, handlers=handlers, force=True)
    for name in ("prefect", "datasets", "huggingface_hub", "httpx", "urllib3"):
        logging.getLogger(name).addHandler(handlers[0])
    route_loguru()
    return path
