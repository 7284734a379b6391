"""The harness is invisible from the desktop's terminal (issue 23).

The issue's fixed list of commands is typed into lxterminal on a real desktop episode (the os
environment and its driver, pyautogui's keys), and what the terminal shows is read from the
accessibility tree (the VTE terminal's text, as every observation reads it). The same list
runs in a plain container of the same image (``docker exec`` as the same user). The desktop
must show an ordinary machine of the sandbox's size: the plain container's view minus our
machinery (docker-init, the keep-alive, the driver, nsenter, the driver's folder and Python,
the certificate variable, the container id, the loop disk's image path), its processes the
desktop session's and the agent's own under an ordinary init.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from tests.plain_container import plain_outputs
from worldtrace.collectors.os.actions import special, write
from worldtrace.collectors.os.environment import OsConfig, OsEnvironment
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker

LIMITS = Limits(cpus=2, memory_mb=1536, pids=512, disk_mb=256)
COMMANDS = {
    "ps": "ps aux",
    "psww": "ps auxww",  # the whole command lines (ps aux cuts them at the window's width)
    "env": "env | sort",
    "mount": "mount",
    "df": "df -h",
    "free": "free",
    "nproc": "nproc",
    "uptime": "uptime",
    # (No `<`: pyautogui types it as `>` on the desktop's keymap, a redirection into /proc.)
    "init": "cat /proc/1/cmdline | tr '\\0' ' '; echo",
    "cgroup": "cat /proc/self/cgroup",
    "root": "ls -a /",
    "opt": "ls /opt",
    "git": "cd ~ && git status",
    "tmp": "ls -a /tmp",
}
MACHINERY = re.compile(
    r"worldtrace|docker-init|sleep \d{3,}|desktop_driver|nsenter|setpriv|unshare|disk\.img|"
    r"PIP_CERT|desktop-session|[0-9a-f]{64}",
    re.IGNORECASE,
)
SESSION = {
    # The desktop session: the X server, the buses, the window manager, the dock.
    r"Xvfb :0 .*",
    r"dbus-daemon --session .*",
    r"/usr/libexec/at-spi-bus-launcher --launch-immediately",
    r"/usr/bin/dbus-daemon --config-file=/usr/share/defaults/at-spi2/accessibil.*",
    r"/usr/libexec/at-spi2-registryd .*",
    r"openbox",
    r"/usr/bin/python3 /usr/local/bin/launcher",
    # The terminal, its shell, and the command typed.
    r"lxterminal --no-remote",
    r"bash",
    r"ps auxw*",
}
# What a desktop session's shell has beside a plain `docker exec` (X, D-Bus, GTK, the terminal).
SESSION_VARIABLES = {
    *("DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "GTK_MODULES"),
    *("GSETTINGS_BACKEND", "COLORTERM", "VTE_VERSION", "TERM", "LS_COLORS", "SHLVL", "PWD", "_"),
    *("SHELL", "USER", "LOGNAME"),  # a login sets them; `docker exec` does not
}


def walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The node and every node below it, depth first."""
    yield node
    for child in node.get("children") or []:
        yield from walk(child)


def terminal_text(observation: dict[str, Any]) -> str:
    """The text of the desktop's one terminal, as the accessibility tree has it."""
    texts = [node.get("text") for node in walk(observation["tree"]) if node["role"] == "terminal"]
    assert len(texts) == 1, texts
    return texts[0] or ""


def desktop_outputs() -> dict[str, str]:
    """The command list's outputs typed into lxterminal on the desktop, one screen each."""
    env = OsEnvironment(OsConfig(limits=LIMITS))
    outputs = {}
    try:
        env.reset(0, SimpleNamespace(launch=(("lxterminal", "--no-remote"),)))
        # The environment identity says so: these rows come from a different machine view.
        assert env.describe().components["view"] == "private"
        for name, line in COMMANDS.items():
            outcome = env.step(write(f"clear; {line} 2>&1\n"), 60)
            assert outcome.error is None, outcome.error
            for _ in range(10):
                lines = terminal_text(outcome.observation).rstrip("\n").split("\n")
                # `clear` emptied the screen: what follows is the output, then the next
                # prompt (on a busy machine the terminal may show it a step later).
                if re.fullmatch(r"user@\S+:\S+\$ ?", lines[-1]) and len(lines) > 1:
                    break
                outcome = env.step(special("WAIT"), 60)
            assert re.fullmatch(r"user@\S+:\S+\$ ?", lines[-1]), lines[-1]
            outputs[name] = "\n".join(lines[:-1]) + "\n"
    finally:
        env.close()
    return outputs


@pytest.fixture(scope="module")
def seen(os_image: str) -> tuple[dict[str, str], dict[str, str]]:
    """(the desktop terminal's outputs, a plain container's outputs)."""
    return desktop_outputs(), plain_outputs(os_image, COMMANDS, "/home/user")


def names_of(text: str) -> set[str]:
    """The names an ``ls`` printed (in columns on a terminal, one a line in a pipe)."""
    return set(text.split())


def test_no_output_names_our_machinery(seen) -> None:
    outputs, _ = seen
    for name, text in outputs.items():
        if name == "mount":
            # Docker's overlay root names its layer folders by id, as in any container.
            text = re.sub(r"^overlay on .*$", "overlay", text, flags=re.M)
        found = MACHINERY.search(text)
        assert found is None, f"{name}: {found.group(0)!r} in\n{text}"


def test_processes_are_the_sessions_under_an_ordinary_init(seen) -> None:
    outputs, plain = seen
    assert "sleep 120" in plain["ps"]  # a plain container shows its keep-alive
    for name in ("ps", "psww"):
        rows = outputs[name].strip().split("\n")[1:]
        commands = [row.split(None, 10)[10] for row in rows]
        assert rows[0].split()[:2] == ["root", "1"] and commands[0] == "/sbin/init", rows
        # Everything else is the desktop session's and the agent's own, as the user.
        assert all(row.split()[0] == "user" for row in rows[1:]), rows
        strange = [c for c in commands[1:] if not any(re.fullmatch(p, c) for p in SESSION)]
        assert not strange, strange
    assert outputs["init"].strip() == "/sbin/init"


def test_environment_is_the_images_without_ours(seen) -> None:
    outputs, plain = seen

    def names(text: str) -> set[str]:
        return {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}

    ours = names(outputs["env"])
    assert "PIP_CERT" in names(plain["env"]) and "PIP_CERT" not in ours
    assert ours - SESSION_VARIABLES <= names(plain["env"]), ours - names(plain["env"])
    assert not any(name.startswith("WORLDTRACE") for name in ours)


def test_the_machine_has_the_sandboxs_size(seen) -> None:
    outputs, plain = seen
    total_kb = int(outputs["free"].split("\n")[1].split()[1])
    assert total_kb == LIMITS.memory_mb * 1024
    assert int(plain["free"].split("\n")[1].split()[1]) != total_kb  # the host's, plainly
    assert outputs["nproc"].strip() == "2"
    assert "load average: 0.00, 0.00, 0.00" in outputs["uptime"]
    # Up since the sandbox started (minutes), not the host's days and hours.
    assert re.search(r" up +\d+ min,", outputs["uptime"]), outputs["uptime"]


def test_cgroup_and_mounts_do_not_name_the_container_or_its_disk(seen) -> None:
    outputs, plain = seen
    assert re.search(r"[0-9a-f]{64}", plain["cgroup"])  # a plain container names itself
    assert all(line.endswith(":/") for line in outputs["cgroup"].strip().split("\n"))
    for name in ("mount", "df"):
        assert "/dev/vda" not in outputs[name] and "docker-init" not in outputs[name]
    assert re.search(r"^/dev/loop\d+ on /home/user type ext4", outputs["mount"], re.M)


def test_files_are_the_images_without_the_drivers(seen) -> None:
    outputs, plain = seen
    assert names_of(outputs["root"]) == names_of(plain["root"]) - {".dockerenv"}
    assert "worldtrace" in names_of(plain["opt"])
    assert names_of(outputs["opt"]) == names_of(plain["opt"]) - {"worldtrace"}
    # The session's sockets and runtime folder only: the driver's files are elsewhere.
    assert names_of(outputs["tmp"]) <= {".", "..", ".X11-unix", ".X0-lock", ".ICE-unix",
                                        "runtime-user"}  # fmt: skip
    # Outside a repository the shell says what a plain container's says (the image has no
    # git), never git's "Stopping at filesystem boundary".
    assert "filesystem boundary" not in outputs["git"]
    assert outputs["git"].strip() == plain["git"].replace("line 1: ", "").strip()
