"""The harness is invisible: what the agent's commands show in terminal and swe sandboxes.

A fixed list of commands runs in a terminal episode (typed into the shell) and a swe episode
(``run_shell_command``), and the same list runs in a plain container of the same image (a
``docker run`` of it, the commands run by ``docker exec`` as the same user). The sandboxes
must show an ordinary machine of their size: the plain container's view minus our machinery
(docker-init, the keep-alive, the driver and its tmux clients, the certificate variable, the
loop disk's image path, the container id, the driver's folder, Docker's marker file and layer
folders), with the memory, cores, load and disk of the sandbox's limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.plain_container import plain_outputs
from worldtrace.collectors.swe.environment import SweConfig, SweEnvironment
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.sandboxes import view
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas import Action

pytestmark = pytest.mark.docker

LIMITS = Limits(memory_mb=768, cpus=1.0, disk_mb=640)
COMMANDS = {
    "ps": "ps aux",
    "env": "env | sort",
    "mount": "mount",
    "mountinfo": "cat /proc/self/mountinfo",
    "df": "df -h",
    "dfroot": "df -m --output=size,file / /usr /etc /tmp ~",
    "free": "free",
    "nproc": "nproc",
    "uptime": "uptime",
    "elapsed": "ps -o etimes= -p $$",
    "init": "tr '\\0' ' ' < /proc/1/cmdline; echo",
    "cgroup": "cat /proc/self/cgroup",
    "root": "ls -a /",
    "opt": "ls /opt",
    "shm": "ls -a /dev/shm",
    "git": "cd ~ && git status",
    "prompt": 'echo "prompt=$PROMPT_COMMAND"',
    "top": "top -b -n 1 | tail -n +7",
    # Module files importable by the image's Python (the swe venv's: where pytest finds plugins).
    "site": 'python3 -c "import os, sys; print(*sorted(n for p in sys.path if os.path.isdir(p) '
    "for n in os.listdir(p) if 'outcome' in n or 'worldtrace' in n))\"",
}
MACHINERY = re.compile(
    r"worldtrace|docker-init|sleep 3600|tmux_driver|swe_driver|send-keys|wait-for|nsenter|"
    r"setpriv|unshare|disk\.img|PIP_CERT|/run/wt|__wt|[0-9a-f]{64}|/var/lib/docker|overlay2|"
    r"\.dockerenv|faketime",
    re.IGNORECASE,
)
# What a login shell in tmux has beside a plain `docker exec`. (GIT_DISCOVERY_... is what an
# ordinary machine needs that our sandbox's mounts would otherwise break.)
SHELL_VARIABLES = {
    *("TMUX", "TMUX_PANE", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "SHLVL", "_"),
    *("SHELL", "USER", "LOGNAME"),  # a login sets them; `docker exec` does not
    *("PAGER", "GIT_PAGER"),  # swe's commands have no terminal to page on
}


def terminal_outputs(image: str) -> dict[str, str]:
    """The command list's outputs typed into a terminal episode's shell, one screen each."""
    env = TerminalEnvironment(TerminalConfig(image=image, limits=LIMITS))
    outputs = {}
    try:
        env.reset(0, None)
        for name, line in COMMANDS.items():
            outcome = env.step(command(f"clear; {line} 2>&1 | tail -n 38"), 30)
            lines = plain_screen(outcome.observation["screen"]).split("\n")
            # `clear` emptied the screen: what follows is the output, then the next prompt.
            outputs[name] = "\n".join(lines[:-1]) + "\n"
    finally:
        env.close()
    return outputs


def swe_outputs() -> dict[str, str]:
    """The command list's outputs through a swe episode's ``run_shell_command``."""
    env = SweEnvironment(SweConfig(limits=LIMITS))
    outputs = {}
    try:
        env.reset(0, None)
        for name, line in COMMANDS.items():
            call = Action(name="run_shell_command", arguments={"command": f"{line} 2>&1"}, text="")
            outputs[name] = env.step(call, 30).observation["output"]
    finally:
        env.close()
    return outputs


@pytest.fixture(scope="module", params=["terminal", "swe"])
def seen(request, terminal_image: str) -> Iterator[tuple[str, dict[str, str], dict[str, str]]]:
    """(domain, the sandbox's outputs, a plain container's outputs) per domain."""
    if request.param == "terminal":
        yield (
            "terminal",
            terminal_outputs(terminal_image),
            plain_outputs(terminal_image, COMMANDS, "/home/user"),
        )
    else:
        image = SweConfig().image_tag
        yield "swe", swe_outputs(), plain_outputs(image, COMMANDS, "/home/user/repo")


def test_no_output_names_our_machinery(seen) -> None:
    _, outputs, _ = seen
    for name, text in outputs.items():
        found = MACHINERY.search(text)
        assert found is None, f"{name}: {found.group(0)!r} in\n{text}"


def test_processes_are_the_agents_own_under_an_ordinary_init(seen) -> None:
    domain, outputs, _ = seen
    rows = outputs["ps"].strip().split("\n")[1:]
    commands = [row.split(None, 10)[10] for row in rows]
    assert rows[0].split()[:2] == ["root", "1"] and commands[0] == "/sbin/init"
    assert outputs["init"].strip() == "/sbin/init"
    # Everything else is the agent's: its shell (with tmux around it in the terminal), and
    # the ps itself.
    assert all(row.split()[0] == "user" for row in rows[1:]), rows
    allowed = {
        "terminal": ("tmux new-session -d -x 160 -y 40 bash", "bash", "ps aux", "tail -n 38"),
        "swe": ("bash -c ps aux 2>&1", "ps aux"),
    }[domain]
    assert all(c in allowed for c in commands[1:]), commands
    assert all(row.split()[0] != "root" for row in outputs["top"].strip().split("\n")[1:])


def test_environment_is_the_images_without_ours(seen) -> None:
    _, outputs, plain = seen

    def names(text: str) -> set[str]:
        return {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}

    ours = names(outputs["env"])
    assert "PIP_CERT" in names(plain["env"])  # the plain container does show it
    assert ours - SHELL_VARIABLES - {"GIT_DISCOVERY_ACROSS_FILESYSTEM"} <= names(plain["env"])
    assert names(plain["env"]) - ours <= {"PIP_CERT"}
    assert "prompt=__prompt_status" in outputs["prompt"] or outputs["prompt"].strip() == "prompt="


def test_the_machine_has_the_sandboxs_size(seen) -> None:
    _, outputs, plain = seen
    total_kb = int(outputs["free"].split("\n")[1].split()[1])
    assert total_kb == LIMITS.memory_mb * 1024
    assert int(plain["free"].split("\n")[1].split()[1]) != total_kb  # the host's, plainly
    assert outputs["nproc"].strip() == "1"
    assert "load average: 0.00, 0.00, 0.00" in outputs["uptime"]
    assert " up 0 min" in outputs["uptime"]
    # The view's boot clock started with it, and its processes' start times count from the
    # same boot: the shell has run seconds, not minus the host's uptime (a huge number).
    assert 0 <= int(outputs["elapsed"]) < 120, outputs["elapsed"]


def test_cgroup_and_mounts_do_not_name_the_container_or_its_disk(seen) -> None:
    _, outputs, plain = seen
    assert re.search(r"[0-9a-f]{64}", plain["cgroup"])  # a plain container names itself
    assert all(line.endswith(":/") for line in outputs["cgroup"].strip().split("\n"))
    for name in ("mount", "mountinfo", "df"):
        assert "/dev/vda" not in outputs[name] and "docker-init" not in outputs[name]
    assert re.search(r"^/dev/loop\d+ on /home/user type ext4", outputs["mount"], re.M)
    # Docker's overlay root names its layer folders on the host; the view's root does not.
    assert "lowerdir=/var/lib/docker/overlay2/" in plain["mount"]
    assert re.search(r"^overlay on / type overlay \(ro,", outputs["mount"], re.M)
    for name in ("mount", "mountinfo"):
        assert "/var/lib/docker" not in outputs[name] and "deleted" not in outputs[name]
    # Nothing of ours is bound over the image's files: the only mounts are the kernel's
    # folders, the sandbox's disk and /proc's machine-size files.
    targets = [line.split()[4] for line in outputs["mountinfo"].strip().split("\n")]
    assert all(
        t == "/"
        or t.split("/")[1] in ("proc", "dev", "sys")
        or t in ("/tmp", "/var/tmp")
        or t.startswith("/home/user")
        for t in targets
    ), targets


def test_disks_have_the_sandboxs_size(seen) -> None:
    _, outputs, plain = seen

    def sizes(text: str) -> dict[str, int]:
        rows = [line.split() for line in text.strip().split("\n")[1:]]
        return {target: int(size) for size, target in rows}

    ours, host = sizes(outputs["dfroot"]), sizes(plain["dfroot"])
    assert host["/"] > 10 * LIMITS.disk_mb  # a plain container shows the host's disk for /
    # The root and the image's folders on it show the disk cap; the writable folders are the
    # cap's filesystem (its size less ext4's own metadata).
    for target in ("/", "/usr", "/etc"):
        assert ours[target] == LIMITS.disk_mb, (target, ours)
    for target in ("/tmp", "/home/user"):
        assert 0.9 * LIMITS.disk_mb < ours[target] <= LIMITS.disk_mb, (target, ours)
    size = f"{LIMITS.disk_mb}M"
    assert re.search(rf"^overlay +{size} .* /$", outputs["df"], re.M), outputs["df"]


def test_files_are_the_images_without_the_drivers(seen) -> None:
    _, outputs, plain = seen
    assert outputs["shm"] == plain["shm"]  # nothing the view's setup used stays
    # Docker's marker file is not there; everything else of the root is.
    assert ".dockerenv" in plain["root"].split()
    assert outputs["root"].split() == [e for e in plain["root"].split() if e != ".dockerenv"]
    assert "worldtrace" in plain["opt"].split()
    assert outputs["opt"].split() == [e for e in plain["opt"].split() if e != "worldtrace"]
    # Outside a repository git says what it says on any machine, not "Stopping at filesystem
    # boundary" (which the sandbox's own disk under /home/user caused).
    assert outputs["git"].strip() == (
        "fatal: not a git repository (or any of the parent directories): .git"
    )
    # The swe image's pytest plugin is importable in its venv, under a name that is not ours.
    assert outputs["site"].split() == plain["site"].split()
    assert "worldtrace" not in outputs["site"]


def test_job_numbers_follow_only_the_agents_actions(terminal_image: str) -> None:
    # Two identical episodes: the background job gets the same process number in both.
    seen = []
    for _ in range(2):
        env = TerminalEnvironment(TerminalConfig(image=terminal_image))
        try:
            env.reset(0, None)
            env.step(command("ls"), 10)
            outcome = env.step(command("sleep 30 &"), 10)
            seen.append(plain_screen(outcome.observation["screen"]).split("\n")[-2])
        finally:
            env.close()
    assert seen[0] == seen[1] and re.fullmatch(r"\[1\] \d+", seen[0]), seen


def test_drivers_find_the_view_from_the_file_its_setup_leaves(terminal_image: str) -> None:
    # The setup leaves its init's pid in Docker's /dev/shm, which the view replaces with its
    # own: root's alone outside, absent inside. Both drivers read it instead of searching.
    with DockerSandbox(terminal_image, LIMITS) as sandbox:
        outside = sandbox.exec(
            ["bash", "-c", f"stat -c '%a %U' {view.PID_FILE}; cat {view.PID_FILE}"], user="root"
        ).text.split("\n")
        assert outside[0] == "600 root"
        status = sandbox.exec(["cat", f"/proc/{outside[1]}/status"], user="root").text
        assert re.search(r"^Name:\tinit$", status, re.M) and re.search(
            r"^NSpid:\t\d+\t1$", status, re.M
        ), status
        inside = sandbox.exec(
            ["nsenter", "-t", outside[1], "-m", "--", "ls", "-a", "/dev/shm"], user="root"
        ).text.split()
        assert inside == [".", ".."]
    drivers = Path(__file__).parents[2] / "collectors"
    for driver in ("terminal/image/tmux_driver.py", "swe/image/swe_driver.py"):
        source = (drivers / driver).read_text()
        assert "def view_pid" not in source and f'"{view.PID_FILE}"' in source
