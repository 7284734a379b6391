from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.records import make_end, make_start, make_step
from worldtrace.collectors.recorder import (
    EpisodeAlreadySealed,
    RunMismatchError,
    RunRecorder,
    read_episode,
)
from worldtrace.schemas.raw import MalformedEpisode

CONFIG = {"domain": "terminal", "episodes": 3, "run_name": "r"}


def test_step_is_on_disk_when_write_returns(tmp_path) -> None:
    writer = RunRecorder(tmp_path, CONFIG).begin("ep-0")
    writer.write_start(make_start("ep-0", {"screen": "$ "}))
    writer.write_step(make_step(0))
    # read through a separate file handle, as another process would
    lines = (tmp_path / "raw" / "partial" / "ep-0.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["start", "step"]


def test_seal_moves_the_episode_atomically_and_refuses_a_second_recording(tmp_path) -> None:
    recorder = RunRecorder(tmp_path, CONFIG)
    writer = recorder.begin("ep-0")
    writer.write_start(make_start("ep-0"))
    sealed = writer.seal(make_end(0))
    assert sealed == tmp_path / "raw" / "episodes" / "ep-0.jsonl"
    assert not (tmp_path / "raw" / "partial" / "ep-0.jsonl").exists()
    assert [e.type for e in read_episode(sealed)] == ["start", "end"]
    assert recorder.sealed_ids() == {"ep-0"}
    with pytest.raises(EpisodeAlreadySealed):
        recorder.begin("ep-0")


def test_resume_with_another_config_is_refused(tmp_path) -> None:
    RunRecorder(tmp_path, CONFIG)
    RunRecorder(tmp_path, dict(CONFIG))  # the same config resumes
    with pytest.raises(RunMismatchError, match="different configuration"):
        RunRecorder(tmp_path, {**CONFIG, "episodes": 4})


def test_partial_episodes_are_kept_aside_not_lost(tmp_path) -> None:
    recorder = RunRecorder(tmp_path, CONFIG)
    first = recorder.begin("ep-1")
    first.write_start(make_start("ep-1"))
    first.write_step(make_step(0))
    # a new process resumes: the partial attempt moves to interrupted/, with its steps
    resumed = RunRecorder(tmp_path, CONFIG)
    moved = resumed.recover_interrupted()
    assert [p.name for p in moved] == ["ep-1.0.jsonl"]
    assert len(list(read_episode(moved[0]))) == 2
    again = resumed.begin("ep-1")
    again.abandon("sandbox died")
    assert sorted(p.name for p in (tmp_path / "raw" / "interrupted").iterdir()) == [
        "ep-1.0.jsonl",
        "ep-1.1.jsonl",
    ]
    last = list(read_episode(tmp_path / "raw" / "interrupted" / "ep-1.1.jsonl"))[-1]
    assert (last.type, last.reason) == ("abandoned", "sandbox died")


def test_torn_last_line_is_ignored(tmp_path) -> None:
    path = tmp_path / "ep.jsonl"
    start = make_start("ep")
    path.write_text(start.model_dump_json() + '\n{"type": "step", "st')
    assert list(read_episode(path)) == [start]


def test_a_malformed_line_is_named_with_its_field(tmp_path) -> None:
    path = tmp_path / "ep.jsonl"
    path.write_text(make_start("ep").model_dump_json() + '\n{"type": "step", "step": -1}\n')
    with pytest.raises(MalformedEpisode, match=r"ep.jsonl line 2: .*step\.step"):
        list(read_episode(path))


WRITER = """
import sys
from worldtrace.collectors.recorder import RunRecorder
from tests.records import make_start, make_step
recorder = RunRecorder(sys.argv[1], {"domain": "terminal", "episodes": 1, "run_name": "r"})
writer = recorder.begin("ep-k")
writer.write_start(make_start("ep-k"))
step = 0
while True:
    writer.write_step(make_step(step, {"pad": "x" * 5000}))
    print(step, flush=True)
    step += 1
"""


def test_sigkill_loses_no_step_that_was_reported_written(tmp_path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    reported = -1
    deadline = time.monotonic() + 30
    while reported < 50 and time.monotonic() < deadline:
        reported = int(process.stdout.readline())
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    events = list(read_episode(tmp_path / "raw" / "partial" / "ep-k.jsonl"))
    steps = [e.step for e in events if e.type == "step"]
    assert steps == list(range(len(steps)))
    assert len(steps) >= reported + 1
