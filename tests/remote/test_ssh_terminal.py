"""The terminal environment on an SSH host: a real OpenSSH server on loopback (see conftest.py).

The server is a container of the test image with tmux and python3, reached only over SSH with
paramiko; the tests look into it through the Docker engine (never through the environment) to
see what an episode left behind: accounts, files, processes.
"""

from __future__ import annotations

import json
import shlex
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from pydantic import ValidationError

from tests.remote.conftest import SshServer, write_key, write_known_hosts
from worldtrace.collectors.registry import get_collector
from worldtrace.collectors.terminal.actions import command, wait
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.collectors.terminal.ssh import SshTerminalEnvironment, on_host
from worldtrace.flows.collect import run_collection
from worldtrace.flows.config import validate_config
from worldtrace.sandboxes.remote import SandboxHostError
from worldtrace.sandboxes.ssh import SshHostConfig, SshResetError
from worldtrace.schemas import Transition, from_row

pytestmark = pytest.mark.docker

STEP_TIMEOUT_S = 20.0
RESET_WORK = "rm -rf ~/work && mkdir ~/work"


def in_server(server: SshServer, script: str) -> tuple[int, str]:
    """Run a shell script in the server's container as root (the test's view, not SSH's)."""
    result = server.container.exec_run(["sh", "-c", script], demux=False)
    return result.exit_code, result.output.decode(errors="replace")


def ssh_config(server: SshServer, **fields: Any) -> dict[str, Any]:
    """The ``ssh`` field of a terminal config for ``server`` (reset by command by default)."""
    config = {
        "host": server.url,
        "key_file": str(server.key),
        "known_hosts": str(server.known_hosts),
        "reset": "command",
        "reset_command": RESET_WORK,
    }
    config.update(fields)
    return {key: value for key, value in config.items() if value is not None}


def environment(server: SshServer, **fields: Any) -> SshTerminalEnvironment:
    """A terminal environment on ``server`` as the collector builds it."""
    collector = get_collector("terminal")
    config = TerminalConfig.model_validate({"ssh": ssh_config(server, **fields)})
    env = collector.make_environment(config)
    assert isinstance(env, SshTerminalEnvironment)
    return env


def lines(observation: dict[str, Any]) -> list[str]:
    return plain_screen(observation["screen"]).split("\n")


@pytest.fixture(scope="module")
def hostname(sshd: SshServer) -> str:
    code, output = in_server(sshd, "hostname")
    assert code == 0
    return output.strip()


@pytest.fixture
def command_env(sshd: SshServer) -> Iterator[SshTerminalEnvironment]:
    env = environment(sshd)
    yield env
    env.close()


def test_an_episode_on_the_ssh_host_types_and_sees_the_screen(
    sshd: SshServer, hostname: str, command_env: SshTerminalEnvironment
) -> None:
    prompt = f"worldtrace@{hostname}:~$"
    first = command_env.reset(seed=0, task=None)
    assert lines(first) == [prompt]
    assert (first["prompt"], first["exit_code"], first["cwd"]) == (True, 0, "/home/worldtrace")
    started = time.monotonic()
    outcome = command_env.step(command("echo hello"), STEP_TIMEOUT_S)
    assert time.monotonic() - started < 5
    observation = outcome.observation
    assert lines(observation) == [f"{prompt} echo hello", "hello", prompt]
    assert (observation["prompt"], observation["exit_code"]) == (True, 0)
    assert (outcome.error, outcome.truncated, outcome.terminated) == (None, False, False)
    # A failing command is an error of the step, exactly as in a container.
    failed = command_env.step(command("ls /nowhere"), STEP_TIMEOUT_S)
    assert failed.error == "exit status 2"
    assert failed.observation["exit_code"] == 2
    # The tmux server runs on the host as the login user, with the image's pane size.
    code, processes = in_server(sshd, "ps -o user:20=,args= -u worldtrace | grep '[t]mux'")
    assert code == 0 and processes.split()[0] == "worldtrace", processes
    assert (observation["columns"], observation["rows"]) == (160, 40)

    identity = command_env.describe()
    assert identity.name == "terminal/bash-tmux-ssh"
    assert identity.components["host"] == sshd.url
    assert identity.components["host_key"].endswith(sshd.host_key.fingerprint)
    assert identity.components["os"].startswith("Debian GNU/Linux 12")
    assert identity.components["tmux"].startswith("tmux 3.")
    assert identity.components["reset"] == "command"
    assert str(sshd.key) not in json.dumps(identity.model_dump(mode="json"))

    command_env.close()
    # Nothing of the episode is left on the host: no tmux server, no copied files.
    _, output = in_server(sshd, "pgrep -u worldtrace tmux; ls -d /tmp/worldtrace-* 2>&1")
    assert "No such file" in output and "tmux" not in output, output


def test_the_reset_command_restores_the_state_before_each_episode(
    sshd: SshServer, command_env: SshTerminalEnvironment
) -> None:
    command_env.reset(seed=0, task=None)
    command_env.step(command("cd ~/work && echo draft > notes.txt && ls"), STEP_TIMEOUT_S)
    _, output = in_server(sshd, "ls /home/worldtrace/work")
    assert output.split() == ["notes.txt"]

    second = command_env.reset(seed=1, task=None)
    assert second["cwd"] == "/home/worldtrace"
    listing = command_env.step(command("ls -A ~/work; echo done"), STEP_TIMEOUT_S).observation
    assert lines(listing)[1:3] == ["done", lines(second)[0]]
    _, output = in_server(sshd, "ls -A /home/worldtrace/work")
    assert output == ""


def test_a_fresh_user_per_episode_gets_a_new_home_and_is_removed_after(
    sshd: SshServer,
) -> None:
    env = environment(sshd, reset="fresh_user", reset_command=None)
    try:
        first = env.reset(seed=0, task=None)
        account = env.host.account
        assert account is not None and account.fresh and account.name.startswith("wt")
        assert first["cwd"] == account.home == f"/home/{account.name}"
        env.step(command("echo mine > ~/secret.txt; (sleep 300 &) ; whoami"), STEP_TIMEOUT_S)
        code, output = in_server(sshd, f"cat {account.home}/secret.txt")
        assert (code, output) == (0, "mine\n")
        assert in_server(sshd, f"ps -o args= -u {account.name}")[1].count("sleep 300") == 1

        second = env.reset(seed=1, task=None)
        new = env.host.account
        assert new is not None and new.name != account.name
        assert second["cwd"] == new.home
        shown = env.step(command("whoami; ls -A ~"), STEP_TIMEOUT_S).observation
        assert new.name in plain_screen(shown["screen"])
        assert "secret.txt" not in plain_screen(shown["screen"])
        # The first episode's account is gone with its home and every process it started.
        assert in_server(sshd, f"getent passwd {account.name}")[0] == 2
        assert in_server(sshd, f"test -e {account.home}")[0] == 1
        # (Its uid may be the new account's now: the processes are told by what they run.)
        # ([x]: a pattern that does not match the shell running pgrep.)
        assert in_server(sshd, "pgrep -f '[s]leep 300'")[1] == ""
        assert in_server(sshd, f"pgrep -f '[/]home/{account.name}'")[1] == ""
    finally:
        env.close()
    _, output = in_server(sshd, "getent passwd | grep -c '^wt' ; ls -d /tmp/worldtrace-* 2>&1")
    assert output.split()[0] == "0" and "No such file" in output


def test_a_fresh_user_needs_root_or_sudo(sshd: SshServer, tmp_path: Path) -> None:
    # An account without sudo rights, reached with the server's key.
    code, output = in_server(
        sshd,
        "id plain >/dev/null 2>&1 || useradd -m -s /bin/bash plain && usermod -p '*' plain && "
        "install -d -o plain -g plain -m 700 /home/plain/.ssh && "
        "install -o plain -g plain -m 600 /home/worldtrace/.ssh/authorized_keys /home/plain/.ssh/",
    )
    assert code == 0, output
    env = environment(sshd, host=f"ssh://plain@{sshd.host}:{sshd.port}", reset="fresh_user",
                      reset_command=None)  # fmt: skip
    try:
        with pytest.raises(SshResetError, match=r"root or sudo without a password.*plain"):
            env.check_host()
        with pytest.raises(SshResetError, match="root or sudo"):
            env.reset(seed=0, task=None)
    finally:
        env.close()
    _, output = in_server(sshd, "getent passwd | grep -c '^wt'")
    assert output.strip() == "0"


def test_a_wrong_or_unknown_host_key_is_a_clear_error(sshd: SshServer, tmp_path: Path) -> None:
    impostor = write_key(tmp_path / "impostor")
    wrong = tmp_path / "wrong_known_hosts"
    write_known_hosts(wrong, sshd.host, sshd.port, impostor)
    env = environment(sshd, known_hosts=str(wrong))
    with pytest.raises(SandboxHostError) as caught:
        env.reset(seed=0, task=None)
    message = str(caught.value)
    assert f"{sshd.host}:{sshd.port}" in message
    assert sshd.host_key.fingerprint in message and impostor.fingerprint in message
    assert "ssh-keygen -R" in message
    env.close()

    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    env = environment(sshd, known_hosts=str(empty))
    with pytest.raises(SandboxHostError, match=r"not in .*empty_known_hosts.*ssh-keyscan"):
        get_collector("terminal").preflight(env.config)
    env.close()
    _, output = in_server(sshd, "ls -d /tmp/worldtrace-* 2>&1")
    assert "No such file" in output


def test_a_refused_key_is_a_clear_error(sshd: SshServer, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    write_key(stranger)
    env = environment(sshd, key_file=str(stranger))
    with pytest.raises(SandboxHostError, match=r"refused key .*stranger.*authorized_keys"):
        env.reset(seed=0, task=None)
    env.close()


def test_a_dropped_connection_truncates_the_step_without_hanging(
    sshd: SshServer, command_env: SshTerminalEnvironment
) -> None:
    command_env.reset(seed=0, task=None)
    # The server side of our connection is killed a moment into a long step.
    killer = threading.Timer(1.0, in_server, (sshd, "pkill -KILL -f '^sshd: worldtrace'"), {})
    killer.start()
    started = time.monotonic()
    outcome = command_env.step(wait(10), STEP_TIMEOUT_S)
    killer.join()
    assert time.monotonic() - started < 5
    assert outcome.truncated and not outcome.terminated
    assert outcome.error is not None and "SSH connection" in outcome.error
    assert "lost" in outcome.error
    assert outcome.observation["sandbox_lost"] is True
    assert outcome.observation["screen_stale"] is True
    # Closing reconnects to stop the episode's tmux server: nothing is left running.
    command_env.close()
    _, output = in_server(sshd, "pgrep -u worldtrace tmux")
    assert output == "", output


def test_a_driver_the_agent_kills_ends_the_episode_with_a_fresh_screen(
    sshd: SshServer, command_env: SshTerminalEnvironment
) -> None:
    command_env.reset(seed=0, task=None)
    # The agent runs as the login user, as the driver does: it can end it (not trace it).
    outcome = command_env.step(command("pkill -f ssh_[d]river.py; echo gone"), STEP_TIMEOUT_S)
    assert outcome.truncated
    assert outcome.error is not None and "stopped answering" in outcome.error
    assert outcome.observation["sandbox_lost"] is True
    # The connection still works: a second driver process looked at the screen.
    assert outcome.observation["screen_stale"] is False
    assert "gone" in lines(outcome.observation)


def test_a_collection_with_the_ssh_option_writes_valid_transitions(
    sshd: SshServer, tmp_path: Path
) -> None:
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path),
            "policy": {"kind": "script", "tasks": ["find-large-logs"]},
            "environment": {"ssh": ssh_config(sshd, reset="fresh_user", reset_command=None)},
        }
    )
    summary = run_collection(config)
    assert (summary["collected"], summary["failed"], summary["errors"]) == (1, 0, 0)
    # The task's setup and check (written for /home/user) ran in the fresh account's home.
    episodes = pl.read_parquet(config.run_dir / "episodes.parquet")
    assert episodes["total_reward"].to_list() == [1.0]
    frame = pl.read_parquet(config.run_dir / "transitions" / "terminal" / "*.parquet")
    rows = [from_row(Transition, row) for row in frame.to_dicts()]  # raises on a bad row
    assert len(rows) == summary["transitions"] == 6
    assert {row.env.name for row in rows} == {"terminal/bash-tmux-ssh"}
    assert all(row.env.components["host"] == sshd.url for row in rows)
    last = rows[-1].next_observation
    assert last.format == "terminal-screen" and "app.log" in last.text
    assert last.meta["cwd"].startswith("/home/wt")
    _, output = in_server(sshd, "getent passwd | grep -c '^wt'")
    assert output.strip() == "0"


def test_the_ssh_option_is_validated() -> None:
    def problems(ssh: dict[str, Any]) -> str:
        with pytest.raises(ValidationError) as caught:
            TerminalConfig.model_validate({"ssh": ssh})
        return str(caught.value)

    assert "needs a reset_command" in problems({"host": "ssh://u@h"})
    assert "leave reset_command out" in problems(
        {"host": "ssh://u@h", "reset": "fresh_user", "reset_command": "true"}
    )
    assert "not an ssh:// URL" in problems({"host": "tcp://h:2376", "reset_command": "true"})
    assert "no password" in problems({"host": "ssh://u:pw@h", "reset_command": "true"})
    assert "reset" in problems({"host": "ssh://u@h", "reset": "reimage"})
    assert "extra" in problems({"host": "ssh://u@h", "reset_command": "true", "port": 2})
    with pytest.raises(ValidationError, match="image and limits apply to containers"):
        TerminalConfig.model_validate(
            {"ssh": {"host": "ssh://u@h", "reset_command": "true"}, "image": "x", "limits": {}}
        )
    # The default is unchanged: a container, whose config hash is what it was before `ssh`.
    assert TerminalConfig().ssh is None
    assert TerminalConfig().config_hash() == "9f30c6ff00d65668"  # input_settle_s: issue 23
    config = TerminalConfig.model_validate({"ssh": {"host": "ssh://u@h", "reset_command": "true"}})
    assert isinstance(config.ssh, SshHostConfig)
    with pytest.raises(ValueError, match="SshTerminalEnvironment"):
        TerminalEnvironment(config).reset(seed=0, task=None)


def test_task_commands_name_the_hosts_home() -> None:
    assert on_host("cd /home/user/work && ls /home/user", "/home/wt1") == (
        "cd /home/wt1/work && ls /home/wt1"
    )
    assert on_host("ls /home/username /home/user.bak", "/h") == "ls /home/username /home/user.bak"
    assert shlex.split(on_host("test -f '/home/user/a b'", "/h")) == ["test", "-f", "/h/a b"]
