"""The seccomp profile of private-view sandboxes: Docker's default, no user namespaces.

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
CLONE_NEWUSER = 0x10000000
"""``clone(2)``/``unshare(2)``'s flag that makes a user namespace."""
"""``personality(2)``'s flag that turns address-space randomization off (``setarch -R``)."""
DEFAULT_PROFILE = Path(__file__).with_name("seccomp_default.json")


@functools.cache
def profile() -> str:
    """The profile, as the JSON text Docker's ``seccomp=`` security option takes."""
    document: dict[str, Any] = json.loads(DEFAULT_PROFILE.read_text(encoding="utf-8"))
    _no_user_namespaces(document["syscalls"])
    document["syscalls"].append(
        {
            "names": ["personality"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": ADDR_NO_RANDOMIZE, "op": "SCMP_CMP_EQ"}],
            "comment": "setarch -R: the agent's processes without address randomization",
        }
    )
    return json.dumps(document, separators=(",", ":"))


def _no_user_namespaces(syscalls: list[dict[str, Any]]) -> None:
    """Let no process of the container make a user namespace.

    A private view's container has CAP_SYS_ADMIN (for our root processes, which make the
    view's namespaces), and Docker's default profile then allows ``clone``, ``clone3`` and
    ``unshare`` with any flags to every process in it: the agent, which holds no capability,
    could still make a user namespace and be root inside it (a kernel surface Docker's
    default keeps closed). Instead, ``clone`` and ``unshare`` are allowed without
    ``CLONE_NEWUSER`` (every other namespace still needs a capability the agent lacks), and
    ``clone3``, whose flags a filter cannot read, answers ENOSYS as it does in Docker's default
    for containers without the capability (glibc then uses ``clone``).
    """
    for rule in syscalls:
        if "CAP_SYS_ADMIN" in rule.get("includes", {}).get("caps", []):
            rule["names"] = [n for n in rule["names"] if n not in ("clone", "clone3", "unshare")]
        if rule["names"] == ["clone3"] and rule["action"] == "SCMP_ACT_ERRNO":
            rule.get("excludes", {}).pop("caps", None)
    syscalls.append(
        {
            "names": ["clone", "unshare"],
            "action": "SCMP_ACT_ALLOW",
            "args": [
                {"index": 0, "value": CLONE_NEWUSER, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
            ],
            "excludes": {"arches": ["s390", "s390x"]},  # clone's flags are its second argument
            "comment": "namespaces but no user namespace (see _no_user_namespaces)",
        }
    )


def security_option() -> str:
    """The ``security_opt`` entry that gives a container :func:`profile`."""
    return f"seccomp={profile()}"


__all__ = ["ADDR_NO_RANDOMIZE", "CLONE_NEWUSER", "DEFAULT_PROFILE", "profile", "security_option"]
