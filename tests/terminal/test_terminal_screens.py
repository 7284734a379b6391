"""The terminal environment against real bash, tmux and full-screen programs in a container.

Every test starts from a fresh container (``reset``) and checks what the recorded observation
holds after real keystrokes: the plain screen, the prompt flag, exit status, working
directory, foreground program, scrollback, timeouts and errors.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from worldtrace.collectors.base import RawObservation, StepOutcome
from worldtrace.collectors.terminal.actions import command, keys, wait
from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
from worldtrace.collectors.terminal.render import TerminalRenderer
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas import Action

pytestmark = pytest.mark.docker

HOME_PROMPT = "user@sandbox:~$"
STEP_TIMEOUT_S = 20.0


def screen_lines(observation: RawObservation) -> list[str]:
    """The visible screen as plain lines, trailing blank lines removed."""
    return plain_screen(observation["screen"]).split("\n")


def scrollback_lines(observation: RawObservation) -> list[str]:
    """The lines that scrolled off the screen during the step, as plain text."""
    text = plain_screen(observation["scrollback"])
    return text.split("\n") if text else []


def step(
    env: TerminalEnvironment, action: Action, timeout_s: float = STEP_TIMEOUT_S
) -> StepOutcome:
    return env.step(action, timeout_s)


@pytest.fixture(scope="module")
def terminal_env(terminal_image: str) -> Iterator[TerminalEnvironment]:
    """One environment object for the module; each test resets it to a fresh container."""
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    yield env
    env.close()


@pytest.fixture
def terminal(terminal_env: TerminalEnvironment) -> tuple[TerminalEnvironment, RawObservation]:
    """A fresh container with bash at its first prompt, and that first observation."""
    first = terminal_env.reset(seed=0, task=None)
    return terminal_env, first


def test_first_observation_is_a_prompt(terminal) -> None:
    _, first = terminal
    assert screen_lines(first) == [HOME_PROMPT]
    assert first["prompt"] is True
    assert first["exit_code"] == 0
    assert first["cwd"] == "/home/user"
    assert first["foreground"] is None
    assert first["cursor"] == [len(HOME_PROMPT) + 1, 0]


def test_echo_shows_output_then_a_fresh_prompt(terminal) -> None:
    env, _ = terminal
    outcome = step(env, command("echo hello"))
    obs = outcome.observation
    assert screen_lines(obs) == [f"{HOME_PROMPT} echo hello", "hello", HOME_PROMPT]
    assert obs["prompt"] is True
    assert obs["exit_code"] == 0
    assert obs["timed_out"] is False
    assert obs["foreground"] is None
    # The cursor waits after "user@sandbox:~$ " on the last line.
    assert obs["cursor"] == [len(HOME_PROMPT) + 1, 2]
    assert outcome.error is None
    assert outcome.terminated is False
    assert outcome.latency_s < 5


def test_cd_changes_prompt_and_cwd(terminal) -> None:
    env, first = terminal
    assert first["cwd"] == "/home/user"
    obs = step(env, command("cd /tmp")).observation
    assert screen_lines(obs)[-1] == "user@sandbox:/tmp$"
    assert obs["cwd"] == "/tmp"
    assert obs["exit_code"] == 0
    obs = step(env, command("cd /usr/share")).observation
    assert screen_lines(obs)[-1] == "user@sandbox:/usr/share$"
    assert obs["cwd"] == "/usr/share"


def test_failing_commands_record_their_exit_status(terminal) -> None:
    env, _ = terminal
    outcome = step(env, command("ls /nonexistent"))
    lines = screen_lines(outcome.observation)
    assert lines[-2] == "ls: cannot access '/nonexistent': No such file or directory"
    assert lines[-1] == HOME_PROMPT
    assert outcome.observation["prompt"] is True
    assert outcome.observation["exit_code"] == 2
    assert outcome.error is not None
    assert "exit status 2" in outcome.error

    outcome = step(env, command("false"))
    assert outcome.observation["exit_code"] == 1
    assert outcome.error is not None
    assert "exit status 1" in outcome.error

    # A later success is not an error: the status is the last command's, not a sticky one.
    outcome = step(env, command("true"))
    assert outcome.observation["exit_code"] == 0
    assert outcome.error is None


def test_long_running_command_returns_without_prompt_then_ctrl_c(terminal) -> None:
    env, _ = terminal
    outcome = step(env, command("sleep 1000"), timeout_s=3)
    obs = outcome.observation
    # A silent job that is still at work (sleep waits on a timer, not on the terminal) keeps
    # the step going until its timeout, and the step says it timed out.
    assert 3 <= outcome.latency_s < 8
    assert obs["prompt"] is False
    assert obs["timed_out"] is True
    assert obs["foreground"] == "sleep"
    assert obs["exit_code"] is None
    assert outcome.error == "timed out: no prompt and sleep still busy"
    assert screen_lines(obs)[-1] == f"{HOME_PROMPT} sleep 1000"

    outcome = step(env, keys("C-c"), timeout_s=10)
    obs = outcome.observation
    assert outcome.latency_s < 5
    assert obs["prompt"] is True
    assert obs["exit_code"] == 130
    assert obs["foreground"] is None
    assert screen_lines(obs)[-2:] == ["^C", HOME_PROMPT]
    assert outcome.error is not None
    assert "130" in outcome.error


def test_vim_edit_and_save(terminal) -> None:
    env, _ = terminal
    obs = step(env, command("vim /home/user/notes.txt")).observation
    lines = screen_lines(obs)
    # vim.nox is started through the `vim` alternative, so the process is named vim.
    assert obs["foreground"] in ("vim", "vim.nox")
    assert obs["foreground"] == "vim"
    assert obs["prompt"] is False
    assert len(lines) == 40
    assert lines[0] == ""
    # The 38 rows between the first line and the status line are vim's empty-line markers.
    assert lines[1:39] == ["~"] * 38
    assert lines[39].startswith('"~/notes.txt" [New]')

    obs = step(env, keys("i", "hello from vim", "Escape")).observation
    lines = screen_lines(obs)
    assert obs["foreground"] == "vim"
    assert lines[0] == "hello from vim"
    assert lines[1] == "~"
    assert "-- INSERT --" not in lines[39]
    assert obs["cursor"] == [len("hello from vim") - 1, 0]

    outcome = step(env, keys(":wq", "Enter"))
    obs = outcome.observation
    assert obs["prompt"] is True
    assert obs["exit_code"] == 0
    assert obs["foreground"] is None
    # vim used the alternate screen: the shell's screen is back as it was.
    assert screen_lines(obs) == [f"{HOME_PROMPT} vim /home/user/notes.txt", HOME_PROMPT]

    obs = step(env, command("cat /home/user/notes.txt")).observation
    assert screen_lines(obs)[-2:] == ["hello from vim", HOME_PROMPT]
    assert env.sandbox.get_file("/home/user/notes.txt") == b"hello from vim\n"


def test_less_scrolls_searches_and_quits(terminal) -> None:
    env, _ = terminal
    obs = step(env, command("seq 1 500 > /tmp/n; less /tmp/n")).observation
    lines = screen_lines(obs)
    assert obs["foreground"] == "less"
    assert obs["prompt"] is False
    assert lines[:39] == [str(n) for n in range(1, 40)]
    assert lines[39].startswith("/tmp/n")

    obs = step(env, keys("Space")).observation
    lines = screen_lines(obs)
    assert obs["foreground"] == "less"
    assert lines[:39] == [str(n) for n in range(40, 79)]
    assert "1" not in lines

    obs = step(env, keys("/250", "Enter")).observation
    lines = screen_lines(obs)
    assert obs["foreground"] == "less"
    assert "250" in lines
    assert "40" not in lines

    outcome = step(env, keys("q"))
    obs = outcome.observation
    assert obs["prompt"] is True
    assert obs["exit_code"] == 0
    assert obs["foreground"] is None
    assert screen_lines(obs)[-2:] == [f"{HOME_PROMPT} seq 1 500 > /tmp/n; less /tmp/n", HOME_PROMPT]
    assert outcome.error is None


def test_python_repl(terminal) -> None:
    env, _ = terminal
    obs = step(env, command("python3")).observation
    lines = screen_lines(obs)
    assert obs["foreground"] == "python3"
    assert obs["prompt"] is False
    assert lines[-1] == ">>>"
    assert lines[-3].startswith("Python 3.")

    obs = step(env, keys("2**10", "Enter")).observation
    lines = screen_lines(obs)
    assert obs["foreground"] == "python3"
    assert obs["prompt"] is False
    assert lines[-3:] == [">>> 2**10", "1024", ">>>"]

    outcome = step(env, keys("C-d"))
    obs = outcome.observation
    assert obs["prompt"] is True
    assert obs["exit_code"] == 0
    assert obs["foreground"] is None
    assert screen_lines(obs)[-1] == HOME_PROMPT
    assert outcome.error is None


def test_scrollback_holds_scrolled_off_lines_once(terminal) -> None:
    env, _ = terminal
    obs = step(env, command("seq 1 100")).observation
    screen, scrollback = screen_lines(obs), scrollback_lines(obs)
    # 102 lines were drawn on a 40-row screen: the first 62 scrolled off, in order.
    assert scrollback == [f"{HOME_PROMPT} seq 1 100", *(str(n) for n in range(1, 62))]
    assert screen == [*(str(n) for n in range(62, 101)), HOME_PROMPT]

    obs = step(env, command("echo next")).observation
    # Two more lines scrolled off; what the previous step returned is not repeated.
    assert scrollback_lines(obs) == ["62", "63"]
    assert screen_lines(obs)[-3:] == [f"{HOME_PROMPT} echo next", "next", HOME_PROMPT]

    obs = step(env, command("true")).observation
    assert scrollback_lines(obs) == ["64"]


def test_long_input_is_typed_in_chunks(terminal_image: str) -> None:
    # A longer quiet period keeps this test about chunking, whatever the host's load
    # (test_step_waits_until_a_slow_shell_has_read_its_input covers the quiet detection).
    env = TerminalEnvironment(TerminalConfig(image=terminal_image, quiet_s=5.0))
    try:
        env.reset(seed=0, task=None)
        # 25 KB is over tmux's 16 KB message limit: the driver must split it.
        line = "echo " + "x" * 25000 + " | wc -c"
        outcome = step(env, keys(line, "Enter"), timeout_s=30)
        obs = outcome.observation
        assert obs["prompt"] is True
        assert obs["exit_code"] == 0
        assert screen_lines(obs)[-2:] == ["25001", HOME_PROMPT]
        # The command line was echoed whole, wrapped at 160 columns: nothing lost or doubled
        # at chunk boundaries.
        echoed = "".join(scrollback_lines(obs) + screen_lines(obs)[:-2])
        assert echoed == f"{HOME_PROMPT} {line}"

        # A chunk that ends in ';' must still be typed literally (tmux takes a trailing ';'
        # as a command separator): the first 4096-character piece below ends with one.
        text = "x;" * 6000
        outcome = step(env, keys(f"printf %s '{text}' | wc -c", "Enter"), timeout_s=30)
        obs = outcome.observation
        assert obs["exit_code"] == 0
        assert screen_lines(obs)[-2:] == ["12000", HOME_PROMPT]
    finally:
        env.close()


def test_step_past_its_timeout_is_cut_and_recoverable(terminal) -> None:
    env, _ = terminal
    outcome = step(env, command("yes > /dev/null"), timeout_s=2)
    obs = outcome.observation
    # Busy CPU with an unchanging screen is not "quiet": only the timeout ends the step.
    assert 2 <= outcome.latency_s < 5
    assert obs["timed_out"] is True
    assert obs["prompt"] is False
    assert obs["foreground"] == "yes"
    assert outcome.error is not None
    assert "timed out" in outcome.error

    outcome = step(env, keys("C-c"), timeout_s=10)
    obs = outcome.observation
    assert obs["prompt"] is True
    assert obs["exit_code"] == 130
    assert obs["foreground"] is None
    assert screen_lines(obs)[-1] == HOME_PROMPT


def test_exit_terminates_the_episode(terminal) -> None:
    env, _ = terminal
    outcome = step(env, command("exit"))
    assert outcome.terminated is True
    assert outcome.observation["exited"] is True
    assert outcome.observation["prompt"] is False
    # tmux keeps the dead pane (remain-on-exit) so that its last screen is recorded, without
    # its "Pane is dead (status, <date>)" line, which made the same step record two screens.
    lines = [line for line in screen_lines(outcome.observation) if line]
    assert lines[-2:] == [f"{HOME_PROMPT} exit", "exit"]


def test_invalid_actions_are_errors_and_change_nothing(terminal) -> None:
    env, _ = terminal
    before = step(env, command("echo ready")).observation

    for action in (
        Action(name="bogus", arguments={}, text="x"),
        Action(name="keys", arguments={"keys": []}, text=""),
        Action(name="keys", arguments={"keys": ["a", ""]}, text="a"),
        Action(name="keys", arguments={"keys": "echo oops"}, text="echo oops"),
        Action(name="wait", arguments={"seconds": -1}, text="<wait -1s>"),
    ):
        outcome = step(env, action)
        assert outcome.error is not None, action
        assert outcome.terminated is False
        assert outcome.observation["screen"] == before["screen"], action
        assert outcome.observation["cursor"] == before["cursor"], action
        assert outcome.observation["scrollback"] == ""
    assert "bogus" in step(env, Action(name="bogus", arguments={}, text="x")).error

    # Nothing was typed: the next command runs on a clean line.
    outcome = step(env, command("echo still-works"))
    assert screen_lines(outcome.observation)[-3:] == [
        f"{HOME_PROMPT} echo still-works",
        "still-works",
        HOME_PROMPT,
    ]
    assert outcome.error is None


# --- regressions: each of these was a bug found by these tests ------------------------------


def test_a_silent_command_ends_its_step_when_it_is_done(terminal) -> None:
    # The quiet rule ended this step at 0.58 s, before `late` and the prompt, and the next
    # action was typed into the running command.
    env, _ = terminal
    outcome = step(env, command("sleep 0.8; echo late"))
    obs = outcome.observation
    assert outcome.latency_s >= 0.8
    assert screen_lines(obs)[-2:] == ["late", HOME_PROMPT]
    assert obs["prompt"] is True and obs["completed"] is True and obs["exit_code"] == 0
    after = step(env, command("echo next")).observation
    assert screen_lines(after)[-5:] == [
        f"{HOME_PROMPT} sleep 0.8; echo late",
        "late",
        f"{HOME_PROMPT} echo next",
        "next",
        HOME_PROMPT,
    ]


@pytest.mark.parametrize(
    ("line", "shown", "foreground"),
    [
        ("vim -u NONE notes.txt", '"notes.txt" [New', "vim"),
        ("seq 200 | less", "1", "less"),
        ("python3", ">>> ", "python3"),
        ("read -p 'name? ' answer", "name? ", None),
        ("cat", f"{HOME_PROMPT} cat", "cat"),
        ("sleep 0.5; cat", f"{HOME_PROMPT} sleep 0.5; cat", "cat"),
        ("python3 -c 'import time; time.sleep(0.6); input(\"ok? \")'", "ok? ", "python3"),
    ],
)
def test_a_program_waiting_for_input_ends_its_step(terminal, line, shown, foreground) -> None:
    # An editor, a pager, a REPL, a prompt: the job sleeps reading the terminal, so the step
    # ends without the prompt and long before the timeout, with the program's screen.
    env, _ = terminal
    outcome = step(env, command(line), timeout_s=30)
    obs = outcome.observation
    assert outcome.latency_s < 10
    assert obs["prompt"] is False and obs["timed_out"] is False
    assert outcome.error is None
    assert obs["foreground"] == foreground
    assert any(row.startswith(shown) or row == shown.rstrip() for row in screen_lines(obs)), (
        screen_lines(obs)
    )


def test_step_waits_until_a_slow_shell_has_read_its_input(terminal_image: str) -> None:
    env = TerminalEnvironment(TerminalConfig(image=terminal_image, limits=Limits(cpus=0.1)))
    try:
        env.reset(seed=0, task=None)
        outcome = env.step(keys("echo " + "x" * 40000 + " | wc -c", "Enter"), 30)
        followup = env.step(command("false"), 30)
        assert screen_lines(outcome.observation)[-2:] == ["40001", HOME_PROMPT]
        assert outcome.observation["prompt"] is True
        assert followup.observation["exit_code"] == 1
    finally:
        env.close()


def test_long_input_of_wide_characters(terminal) -> None:
    env, _ = terminal
    outcome = step(env, keys("printf %s '" + "\U0001f600" * 5000 + "' | wc -m", "Enter"))
    assert screen_lines(outcome.observation)[-2:] == ["5000", HOME_PROMPT]


def test_wait_at_an_idle_prompt_is_not_an_error(terminal) -> None:
    env, _ = terminal
    outcome = step(env, wait(1))
    assert outcome.observation["timed_out"] is False
    assert outcome.error is None


def test_invalid_action_keeps_the_prompt_state(terminal) -> None:
    env, _ = terminal
    before = step(env, command("false")).observation
    after = step(env, Action(name="bogus", arguments={}, text="x")).observation
    assert (after["prompt"], after["exit_code"]) == (before["prompt"], before["exit_code"])


def test_scrollback_of_consecutive_steps_has_no_gap(terminal) -> None:
    env, _ = terminal
    producer = 'python3 -u -c "import time\nfor i in range(10**7): print(i); time.sleep(0.0001)"'
    obs = step(env, command(producer), timeout_s=1).observation
    gaps = []
    for _ in range(3):
        previous_top = screen_lines(obs)[0]
        obs = step(env, wait(0.5), timeout_s=1).observation
        scrollback = scrollback_lines(obs)
        gaps.append((previous_top, scrollback[0] if scrollback else None))
    step(env, keys("C-c"), timeout_s=10)
    # The first line to scroll off after a capture is the top line of the captured screen.
    assert all(top == first for top, first in gaps), gaps


def test_reset_gives_a_fresh_container(terminal_env: TerminalEnvironment) -> None:
    terminal_env.reset(seed=0, task=None)
    first_id = terminal_env.sandbox.container.id
    step(terminal_env, command("touch /home/user/left-behind"))
    started = time.monotonic()
    obs = terminal_env.reset(seed=1, task=None)
    assert time.monotonic() - started < 15
    assert terminal_env.sandbox.container.id != first_id
    assert obs["prompt"] is True
    outcome = step(terminal_env, command("ls /home/user/left-behind"))
    assert outcome.observation["exit_code"] == 2


def test_a_pipe_still_streaming_output_keeps_the_step_going(terminal) -> None:
    # `yes` printed the same screen over and over while its group leader sat blocked: the
    # step ended after 0.58 s and the next command was typed into the running pipe. Here the
    # leader is `timeout`, blocked in wait while yes streams for 3 s (on any machine; 50 MB
    # took 21-24 s here, most of it tmux parsing the same screen).
    env, _ = terminal
    started = time.monotonic()
    outcome = step(env, command("timeout 3 yes | head -c 50M; echo DONE"), timeout_s=60)
    obs = outcome.observation
    assert time.monotonic() - started >= 3
    assert outcome.error is None
    assert screen_lines(obs)[-2:] == ["DONE", HOME_PROMPT]
    assert obs["prompt"] is True and obs["completed"] is True and obs["exit_code"] == 0
    assert obs["foreground"] is None
    # The next command runs at the prompt, not inside the pipe.
    after = step(env, command("echo next")).observation
    assert screen_lines(after)[-3:] == [f"{HOME_PROMPT} echo next", "next", HOME_PROMPT]


def test_pane_size_is_reported(terminal_image: str) -> None:
    env = TerminalEnvironment(TerminalConfig(image=terminal_image, width=100, height=30))
    try:
        first = env.reset(seed=0, task=None)
        obs = step(env, command("tput cols; tput lines")).observation
    finally:
        env.close()
    assert (first["columns"], first["rows"]) == (100, 30)
    assert (obs["columns"], obs["rows"]) == (100, 30)
    assert screen_lines(obs)[-3:-1] == ["100", "30"]
    meta = TerminalRenderer().observation(obs).meta
    assert (meta["columns"], meta["rows"]) == (100, 30)
