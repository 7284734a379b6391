"""Model usage totals wherever a user looks, and the check of a policy config's endpoint.

One real llm run of the terminal domain against the stand-in model server (a real HTTP
server speaking OpenAI's protocol; the real container runs the commands), with prices so the
cost is known: the collection summary, ``worldtrace inspect`` of the run and of its published
folder, and the dataset card all show the totals the stand-in reported. A script run shows
none. ``worldtrace doctor --policy-config`` says the model answers, or why not.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from tests.collecting import invoke
from tests.llm_collecting import worldtrace_here
from tests.llm_server import MODEL, StandInModelServer
from tests.prefect_server import free_port
from worldtrace.collectors.llm.params import Prices
from worldtrace.flows.cli import app

TASK = "organize-downloads"
PRICES = {"prompt": 3.0, "completion": 15.0, "cached": 0.3}
KEY = "sk-doctor-never-printed-41c7"
WIDE = {"COLUMNS": "250"}
"""Rich tables as wide as their rows: no cell is folded onto two lines."""


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """One command per episode (a different one per seed), then DONE."""
    if any(message.get("role") == "assistant" for message in body["messages"]):
        return {"content": "DONE"}
    command = "ls ~/work/downloads" if body.get("seed", 0) % 2 else "ls -la ~/work/downloads"
    return {"content": f"{command}<Enter>"}


@dataclass
class LLMRun:
    """The llm run, what the stand-in sent, and what the commands printed."""

    run_dir: Path
    folder: Path
    completions: list[dict[str, Any]]
    collect_output: str


def _collect(folder: Path, prefect_url: str, *args: str) -> str:
    """``worldtrace collect terminal ARGS`` against the test server, in this process (what it
    prints is the command's, not its process's: tests/llm_collecting.py)."""
    env = WIDE | {"WORLDTRACE_LOG_DIR": str(folder / "logs")}
    result = worldtrace_here(prefect_url, "collect", "terminal", *args, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def llm_run(
    tmp_path_factory: pytest.TempPathFactory, prefect_server: str, terminal_image: str
) -> Iterator[LLMRun]:
    """Two episodes of the llm policy with prices, curated and published."""
    folder = tmp_path_factory.mktemp("llm-usage")
    config = folder / "llm.yaml"
    params = {"prices": PRICES, "max_retries": 2}
    config.write_text(yaml.safe_dump({"max_steps": 6, "policy": {"params": params}}))
    with StandInModelServer(then=_reply) as server:
        output = _collect(
            folder,
            prefect_server,
            "--policy",
            "llm",
            "--base-url",
            server.url,
            "--task",
            TASK,
            "--episodes",
            "2",
            "--config",
            str(config),
            "--out",
            str(folder / "runs"),
            "--run-name",
            "llm",
        )
        completions = list(server.completions)
    run_dir = folder / "runs" / "llm"
    invoke("curate", str(run_dir), "--out", str(folder / "corpus"))
    invoke("publish", str(folder / "corpus"), "--to", str(folder / "dist"))
    yield LLMRun(run_dir, folder, completions, output)


def _expected(run: LLMRun) -> dict[str, Any]:
    """The totals, from what the stand-in reported (model time: from the episodes table)."""
    usages = [completion["usage"] for completion in run.completions]
    prices = Prices(**PRICES)
    episodes = pl.read_parquet(run.run_dir / "episodes.parquet")
    return {
        "episodes": 2,
        "calls": len(usages),
        "prompt": sum(usage["prompt_tokens"] for usage in usages),
        "completion": sum(usage["completion_tokens"] for usage in usages),
        "cost": sum(
            prices.cost_usd(usage["prompt_tokens"], usage["completion_tokens"], 0)
            for usage in usages
        ),
        "latency": episodes["usage"].struct.field("latency_s").sum(),
    }


def _cells(text: str, first: str) -> list[str]:
    """The cells of the rich-table or markdown row of ``text`` that starts with ``first``."""
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.replace("┃", "│").replace("|", "│").split("│")]
        cells = [cell for cell in cells if cell]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row starting with {first!r} in:\n{text}")


def _usage_row(expected: dict[str, Any]) -> list[str]:
    """The model usage row per model and domain, as inspect and the card write it."""
    return [
        MODEL,
        "terminal",
        "2",
        f"{expected['calls']:,}",
        f"{expected['prompt']:,}",
        f"{expected['completion']:,}",
        "0",
        "0",
        f"{expected['latency']:,.2f}",
        f"{expected['cost']:,.6f}",
    ]


def test_the_collection_summary_totals_the_model_calls(llm_run: LLMRun) -> None:
    expected = _expected(llm_run)
    # Both episodes ran their command and ended with DONE: two calls each.
    assert expected["calls"] == 4 and expected["prompt"] > 0 and expected["cost"] > 0
    output = llm_run.collect_output
    assert _cells(output, "model calls") == ["model calls", "4"]
    assert _cells(output, "tokens") == [
        "tokens",
        f"{expected['prompt']:,} prompt, {expected['completion']:,} completion, "
        "0 cached, 0 reasoning",
    ]
    assert _cells(output, "model time") == ["model time", f"{expected['latency']:,.2f} s"]
    assert _cells(output, "cost") == ["cost", f"{expected['cost']:,.6f} USD"]


def test_inspect_shows_the_usage_of_the_run_and_of_its_published_folder(
    llm_run: LLMRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", WIDE["COLUMNS"])
    row = _usage_row(_expected(llm_run))
    for folder in (llm_run.run_dir, llm_run.folder / "corpus", llm_run.folder / "dist"):
        output = invoke("inspect", str(folder))
        assert "Model usage" in output, folder
        assert _cells(output, MODEL) == row, folder


def test_the_card_has_a_model_usage_section(llm_run: LLMRun) -> None:
    card = (llm_run.folder / "dist" / "README.md").read_text()
    section = card.split("## Model usage", 1)[1].split("\n## ", 1)[0]
    assert _cells(section, MODEL) == _usage_row(_expected(llm_run))
    # The schema table documents the column each row's usage is in.
    assert "| `usage.prompt_tokens` | int64" in card
    assert "its `usage`" in card


def test_a_script_run_shows_no_model_usage(
    tmp_path: Path, prefect_server: str, terminal_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = _collect(
        tmp_path,
        prefect_server,
        "--policy",
        "script",
        "--task",
        TASK,
        "--episodes",
        "1",
        "--out",
        str(tmp_path / "runs"),
        "--run-name",
        "script",
    )
    assert "transitions" in output and "model calls" not in output and "tokens" not in output
    run_dir = tmp_path / "runs" / "script"
    monkeypatch.setenv("COLUMNS", WIDE["COLUMNS"])
    assert "Model usage" not in invoke("inspect", str(run_dir))
    invoke("publish", str(run_dir), "--to", str(tmp_path / "dist"), "--uncurated")
    assert "Model usage" not in invoke("inspect", str(tmp_path / "dist"))
    card = (tmp_path / "dist" / "README.md").read_text()
    assert "## Model usage" not in card and "## Per-domain statistics" in card


def _doctor(config: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """``worldtrace doctor --policy-config CONFIG`` with a key planted; its status and output."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    result = CliRunner().invoke(app, ["doctor", "--policy-config", str(config)])
    output = result.output  # stdout and stderr, as a terminal shows them
    assert KEY not in output
    return result.exit_code, output


def _policy_config(tmp_path: Path, params: dict[str, Any], as_block: bool = False) -> Path:
    """A collection config holding ``params`` (or the policy block alone)."""
    block = {"kind": "llm", "params": params}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(block if as_block else {"domain": "terminal", "policy": block}))
    return path


def test_doctor_says_the_configured_model_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with StandInModelServer() as server:
        named = _policy_config(tmp_path, {"base_url": server.url, "model": MODEL})
        status, output = _doctor(named, monkeypatch)
        assert status == 0, output
        assert output == f"ok: {MODEL} answers at {server.url}\n"
        # A policy block without a model: the first model listed.
        first = _policy_config(tmp_path, {"base_url": server.url}, as_block=True)
        status, output = _doctor(first, monkeypatch)
        assert status == 0, output
        assert output.startswith(f"ok: {MODEL} answers at {server.url} (the first model")
        # One model list per check, each with the key (which only the server sees).
        assert server.authorizations == [f"Bearer {KEY}"] * 2
        assert server.chat_requests() == []


def test_doctor_refuses_a_model_the_endpoint_does_not_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with StandInModelServer() as server:
        config = _policy_config(tmp_path, {"base_url": server.url, "model": "no/such-model"})
        status, output = _doctor(config, monkeypatch)
    assert status == 2, output
    assert "does not list the model 'no/such-model'" in output and MODEL in output


def test_doctor_says_a_closed_port_does_not_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    status, output = _doctor(
        _policy_config(tmp_path, {"base_url": url, "model": MODEL}), monkeypatch
    )
    assert status == 1, output
    assert f"{url} does not answer" in output and "APIConnectionError" in output
