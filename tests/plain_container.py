"""What a plain container of an image shows: the baseline the agent's view is compared with."""

from __future__ import annotations

import docker


def plain_outputs(image: str, commands: dict[str, str], workdir: str) -> dict[str, str]:
    """Each command's output (stdout and stderr) in a plain container of ``image``, as the user."""
    client = docker.from_env()
    container = client.containers.run(
        image, ["sleep", "120"], detach=True, remove=True, network_mode="none"
    )
    try:
        return {
            name: container.exec_run(
                ["bash", "-c", f"{line} 2>&1"], user="user", workdir=workdir
            ).output.decode(errors="replace")
            for name, line in commands.items()
        }
    finally:
        container.remove(force=True)
