"""What the llm policy's end-to-end tests share: collect against the stand-in, check the run.

Every domain's test (tests/<domain>/test_<domain>_llm.py, tests/collectors/test_llm_policy.py)
scripts the stand-in model server (tests/llm_server.py) with its domain's replies, runs
``worldtrace collect`` in a process of its own (or, where the process is not the subject, in
the test's: :func:`collect_here`) against the session's Prefect server
(tests/prefect_server.py), then checks what only its domain can: what the environment did
with the actions and what the model was offered. What any domain's run must show is checked
here: each row's usage is what the stand-in reported for its call and the episode sums them
plus the closing call; the first request holds the system prompt, the task and the first
observation; replies that are no action leave the environment untouched, and the episode
ends truncated with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import yaml
from datasets import Dataset

from tests import in_process
from tests.collecting import curate_and_publish, export_both, rows_of
from tests.llm_server import MODEL, Reply, Responder, StandInModelServer
from tests.prefect_server import client_env
from worldtrace.collectors.base import INVALID_REPLY
from worldtrace.collectors.recorder import read_episode
from worldtrace.schemas import Episode, Transition, from_row

Counts = tuple[int, int]
"""A call's prompt and completion tokens, as the stand-in reports them."""

NOT_JSON = "{not json"
"""Tool-call arguments a model may send that are not JSON."""


def usage(prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    """A server's ``usage`` block with these counts (cached and reasoning tokens inside them)."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def llm_config(
    domain: str,
    folder: Path,
    run_name: str,
    *,
    tasks: list[str] | None = None,
    params: dict[str, Any] | None = None,
    environment: dict[str, Any] | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """A collect config of one llm episode into ``folder/runs/run_name``.

    ``settings`` are further top-level keys (``max_steps``, ``step_timeout_s``); without
    ``tasks`` the domain's plan picks them.
    """
    policy: dict[str, Any] = {"kind": "llm", "params": params or {}}
    if tasks is not None:
        policy["tasks"] = tasks
    config = {
        "domain": domain,
        "episodes": 1,
        "out": str(folder / "runs"),
        "run_name": run_name,
        **settings,
        "policy": policy,
    }
    if environment is not None:
        config["environment"] = environment
    return config


def run_collect(
    folder: Path,
    prefect_server: str,
    config: dict[str, Any],
    *args: str,
    extra_env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Write ``config`` as ``folder/<run_name>.yaml`` and run ``worldtrace collect`` on it.

    The run is a process of its own pointed at the session's Prefect server (no temporary
    API); a stand-in model server in this process is reached over loopback. ``args`` are
    further command-line options; the process is returned whatever its exit code.
    """
    path = _config_file(folder, config)
    command = [sys.executable, "-m", "worldtrace.flows.cli", "collect", "--config", str(path)]
    return subprocess.run(
        [*command, *args],
        env=client_env(prefect_server) | (extra_env or {}),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _config_file(folder: Path, config: dict[str, Any]) -> Path:
    path = folder / f"{config['run_name']}.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True))
    return path


def collect_here(
    folder: Path,
    prefect_server: str,
    config: dict[str, Any],
    *args: str,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """:func:`run_collect` in this process (:func:`worldtrace_here`)."""
    path = _config_file(folder, config)
    return worldtrace_here(prefect_server, "collect", "--config", str(path), *args, env=extra_env)


def worldtrace_here(
    prefect_server: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``worldtrace ARGS`` in this process (tests/in_process.py), its result as a process's.

    What a process would print through handlers made before the command ran (Prefect's
    console) is not in the returned stderr: a test about what the process prints runs it in a
    process of its own (:func:`run_collect`).
    """
    result = in_process.worldtrace_here(prefect_server, *args, env=env)
    return subprocess.CompletedProcess(
        ["worldtrace", *args], result.exit_code, result.stdout, result.stderr
    )


@dataclass(frozen=True)
class LLMRun:
    """A collected run of one llm episode, read back."""

    run_dir: Path
    rows: list[Transition]
    """The episode's transitions, in step order."""
    episode: Episode
    """The run's only row of the episodes table, validated."""
    requests: list[dict[str, Any]]
    """The chat requests the stand-in received, in order."""


def read_run(run_dir: Path, domain: str, requests: Sequence[dict[str, Any]] = ()) -> LLMRun:
    """Read back a run of one episode: its rows of ``domain`` and its episode row."""
    rows = sorted(rows_of(run_dir, domain), key=lambda row: row.step)
    (episode,) = pl.read_parquet(run_dir / "episodes.parquet").to_dicts()
    return LLMRun(run_dir, rows, from_row(Episode, episode), list(requests))


def collect_llm(
    folder: Path,
    prefect_server: str,
    model: StandInModelServer,
    domain: str,
    run_name: str,
    *,
    args: Sequence[str] = (),
    **config: Any,
) -> LLMRun:
    """Collect one llm episode with ``model`` as the endpoint; fail the test if the run fails.

    The endpoint is given the way a user types it (``--policy llm --base-url``); ``config``
    goes to :func:`llm_config` (tasks, params, environment, settings), ``args`` after it on the
    command line. Called inside the ``with`` block of ``model``, which records the requests.
    In this process (:func:`collect_here`): the domains' tests check rows and requests, not
    what a process prints.
    """
    done = collect_here(
        folder,
        prefect_server,
        llm_config(domain, folder, run_name, **config),
        *("--policy", "llm", "--base-url", model.url, *args),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return read_run(folder / "runs" / run_name, domain, model.chat_requests())


def assert_usage_as_reported(
    run: LLMRun, counts: Sequence[Counts], closing: Counts, *, cached: int = 0, reasoning: int = 0
) -> None:
    """Each row's usage is what the stand-in reported for its call, one call a row; the episode
    sums them plus the closing call (the reply that ended it made no row).

    ``counts`` are the rows' prompt and completion tokens, ``closing`` the closing call's;
    every call reported ``cached`` and ``reasoning`` tokens.
    """
    for row, (prompt, completion) in zip(run.rows, counts, strict=True):
        assert row.usage is not None
        assert (row.usage.model, row.usage.calls) == (MODEL, 1)
        assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (prompt, completion)
        assert (row.usage.cached_tokens, row.usage.reasoning_tokens) == (cached, reasoning)
        assert row.usage.latency_s > 0
    calls = len(counts) + 1
    total = run.episode.usage
    assert total is not None and total.calls == calls
    assert total.prompt_tokens == sum(prompt for prompt, _ in counts) + closing[0]
    assert total.completion_tokens == sum(completion for _, completion in counts) + closing[1]
    assert (total.cached_tokens, total.reasoning_tokens) == (cached * calls, reasoning * calls)


def assert_completed(
    run: LLMRun,
    *,
    instruction: str,
    system: str,
    counts: Sequence[Counts],
    closing: Counts,
    cached: int = 0,
    reasoning: int = 0,
) -> None:
    """The model's actions all worked and its closing reply completed the episode.

    Every row records the model as its policy, the task and what its call cost
    (:func:`assert_usage_as_reported`); the model was asked once a row and once more; the
    first request showed the domain's ``system`` prompt, the task and the first observation.
    """
    rows, episode = run.rows, run.episode
    assert [row.action_error for row in rows] == [None] * len(counts)
    for row in rows:
        assert row.task == instruction
        assert (row.policy.kind, row.policy.version) == ("llm", MODEL)
    assert_usage_as_reported(run, counts, closing, cached=cached, reasoning=reasoning)
    assert (episode.status, episode.length, episode.error) == ("completed", len(counts), None)
    assert len(run.requests) == len(counts) + 1
    assert run.requests[0]["messages"][:3] == [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Instruction: {instruction}"},
        {"role": "user", "content": rows[0].observation.text},
    ]


def assert_gave_up(run: LLMRun, *, after: int = 0, invalid: int = 2) -> None:
    """After ``after`` steps, the model's ``invalid`` replies in a row were no action.

    Each is an ``invalid_reply`` row that says why, with the environment untouched (the state
    after is the state the model was shown, and no step time); the last row and the episode
    are truncated with the reason; the model was shown its first rejected reply and why, and
    was not asked again after the last.
    """
    rows, episode = run.rows, run.episode
    assert len(rows) == after + invalid
    rejected = rows[after:]
    assert [row.action.name for row in rejected] == [INVALID_REPLY] * invalid
    for row in rejected:
        assert row.action_error
        assert row.next_observation.text == row.observation.text
        assert row.timing.step_latency_s == 0
        assert row.policy.kind == "llm" and row.usage is not None
    assert [row.truncated for row in rows] == [False] * (len(rows) - 1) + [True]
    assert (episode.status, episode.length) == ("truncated", len(rows))
    assert episode.error == f"the model's last {invalid} replies in a row were no action"
    assert episode.usage is not None and episode.usage.calls == len(rows)
    assert len(run.requests) == len(rows)
    first = rows[after]
    assert run.requests[after + 1]["messages"][-2:] == [
        {"role": "assistant", "content": first.action.text},
        {
            "role": "user",
            "content": f"The action failed: {first.action_error}\n\n{first.observation.text}",
        },
    ]


def _costing(reply: Reply | Responder, counts: Counts, cached: int, reasoning: int) -> Responder:
    """``reply`` with the usage the stand-in reports for it."""
    block = usage(*counts, cached=cached, reasoning=reasoning)
    if callable(reply):
        return lambda body: {**reply(body), "usage": block}
    return lambda body: {**reply, "usage": block}


def collect_completed(
    folder: Path,
    prefect_server: str,
    domain: str,
    replies: Sequence[Reply | Responder],
    counts: Sequence[Counts],
    closing: tuple[Reply, Counts],
    *,
    instruction: str,
    system: str,
    cached: int = 0,
    reasoning: int = 0,
    **config: Any,
) -> LLMRun:
    """Collect an episode whose model answers ``replies`` then ``closing``; check it completed.

    Each reply (or function of the request) is sent with the usage of its ``counts``, the
    closing one with its own; the run is checked by :func:`assert_completed`.
    """
    scripted = [
        _costing(reply, count, cached, reasoning)
        for reply, count in zip(replies, counts, strict=True)
    ]
    last, last_counts = closing
    then = _costing(last, last_counts, cached, reasoning)
    with StandInModelServer(scripted, then=then) as model:
        run = collect_llm(folder, prefect_server, model, domain, "valid", **config)
    assert_completed(
        run,
        instruction=instruction,
        system=system,
        counts=counts,
        closing=last_counts,
        cached=cached,
        reasoning=reasoning,
    )
    return run


def collect_tool_calls(
    folder: Path,
    prefect_server: str,
    domain: str,
    calls: list[dict[str, Any]],
    counts: Sequence[Counts],
    closing: tuple[str, Counts],
    **config: Any,
) -> LLMRun:
    """Collect an episode of a tool domain whose model makes ``calls``, then ends with the
    text ``closing`` (a reply without a tool call); check it as :func:`collect_completed` does.

    The actions are the calls; the second request holds the first call, then its result as
    the tool's message.
    """
    replies = [{"tool_calls": [call]} for call in calls]
    text, last_counts = closing
    run = collect_completed(
        folder, prefect_server, domain, replies, counts, ({"content": text}, last_counts), **config
    )
    assert [{"name": r.action.name, "arguments": r.action.arguments} for r in run.rows] == calls
    assistant, result = run.requests[1]["messages"][3:5]
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == calls[0]["name"]
    assert json.loads(call["function"]["arguments"]) == calls[0]["arguments"]
    assert result == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": run.rows[0].next_observation.text,
    }
    return run


def assert_tools_offered(run: LLMRun, tools: Sequence[dict[str, Any]]) -> None:
    """The first request offered ``tools`` (MCP-style ``{name, description, inputSchema}``,
    as the environment defines them) as function definitions, in their order."""
    offered = [tool["function"] for tool in run.requests[0]["tools"]]
    assert [tool["name"] for tool in offered] == [tool["name"] for tool in tools]
    assert [tool["parameters"] for tool in offered] == [tool["inputSchema"] for tool in tools]
    described = [str(tool.get("description") or "") for tool in tools]
    assert [tool["description"] for tool in offered] == described


def collect_a_call_not_json(
    folder: Path, prefect_server: str, domain: str, tool: str, counts: Counts, **config: Any
) -> LLMRun:
    """Collect an episode whose model calls ``tool`` with arguments that are not JSON, again
    and again: two invalid replies (``max_invalid_replies``), checked by :func:`assert_gave_up`.

    Each row keeps the call as sent and says why it is no action; nothing reached the
    environment.
    """
    broken = {"tool_calls": [{"name": tool, "arguments": NOT_JSON}], "usage": usage(*counts)}
    params = {"max_invalid_replies": 2}
    with StandInModelServer(then=broken) as model:
        run = collect_llm(
            folder, prefect_server, model, domain, "malformed", params=params, **config
        )
    assert_gave_up(run)
    for row in run.rows:
        assert json.loads(row.action.text) == {"name": tool, "arguments": NOT_JSON}
        assert row.action_error is not None
        assert row.action_error.startswith(f"the arguments of {tool!r} are not JSON")
        assert row.usage is not None and row.usage.prompt_tokens == counts[0]
    return run


def collect_invalid_replies(
    folder: Path,
    prefect_server: str,
    domain: str,
    replies: list[str],
    then: str,
    **config: Any,
) -> LLMRun:
    """Collect an episode of a text domain whose model's ``replies`` are no action, two in a
    row (``max_invalid_replies``); ``then`` would be its next reply, never asked for. Checked
    by :func:`assert_gave_up`; each row keeps its reply as sent.
    """
    scripted = [{"content": reply} for reply in replies]
    params = {"max_invalid_replies": 2}
    with StandInModelServer(scripted, then={"content": then}) as model:
        run = collect_llm(folder, prefect_server, model, domain, "bad", params=params, **config)
    assert_gave_up(run)
    assert [row.action.text for row in run.rows] == replies
    return run


def assert_replies_kept(run: LLMRun, replies: list[str], closing: str = "DONE") -> None:
    """A text domain's run kept each reply as sent (prose around the action included) in its
    raw record, the closing one at the end; the last request replayed each action and showed
    the state after the last."""
    (path,) = (run.run_dir / "raw" / "episodes").glob("*.jsonl")
    events = list(read_episode(path))
    steps = [event for event in events if event.type == "step"]
    assert [step.reply["content"] for step in steps] == replies
    assert events[-1].type == "end" and events[-1].reply["content"] == closing
    last = run.requests[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "assistant"] == [
        row.action.text for row in run.rows
    ]
    assert last[-1]["content"] == run.rows[-1].next_observation.text


def publish_and_export(run: LLMRun, folder: Path, domain: str) -> tuple[Dataset, list[dict]]:
    """Curate, publish and export the run (tests/collecting.py); every row is published and
    the exported rows are the run's. Return the published dataset and the agentworld rows."""
    dataset = curate_and_publish(run.run_dir, folder, domain)
    assert dataset.num_rows == len(run.rows)
    assert set(dataset["domain"]) == {domain}
    agentworld, _ = export_both(folder / "dist", folder, domain, dataset)
    assert {row["transition_id"] for row in agentworld} <= {row.id for row in run.rows}
    return dataset, agentworld
