"""The MCP servers of the domain, as the image's manifest ``image/servers.json`` lists them.

One image, :data:`IMAGE_TAG`, holds every server at a pinned version (the Python ones in
``/opt/mcp-venv``, the npm ones in ``/opt/mcp-npm/node_modules``) and their seeded state; the
manifest, copied into it as ``/opt/worldtrace/servers.json``, is the single source of truth
for how each server starts (its command per transport, its environment, the services it
needs) and what its world is (the ``state`` the driver snapshots), read here as
:class:`ServerSpec` and by the in-container driver.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from worldtrace.sandboxes.images import DRIVER_RUNTIME, ImageDefinition
from worldtrace.schemas.errors import ConfigError, validation_problems

IMAGE_FOLDER = Path(__file__).parent / "image"
MANIFEST_PATH = IMAGE_FOLDER / "servers.json"
MANIFEST_IN_IMAGE = "/opt/worldtrace/servers.json"
"""Where the manifest is inside the image (the driver reads it there)."""
IMAGE = ImageDefinition("mcp", IMAGE_FOLDER, shared_files=(DRIVER_RUNTIME,))
"""The one sandbox image of the domain: every server, its seeded state, the driver."""
IMAGE_TAG = IMAGE.tag
"""``worldtrace/mcp:latest``."""
SDK_VERSION = "2.3.0"
"""The version of the ``mcp`` client SDK in the image's venv (pinned in requirements.txt)."""


class Transport(BaseModel):
    """How to start a server over one transport, and where to reach it for HTTP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: tuple[str, ...] = Field(
        min_length=1, description="argv, absolute paths (nothing fetched at run time)"
    )
    url: str | None = Field(
        default=None, description="the endpoint a client connects to (HTTP transports only)"
    )


class ServerState(BaseModel):
    """What the server's world is, so the driver knows what to snapshot after each call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["files", "git", "memory", "postgres", "none"]
    root: str | None = Field(default=None, description="folder of a files or git world")
    path: str | None = Field(default=None, description="file of a memory world")
    database: str | None = Field(default=None, description="database of a postgres world")

    @model_validator(mode="after")
    def _has_its_location(self) -> ServerState:
        needed = {"files": "root", "git": "root", "memory": "path", "postgres": "database"}
        field = needed.get(self.kind)
        if field is not None and not getattr(self, field):
            raise ValueError(f"a {self.kind} state needs {field!r}")
        return self


class ServerSpec(BaseModel):
    """One MCP server of the image: package, pinned version, how it starts, its world."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$", description="the key in the manifest")
    package: str = Field(min_length=1, description="the package name on its registry")
    version: str = Field(min_length=1, description="the installed (pinned) version")
    registry: Literal["pypi", "npm"]
    transports: dict[Literal["stdio", "http"], Transport] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict, description="environment of the server")
    services: tuple[Literal["postgres", "site"], ...] = Field(
        default=(),
        description="what must run beside it: postgres (start_postgres.sh in the container), "
        "site (a web-domain site sharing the container's network, started by the host)",
    )
    state: ServerState
    examples: tuple[str, ...] = Field(
        default=(), description="strings from the server's world for string arguments"
    )
    description: str = ""

    @model_validator(mode="after")
    def _http_has_url(self) -> ServerSpec:
        http = self.transports.get("http")
        if http is not None and not http.url:
            raise ValueError("the http transport needs a url")
        stdio = self.transports.get("stdio")
        if stdio is not None and stdio.url is not None:
            raise ValueError("the stdio transport has no url")
        return self


def load_servers(path: Path = MANIFEST_PATH) -> dict[str, ServerSpec]:
    """Read a manifest: ``{"servers": {name: {...}}}``; raise :class:`ConfigError` if malformed.

    The error names the file and every bad field (``servers.git.version: Field required``).
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ConfigError(f"cannot read the MCP server manifest {path}: {error}") from None
    if not isinstance(raw, dict) or set(raw) != {"servers"} or not isinstance(raw["servers"], dict):
        raise ConfigError(f'{path}: expected one object {{"servers": {{name: server}}}}')
    servers: dict[str, ServerSpec] = {}
    problems: list[str] = []
    for name, entry in raw["servers"].items():
        if not isinstance(entry, dict):
            problems.append(f"servers.{name}: expected an object")
            continue
        try:
            servers[name] = ServerSpec.model_validate({**entry, "name": name})
        except ValidationError as error:
            problems += [f"servers.{name}.{line}" for line in validation_problems(error, name)]
    if problems:
        raise ConfigError(f"{path} is not a valid MCP server manifest:\n" + "\n".join(problems))
    if not servers:
        raise ConfigError(f"{path} lists no server")
    return servers


SERVERS: dict[str, ServerSpec] = load_servers()
"""Every server of the image, by name (the manifest's order)."""
