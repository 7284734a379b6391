"""The shared episode loop with the real terminal environment."""

from __future__ import annotations

import pytest

import worldtrace
from worldtrace.collectors.base import EpisodePlan, ReplayPolicy, ScriptPolicy
from worldtrace.collectors.episode import (
    EpisodeInterrupted,
    EpisodeLimits,
    clear_stop,
    request_stop,
    run_episode,
)
from worldtrace.collectors.recorder import RunRecorder, read_episode
from worldtrace.collectors.terminal import TerminalCollector, TerminalConfig
from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.environment import TerminalEnvironment
from worldtrace.collectors.terminal.tasks import TerminalTask, task_by_name
from worldtrace.sandboxes import docker as docker_sandboxes
from worldtrace.schemas.records import EnvironmentRef

pytestmark = pytest.mark.docker


def play(tmp_path, policy, task, max_steps, image):
    collector = TerminalCollector()
    env = collector.make_environment(TerminalConfig(image=image))
    writer = RunRecorder(tmp_path, {"domain": "terminal"}).begin("ep")
    plan = EpisodePlan(index=0, seed=5, task=task)
    try:
        result = run_episode(env, policy, writer, plan, EpisodeLimits(max_steps, 10))
    finally:
        env.close()
    return result, list(read_episode(tmp_path / "raw" / "episodes" / "ep.jsonl"))


def test_a_finished_script_is_completed_and_checked(tmp_path, terminal_image):
    task = task_by_name("word-frequency")
    result, events = play(tmp_path, ScriptPolicy(), task, 50, terminal_image)
    assert (result.status, result.steps, result.reward) == ("completed", len(task.steps), 1.0)
    start, end = events[0], events[-1]
    assert start.env.components["tmux"].startswith("tmux")
    assert start.task_name == "word-frequency"
    assert start.collector_version == worldtrace.__version__
    assert (end.status, end.reward) == ("completed", 1.0)


def test_the_step_limit_truncates(tmp_path, terminal_image):
    task = task_by_name("word-frequency")
    result, events = play(tmp_path, ScriptPolicy(), task, 2, terminal_image)
    assert (result.status, result.steps) == ("truncated", 2)
    assert [e.type for e in events] == ["start", "step", "step", "end"]


def test_a_broken_task_setup_fails_the_episode_with_its_reason(tmp_path, terminal_image):
    task = TerminalTask(name="broken", instruction="x", setup=("exit 7",), steps=(command("ls"),))
    result, events = play(tmp_path, ScriptPolicy(), task, 5, terminal_image)
    assert result.status == "failed"
    assert "exit 7" in result.error and "exited 7" in result.error
    assert events[-1].status == "failed"


def test_replay_records_the_ground_truth_of_given_actions(tmp_path, terminal_image):
    actions = [command("mkdir -p /home/user/a && cd /home/user/a"), command("pwd")]
    task = TerminalTask(name="replay", instruction="replay")
    result, events = play(tmp_path, ReplayPolicy(actions), task, 10, terminal_image)
    assert result.status == "completed"
    steps = [e for e in events if e.type == "step"]
    assert steps[1].observation["cwd"] == "/home/user/a"
    assert "/home/user/a" in steps[1].observation["screen"]


class StoppedWhileDescribed(TerminalEnvironment):
    """The real terminal environment, stopped as SIGTERM or Ctrl-C would stop it (the stop
    requested, this process's sandboxes removed) just after its reset, as it is described."""

    def describe(self) -> EnvironmentRef:
        request_stop()
        docker_sandboxes.close_all()
        return super().describe()


def test_a_stop_while_the_episode_starts_sets_the_attempt_aside(
    tmp_path, terminal_image, monkeypatch
):
    # The first episode of a process asks its sandbox for the image's versions; the stop
    # removed it. Such an attempt was left in partial/ by a stopped run, neither set aside
    # nor sealed (the stopping test failed once in CI so).
    monkeypatch.setattr(docker_sandboxes, "_versions_by_image", {})
    env = StoppedWhileDescribed(TerminalConfig(image=terminal_image))
    recorder = RunRecorder(tmp_path, {"domain": "terminal"})
    plan = EpisodePlan(index=0, seed=5, task=task_by_name("word-frequency"))
    try:
        with pytest.raises(EpisodeInterrupted):
            run_episode(env, ScriptPolicy(), recorder.begin("ep"), plan, EpisodeLimits(5, 10))
    finally:
        clear_stop()
        env.close()
    assert not list(recorder.layout.partial.iterdir())
    assert not list(recorder.layout.sealed.iterdir())
    (attempt,) = recorder.layout.interrupted.iterdir()
    assert list(read_episode(attempt))[-1].reason == "interrupted: the run was asked to stop"
