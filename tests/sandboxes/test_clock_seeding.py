"""Files seeded onto a sandbox's disk are created in the same second of the episode's clock.

A seeded file keeps its image's modification time, but its birth and change times are when
the sandbox's disk was made, shown on the episode's clock. The clock's offset is a whole number
of seconds, and it was the rounded distance to the episode's start: the disk was made half a
second before or after the start's second at random, so ``stat``'s Birth (and server-
filesystem's ``created``) read 08:59:59 in one run and 09:00:00 in the next. The offset now
maps a real second boundary onto the start, with room for the seeding in that second.
Checked on real sandboxes.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker

START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
# Birth and change of seeded files (the first and the last seeded of the home folder), and the
# clock when the shell starts.
PROBE = "stat -c '%W %Z' /home/user /home/user/.bashrc /home/user/.profile; date -u +%s"


def test_seeded_files_are_created_in_the_starts_second(terminal_image: str) -> None:
    start = int(START.timestamp())
    for _ in range(4):  # each start had an even chance of the wrong second before
        with DockerSandbox(terminal_image, limits=Limits(disk_mb=64), clock_start=START) as box:
            result = box.exec(["sh", "-c", PROBE], timeout=20)
        assert result.exit_code == 0, result.stderr
        *seeded, now = result.text.strip().splitlines()
        times = {int(value) for line in seeded for value in line.split()}
        assert times == {start}, result.text
        assert 0 <= int(now) - start < 15  # the clock starts at the start's second, then runs
