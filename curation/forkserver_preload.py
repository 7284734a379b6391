"""Imported by ``multiprocess``'s forkserver as it starts (its preload), never by curate itself.

It makes the kernel end the forkserver the moment the curate process that started it dies
(SIGKILL included), and each pool worker the moment the forkserver dies: a chain of parent-
death signals, so nothing of a killed curate runs on, however loaded the machine (a worker
watching for its parent's end had to be scheduled first, and under load that took seconds).
"""

from __future__ import annotations

import os

from worldtrace.curation.parent_death import die_with_parent

die_with_parent()
os.register_at_fork(after_in_child=die_with_parent)
