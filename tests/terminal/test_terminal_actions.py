from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worldtrace.collectors.terminal import IMAGE, TerminalConfig, TerminalEnvironment, actions
from worldtrace.collectors.terminal.actions import command, is_key_name, keys, render_keys, wait
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.sandboxes import driver_runtime


def load_driver(monkeypatch: pytest.MonkeyPatch):
    """The image's driver loaded on the host, importing the runtime the image copies beside it."""
    monkeypatch.setitem(sys.modules, "driver_runtime", driver_runtime)
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


def test_the_driver_in_the_image_classifies_keys_like_the_package(monkeypatch):
    driver = load_driver(monkeypatch)
    assert set(actions.NAMED_KEYS) == driver.NAMED_KEYS
    samples = ["Enter", "C-c", "M-x", "F12", "ls -la", "C-cat", "x", "S-Tab", ";", "Escape"]
    assert [driver.is_key_name(s) for s in samples] == [is_key_name(s) for s in samples]


def test_canonical_text():
    assert command("echo hello").text == "echo hello<Enter>"
    assert render_keys(["itodo", "Escape", ":wq", "Enter"]) == "itodo<Escape>:wq<Enter>"
    assert render_keys(["i", "todo", "Escape"]) == "i<+>todo<Escape>"
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


def test_adjacent_typed_texts_read_back_as_the_same_items():
    # ["Ente", "r"] types the word Enter; read back as one item, it would press the key.
    assert keys("Ente", "r").text == "Ente<+>r"
    assert actions.parse_action_text("Ente<+>r").arguments["keys"] == ["Ente", "r"]
    action = keys("i", "hello", "Enter")
    assert actions.parse_action_text(action.text) == action


@pytest.mark.parametrize(
    ("items", "text"),
    [
        # The case: typed text that looks like a key is escaped.
        (["echo '<Enter>'", "Enter"], "echo '\\<Enter>'<Enter>"),
        (["<wait 5s>"], "\\<wait 5s>"),
        (["a\\", "Enter"], "a\\\\<Enter>"),
        (["x <+> y"], "x \\<+> y"),
        # What needs no escape is written as it is: redirections, heredocs, SQL's <>.
        (["cat <<'EOF' > f <in", "Enter"], "cat <<'EOF' > f <in<Enter>"),
        (["select 1 where 2 <> 3;"], "select 1 where 2 <> 3;"),
        (["printf 'a\\\\n' \\"], "printf 'a\\\\n' \\"),
        (["M-<", "M->", "C-<"], "<M-<><M->><C-<>"),
    ],
)
def test_escaping_rule(items, text):
    assert render_keys(items) == text
    assert actions.parse_action_text(text).arguments["keys"] == items


def test_texts_from_before_the_escaping_rule_read_as_they_did():
    # No token-like text inside typed text: the old and the new writing agree.
    assert actions.parse_action_text("vim notes.txt<Enter>ihello <world><Escape>:wq<Enter>") == (
        keys("vim notes.txt", "Enter", "ihello <world>", "Escape", ":wq", "Enter")
    )


# Typed text drawn mostly from the characters the rule is about, so that tokens, escapes and
# their near misses appear often.
_TRICKY = st.lists(
    st.sampled_from([*"<>\\+- aCMSw", "wait 5s", "C-", "M-", *sorted(actions.NAMED_KEYS)]),
    min_size=1,
    max_size=12,
).map("".join)
_KEY = st.sampled_from(sorted(actions.NAMED_KEYS)) | st.builds(
    lambda mods, key: "".join(mods) + key,
    st.lists(st.sampled_from(["C-", "M-", "S-"]), min_size=1, max_size=3),
    st.sampled_from([*"<>\\+-ac", "Enter", "Up"]),
)
_ITEM = (_TRICKY | st.text(min_size=1, max_size=8) | st.just("wait 5s") | _KEY).filter(bool)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=6))
def test_every_key_sequence_reads_back_as_exactly_itself(items):
    text = render_keys(items)
    assert actions.parse_action_text(text).arguments["keys"] == items


@settings(max_examples=500, deadline=None)
@given(st.lists(_ITEM, min_size=1, max_size=6))
def test_the_reading_is_the_one_canonical_text(items):
    action = actions.parse_action_text(render_keys(items))
    assert action.text == render_keys(items)


def test_collected_runs_renormalize_to_texts_that_read_back():
    from worldtrace.collectors.terminal.render import TerminalRenderer
    from worldtrace.schemas.raw import read_raw_episode

    renderer = TerminalRenderer()
    folder = Path(__file__).resolve().parent.parent / "data" / "collected"
    seen = 0
    for path in sorted(folder.glob("terminal-*/raw/episodes/*.jsonl")):
        for step in read_raw_episode(path).steps:
            action = renderer.action(step.action)
            assert actions.parse_action_text(action.text) == action
            seen += 1
    assert seen > 10


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
