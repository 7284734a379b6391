"""Library logs routed like the command says (see ``worldtrace.flows.logs``), datatrove's too.

loguru (datatrove's logger) goes to the command's log file, and to the screen only with
``--verbose``. datatrove gives each task a log file of its own and also adds a screen sink at
INFO; after the task it puts a screen sink back. :func:`install` replaces both hooks in every
process that imports the curation pipeline (datatrove's pool workers import it to run its
steps): a task's lines go to its own file in the stage's logging folder and to the command's
log file, and to the screen only when verbose. Workers learn the choice from the environment.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from loguru import logger

LOG_FILE_ENV = "WORLDTRACE_LOG_FILE"
"""The command's log file (set by the command line; inherited by the processes it starts)."""
VERBOSE_ENV = "WORLDTRACE_VERBOSE"
"""``1`` when library logs go to the screen too."""


def route_loguru() -> None:
    """Point loguru at the command's log file, and at the screen when verbose."""
    logger.remove()
    path = os.environ.get(LOG_FILE_ENV)
    if path:
        logger.add(path, level="INFO")
    if os.environ.get(VERBOSE_ENV) == "1":
        logger.add(sys.stderr, level="INFO")


def _add_task_logger(logging_dir: Any, rank: int, local_rank: int = 0, node_rank: int = -1) -> Any:
    route_loguru()
    logfile = logging_dir.open(f"logs/task_{rank:05d}.log", "w")
    logger.add(logfile, level="DEBUG")
    logger.info(f"Launching pipeline for {rank=}")
    return logfile


def _close_task_logger(logfile: Any) -> None:
    logger.complete()
    route_loguru()
    logfile.close()


def install() -> None:
    """Replace datatrove's task logger hooks (idempotent)."""
    import datatrove.executor.base as executor_base
    import datatrove.utils.logging as datatrove_logging

    executor_base.add_task_logger = _add_task_logger
    executor_base.close_task_logger = _close_task_logger
    datatrove_logging.setup_default_logger = route_loguru
