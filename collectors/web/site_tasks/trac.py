"""Scripted tasks on the trac site (filled in below)."""

from __future__ import annotations

from collectors.web.tasks import WebTask

TASKS: tuple[WebTask, ...] = ()
