from __future__ import annotations

import importlib.util

import pytest

from worldtrace.collectors.terminal import IMAGE, TerminalConfig, TerminalEnvironment, actions
from worldtrace.collectors.terminal.actions import command, is_key_name, keys, render_keys, wait
from worldtrace.collectors.terminal.screen import plain_screen


def load_driver():
    spec = importlib.util.spec_from_file_location("tmux_driver", IMAGE.folder / "tmux_driver.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("item", ["Enter", "C-c", "C-d", "Escape", "M-x", "F5", "S-Up", "C-M-a"])
def test_key_names(item):
    assert is_key_name(item)


@pytest.mark.parametrize("item", ["ls", "echo Enter", "C-", "Enterprise", "C-cat", "q!"])
def test_literal_text(item):
    assert not is_key_name(item)


def test_the_driver_in_the_image_classifies_keys_like_the_package():
    driver = load_driver()
    assert set(actions.NAMED_KEYS) == driver.NAMED_KEYS
    samples = ["Enter", "C-c", "M-x", "F12", "ls -la", "C-cat", "x", "S-Tab", ";", "Escape"]
    assert [driver.is_key_name(s) for s in samples] == [is_key_name(s) for s in samples]


def test_canonical_text():
    assert command("echo hello").text == "echo hello<Enter>"
    assert render_keys(["i", "todo", "Escape", ":wq", "Enter"]) == "itodo<Escape>:wq<Enter>"
    assert keys("C-c").text == "<C-c>"
    assert wait(5).text == "<wait 5s>"
    with pytest.raises(ValueError):
        keys()
    with pytest.raises(ValueError):
        wait(0)


@pytest.mark.docker
def test_text_ending_in_a_semicolon_is_typed_literally(terminal_image):
    # tmux ends a command at an argument ending in ';' unless it is escaped.
    env = TerminalEnvironment(TerminalConfig(image=terminal_image))
    try:
        env.reset(0, None)
        outcome = env.step(command("echo semi;"), 10)
        assert plain_screen(outcome.observation["screen"]).splitlines()[-2:] == [
            "semi",
            "user@sandbox:~$",
        ]
        outcome = env.step(keys("echo a\\;", "Enter"), 10)
        assert plain_screen(outcome.observation["screen"]).splitlines()[-2] == "a;"
    finally:
        env.close()


@pytest.mark.parametrize(
    "action",
    [
        command("ls -l"),
        keys("vim notes.txt", "Enter", "ihello <world>", "Escape", ":wq", "Enter"),
        keys("C-c"),
        keys("echo a<b", "Tab"),
        wait(2.5),
    ],
)
def test_action_text_reads_back_into_the_same_action(action):
    assert actions.parse_action_text(action.text) == action


def test_adjacent_literal_items_read_back_as_one_typed_text():
    # Typing "i" then "hello" sends the same bytes as typing "ihello"; the text cannot tell
    # them apart, so the reading is the shorter one.
    assert actions.parse_action_text(keys("i", "hello", "Enter").text) == keys("ihello", "Enter")


def test_an_empty_action_text_is_refused():
    with pytest.raises(ValueError, match="types nothing"):
        actions.parse_action_text("")


def test_a_replay_of_action_texts_records_their_real_screens(tmp_path, terminal_image):
    from worldtrace.collectors.recorder import read_episode
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    config = validate_config(
        {
            "domain": "terminal",
            "episodes": 1,
            "out": str(tmp_path),
            "policy": {"kind": "replay", "params": {"actions": ["cd /tmp<Enter>", "pwd<Enter>"]}},
            "environment": {"image": terminal_image},
        }
    )
    summary = run_collection(config)
    assert (summary["collected"], summary["transitions"]) == (1, 2)
    (episode,) = (config.run_dir / "raw" / "episodes").glob("*.jsonl")
    steps = [event for event in read_episode(episode) if event.type == "step"]
    assert [step.action.arguments["keys"] for step in steps] == [
        ["cd /tmp", "Enter"],
        ["pwd", "Enter"],
    ]
    assert steps[1].observation["cwd"] == "/tmp"
    assert plain_screen(steps[1].observation["screen"]).splitlines()[-2] == "/tmp"
