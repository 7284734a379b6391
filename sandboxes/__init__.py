"""Where real environments run: Docker images and containers with limits and cleanup."""

from worldtrace.sandboxes.docker import DockerSandbox, ExecResult, Limits, SandboxDied, SandboxError

__all__ = ["DockerSandbox", "ExecResult", "Limits", "SandboxDied", "SandboxError"]
