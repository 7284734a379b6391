"""Where real environments run: Docker images and containers with limits and cleanup."""

from worldtrace.sandboxes.docker import DockerSandbox, ExecResult
from worldtrace.sandboxes.errors import SandboxDied, SandboxError
from worldtrace.sandboxes.limits import Limits

__all__ = ["DockerSandbox", "ExecResult", "Limits", "SandboxDied", "SandboxError"]
