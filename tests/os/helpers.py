"""Helpers of the tests of the in-container desktop driver: a sandbox of ``worldtrace/os``, one
driver process in it, and lookups in the accessibility trees it replies with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

from worldtrace.collectors.os.image_definition import DRIVER, IMAGE
from worldtrace.sandboxes.channel import DriverChannel
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.images import ensure_image
from worldtrace.sandboxes.limits import Limits

SETTLE_CAP_S = 3.0
"""The ``settle_cap_s`` :meth:`Driver.act` gives every call."""


def new_sandbox() -> DockerSandbox:
    """A sandbox of the image, as an episode has it (more memory: four GTK applications)."""
    image = ensure_image(IMAGE)
    limits = Limits(disk_mb=128, cpus=2, memory_mb=1536)
    return DockerSandbox(image, limits=limits, network="none").start()


class Driver:
    """One driver process in a sandbox."""

    def __init__(self, sandbox: DockerSandbox) -> None:
        self.channel = DriverChannel(sandbox.open_stream(list(DRIVER)), "desktop driver")

    def request(self, op: str, timeout_s: float = 60.0, **fields: Any) -> dict[str, Any]:
        """Send one request and return the reply."""
        return self.channel.request({"op": op, **fields}, timeout_s)

    def ok(self, op: str, **fields: Any) -> dict[str, Any]:
        """A request the driver must serve; its observation is checked for consistency."""
        reply = self.request(op, **fields)
        assert "driver_error" not in reply, reply["driver_error"]
        if op != "stop":
            assert reply["tree_digest"] == digest(reply["tree"])
            assert reply["nodes"] == count_nodes(reply["tree"])
        return reply

    def act(self, function: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """One pyautogui call."""
        call = {"function": function, "args": list(args), "kwargs": kwargs}
        return self.ok("act", call=call, quiet_s=0.3, settle_cap_s=SETTLE_CAP_S)

    def close(self) -> None:
        """Stop the session, then end the driver."""
        self.request("stop")
        self.channel.close()


def digest(tree: dict[str, Any] | None) -> str:
    """The tree digest as the protocol defines it."""
    canonical = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def count_nodes(node: dict[str, Any] | None) -> int:
    """How many nodes a (sub)tree holds."""
    if node is None:
        return 0
    return 1 + sum(count_nodes(child) for child in node["children"])


def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a tree, depth first."""
    yield node
    for child in node["children"]:
        yield from nodes(child)


def application(tree: dict[str, Any], name: str) -> dict[str, Any]:
    """The application node called ``name``."""
    found = [app for app in tree["children"] if app["name"] == name]
    assert found, [app["name"] for app in tree["children"]]
    return found[0]


def find(node: dict[str, Any], role: str, name: str | None = None) -> list[dict[str, Any]]:
    """The nodes of ``role`` (and ``name``, less the padding mousepad's menu items carry)."""
    return [
        each
        for each in nodes(node)
        if each["role"] == role and (name is None or (each["name"] or "").strip() == name)
    ]


def centre(node: dict[str, Any]) -> tuple[int, int]:
    """The middle of a node's extents."""
    return node["x"] + node["width"] // 2, node["y"] + node["height"] // 2
