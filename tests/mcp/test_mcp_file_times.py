"""server-filesystem's file times are on the episode's clock, the same in every run.

Node.js reads file times through libuv, which calls ``statx`` with ``syscall(2)``: the
sandbox's clock library (libfaketime) never saw it, so ``get_file_info`` showed the real
collection moment as ``created`` and the image's seeded times moved by the clock's offset
(``modified: Wed Sep 26 2001`` for a file the image dates 2000-01-01), and two runs differed
by the seconds between them (docs/determinism.md). The server now gets
``libfaketime-node.so.1`` (``collectors/mcp/image/node_file_times.c``), and the clock maps a
whole real second onto the episode's start, so the files seeded onto the sandbox's disk are
created in the same second of the episode's clock in every run. Checked on the real server.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment
from worldtrace.collectors.mcp.render import McpRenderer
from worldtrace.collectors.tool_calls import tool_call

pytestmark = pytest.mark.docker

START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
SEEDED = "/srv/project/README.md"
WRITTEN = "/srv/project/notes/new.md"
GMT = " GMT+0000 (Coordinated Universal Time)"


def file_infos(calls: list[tuple[str, dict]], runs: int = 1) -> list[list[str]]:
    """The texts of ``calls`` in ``runs`` fresh episodes of server-filesystem on START's clock."""
    texts = []
    for _ in range(runs):
        environment = McpEnvironment(McpConfig(server="filesystem", clock_start=START))
        try:
            environment.reset(0, None)
            run = []
            for name, arguments in calls:
                outcome = environment.step(tool_call(name, arguments), timeout_s=30)
                assert outcome.error is None, outcome.error
                run.append(McpRenderer().observation(outcome.observation).text)
            texts.append(run)
        finally:
            environment.close()
    return texts


def times(text: str) -> dict[str, str]:
    """``{created|modified|accessed: the date as the server printed it}``."""
    found = dict(re.findall(r"^(created|modified|accessed): (.*)$", text, re.MULTILINE))
    assert set(found) == {"created", "modified", "accessed"}, text
    return found


def test_seeded_and_written_files_show_episode_times(mcp_image: str) -> None:
    (run,) = file_infos(
        [
            ("get_file_info", {"path": SEEDED}),
            ("write_file", {"path": WRITTEN, "content": "a note\n"}),
            ("get_file_info", {"path": WRITTEN}),
        ]
    )
    seeded, written = times(run[0]), times(run[2])
    # The image's times, exactly: every seeded file is dated 2000-01-01 in the image.
    assert seeded["modified"] == seeded["accessed"] == "Sat Jan 01 2000 00:00:00" + GMT, run[0]
    # Put on the sandbox's disk as the episode's clock started.
    assert seeded["created"] == "Mon Mar 03 2025 09:00:00" + GMT, run[0]
    # Written during the episode: seconds after its start, on its clock.
    for value in written.values():
        assert value.startswith("Mon Mar 03 2025 09:0"), run[2]


def test_two_runs_show_the_same_seeded_file_times(mcp_image: str) -> None:
    first, second = file_infos([("get_file_info", {"path": SEEDED})], runs=2)
    assert first == second
