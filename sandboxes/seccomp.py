"""The seccomp profile of sandboxes with a private view: Docker's default, plus one value.

Docker's default profile lets a container call ``personality(2)`` with only a few values, none
of which turns off address-space randomization (``ADDR_NO_RANDOMIZE``, what ``setarch -R``
sets). With randomization on, two runs of the same episode load the same programs at other
addresses, so what a process measures of itself differs run to run: ``ps`` showed the same
``sleep 300`` with an RSS of 2352 kB in one run and 2344 kB in the other. The terminal driver
starts the agent's tmux server under ``setarch -R``
(``collectors/terminal/image/tmux_driver.py``), so the agent's processes are laid out alike in
every run; that needs this profile, which is Docker's own with ``personality(ADDR_NO_RANDOMIZE)``
allowed as well. The setting is the sandbox's processes', not the host's:
``/proc/sys/kernel/randomize_va_space`` stays as it is.

``seccomp_default.json`` is Docker's default profile as Debian ships it for the engine this
machine runs (``profiles/seccomp/default.json`` of the package
``golang-github-docker-docker-dev`` 20.10.24+dfsg1-1+deb12u1; Apache-2.0, Docker, Inc.): a
profile given to a container replaces the engine's built-in one, so everything else a sandbox
may call is what it was.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

ADDR_NO_RANDOMIZE = 0x0040000
"""``personality(2)``'s flag that turns address-space randomization off (``setarch -R``)."""
DEFAULT_PROFILE = Path(__file__).with_name("seccomp_default.json")


@functools.cache
def profile() -> str:
    """The profile, as the JSON text Docker's ``seccomp=`` security option takes."""
    document: dict[str, Any] = json.loads(DEFAULT_PROFILE.read_text(encoding="utf-8"))
    document["syscalls"].append(
        {
            "names": ["personality"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": ADDR_NO_RANDOMIZE, "op": "SCMP_CMP_EQ"}],
            "comment": "setarch -R: the agent's processes without address randomization",
        }
    )
    return json.dumps(document, separators=(",", ":"))


def security_option() -> str:
    """The ``security_opt`` entry that gives a container :func:`profile`."""
    return f"seccomp={profile()}"


__all__ = ["ADDR_NO_RANDOMIZE", "DEFAULT_PROFILE", "profile", "security_option"]
