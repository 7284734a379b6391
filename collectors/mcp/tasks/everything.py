"""Scripted tasks on ``@modelcontextprotocol/server-everything``: protocol coverage.

The server exercises the protocol's content kinds: plain text (``echo``, ``get-sum``),
structured content with an output schema (``get-structured-content``), images
(``get-tiny-image``), annotated content (``get-annotated-message``), resource links
(``get-resource-links``), embedded text and blob resources (``get-resource-reference``),
gzipped data returned as a resource or a link (``gzip-file-as-resource``) and progress
(``trigger-long-running-operation``). It keeps no state a check could look at, so a check
recomputes what the answer must be from the call's arguments (the sum, the echoed text, the
decompressed bytes, the PNG's own structure) and compares it with what the server returned.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import math
import re
import struct
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from worldtrace.collectors.mcp.tasks import (
    CheckContext,
    McpTask,
    all_of,
    answered,
    calls,
    result_blocks,
    result_text,
    structured,
)
from worldtrace.collectors.tool_calls import tool_call

SUM_TEXT = re.compile(r"^The sum of (\S+) and (\S+) is (\S+)\.$")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WEATHER_CITIES = ("New York", "Chicago", "Los Angeles")


def _answers(context: CheckContext, tool: str, **arguments: Any) -> list[Mapping[str, Any]]:
    """The answered calls of ``tool`` whose arguments include ``arguments``."""
    return [
        raw
        for raw in calls(context, tool)
        if answered(raw)
        and all((raw.get("arguments") or {}).get(key) == value for key, value in arguments.items())
    ]


def _number(value: Any) -> float | None:
    """``value`` as a number (a JSON number or its text), None when it is not one."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _close(value: float | None, expected: float) -> bool:
    return value is not None and math.isclose(value, expected, rel_tol=1e-12)


def _decoded(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def valid_png(data: bytes | None) -> bool:
    """True if ``data`` is a PNG: whole chunks to IEND, good critical chunks, data that inflates.

    Critical chunks must carry correct CRCs; ancillary ones need not, as decoders only warn
    about them: the server's own logo carries an ``iCCP`` chunk with a wrong one.
    """
    if data is None or not data.startswith(PNG_SIGNATURE):
        return False
    offset = len(PNG_SIGNATURE)
    image_data = b""
    while offset + 12 <= len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        crc_bytes = data[offset + 8 + length : offset + 12 + length]
        if len(body) != length or len(crc_bytes) != 4:
            return False
        critical = kind[:1].isupper()
        if critical and zlib.crc32(kind + body) != struct.unpack(">I", crc_bytes)[0]:
            return False
        if kind == b"IDAT":
            image_data += body
        if kind == b"IEND":
            try:
                return bool(zlib.decompress(image_data))
            except zlib.error:
                return False
        offset += 12 + length
    return False


def echo_check(message: str) -> Callable[[CheckContext], bool]:
    """The echo of ``message`` came back as ``Echo: <message>``."""

    def check(context: CheckContext) -> bool:
        return any(
            result_text(raw) == f"Echo: {message}"
            for raw in _answers(context, "echo", message=message)
        )

    return check


def sum_check(*pairs: tuple[float, float]) -> Callable[[CheckContext], bool]:
    """Each pair was added by ``get-sum`` and the sum it reported is the true sum."""

    def check(context: CheckContext) -> bool:
        for a, b in pairs:
            reported = [
                SUM_TEXT.match(result_text(raw)) for raw in _answers(context, "get-sum", a=a, b=b)
            ]
            if not any(
                match is not None and _close(_number(match.group(3)), a + b) for match in reported
            ):
                return False
        return True

    return check


def weather_check(*cities: str) -> Callable[[CheckContext], bool]:
    """Each city's weather came back as structured content, the same as its text block."""

    def check(context: CheckContext) -> bool:
        for city in cities:
            answers = _answers(context, "get-structured-content", location=city)
            if not answers:
                return False
            weather = structured(answers[-1])
            if not isinstance(weather, Mapping):
                return False
            numbers = all(
                isinstance(weather.get(key), int | float) for key in ("temperature", "humidity")
            )
            if not numbers or not isinstance(weather.get("conditions"), str):
                return False
            try:
                if json.loads(result_text(answers[-1])) != weather:
                    return False
            except ValueError:
                return False
        return True

    return check


def image_check(context: CheckContext) -> bool:
    """The tiny image came back as a valid PNG image block."""
    for raw in _answers(context, "get-tiny-image"):
        for block in result_blocks(raw):
            is_png = block.get("type") == "image" and block.get("mimeType") == "image/png"
            if is_png and valid_png(_decoded(block.get("data"))):
                return True
    return False


def annotated_check(context: CheckContext) -> bool:
    """Every message type came back annotated, errors first in priority; the image is a PNG."""
    priorities: dict[str, float] = {}
    for kind in ("error", "success", "debug"):
        answers = _answers(context, "get-annotated-message", messageType=kind)
        if not answers:
            return False
        blocks = result_blocks(answers[-1])
        annotations = blocks[0].get("annotations") if blocks else None
        if not isinstance(annotations, Mapping) or not annotations.get("audience"):
            return False
        priority = _number(annotations.get("priority"))
        if priority is None:
            return False
        priorities[kind] = priority
        wants_image = (answers[-1].get("arguments") or {}).get("includeImage") is True
        images = [block for block in blocks if block.get("type") == "image"]
        if wants_image and not any(valid_png(_decoded(image.get("data"))) for image in images):
            return False
    return priorities["error"] > priorities["success"] > priorities["debug"] >= 0


def links_check(count: int) -> Callable[[CheckContext], bool]:
    """``count`` resource links came back, each with a ``demo://`` URI and a MIME type."""

    def check(context: CheckContext) -> bool:
        for raw in _answers(context, "get-resource-links", count=count):
            links = [block for block in result_blocks(raw) if block.get("type") == "resource_link"]
            if len(links) == count and all(
                str(link.get("uri", "")).startswith("demo://") and link.get("mimeType")
                for link in links
            ):
                return True
        return False

    return check


def reference_check(kind: str, resource_id: int) -> Callable[[CheckContext], bool]:
    """Resource ``resource_id`` came back embedded, its text or blob saying which it is."""
    uri = f"demo://resource/dynamic/{kind.lower()}/{resource_id}"

    def check(context: CheckContext) -> bool:
        for raw in _answers(
            context, "get-resource-reference", resourceType=kind, resourceId=resource_id
        ):
            for block in result_blocks(raw):
                resource = block.get("resource")
                if block.get("type") != "resource" or not isinstance(resource, Mapping):
                    continue
                if resource.get("uri") != uri:
                    continue
                if kind == "Blob":
                    content = _decoded(resource.get("blob"))
                    text = content.decode(errors="replace") if content is not None else ""
                else:
                    text = str(resource.get("text", ""))
                if text.startswith(f"Resource {resource_id}:"):
                    return True
        return False

    return check


def gzip_resource_check(name: str, text: str) -> Callable[[CheckContext], bool]:
    """``text`` came back gzipped as an embedded resource called ``name``."""

    def check(context: CheckContext) -> bool:
        for raw in _answers(context, "gzip-file-as-resource", name=name, outputType="resource"):
            for block in result_blocks(raw):
                resource = block.get("resource")
                if not isinstance(resource, Mapping) or not str(resource.get("uri")).endswith(name):
                    continue
                blob = _decoded(resource.get("blob"))
                try:
                    if blob is not None and gzip.decompress(blob) == text.encode():
                        return True
                except (OSError, EOFError):
                    return False
        return False

    return check


def gzip_link_check(name: str) -> Callable[[CheckContext], bool]:
    """A gzipped file came back as a link to a session resource called ``name``."""

    def check(context: CheckContext) -> bool:
        for raw in _answers(context, "gzip-file-as-resource", name=name, outputType="resourceLink"):
            for block in result_blocks(raw):
                if (
                    block.get("type") == "resource_link"
                    and str(block.get("uri", "")).endswith(f"/{name}")
                    and block.get("mimeType") == "application/gzip"
                ):
                    return True
        return False

    return check


def operation_check(duration: float, steps: int) -> Callable[[CheckContext], bool]:
    """The long-running operation finished with the duration and steps it was given."""
    expected = f"Duration: {duration:g} seconds, Steps: {steps}."

    def check(context: CheckContext) -> bool:
        return any(
            expected in result_text(raw)
            for raw in _answers(
                context, "trigger-long-running-operation", duration=duration, steps=steps
            )
        )

    return check


def _data_uri(text: str) -> str:
    return "data:text/plain;base64," + base64.b64encode(text.encode()).decode()


RELEASE_NOTES = "Release 2.4.1\n- fix: retry uploads on 503\n- docs: new quick start\n"

TASKS: tuple[McpTask, ...] = (
    McpTask(
        name="everything-echo-then-add",
        instruction=(
            "Check that the server answers by echoing 'deploy checklist ready', then add "
            "19.5 and 22.5 with its sum tool."
        ),
        category="text",
        server="everything",
        steps=(
            tool_call("echo", {"message": "deploy checklist ready"}),
            tool_call("get-sum", {"a": 19.5, "b": 22.5}),
        ),
        check=all_of(echo_check("deploy checklist ready"), sum_check((19.5, 22.5))),
    ),
    McpTask(
        name="everything-running-total",
        instruction=(
            "Total an expense report of 1250, 380.5 and -75.25 with the sum tool, two numbers "
            "at a time (carry the running total into the next call)."
        ),
        category="text",
        server="everything",
        steps=(
            tool_call("get-sum", {"a": 1250, "b": 380.5}),
            tool_call("get-sum", {"a": 1630.5, "b": -75.25}),
        ),
        check=sum_check((1250, 380.5), (1630.5, -75.25)),
    ),
    McpTask(
        name="everything-weather-in-three-cities",
        instruction=(
            "Get the structured weather report for New York, Chicago and Los Angeles and say "
            "which city is warmest."
        ),
        category="structured",
        server="everything",
        steps=tuple(
            tool_call("get-structured-content", {"location": city}) for city in WEATHER_CITIES
        ),
        check=weather_check(*WEATHER_CITIES),
    ),
    McpTask(
        name="everything-tiny-image",
        instruction="Fetch the server's tiny MCP logo image and confirm it is a PNG.",
        category="image",
        server="everything",
        steps=(tool_call("get-tiny-image", {}), tool_call("echo", {"message": "got the logo"})),
        check=all_of(image_check, echo_check("got the logo")),
    ),
    McpTask(
        name="everything-annotated-messages",
        instruction=(
            "Get an annotated message of each type (error with its example image, success, "
            "debug) and compare their priorities and audiences."
        ),
        category="annotations",
        server="everything",
        steps=(
            tool_call("get-annotated-message", {"messageType": "error", "includeImage": True}),
            tool_call("get-annotated-message", {"messageType": "success"}),
            tool_call("get-annotated-message", {"messageType": "debug"}),
        ),
        check=annotated_check,
    ),
    McpTask(
        name="everything-resource-links-then-reference",
        instruction=(
            "List four resource links the server offers, then fetch text resource 2 embedded "
            "in a resource reference."
        ),
        category="resources",
        server="everything",
        steps=(
            tool_call("get-resource-links", {"count": 4}),
            tool_call("get-resource-reference", {"resourceType": "Text", "resourceId": 2}),
        ),
        check=all_of(links_check(4), reference_check("Text", 2)),
    ),
    McpTask(
        name="everything-text-and-blob-resources",
        instruction=(
            "Fetch resource 3 as an embedded text resource and resource 4 as a base64 blob, "
            "and decode the blob."
        ),
        category="resources",
        server="everything",
        steps=(
            tool_call("get-resource-reference", {"resourceType": "Text", "resourceId": 3}),
            tool_call("get-resource-reference", {"resourceType": "Blob", "resourceId": 4}),
        ),
        check=all_of(reference_check("Text", 3), reference_check("Blob", 4)),
    ),
    McpTask(
        name="everything-gzip-release-notes",
        instruction=(
            "Compress the release notes (given as a data URI) into release-notes.txt.gz, once "
            "returned as an embedded resource and once as a resource link."
        ),
        category="resources",
        server="everything",
        steps=(
            tool_call(
                "gzip-file-as-resource",
                {
                    "name": "release-notes.txt.gz",
                    "data": _data_uri(RELEASE_NOTES),
                    "outputType": "resource",
                },
            ),
            tool_call(
                "gzip-file-as-resource",
                {
                    "name": "release-notes-link.txt.gz",
                    "data": _data_uri(RELEASE_NOTES),
                    "outputType": "resourceLink",
                },
            ),
        ),
        check=all_of(
            gzip_resource_check("release-notes.txt.gz", RELEASE_NOTES),
            gzip_link_check("release-notes-link.txt.gz"),
        ),
    ),
    McpTask(
        name="everything-long-running-operation",
        instruction=(
            "Start a two-second long-running operation in four steps, wait for it to finish, "
            "then echo 'operation finished'."
        ),
        category="progress",
        server="everything",
        steps=(
            tool_call("trigger-long-running-operation", {"duration": 2, "steps": 4}),
            tool_call("echo", {"message": "operation finished"}),
        ),
        check=all_of(operation_check(2, 4), echo_check("operation finished")),
    ),
)
"""The everything server's tasks."""
