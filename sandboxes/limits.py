"""The resource limits of one sandbox, as a configuration states them.

Configurations (``limits:``), the container (:mod:`worldtrace.sandboxes.docker`) and the
check for another machine's engine (:mod:`worldtrace.sandboxes.remote`) all read them, so
this module imports none of its neighbours.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Resource limits of one sandbox."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf is no limit

    cpus: float = Field(default=1.0, gt=0, description="CPU cores the container may use")
    memory_mb: int = Field(default=512, ge=16, description="memory limit (no swap)")
    pids: int = Field(default=256, ge=8, description="maximum number of processes")
    wall_clock_s: float = Field(
        default=3600, gt=0, description="the container stops itself after this long"
    )
    disk_mb: int | None = Field(
        default=1024,
        ge=16,
        description="size of everything the sandbox can write; null: no cap and a writable "
        "root filesystem (for an engine on another machine, where no disk can be mounted)",
    )
