"""The driver's snapshots leave no trace in the server's world: file access times.

After every call the driver hashes every file of server-filesystem's folder (the state in
``meta``). An ordinary read sets a file's access time, so ``get_file_info`` showed, as
"accessed", the moment our snapshot ran instead of anything the agent did; its value moved
with each run's timing. Checked on the real server: a seeded file nobody but the snapshot
has read keeps the access time the image gave it, which equals its modification time.
"""

from __future__ import annotations

import re

import pytest

from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment
from worldtrace.collectors.mcp.render import McpRenderer
from worldtrace.collectors.tool_calls import tool_call

pytestmark = pytest.mark.docker


def test_snapshots_do_not_set_access_times(mcp_image: str) -> None:
    env = McpEnvironment(McpConfig(server="filesystem"))
    try:
        env.reset(0, None)
        # Two calls, so the snapshot has read every file at least twice.
        env.step(tool_call("list_allowed_directories", {}), timeout_s=30)
        outcome = env.step(
            tool_call("get_file_info", {"path": "/srv/project/README.md"}), timeout_s=30
        )
    finally:
        env.close()
    text = McpRenderer().observation(outcome.observation).text
    times = dict(re.findall(r"^(created|modified|accessed): (.*)$", text, re.MULTILINE))
    assert set(times) == {"created", "modified", "accessed"}, text
    # The image sets both times of every seeded file to the same instant.
    assert times["accessed"] == times["modified"], text
