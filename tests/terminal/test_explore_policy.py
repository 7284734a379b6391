"""The exploring terminal policy, driven by a tiny fake shell (no Docker needed).

The docker-marked test at the end runs the policy in a real sandbox on a seeded workspace.
"""

from __future__ import annotations

import json
import os
import posixpath
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.terminal.fake_shell import (
    HOME_PROJECT,
    PRE_EXISTING,
    FakeShell,
    run_episode,
    run_episode_with_cwd,
)
from worldtrace.collectors.base import HistoryItem
from worldtrace.collectors.terminal.explore import ExplorePolicy, command_output
from worldtrace.collectors.terminal.workspace import workspace_setup

REPO = Path(__file__).resolve().parents[2]


def program_observation(foreground: str) -> dict:
    return {
        "screen": "~\n~\n~",
        "scrollback": "",
        "cursor": [0, 0],
        "prompt": False,
        "exit_code": None,
        "cwd": HOME_PROJECT,
        "foreground": foreground,
        "timed_out": True,
    }


def test_same_seed_same_actions() -> None:
    assert run_episode(7) == run_episode(7)
    # reset() forgets everything: a reused policy repeats itself too.
    policy = ExplorePolicy(max_steps=30)
    runs = []
    for _ in range(2):
        policy.reset(3, None)
        shell, history, texts = FakeShell(), [], []
        observation = shell.start()
        while (action := policy.act(observation, history)) is not None:
            observation = shell.step(action)
            history.append(HistoryItem(action=action, observation=observation))
            texts.append(action.text)
        runs.append(texts)
    assert runs[0] == runs[1] == run_episode(3, steps=30)


def test_same_seed_same_actions_across_processes() -> None:
    # Set iteration order changes with PYTHONHASHSEED; the policy must not depend on it.
    script = "import json; from tests.terminal.fake_shell import run_episode; "
    script += "print(json.dumps(run_episode(11)))"
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] == run_episode(11)


def test_different_seeds_different_actions() -> None:
    episodes = [tuple(run_episode(seed)) for seed in range(5)]
    assert len(set(episodes)) == 5


def test_starts_by_listing_and_uses_what_it_saw() -> None:
    for seed in range(5):
        texts = run_episode(seed)
        assert texts[0] == "ls -1p<Enter>"
        later = texts[1:]
        assert any("data.csv" in text for text in later), seed
        assert any(
            ("src" in text and "ls -1p" not in text) or text.startswith("ls -1p src")
            for text in later
        ), seed


def test_words_from_files_become_grep_patterns() -> None:
    words = {"station", "city", "temperature", "lisbon", "porto", "faro", "stations", "Weather"}
    words |= {"backup", "remember", "migrating", "coast", "network", "tools", "summary", "print"}
    greps = [text for seed in range(10) for text in run_episode(seed) if text.startswith("grep")]
    assert greps
    assert any(any(word in text for word in words) for text in greps)


def operands(line: str) -> list[str]:
    return [w for w in shlex.split(line)[1:] if not w.startswith("-")]


def resolve(cwd: str, target: str) -> str:
    return posixpath.normpath(posixpath.join(cwd, target.replace("~", "/home/user", 1)))


def test_never_touches_files_it_did_not_create() -> None:
    changes = 0
    for seed in range(30):
        played = run_episode_with_cwd(seed, steps=60)
        for index, (text, cwd) in enumerate(played):
            line = text.removesuffix("<Enter>")
            targets: list[str] = []
            if line.startswith(("rm ", "mv ", "sed -i")):
                targets = operands(line)
                if line.startswith("mv "):
                    targets = targets[:1]
                if line.startswith("sed -i"):
                    targets = targets[-1:]
                changes += 1
                for target in targets:
                    # Whatever it removes or changes, it named in an earlier command.
                    name = target.rstrip("/").split("/")[-1]
                    assert any(name in earlier for earlier, _ in played[:index]), (seed, text)
            if " > " in line:
                targets.append(line.split(" > ", 1)[1].split()[0])
            if line.startswith("cp "):
                targets.append(operands(line)[-1])
            for target in targets:
                assert resolve(cwd, target) not in PRE_EXISTING, (seed, cwd, text)
    assert changes > 30  # the property is exercised, not vacuous


def test_leaves_less_with_q() -> None:
    policy = ExplorePolicy()
    policy.reset(0, None)
    action = policy.act(program_observation("less"), [])
    assert action is not None and action.arguments["keys"] == ["q"]


def test_leaves_vim_without_saving() -> None:
    policy = ExplorePolicy()
    policy.reset(0, None)
    action = policy.act(program_observation("vim"), [])
    assert action is not None and action.arguments["keys"] == ["Escape", ":q!", "Enter"]


def test_leaves_python_and_unknown_programs() -> None:
    policy = ExplorePolicy()
    policy.reset(0, None)
    assert policy.act(program_observation("python3"), []).arguments["keys"] == ["C-d"]
    policy.reset(0, None)
    assert policy.act(program_observation("top"), []).arguments["keys"] == ["C-c"]


def test_escalates_when_a_program_will_not_leave() -> None:
    policy = ExplorePolicy()
    policy.reset(0, None)
    tries = [policy.act(program_observation("less"), []).arguments["keys"] for _ in range(4)]
    assert tries[0] == ["q"]
    assert ["C-c"] in tries[1:]


def test_finishes_its_own_interactive_sequences() -> None:
    # Every program it opens against the fake shell is closed again by its own actions.
    for seed in range(20):
        policy = ExplorePolicy(max_steps=50)
        policy.reset(seed, None)
        shell = FakeShell()
        observation = shell.start()
        history: list[HistoryItem] = []
        while (action := policy.act(observation, history)) is not None:
            observation = shell.step(action)
            history.append(HistoryItem(action=action, observation=observation))
        assert shell.foreground is None, seed


def test_stops_after_max_steps() -> None:
    policy = ExplorePolicy(max_steps=5)
    policy.reset(1, None)
    shell = FakeShell()
    observation = shell.start()
    actions = []
    for _ in range(10):
        action = policy.act(observation, [])
        if action is None:
            break
        actions.append(action)
        observation = shell.step(action)
    assert len(actions) == 5
    assert policy.act(observation, []) is None


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        ExplorePolicy(max_steps=0)
    with pytest.raises(ValueError, match="unknown"):
        ExplorePolicy(weights={"teleport": 1.0})


def test_command_output_follows_wrapped_command_lines() -> None:
    prompt = "user@sandbox:~$ "
    long = "grep -rn " + "x" * 170
    screen = f"{prompt}ls\nold\n{prompt}{long[:144]}\n{long[144:]}\nfound: 1\n{prompt}"
    assert command_output({"screen": screen}, long) == ["found: 1"]
    assert command_output({"screen": screen}, "ls") == ["old"]
    assert command_output({"screen": screen}, "pwd") is None


def test_workspace_setup_is_seeded() -> None:
    assert workspace_setup(4) == workspace_setup(4)
    trees = {workspace_setup(seed) for seed in range(8)}
    assert len(trees) == 8
    for script in workspace_setup(5):
        done = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


@pytest.mark.docker
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_explores_a_real_workspace_without_harm(seed: int, terminal_image: str) -> None:
    from worldtrace.collectors.terminal.environment import TerminalConfig, TerminalEnvironment
    from worldtrace.collectors.terminal.tasks import TerminalTask

    task = TerminalTask(name=f"explore-{seed}", instruction="explore", setup=workspace_setup(seed))
    # Checksums of every workspace file outside .git: exploring may add files, never change one.
    snapshot = (
        "find /home/user -mindepth 2 -path '*/.git' -prune -o -type f -print | sort "
        "| xargs -d '\\n' sha256sum"
    )
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        observation = env.reset(seed, task)
        before = env.sandbox.exec(snapshot).text.splitlines()
        assert len(before) >= 10
        policy = ExplorePolicy(max_steps=40)
        policy.reset(seed, task)
        history: list[HistoryItem] = []
        while (action := policy.act(observation, history)) is not None:
            outcome = env.step(action, timeout_s=15)
            observation = outcome.observation
            # Only the deliberately long `sleep N` (interrupted next) runs to the timeout.
            assert not observation.get("timed_out") or observation["foreground"] == "sleep", (
                action.text
            )
            history.append(HistoryItem(action=action, observation=observation, error=outcome.error))
        assert len(history) == 40
        assert observation.get("foreground") is None
        after = set(env.sandbox.exec(snapshot).text.splitlines())
        assert [line for line in before if line not in after] == []
    finally:
        env.close()
