"""Real episodes of six domains, curated, published and exported, read as a training team would.

``tests/data/collected/`` keeps the raw episodes of small runs collected from every domain's
defaults on this project's real environments (scripted tasks run twice, exploring walks; see
its README). Each test normalizes them with today's renderers, curates them into one corpus,
publishes and exports it exactly as the commands do, and checks what a world model would
learn from the rows: whole episodes, duplicates marked but never merged across different
outcomes, one meaning of ``action_error``, no text scrubbed that is not a secret, and
bounded exports in which the environment speaks.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from datasets import load_dataset

from worldtrace.curation import curate
from worldtrace.curation.dedup import change_key
from worldtrace.curation.secrets import is_reserved_domain
from worldtrace.exports import EXPORTERS
from worldtrace.exports.prompts import ERROR_PREFIX, OBSERVATION_HEADER
from worldtrace.exports.tokens import DEFAULT_HISTORY_TOKENS, estimate_tokens
from worldtrace.normalizers import normalize_run
from worldtrace.publishing.folder import publish_folder
from worldtrace.publishing.inspect import summarize

COLLECTED = Path(__file__).resolve().parent.parent / "data" / "collected"
DOMAINS = {"terminal", "swe", "mcp", "search", "web", "os"}


@dataclass(frozen=True)
class Published:
    """The fixture's runs after normalize → curate → publish → export."""

    runs: list[Path]
    corpus: Path
    dist: Path
    sft: Path

    def rows(self) -> pl.DataFrame:
        """Every published row."""
        return pl.read_parquet(sorted(self.dist.glob("data/*/*.parquet")))

    def input_rows(self) -> pl.DataFrame:
        """Every normalized row of the runs, as curation read them."""
        return pl.concat(
            [pl.read_parquet(sorted(run.glob("transitions/*/*.parquet"))) for run in self.runs]
        )

    def input_episodes(self) -> pl.DataFrame:
        """The runs' episodes tables."""
        return pl.concat([pl.read_parquet(run / "episodes.parquet") for run in self.runs])

    def export(self, fmt: str) -> list[dict[str, Any]]:
        """The lines of every domain's file of export format ``fmt``."""
        lines = []
        for path in sorted((self.sft / fmt).glob("*.jsonl")):
            lines += [json.loads(line) for line in path.read_text().splitlines()]
        return lines


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Published:
    root = tmp_path_factory.mktemp("collected")
    runs = []
    for source in sorted(path for path in COLLECTED.iterdir() if path.is_dir()):
        run = root / "runs" / source.name
        shutil.copytree(source, run)
        report = normalize_run(run)
        assert report.episodes and not report.quarantined, report
        runs.append(run)
    corpus, dist, sft = root / "corpus", root / "dist", root / "sft"
    curate(runs, corpus)
    publish_folder(corpus, dist)
    for fmt, exporter in EXPORTERS.items():
        exporter(dist, sft / fmt)
    return Published(runs, corpus, dist, sft)


def episode_rows(frame: pl.DataFrame) -> dict[str, list[dict[str, Any]]]:
    """The rows of each episode, in step order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in frame.sort("episode_id", "step").iter_rows(named=True):
        found.setdefault(row["episode_id"], []).append(row)
    return found


def test_the_fixture_holds_every_domain_and_both_kinds_of_policy(published: Published) -> None:
    episodes = published.input_episodes()
    assert set(episodes["domain"]) == DOMAINS
    kinds = episodes.select("domain", pl.col("policy").struct.field("kind")).unique()
    for domain in DOMAINS:
        assert set(kinds.filter(pl.col("domain") == domain)["kind"]) >= {"script", "explore"}


def test_every_episode_is_published_whole_with_its_first_state_and_final_reward(
    published: Published,
) -> None:
    rows = episode_rows(published.rows())
    inputs = published.input_episodes()
    assert set(rows) == set(inputs["episode_id"])  # no episode dropped by the defaults
    for episode in inputs.iter_rows(named=True):
        steps = rows[episode["episode_id"]]
        assert [row["step"] for row in steps] == list(range(episode["length"])), episode
        for before, after in itertools.pairwise(steps):
            assert after["observation"]["text"] == before["next_observation"]["text"]
        assert sum(row["reward"] for row in steps) == pytest.approx(episode["total_reward"])
        last = steps[-1]
        assert last["terminated"] == (episode["status"] == "completed")
    published_episodes = pl.read_parquet(published.dist / "meta" / "episodes.parquet")
    assert published_episodes.sort("episode_id")["length"].to_list() == [
        len(rows[e]) for e in sorted(rows)
    ]


def test_scripted_episodes_of_one_task_share_their_first_step_as_a_marked_duplicate(
    published: Published,
) -> None:
    rows = published.rows()
    first_steps = rows.filter(
        (pl.col("step") == 0) & (pl.col("policy").struct.field("kind") == "script")
    )
    marked = 0
    for (_domain, _task), group in first_steps.group_by("domain", "task"):
        keeper, *others = group.sort("episode_id").iter_rows(named=True)
        for other in others:
            same = all(
                other[field][part] == keeper[field][part]
                for field, part in [
                    ("observation", "text"),
                    ("action", "arguments"),
                    ("next_observation", "text"),
                ]
            )
            if same:  # the same first transition: a duplicate, still the episode's first row
                assert keeper["curation"]["target"]
                assert other["curation"]["duplicate_of"] == keeper["id"]
                assert not other["curation"]["target"]
                marked += 1
    assert marked >= 4  # terminal, mcp, search and os tasks were each collected twice


def test_duplicates_point_at_a_target_with_the_same_action_outcome_and_change(
    published: Published,
) -> None:
    rows = published.rows()
    by_id = {row["id"]: row for row in rows.iter_rows(named=True)}
    duplicates = [row for row in by_id.values() if row["curation"]["duplicate_of"]]
    assert duplicates
    for row in duplicates:
        kept = by_id[row["curation"]["duplicate_of"]]
        assert kept["curation"]["target"] and not row["curation"]["target"]
        for field in ("name", "arguments", "text"):
            assert row["action"][field] == kept["action"][field]
        for field in ("action_error", "reward", "terminated"):
            assert row[field] == kept[field]
        if row["curation"]["duplicate_rule"] == "exact":
            for field in ("observation", "next_observation"):
                assert row[field]["text"] == kept[field]["text"]
        else:
            assert row["curation"]["duplicate_rule"] == "near"
            assert change_key(row) == change_key(kept)


def test_every_rewarded_and_terminal_step_is_a_published_row(published: Published) -> None:
    inputs = published.input_rows()
    rows = {row["id"]: row for row in published.rows().iter_rows(named=True)}
    finals = inputs.filter((pl.col("reward") != 0) | pl.col("terminated"))
    assert finals.height and set(finals["domain"]) >= {"terminal", "os", "web"}
    for row in finals.iter_rows(named=True):
        assert rows[row["id"]]["reward"] == row["reward"]
        assert rows[row["id"]]["terminated"] == row["terminated"]
    os_saves = [r for r in rows.values() if r["domain"] == "os" and r["reward"] == 1.0]
    assert len(os_saves) == 2  # both episodes' final save keeps its reward


def test_submits_of_a_form_with_other_values_are_separate_targets(published: Published) -> None:
    web = published.rows().filter(pl.col("domain") == "web")
    submits = [
        row
        for row in web.iter_rows(named=True)
        if row["action"]["name"] == "click"
        and "add_review" in json.loads(row["observation"]["meta"]).get("url", "")
    ]
    tasks = {row["task"] for row in submits}
    assert len(tasks) == 2, tasks
    assert all(row["curation"]["target"] for row in submits)


def test_action_error_means_one_thing_in_every_domain(published: Published) -> None:
    rows = published.rows()
    mcp = rows.filter(pl.col("domain") == "mcp")
    flagged = [
        row
        for row in mcp.iter_rows(named=True)
        if json.loads(row["next_observation"]["meta"]).get("is_error")
    ]
    assert flagged and all(row["action_error"].startswith("tool error") for row in flagged)
    for domain in ("terminal", "swe"):
        for row in rows.filter(pl.col("domain") == domain).iter_rows(named=True):
            code = json.loads(row["next_observation"]["meta"]).get("exit_code")
            if code not in (None, 0):
                assert row["action_error"] == f"exit status {code}"
    assert rows.filter(pl.col("domain") == "terminal")["action_error"].is_not_null().any()
    summary = summarize(str(published.dist))
    assert summary["action_error_rate"] == pytest.approx(rows["action_error"].is_not_null().mean())
    stats = json.loads((published.corpus / "stats.json").read_text())
    labelled = stats["total"]["labelled"].get("error_episode", 0)
    assert labelled == sum(
        len(steps)
        for steps in episode_rows(rows).values()
        if sum(r["action_error"] is not None for r in steps) / len(steps) > 0.5
    )


def test_an_empty_result_is_a_kept_labelled_state_and_a_target(published: Published) -> None:
    rows = published.rows()
    empty = rows.filter(pl.col("next_observation").struct.field("text").str.strip_chars() == "")
    assert empty.height  # the swe replay lists a new, empty directory
    for row in empty.iter_rows(named=True):
        assert "empty_or_truncated" in row["curation"]["labels"] and row["curation"]["target"]
        following = rows.filter(
            (pl.col("episode_id") == row["episode_id"]) & (pl.col("step") == row["step"] + 1)
        )
        assert following.height == 1 and following["curation"][0]["target"]


EMAIL = re.compile(r"[\w.+-]+@([\w-]+(?:\.[\w-]+)+)")


def people_scrubbed(text: str) -> str:
    """``text`` with the e-mail addresses of real domains (not RFC 2606's) replaced."""
    return EMAIL.sub(lambda m: m.group(0) if is_reserved_domain(m.group(1)) else "<EMAIL>", text)


def test_scrubbing_replaces_only_real_addresses_in_real_text(published: Published) -> None:
    # The environments hold no secrets; their text does hold maintainers' addresses (Debian
    # package pages, a setup.py), versions, paths, hashes and ids, which must stay as they are.
    inputs = {row["id"]: row for row in published.input_rows().iter_rows(named=True)}
    scrubbed = 0
    for row in published.rows().iter_rows(named=True):
        before = inputs[row["id"]]
        for field in ("observation", "next_observation"):
            text = before[field]["text"]
            assert row[field]["text"] == people_scrubbed(text), row["id"]
            scrubbed += row[field]["text"] != text
        assert row["action"]["text"] == people_scrubbed(before["action"]["text"])
    assert scrubbed  # the fixture's search and swe rows name real maintainers


def test_exports_give_one_bounded_row_per_target_in_which_the_environment_speaks(
    published: Published,
) -> None:
    rows = published.rows()
    targets = rows.filter(pl.col("curation").struct.field("target"))
    assert 0 < targets.height < rows.height
    by_id = {row["id"]: row for row in rows.iter_rows(named=True)}
    agentworld, openai = published.export("agentworld"), published.export("openai")
    assert sorted(r["transition_id"] for r in agentworld) == sorted(targets["id"])
    assert sorted(r["transition_id"] for r in openai) == sorted(targets["id"])
    for line in agentworld:
        row = by_id[line["transition_id"]]
        assert line["instruction"]  # the task, or what an exploring agent was doing
        target = line["response"][-1]
        error = row["action_error"]
        expected = (f"{ERROR_PREFIX}{error}\n" if error else "") + OBSERVATION_HEADER
        assert target == f"{expected}\n{row['next_observation']['text']}"
        history = line["prompt"][:-1] + line["response"][:-1]
        assert sum(estimate_tokens(text) for text in history) <= DEFAULT_HISTORY_TOKENS
        # no state twice: a response is never repeated as the next prompt's state
        for response, prompt in zip(line["response"], line["prompt"][1:], strict=False):
            state = response.split(f"{OBSERVATION_HEADER}\n", 1)[1]
            assert not state.strip() or state not in prompt
    for line in openai:
        assert line["messages"][-1]["role"] == "assistant"
        assert not any(m.get("tool_calls") or m["role"] == "tool" for m in line["messages"])


def test_the_card_and_inspect_count_rows_and_training_targets(published: Published) -> None:
    rows = published.rows()
    targets = int(rows["curation"].struct.field("target").sum())
    card = (published.dist / "README.md").read_text()
    assert f"- Rows: {rows.height:,} (training targets: {targets:,})" in card
    assert summarize(str(published.dist))["targets"] == targets
    everything = load_dataset(str(published.dist), "all", split="train")
    assert len(everything.filter(lambda row: row["curation"]["target"])) == targets
