"""The capabilities a private view's setup needs never reach the agent (issue 24's review).

The sandbox container gets CAP_SYS_ADMIN and CAP_SYS_TIME so that its root processes (ours)
can make the agent's namespaces and give the view a boot clock of its own. The agent's
processes must hold none of them, be unable to gain them (no-new-privileges, no setuid path),
and so be unable to make a user namespace (which Docker's default seccomp profile would
allow every process of a container that has CAP_SYS_ADMIN: sandboxes/seccomp.py), mount, set a
clock or make a time namespace in the view.
"""

from __future__ import annotations

import re

import pytest

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.screen import plain_screen

pytestmark = pytest.mark.docker

PROBES = (
    "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status",
    "id -u",
    "unshare --user --map-root-user true 2>/dev/null; echo userns=$?",
    "unshare --time true; echo timens=$?",
    "mount -t tmpfs none /tmp 2>/dev/null; echo mount=$?",
    "date -s '2030-01-01' >/dev/null 2>&1; echo settime=$?",
    "sudo -n true 2>/dev/null; echo sudo=$?",
)


def test_the_agent_holds_no_capability_and_cannot_gain_one(terminal_image: str) -> None:
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        env.reset(0, None)
        outcome = env.step(command("clear; " + "; ".join(PROBES)), 30)
        screen = plain_screen(outcome.observation["screen"])
    finally:
        env.close()
    fields = dict(re.findall(r"^(\w+):\s+(\S+)$", screen, re.MULTILINE))
    for name in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(fields[name], 16) == 0, (name, screen)
    assert fields["NoNewPrivs"] == "1", screen
    assert re.search(r"^[1-9]\d*$", screen, re.MULTILINE), f"the agent is root:\n{screen}"
    for probe in ("userns", "timens", "mount", "settime", "sudo"):
        status = re.search(rf"^{probe}=(\d+)$", screen, re.MULTILINE)
        assert status and status.group(1) != "0", f"{probe} succeeded:\n{screen}"
