"""Curation with real datatrove pipelines on real parquet shards."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.curation.helpers import PROSE, numbers_screen, read_output, step, write_shard
from tests.records import make_transition
from worldtrace.curation import CurationConfig, CurationError, curate, load_curation_config
from worldtrace.curation.config import ScrubSettings
from worldtrace.curation.scrub import Scrubber
from worldtrace.schemas import Action, Episode, Observation, Transition, to_row, to_table
from worldtrace.schemas.arrow import arrow_schema_of
from worldtrace.schemas.errors import InputError

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
    b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff"
    b"\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82"
)
SECRETS = {
    "aws_access_key": "AKIAIOSFODNN7EXAMPLE",
    "github_token": "ghp_" + "a1B2c3D4e5" * 4,
    "openai_key": "sk-proj-" + "Z9y8X7w6V5" * 3,
    "slack_token": "xoxb-1234567890-abcdefghij",
    "hf_token": "hf_" + "AbCdEfGhIj" * 3 + "kl",
    "google_api_key": "AIza" + "S" * 35,
}
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabc123\n-----END RSA PRIVATE KEY-----"


def marks(frame: pl.DataFrame) -> dict[str, dict[str, object]]:
    """Every row's ``curation`` column by id."""
    return {row["id"]: row["curation"] for row in frame.iter_rows(named=True)}


def labels_by_id(frame: pl.DataFrame) -> dict[str, list[str]]:
    return {row_id: list(mark["labels"]) for row_id, mark in marks(frame).items()}  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("curation")
    run = root / "run"
    changed = PROSE.replace("lazy", "sleepy")
    echo, done = "$ echo done", "$ echo done\ndone"
    secrets_text = " ".join(SECRETS.values())
    terminal = [
        step("ep-a", 0, f"{PROSE}\n{echo}", f"{PROSE}\n{done}"),
        step("ep-a", 1, "$ ls", "file.txt"),
        # exact duplicate of ep-a:1 in another episode
        step("ep-b", 0, "$ ls", "file.txt"),
        # near duplicate of ep-a:0: one word of the state changed, the same change made
        step("ep-b", 1, f"{changed}\n{echo}", f"{changed}\n{done}"),
        # the same state and action as ep-a:0, but the action changed other lines
        step("ep-b", 2, f"{PROSE}\n{echo}", f"{PROSE}\n$ echo done\nfailed"),
        # screens differing only in their numbers are kept
        step("ep-c", 0, numbers_screen(1), numbers_screen(2)),
        step("ep-c", 1, numbers_screen(3), numbers_screen(4)),
        step(
            "ep-d",
            0,
            f"export KEYS='{secrets_text}'\n{PEM}\nmail bob@corp-mail.io at 8.8.4.4 or "
            "2a03:2880:f003:c07:face:b00c::2",
            "git clone https://alice:hunter2@github.com/org/repo.git",
            task="token ghp_" + "Q" * 36,
            action=Action(
                name="keys",
                arguments={"keys": ["curl -u admin@corp.io https://x:y@host.io"]},
                text="echo sk-proj-" + "k" * 24,
            ),
        ),
        # contaminated: overlaps the eval set
        step("ep-e", 0, "What is the capital of France? Paris is the capital of France.", "ok"),
        # error-dominated episode: two of three actions failed
        step("ep-f", 0, "$ a", "err 1", action_error="boom"),
        step("ep-f", 1, "$ b", "err 2", action_error="boom"),
        step("ep-f", 2, "$ c", "fine"),
    ]
    web = [
        step(
            "ep-w",
            0,
            "[1] link 'Home'",
            "[1] link 'Home'\n[2] button 'Go'",
            domain="web",
            observation=Observation(format="axtree", text="[1] link 'Home'", screenshot=PNG),
        ),
        # a no-op: same text before and after a read-only action
        step(
            "ep-w",
            1,
            "[1] link 'Home'",
            "[1] link 'Home'",
            domain="web",
            action=Action(name="scroll", arguments={"dy": 100}, text="scroll(0, 100)"),
        ),
    ]
    write_shard(run / "transitions" / "terminal", terminal)
    write_shard(run / "transitions" / "web", web)
    bad = run / "transitions" / "terminal"
    good = (bad / "part-00000.parquet").read_bytes()
    (bad / "part-00001.parquet").write_bytes(good[: len(good) // 2])  # truncated
    pq.write_table(pa.table({"id": ["x"], "text": ["foreign"]}), bad / "part-00002.parquet")
    invalid = to_row(make_transition(step=0, episode_id="ep-z"))
    invalid["id"] = "wrong-id"
    pq.write_table(
        pa.Table.from_pylist([invalid], schema=arrow_schema_of(Transition)),
        bad / "part-00003.parquet",
    )
    episodes = [
        Episode(
            episode_id=eid,
            run_id="r",
            domain="terminal",
            policy=make_transition().policy,
            seed=0,
            status="completed",
            length=1,
            started_at=make_transition().timing.started_at,
            ended_at=make_transition().timing.started_at,
        )
        for eid in ("ep-a", "ep-b", "ep-c", "ep-d", "ep-e", "ep-f", "ep-w", "ep-gone")
    ]
    pq.write_table(to_table(episodes, Episode), run / "episodes.parquet")  # type: ignore[arg-type]
    evals = root / "evals.jsonl"
    evals.write_text(
        json.dumps({"prompt": "Q: What is the capital of France? Paris is the capital of France."})
        + "\n"
    )
    config = CurationConfig(
        decontam={"eval_files": [evals], "n_grams": 4, "threshold": 0.5},
        filters={"max_error_fraction": 0.5, "error_episode": "drop"},
    )
    out = root / "out"
    report = curate(run, out, config)
    assert report.stages_run == ["prepare", "buckets", "cluster", "resolve", "write"]
    return run, out, root


def test_duplicates_stay_in_their_episode_marked_with_the_row_they_duplicate(
    corpus: tuple[Path, Path, Path],
) -> None:
    _, out, _ = corpus
    found = marks(read_output(out))
    # every step of every kept episode is written
    assert {"ep-a:00000", "ep-a:00001", "ep-b:00000", "ep-b:00001", "ep-b:00002"} <= set(found)
    assert found["ep-a:00000"]["target"] and found["ep-a:00001"]["target"]
    exact, near = found["ep-b:00000"], found["ep-b:00001"]
    assert (exact["target"], exact["duplicate_of"], exact["duplicate_rule"]) == (
        False,
        "ep-a:00001",
        "exact",
    )
    assert (near["target"], near["duplicate_of"], near["duplicate_rule"]) == (
        False,
        "ep-a:00000",
        "near",
    )
    # the same state and action with another outcome is a transition of its own
    assert found["ep-b:00002"]["target"] and found["ep-b:00002"]["duplicate_of"] is None
    # screens differing only in their numbers are different states
    assert found["ep-c:00000"]["target"] and found["ep-c:00001"]["target"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["total"]["exact_duplicates"] == 1
    assert stats["total"]["near_duplicates"] == 1
    assert stats["total"]["targets"] == stats["total"]["rows_out"] - 2


def test_decontam_and_error_episodes_drop_whole_episodes(
    corpus: tuple[Path, Path, Path],
) -> None:
    _, out, _ = corpus
    ids = set(read_output(out)["id"])
    assert not any(i.startswith(("ep-e:", "ep-f:")) for i in ids)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["total"]["dropped"] == {"decontam": 1, "error_episode": 3}
    assert stats["episodes_dropped"] == {"decontam": 1, "error_episode": 1}
    episodes = set(pl.read_parquet(out / "episodes.parquet")["episode_id"])
    assert "ep-e" not in episodes and "ep-f" not in episodes


def test_scrubbing_every_kind(corpus: tuple[Path, Path, Path]) -> None:
    _, out, _ = corpus
    row = read_output(out).filter(pl.col("id") == "ep-d:00000").row(0, named=True)
    blob = json.dumps(row, default=str)
    for secret in [*SECRETS.values(), "MIIEowIBAAKCAQEA", "bob@corp-mail.io", "8.8.4.4", "hunter2"]:
        assert secret not in blob
    assert "2a03:2880:f003:c07:face:b00c::2" not in blob and "admin@corp.io" not in blob
    obs = row["observation"]["text"]
    for kind in SECRETS:
        assert f"<SECRET:{kind}>" in obs
    assert "<SECRET:private_key>" in obs and "<EMAIL>" in obs and "<IP>" in obs
    assert "https://alice:<PASSWORD>@github.com" in row["next_observation"]["text"]
    assert row["task"] == "token <SECRET:github_token>"
    assert "<SECRET:openai_key>" in row["action"]["text"]
    assert json.loads(row["action"]["arguments"])["keys"] == [
        "curl -u <EMAIL> https://x:<PASSWORD>@host.io"
    ]
    scrubbed = json.loads((out / "stats.json").read_text())["total"]["scrubbed"]
    assert scrubbed["github_token"] == 2 and scrubbed["openai_key"] == 2
    assert scrubbed["email"] == 2 and scrubbed["url_password"] == 2
    assert scrubbed["ipv4"] == 1 and scrubbed["ipv6"] == 1
    for kind in ("aws_access_key", "slack_token", "hf_token", "google_api_key", "private_key"):
        assert scrubbed[kind] == 1


def test_scrubber_leaves_ordinary_text() -> None:
    text = "$ ls -la /root\n127.0.0.1 localhost\n12:34:56 up 3 days, version 1.2.3"
    assert Scrubber(ScrubSettings()).text(text) == text


def test_bad_input_quarantined(corpus: tuple[Path, Path, Path]) -> None:
    _, out, _ = corpus
    entries = [json.loads(line) for line in (out / "quarantine.jsonl").read_text().splitlines()]
    reasons = {Path(e["file"]).name: e["reason"] for e in entries}
    assert reasons["part-00001.parquet"].startswith("unreadable parquet")
    assert reasons["part-00002.parquet"].startswith("foreign schema")
    assert "invalid row" in reasons["part-00003.parquet"]
    stats = json.loads((out / "stats.json").read_text())
    assert stats["quarantine"] == {"files": 2, "rows": 1}


def test_noop_labelled_in_the_curation_column(corpus: tuple[Path, Path, Path]) -> None:
    _, out, _ = corpus
    found = marks(read_output(out))
    assert found["ep-w:00001"] == {
        "target": True,
        "duplicate_of": None,
        "duplicate_rule": None,
        "labels": ["noop"],
    }
    assert found["ep-a:00000"]["labels"] == []


def test_output_loads_with_polars_and_datasets(corpus: tuple[Path, Path, Path]) -> None:
    from datasets import Image, load_dataset

    _, out, _ = corpus
    lazy = pl.scan_parquet(str(out / "transitions" / "*" / "*.parquet"))
    assert lazy.select(pl.len()).collect().item() == len(read_output(out))
    shards = sorted((out / "transitions").glob("*/*.parquet"))
    assert {path.parent.name for path in shards} == {"terminal", "web"}, shards
    for path in shards:
        assert pq.read_schema(path).equals(arrow_schema_of(Transition), check_metadata=False)
    data = load_dataset(
        "parquet", data_files=str(out / "transitions" / "web" / "*.parquet"), split="train"
    )
    assert isinstance(data.features["observation"]["screenshot"], Image)
    shot = data[0]["observation"]["screenshot"]
    assert shot is not None and shot.size == (1, 1)
    episodes = pl.read_parquet(out / "episodes.parquet")
    assert "ep-gone" not in set(episodes["episode_id"]) and "ep-a" in set(episodes["episode_id"])


def test_stats_per_domain(corpus: tuple[Path, Path, Path]) -> None:
    _, out, _ = corpus
    stats = json.loads((out / "stats.json").read_text())
    assert set(stats["domains"]) == {"terminal", "web"}
    web = stats["domains"]["web"]
    assert web["rows_in"] == 2 and web["rows_out"] == 2
    env = web["env_versions"]["sha256:abc"]
    assert env["lengths"]["observation_chars"]["max"] == len("[1] link 'Home'")
    assert stats["domains"]["terminal"]["rows_out"] == len(read_output(out)) - 2


def test_rerun_does_no_work_and_is_identical(corpus: tuple[Path, Path, Path]) -> None:
    run, out, _ = corpus
    files = sorted((out / "transitions").glob("*/*.parquet"))
    before = {p: p.read_bytes() for p in [*files, out / "stats.json", out / "quarantine.jsonl"]}
    config = load_curation_config_from(out)
    report = curate(run, out, config)
    assert report.stages_run == []
    assert sorted((out / "transitions").glob("*/*.parquet")) == files
    assert {p: p.read_bytes() for p in before} == before
    with pytest.raises(CurationError):
        curate(run, out, CurationConfig(exact_dedup=False))


def load_curation_config_from(out: Path) -> CurationConfig:
    return CurationConfig.model_validate(
        json.loads((out / ".curation" / "config.json").read_text())
    )


def test_interrupted_write_stage_finishes_missing_work(corpus: tuple[Path, Path, Path]) -> None:
    run, out, root = corpus
    resumed = root / "resumed"
    config = load_curation_config_from(out)
    curate(run, resumed, config)
    # forget that the final stage finished and damage its output: only it runs again
    (resumed / ".curation" / "logs" / "write" / "completions" / "00000").unlink()
    damaged = sorted((resumed / "transitions").glob("*/*.parquet"))
    assert damaged  # or there would be nothing for the write stage to redo
    for path in damaged:
        path.write_bytes(b"garbage")
    report = curate(run, resumed, config)
    assert report.stages_run == ["write"]
    assert read_output(resumed).sort("id").equals(read_output(out).sort("id"))


@pytest.mark.parametrize("mode", ["drop", "exclude", "label", "keep"])
def test_filter_modes(tmp_path: Path, mode: str) -> None:
    run = tmp_path / "run"
    rows = [
        step("ep-1", 0, "$ ", "$ echo hi\nhi"),
        step("ep-1", 1, "", "$ "),  # empty observation
        step("ep-1", 2, "x" * 500, "$ "),  # oversize
        step("ep-1", 3, "$ ls", "$ ls"),  # no-op of a non read-only action
    ]
    clean = [step("ep-2", 0, "$ ", "$ echo hi\nhi there")]
    write_shard(run / "transitions" / "terminal", rows + clean)
    config_file = tmp_path / "curation.yaml"
    config_file.write_text(
        "minhash: {enabled: false}\n"
        f"filters: {{empty_observation: {mode}, oversize_observation: {mode}, noop: {mode},"
        " max_observation_chars: 100}\n"
    )
    out = tmp_path / "out"
    report = curate(run, out, load_curation_config(config_file))
    found = marks(read_output(out))
    if mode == "drop":  # the whole episode, never a single row
        assert set(found) == {"ep-2:00000"} and report.episodes_dropped == {"empty_or_truncated": 1}
        return
    assert len(found) == 5
    expected = ["empty_or_truncated"], ["oversize"], ["noop"]
    if mode == "keep":
        expected = [], [], []
    assert tuple(found[f"ep-1:0000{i}"]["labels"] for i in (1, 2, 3)) == expected
    targets = [found[f"ep-1:0000{i}"]["target"] for i in (1, 2, 3)]
    assert targets == ([False] * 3 if mode == "exclude" else [True] * 3)
    assert found["ep-1:00000"]["labels"] == [] and found["ep-1:00000"]["target"]
    assert report.targets == (2 if mode == "exclude" else 5)


def test_config_rejects_unknown_fields_and_executors(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        CurationConfig.model_validate({"filters": {"nope": 1}})
    with pytest.raises(InputError, match="holds no run or corpus"):
        curate(tmp_path, tmp_path / "out", executor="ray")
    with pytest.raises(InputError, match="dask"):
        curate(tmp_path, tmp_path / "out", executor="dask")


def test_different_actions_on_the_same_screen_are_not_near_duplicates(tmp_path: Path) -> None:
    # Consecutive steps share most of their screen; only the action tells them apart.
    listing = "\n".join(f"-rw-r--r-- 1 root root {i * 37} file-{i}.txt" for i in range(30))
    rows = [
        step(
            "shared-screen",
            i,
            listing,
            listing + f"\nroot@sandbox:~# {cmd}",
            action=Action(name="keys", arguments={"keys": [cmd, "Enter"]}, text=f"{cmd}<Enter>"),
        )
        for i, cmd in enumerate(["ls", "wc -l file-1.txt", "cat file-2.txt", "pwd"])
    ]
    write_shard(tmp_path / "in" / "transitions" / "terminal", rows)
    curate(tmp_path / "in", tmp_path / "out")
    assert read_output(tmp_path / "out").height == 4
