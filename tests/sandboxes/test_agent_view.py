"""The harness is invisible: what the agent's commands show in terminal and swe sandboxes.

A fixed list of commands runs in a terminal episode (typed into the shell) and a swe episode
(``run_shell_command``), and the same list runs in a plain container of the same image (a
``docker run`` of it, the commands run by ``docker exec`` as the same user). The sandboxes
must show an ordinary machine of their size: the plain container's view minus our machinery
(docker-init, the keep-alive, the driver and its tmux clients, the certificate variable, the
loop disk's image path, the container id, the driver's folder), with the memory, cores and
load of the sandbox's limits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import docker
import pytest

from worldtrace.collectors.swe.environment import SweConfig, SweEnvironment
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.sandboxes.docker import Limits
from worldtrace.schemas import Action

pytestmark = pytest.mark.docker

LIMITS = Limits(memory_mb=768, cpus=1.0)
COMMANDS = {
    "ps": "ps aux",
    "env": "env | sort",
    "mount": "mount",
    "df": "df -h",
    "free": "free",
    "nproc": "nproc",
    "uptime": "uptime",
    "init": "tr '\\0' ' ' < /proc/1/cmdline; echo",
    "cgroup": "cat /proc/self/cgroup",
    "root": "ls -a /",
    "opt": "ls /opt",
    "git": "cd ~ && git status",
    "prompt": 'echo "prompt=$PROMPT_COMMAND"',
    "top": "top -b -n 1 | tail -n +7",
}
MACHINERY = re.compile(
    r"worldtrace|docker-init|sleep 3600|tmux_driver|swe_driver|send-keys|wait-for|nsenter|"
    r"setpriv|unshare|disk\.img|PIP_CERT|/run/wt|__wt|[0-9a-f]{64}",
    re.IGNORECASE,
)
# What a login shell in tmux has beside a plain `docker exec`. (GIT_DISCOVERY_... is what an
# ordinary machine needs that our sandbox's mounts would otherwise break.)
SHELL_VARIABLES = {
    *("TMUX", "TMUX_PANE", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "SHLVL", "_"),
    *("SHELL", "USER", "LOGNAME"),  # a login sets them; `docker exec` does not
    *("PAGER", "GIT_PAGER"),  # swe's commands have no terminal to page on
}


def plain_outputs(image: str, workdir: str) -> dict[str, str]:
    """The command list's outputs in a plain container of ``image``, as the user."""
    client = docker.from_env()
    container = client.containers.run(
        image, ["sleep", "120"], detach=True, remove=True, network_mode="none"
    )
    try:
        return {
            name: container.exec_run(
                ["bash", "-c", f"{line} 2>&1"], user="user", workdir=workdir
            ).output.decode(errors="replace")
            for name, line in COMMANDS.items()
        }
    finally:
        container.remove(force=True)


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
            plain_outputs(terminal_image, "/home/user"),
        )
    else:
        image = SweConfig().image_tag
        yield "swe", swe_outputs(), plain_outputs(image, "/home/user/repo")


def test_no_output_names_our_machinery(seen) -> None:
    _, outputs, _ = seen
    for name, text in outputs.items():
        if name == "mount":
            # Docker's overlay root names its layer folders by id, as in any container.
            text = re.sub(r"^overlay on .*$", "overlay", text, flags=re.M)
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


def test_cgroup_and_mounts_do_not_name_the_container_or_its_disk(seen) -> None:
    _, outputs, plain = seen
    assert re.search(r"[0-9a-f]{64}", plain["cgroup"])  # a plain container names itself
    assert all(line.endswith(":/") for line in outputs["cgroup"].strip().split("\n"))
    for name in ("mount", "df"):
        assert "/dev/vda" not in outputs[name] and "docker-init" not in outputs[name]
    assert re.search(r"^/dev/loop\d+ on /home/user type ext4", outputs["mount"], re.M)


def test_files_are_the_images_without_the_drivers(seen) -> None:
    _, outputs, plain = seen
    assert outputs["root"] == plain["root"]
    assert "worldtrace" in plain["opt"].split()
    assert outputs["opt"].split() == [e for e in plain["opt"].split() if e != "worldtrace"]
    # Outside a repository git says what it says on any machine, not "Stopping at filesystem
    # boundary" (which the sandbox's own disk under /home/user caused).
    assert outputs["git"].strip() == (
        "fatal: not a git repository (or any of the parent directories): .git"
    )


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
