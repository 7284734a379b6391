"""The mcp renderer's volatile spans, on the real servers that print clock readings.

Two alike calls a second or two apart must give texts that differ only inside the spans
:data:`~worldtrace.collectors.mcp.render.VOLATILE_PATTERNS` marks (issue 23: a record marks
what varies by nature so training can mask it and comparisons can ignore it).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment
from worldtrace.collectors.mcp.render import McpRenderer
from worldtrace.collectors.tool_calls import tool_call

RENDER = McpRenderer()


def masked(text: str) -> str:
    """``text`` with every volatile span replaced by a marker."""
    spans = RENDER.volatile_spans(text)
    out, last = [], 0
    for span in spans:
        out += [text[last : span.start], "<volatile>"]
        last = span.end
    return "".join([*out, text[last:]])


def episode_texts(server: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The observation texts of ``calls`` in a fresh real episode of ``server``.

    A call named ``sleep`` waits ``seconds`` instead (and gives no text): the episode's clock
    runs on meanwhile.
    """
    environment = McpEnvironment(McpConfig(server=server))
    try:
        environment.reset(0, None)
        texts = []
        for name, arguments in calls:
            if name == "sleep":
                time.sleep(arguments["seconds"])
                continue
            outcome = environment.step(tool_call(name, arguments), 30)
            assert outcome.error is None, outcome.error
            texts.append(RENDER.marked_observation(outcome.observation).text)
        return texts
    finally:
        environment.close()


INFO = "/srv/project/notes/{}.md"


@pytest.mark.docker
@pytest.mark.parametrize(
    ("server", "calls", "pair"),
    [
        (
            # The same question twice, 1.5 s apart: only the clock reading may differ.
            "time",
            [
                ("get_current_time", {"timezone": "Europe/Paris"}),
                ("sleep", {"seconds": 1.5}),
                ("get_current_time", {"timezone": "Europe/Paris"}),
            ],
            (0, 1),
        ),
        (
            # Two files alike but written 1.5 s apart: only their dates may differ.
            "filesystem",
            [
                ("write_file", {"path": INFO.format("weekly"), "content": "Plan.\n"}),
                ("sleep", {"seconds": 1.5}),
                ("write_file", {"path": INFO.format("monthly"), "content": "Plan.\n"}),
                ("get_file_info", {"path": INFO.format("weekly")}),
                ("get_file_info", {"path": INFO.format("monthly")}),
            ],
            (2, 3),
        ),
    ],
)
def test_clock_readings_are_the_only_difference_between_alike_answers(
    server: str, calls: list[tuple[str, dict[str, Any]]], pair: tuple[int, int], mcp_image: str
) -> None:
    texts = episode_texts(server, calls)
    first, second = texts[pair[0]], texts[pair[1]]
    assert first != second  # the clock moved between them
    assert RENDER.volatile_spans(first)
    assert masked(first) == masked(second)
    # And a second episode reads the same once the readings are masked.
    again = episode_texts(server, calls)
    assert [masked(text) for text in again] == [masked(text) for text in texts]


def test_the_patterns_mark_only_the_readings() -> None:
    # Texts as the servers print them (from recorded runs), with their stable neighbours.
    info = (
        "size: 162\ncreated: Fri Nov 27 2026 02:07:49 GMT+0000 (Coordinated Universal Time)\n"
        "modified: Sat Jan 01 2000 00:00:00 GMT+0000 (Coordinated Universal Time)\n"
        "isDirectory: false"
    )
    assert masked(info) == (
        "size: 162\ncreated: <volatile>\nmodified: <volatile>\nisDirectory: false"
    )
    now = (
        '{\n  "timezone": "UTC",\n  "datetime": "2026-11-26T21:00:49+00:00",\n  "is_dst": false\n}'
    )
    assert (
        masked(now) == '{\n  "timezone": "UTC",\n  "datetime": "<volatile>",\n  "is_dst": false\n}'
    )
    page = "Powered by Datasette · Queries took 16.214ms · Data license"
    assert masked(page) == "Powered by Datasette · Queries took <volatile> · Data license"
    resource = "Resource 3: This is a plaintext resource created at 2:07:33 AM"
    assert masked(resource).endswith("created at <volatile>")
    # A file's own dates and the git log's are content, not readings.
    assert masked("2024-03-01T00:00:00Z,4.2\nDate: 2024-01-11 09:30:00+00:00") == (
        "2024-03-01T00:00:00Z,4.2\nDate: 2024-01-11 09:30:00+00:00"
    )
