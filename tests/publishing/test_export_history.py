"""Exports bound a row's history by a token budget and a turn cap, oldest turns first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.records import make_transition
from worldtrace.exports import DEFAULT_HISTORY_TOKENS, export_agentworld, export_openai
from worldtrace.exports.prompts import parse_response
from worldtrace.exports.tokens import estimate_tokens, tokenizer_counter
from worldtrace.schemas import Action, EnvironmentRef, Observation, PolicyRef, Transition, to_table
from worldtrace.schemas.errors import ConfigError

WEB = EnvironmentRef(
    name="web/trac", version="chromium-131", components={"trac": "1.6"}, config_hash="7a"
)


def _axtree(page: int, rows: int = 40) -> str:
    """A BrowserGym-style accessibility tree of a Trac report page (about 100 bytes a row)."""
    lines = [
        f"URL: http://trac.localhost/report/{page}",
        f"Title: {{{page}}} Active Tickets - Trac",
        f"RootWebArea '{{{page}}} Active Tickets - Trac', focused",
    ]
    for i in range(rows):
        bid = 100 * page + i
        lines.append(
            f"\t[{bid}] link '#{bid}: crash when saving a milestone with an empty due date', "
            f"url='http://trac.localhost/ticket/{bid}'"
        )
    return "\n".join(lines) + "\n"


def _web_episode(length: int, rows: int = 40, last_rows: int | None = None) -> list[Transition]:
    steps = []
    for k in range(length):
        next_rows = last_rows if last_rows is not None and k == length - 1 else rows
        steps.append(
            make_transition(
                k,
                "ep-web",
                domain="web",
                env=WEB,
                task="Find the oldest ticket about milestones",
                policy=PolicyRef(kind="script", name="trac-tasks", version="1"),
                observation=Observation(format="axtree", text=_axtree(k, rows)),
                action=Action(
                    name="click",
                    arguments={"bid": str(100 * k + 1)},
                    text=f"click('{100 * k + 1}')",
                ),
                next_observation=Observation(format="axtree", text=_axtree(k + 1, next_rows)),
            )
        )
    return steps


def _publish(root: Path, records: list[Transition]) -> Path:
    folder = root / "data" / records[0].domain
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_table(records, Transition), folder / "train-0.parquet")
    return root


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return {row["transition_id"]: row for row in rows}


def _history_tokens(row: dict[str, Any], count: Any = estimate_tokens) -> int:
    """The tokens of an agentworld row's history: every turn shown but the target."""
    return sum(count(text) for text in row["prompt"][:-1] + row["response"][:-1])


def test_history_is_trimmed_oldest_first_to_the_token_budget(tmp_path: Path) -> None:
    steps = _web_episode(12)
    pub = _publish(tmp_path / "pub", steps)
    budget = 5_000
    export_agentworld(pub, tmp_path / "aw", history_tokens=budget)
    rows = _rows(tmp_path / "aw" / "web_train.jsonl")
    # The same windows without a budget, for every number of past turns.
    unbounded = {}
    for n in range(len(steps)):
        export_agentworld(pub, tmp_path / f"aw{n}", history=n, history_tokens=None)
        unbounded[n] = _rows(tmp_path / f"aw{n}" / "web_train.jsonl")
    trimmed_some = False
    for step in steps:
        row = rows[step.id]
        trimmed = row["trimmed_turns"]
        shown = step.step - trimmed  # past turns shown
        assert row["total_turns"] == shown + 1
        assert _history_tokens(row) <= budget
        # As many past turns as fit: the window with one more turn would not.
        assert row == {**unbounded[shown][step.id], "id": row["id"]}
        if trimmed:
            trimmed_some = True
            assert _history_tokens(unbounded[shown + 1][step.id]) > budget
        # The first turn shown keeps its episode number and restates task and state.
        assert row["prompt"][0].startswith(
            f"### Turn {trimmed + 1}\n**Task:** Find the oldest ticket about milestones\n"
        )
        assert steps[trimmed].observation.text in row["prompt"][0]
        assert parse_response(row["response"][-1]) == (step.next_observation.text, None)
    assert trimmed_some
    assert rows[steps[-1].id]["trimmed_turns"] > 0


def test_rows_are_bounded_by_default_and_the_target_is_always_whole(tmp_path: Path) -> None:
    # 40 pages of about 12,000 bytes, and a last page of about 60,000 bytes (20,000 estimated
    # tokens: more than the whole budget).
    steps = _web_episode(40, rows=120, last_rows=600)
    pub = _publish(tmp_path / "pub", steps)
    export_agentworld(pub, tmp_path / "aw")
    export_openai(pub, tmp_path / "oa")
    rows = _rows(tmp_path / "aw" / "web_train.jsonl")
    lines = _rows(tmp_path / "oa" / "web.jsonl")
    assert len(rows) == len(lines) == 40
    for step in steps:
        row, line = rows[step.id], lines[step.id]
        assert _history_tokens(row) <= DEFAULT_HISTORY_TOKENS
        # Everything the row holds but its target turn and system prompt is within budget.
        assert len(json.dumps(row["prompt"] + row["response"])) < (
            3 * DEFAULT_HISTORY_TOKENS + 2 * len(step.next_observation.text) + 1_000
        )
        assert parse_response(row["response"][-1]) == (step.next_observation.text, None)
        assert parse_response(line["messages"][-1]["content"]) == (
            step.next_observation.text,
            None,
        )
        # Both formats hold the same window.
        assert line["trimmed_turns"] == row["trimmed_turns"]
        assert [m["content"] for m in line["messages"][1::2]] == row["prompt"]
        assert [m["content"] for m in line["messages"][2::2]] == row["response"]
    last = rows[steps[-1].id]
    assert last["trimmed_turns"] >= 30
    assert len(last["response"][-1]) > 3 * DEFAULT_HISTORY_TOKENS


def test_no_history_budget_gives_single_turn_rows_and_the_turn_cap_still_works(
    tmp_path: Path,
) -> None:
    steps = _web_episode(6)
    pub = _publish(tmp_path / "pub", steps)
    export_openai(pub, tmp_path / "oa0", history_tokens=0)
    for step in steps:
        line = _rows(tmp_path / "oa0" / "web.jsonl")[step.id]
        assert len(line["messages"]) == 3 and line["trimmed_turns"] == step.step
        user = line["messages"][1]["content"]
        header = "Initial" if step.step == 0 else "Current"
        assert f"**{header} Observation:**\n{step.observation.text}" in user
    # --history caps the turns; the budget, when smaller, trims further.
    export_agentworld(pub, tmp_path / "cap", history=2)
    export_agentworld(pub, tmp_path / "both", history=4, history_tokens=2_000)
    cap, both = (
        _rows(tmp_path / "cap" / "web_train.jsonl"),
        _rows(tmp_path / "both" / "web_train.jsonl"),
    )
    for step in steps:
        assert cap[step.id]["trimmed_turns"] == max(0, step.step - 2)
        assert both[step.id]["total_turns"] <= 5
        assert _history_tokens(both[step.id]) <= 2_000
    assert both[steps[-1].id]["total_turns"] < 5
    with pytest.raises(ConfigError, match="history_tokens"):
        export_agentworld(pub, tmp_path / "bad", history_tokens=-1)


def _word_tokenizer(path: Path) -> Path:
    """A local tokenizer.json counting words and punctuation (nothing is downloaded)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(vocab={"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(path))
    return path


def test_tokens_are_estimated_or_counted_by_a_local_tokenizer(tmp_path: Path) -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abc") == 1 and estimate_tokens("abcd") == 2
    assert estimate_tokens("é" * 3) == 2  # bytes of UTF-8, not characters
    words = tokenizer_counter(_word_tokenizer(tmp_path / "tokenizer.json"))
    assert words("click('12') and more") == 6
    # Long single-word states: many estimated tokens, few real ones for this tokenizer.
    steps = [
        make_transition(
            k,
            "ep-long",
            observation=Observation(format="terminal-screen", text=f"s{k}" * 1_500),
            next_observation=Observation(format="terminal-screen", text=f"s{k + 1}" * 1_500),
        )
        for k in range(5)
    ]
    pub = _publish(tmp_path / "pub", steps)
    export_agentworld(pub, tmp_path / "est", history_tokens=500)
    export_agentworld(
        pub, tmp_path / "tok", history_tokens=500, tokenizer=tmp_path / "tokenizer.json"
    )
    estimated = _rows(tmp_path / "est" / "terminal_train.jsonl")
    counted = _rows(tmp_path / "tok" / "terminal_train.jsonl")
    for step in steps:
        assert estimated[step.id]["trimmed_turns"] == step.step
        assert counted[step.id]["trimmed_turns"] == 0
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json"):
        export_agentworld(pub, tmp_path / "x", tokenizer=tmp_path / "bad.json")


def test_cli_history_options(tmp_path: Path) -> None:
    from worldtrace.flows.cli import EXPORT_HISTORY_TOKENS, app

    assert EXPORT_HISTORY_TOKENS == DEFAULT_HISTORY_TOKENS
    runner = CliRunner()
    help_text = runner.invoke(app, ["export", "--help"], env={"COLUMNS": "200"}).output
    assert "--history-tokens" in help_text and "16384" in help_text
    assert "--tokenizer" in help_text and "3 bytes" in help_text
    steps = _web_episode(4)
    pub = _publish(tmp_path / "pub", steps)
    args = ["export", str(pub), "--format", "agentworld", "--out", str(tmp_path / "o")]
    result = runner.invoke(app, [*args, "--history-tokens", "0"])
    assert result.exit_code == 0, result.output
    assert "web: 4 rows" in result.output
    rows = _rows(tmp_path / "o" / "web_train.jsonl")
    assert [row["trimmed_turns"] for row in rows.values()] == [0, 1, 2, 3]
    tokenizer = _word_tokenizer(tmp_path / "tokenizer.json")
    result = runner.invoke(
        app, [*args, "--history-tokens", "100000", "--tokenizer", str(tokenizer)]
    )
    assert result.exit_code == 0, result.output
    assert [r["trimmed_turns"] for r in _rows(tmp_path / "o" / "web_train.jsonl").values()] == [
        0
    ] * 4
    bad = runner.invoke(app, [*args, "--history-tokens", "-5"])
    assert bad.exit_code == 2 and "history_tokens must be >= 0" in bad.output
