"""Benchmark of the ``llm`` policy: its own cost per step, and whether it limits collection.

Run ``.venv/bin/python benchmarks/llm_policy.py [--rounds R] [--workers 1,8,32] [--quick]``.

Both parts talk to ``tests.llm_server.StandInModelServer``, a real HTTP server on loopback
speaking the chat-completions protocol (no model server can run on these machines), through
the real ``openai`` client. It measures:

1. Per-step overhead. *Ours* is ``LLMPolicy.act`` on the real observations of a recorded
   terminal episode (``tests/data/collected/terminal-explore``, 12 steps, cycled to
   ``--history`` steps): rendering the history, trimming it to the budget, the request through
   ``ModelClient`` (the endpoint bound, tenacity), reading the usage, parsing the reply with the
   terminal's parser, then the step's record: a ``RawStep`` with the call's ``usage`` and
   ``reply`` serialized as the recorder serializes it (``model_dump_json``; the fsync after it
   is the recorder's, paid by every policy, and left out). The *baseline* sends the very same
   request bodies (captured from the stand-in) with a bare ``openai`` client,
   ``client.chat.completions.create(**body)``, and reads the reply's text. The stand-in answers
   both at once with the episode's next recorded action. The two alternate in passes of
   ``--history`` steps inside each round, the first pass of a round taking turns, so that load
   from elsewhere hits both alike. The policy's ``chat.completions.create`` is also timed inside
   its steps: the step minus that call is the policy's own work, free of the difference in
   load between two passes.
2. Throughput: ``run_collection`` (what ``worldtrace collect`` runs, ``--no-normalize``) of the
   terminal domain in real containers with 1, 8 and 32 workers and as many episodes, a
   stand-in that waits 50 ms before each reply, ``concurrency`` equal to the workers, and
   episodes of ``--steps`` quick commands then ``DONE``. The baseline is the same collection with
   the replay policy of the same commands (same task set up and checked, same steps), so the
   ratio says whether the policy (50 ms of model time per step included) is the bottleneck.

Numbers are printed and written to ``benchmarks/results/llm_policy.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import loadavg, log, machine_info, write_report

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.llm_server import MODEL, StandInModelServer  # noqa: E402
from worldtrace.collectors.base import HistoryItem, RejectedReply  # noqa: E402
from worldtrace.collectors.llm.client import NO_KEY  # noqa: E402
from worldtrace.collectors.llm.history import fit  # noqa: E402
from worldtrace.collectors.llm.params import LLMParams  # noqa: E402
from worldtrace.collectors.llm.policy import LLMPolicy  # noqa: E402
from worldtrace.collectors.recorder import now_utc, read_episode  # noqa: E402
from worldtrace.collectors.terminal import TerminalCollector  # noqa: E402
from worldtrace.flows.logs import configure  # noqa: E402
from worldtrace.schemas.raw import RawStart, RawStep  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
RESULTS_FILE = RESULTS_DIR / "llm_policy.json"
EPISODE = ROOT / "tests/data/collected/terminal-explore/raw/episodes/terminal-explore-s000000.jsonl"
TARGET_RATIO = 1.1
MODEL_DELAY_S = 0.05
TASK = "gzip-rotated-logs"
"""The task both throughput collections set up and check (any quick one would do)."""
COMMANDS = (
    "echo hello<Enter>",
    "pwd<Enter>",
    "ls -la<Enter>",
    "date<Enter>",
    "wc -l /etc/passwd<Enter>",
)


def assistant_turns(body: dict[str, Any]) -> int:
    """How many actions the request's history holds (the step the model is asked for)."""
    return sum(message.get("role") == "assistant" for message in body.get("messages", []))


# --------------------------------------------------------------------------- overhead


class RecordedEpisode:
    """A real terminal episode's observations and actions, cycled to any length."""

    def __init__(self, path: Path) -> None:
        events = list(read_episode(path))
        start = events[0]
        assert isinstance(start, RawStart) and start.observation is not None
        steps = [event for event in events if isinstance(event, RawStep)]
        self.observations = [start.observation, *(step.observation for step in steps)]
        self.items = [HistoryItem(step.action, step.observation, step.error) for step in steps]
        self.replies = [step.action.text for step in steps]

    def history(self, length: int) -> list[HistoryItem]:
        """The first ``length`` steps, the recorded ones repeated as often as needed."""
        return [self.items[index % len(self.items)] for index in range(length)]

    def observation(self, step: int) -> dict[str, Any]:
        """What the agent sees before ``step`` (after the step before it)."""
        if step == 0:
            return self.observations[0]
        return self.observations[1 + (step - 1) % len(self.items)]

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """The stand-in's answer: the recorded action of the step it is asked for."""
        return {"content": self.replies[assistant_turns(body) % len(self.replies)]}


def policy_pass(policy: LLMPolicy, episode: RecordedEpisode, length: int) -> list[float]:
    """One episode of ``length`` steps through the policy and the step record; seconds each."""
    policy.reset(seed=7, task=None)
    took: list[float] = []
    for step in range(length):
        history = episode.history(step)
        started = time.perf_counter()
        choice = policy.act(episode.observation(step), history)
        call = policy.last_call()
        if choice is None or isinstance(choice, RejectedReply) or call is None:
            raise RuntimeError(f"step {step}: the policy did not act on a valid reply: {choice!r}")
        record = RawStep(
            step=step,
            action=choice,
            observation=episode.observation(step + 1),
            started_at=now_utc(),
            latency_s=0.01,
            usage=call.usage,
            reply=call.reply,
        )
        line = record.model_dump_json().encode() + b"\n"
        took.append(time.perf_counter() - started)
        if len(line) < 100:
            raise RuntimeError("the step record is implausibly short")
    return took


def bare_pass(client: openai.OpenAI, bodies: Sequence[dict[str, Any]]) -> list[float]:
    """The same requests with a bare client; seconds each."""
    took: list[float] = []
    for body in bodies:
        started = time.perf_counter()
        response = client.chat.completions.create(**body)
        text = response.choices[0].message.content
        took.append(time.perf_counter() - started)
        if not text:
            raise RuntimeError("the bare call got an empty reply")
    return took


def local_costs(policy: LLMPolicy, episode: RecordedEpisode, length: int) -> dict[str, float]:
    """The policy's work without the network, per step: prompt (render + trim) and parse."""
    policy.reset(seed=7, task=None)
    policy._first = episode.observation(0)  # what act() keeps from the first step
    prompt_s: list[float] = []
    parse_s: list[float] = []
    for step in range(length):
        history = episode.history(step)
        started = time.perf_counter()
        fit(policy._fixed_messages(), policy._turns(history), policy.params.history_tokens)
        prompt_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        policy._parse_action(episode.replies[step % len(episode.replies)])
        parse_s.append(time.perf_counter() - started)
    return {
        "prompt_ms": round(statistics.fmean(prompt_s) * 1000, 3),
        "parse_ms": round(statistics.fmean(parse_s) * 1000, 4),
    }


def stand_in(reply: Any) -> StandInModelServer:
    """The stand-in answering every request with ``reply`` (it answers without Nagle's delay)."""
    return StandInModelServer(then=reply)


class TimedCreate:
    """Times the ``chat.completions.create`` the policy's client makes inside each step.

    The step minus that call is the policy's own work, measured within the same step and so
    free of the load that differs between a policy pass and a bare pass.
    """

    def __init__(self, client: openai.OpenAI) -> None:
        self.took: list[float] = []
        self._create = client.chat.completions.create
        client.chat.completions.create = self  # type: ignore[method-assign]

    def __call__(self, **request: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._create(**request)
        finally:
            self.took.append(time.perf_counter() - started)


def measure_overhead(rounds: int, length: int) -> dict[str, Any]:
    """Policy steps against bare calls, alternating passes; ms per step and the ratio."""
    episode = RecordedEpisode(EPISODE)
    collector = TerminalCollector()
    with stand_in(episode.reply) as server:
        params = LLMParams(model=MODEL, base_url=server.url, api_key_env=None)
        policy = LLMPolicy(collector, params)
        bare = openai.OpenAI(
            base_url=server.url,
            api_key=NO_KEY,
            timeout=params.request_timeout_s,
            max_retries=0,
        )
        policy_pass(policy, episode, length)  # warm-up: connections, imports; not counted
        bodies = server.chat_requests()[-length:]
        bare_pass(bare, bodies)
        inside = TimedCreate(policy._client._client)
        ours: list[float] = []
        base: list[float] = []
        rows: list[dict[str, Any]] = []
        for round_index in range(rounds):
            if round_index % 2 == 0:
                round_ours = policy_pass(policy, episode, length)
                round_base = bare_pass(bare, bodies)
            else:
                round_base = bare_pass(bare, bodies)
                round_ours = policy_pass(policy, episode, length)
            ours += round_ours
            base += round_base
            row = {
                "ours_ms": round(statistics.fmean(round_ours) * 1000, 3),
                "bare_ms": round(statistics.fmean(round_base) * 1000, 3),
            }
            row["ratio"] = round(row["ours_ms"] / row["bare_ms"], 3)
            rows.append(row)
            log(f"  round {round_index + 1}/{rounds}: {row}")
        local = local_costs(policy, episode, length)
        prompt_tokens = [
            sum(len(str(message.get("content") or "")) for message in body["messages"])
            for body in bodies
        ]
    ours_ms = statistics.fmean(ours) * 1000
    bare_ms = statistics.fmean(base) * 1000
    inside_ms = statistics.fmean(inside.took) * 1000
    return {
        "steps_per_pass": length,
        "rounds": rounds,
        "ours_ms_per_step": round(ours_ms, 3),
        "bare_ms_per_step": round(bare_ms, 3),
        "ours_median_ms": round(statistics.median(ours) * 1000, 3),
        "bare_median_ms": round(statistics.median(base) * 1000, 3),
        "overhead_ms_per_step": round(ours_ms - bare_ms, 3),
        "ratio": round(ours_ms / bare_ms, 3),
        "ratio_of_medians": round(statistics.median(ours) / statistics.median(base), 3),
        "inside_call_ms_per_step": round(inside_ms, 3),
        "own_ms_per_step": round(ours_ms - inside_ms, 3),
        "ratio_to_inside_call": round(ours_ms / inside_ms, 3),
        "median_of_round_ratios": round(statistics.median(r["ratio"] for r in rows), 3),
        "local": local,
        "prompt_chars_first_last_step": [prompt_tokens[0], prompt_tokens[-1]],
        "by_round": rows,
    }


# --------------------------------------------------------------------------- throughput


def delayed_actions(steps: int) -> Any:
    """The 50 ms stand-in's answer: the next of ``steps`` commands, then ``DONE``."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        turn = assistant_turns(body)
        content = COMMANDS[turn % len(COMMANDS)] if turn < steps else "DONE"
        return {"sleep": MODEL_DELAY_S, "content": content}

    return reply


def collection(
    kind: str, workers: int, steps: int, work_dir: Path, url: str, concurrency: int
) -> dict[str, Any]:
    """One collection of ``workers`` episodes with ``workers`` workers; steps per second."""
    from worldtrace.flows.collect import run_collection
    from worldtrace.flows.config import validate_config

    if kind == "llm":
        policy = {
            "kind": "llm",
            "tasks": [TASK],
            "params": {
                "model": MODEL,
                "base_url": url,
                "api_key_env": None,
                "concurrency": concurrency,
            },
        }
    else:
        actions = [COMMANDS[index % len(COMMANDS)] for index in range(steps)]
        policy = {"kind": "replay", "tasks": [TASK], "params": {"actions": actions}}
    config = validate_config(
        {
            "domain": "terminal",
            "episodes": workers,
            "workers": workers,
            "max_steps": steps + 1,
            "normalize": False,
            "out": str(work_dir / f"{kind}-{workers}"),
            "policy": policy,
        }
    )
    started = time.perf_counter()
    summary = run_collection(config)
    took = time.perf_counter() - started
    if summary["collected"] != workers or summary["steps"] != workers * steps:
        raise RuntimeError(f"{kind} with {workers} workers collected {summary}")
    return {
        "episodes": summary["collected"],
        "steps": summary["steps"],
        "errors": summary["errors"],
        "seconds": round(took, 2),
        "steps_per_s": round(summary["steps"] / took, 2),
    }


def measure_throughput(workers: Sequence[int], steps: int, work_dir: Path) -> dict[str, Any]:
    """Per number of workers: the llm and the replay collection, and llm's share of replay's."""
    results: dict[str, Any] = {}
    with stand_in(delayed_actions(steps)) as server:
        concurrency = max(workers)
        # The first flow of a process starts Prefect's temporary API: not charged to a row.
        collection("replay", 1, steps, work_dir / "warm-up", server.url, concurrency)
        collection("llm", 1, steps, work_dir / "warm-up", server.url, concurrency)
        for index, count in enumerate(workers):
            order = ("replay", "llm") if index % 2 == 0 else ("llm", "replay")
            row = {kind: collection(kind, count, steps, work_dir, server.url, concurrency)
                   for kind in order}  # fmt: skip
            row["ratio"] = round(row["llm"]["steps_per_s"] / row["replay"]["steps_per_s"], 3)
            results[str(count)] = row
            log(f"  {count} worker(s): {row}")
    return results


# --------------------------------------------------------------------------- report


def print_report(report: dict[str, Any]) -> None:
    """The two tables of the run."""
    console = Console()
    overhead = report["overhead"]
    table = Table(title="llm policy step vs bare openai call (same stand-in, same bodies)")
    for column in ("", "mean ms", "median ms"):
        table.add_column(column, justify="right")
    table.add_row("policy + record", f"{overhead['ours_ms_per_step']:.3f}",
                  f"{overhead['ours_median_ms']:.3f}")  # fmt: skip
    table.add_row("bare call", f"{overhead['bare_ms_per_step']:.3f}",
                  f"{overhead['bare_median_ms']:.3f}")  # fmt: skip
    met = "met" if overhead["ratio"] <= TARGET_RATIO else "NOT met"
    table.add_row("ratio", f"{overhead['ratio']:.3f} (target ≤ {TARGET_RATIO}: {met})",
                  f"{overhead['ratio_of_medians']:.3f}")  # fmt: skip
    console.print(table)
    console.print(
        f"the call inside the policy's steps: {overhead['inside_call_ms_per_step']:.3f} ms; the "
        f"policy's own work: {overhead['own_ms_per_step']:.3f} ms a step, ratio "
        f"{overhead['ratio_to_inside_call']:.3f}"
    )
    local = overhead["local"]
    console.print(
        f"without the network, per step: prompt (render + trim) {local['prompt_ms']:.3f} ms, "
        f"parse {local['parse_ms']:.4f} ms"
    )
    if not report["throughput"]:
        return
    table = Table(title=f"terminal collection, stand-in answering in {MODEL_DELAY_S * 1000:.0f} ms")
    for column in ("workers", "llm steps/s", "replay steps/s", "llm / replay", "llm s", "replay s"):
        table.add_column(column, justify="right")
    for count, row in report["throughput"].items():
        table.add_row(
            count,
            f"{row['llm']['steps_per_s']:.2f}",
            f"{row['replay']['steps_per_s']:.2f}",
            f"{row['ratio']:.2f}",
            f"{row['llm']['seconds']:.1f}",
            f"{row['replay']['seconds']:.1f}",
        )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    """Run both measurements and print and save the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=None, help="overhead rounds (default 20)")
    parser.add_argument("--history", type=int, default=None, help="steps per pass (default 40)")
    parser.add_argument("--workers", default=None, help="comma-separated (default 1,8,32)")
    parser.add_argument("--steps", type=int, default=None, help="steps per episode (default 5)")
    parser.add_argument("--quick", action="store_true", help="smaller numbers, a few minutes")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--output", type=Path, default=RESULTS_FILE)
    args = parser.parse_args(argv)
    rounds = args.rounds or (6 if args.quick else 20)
    length = args.history or (24 if args.quick else 40)
    workers = tuple(
        int(n) for n in (args.workers or ("1,4,8" if args.quick else "1,8,32")).split(",")
    )
    steps = args.steps or (4 if args.quick else 5)

    log(f"library logs: {configure('bench-llm-policy', loud=False)}")
    started = time.monotonic()
    load_start = loadavg()
    log(f"overhead: {rounds} rounds of {length} steps, policy and bare alternating")
    overhead = measure_overhead(rounds, length)
    throughput: dict[str, Any] = {}
    if not args.skip_throughput:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="bench-llm-", dir=RESULTS_DIR) as tmp:
            log(f"throughput: workers {workers}, {steps} steps per episode, llm and replay")
            throughput = measure_throughput(workers, steps, Path(tmp))
    report = {
        "benchmark": "llm_policy",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "command": " ".join(["benchmarks/llm_policy.py", *(argv or sys.argv[1:])]),
        "machine": machine_info(load_start),
        "overhead": overhead,
        "throughput": throughput,
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    write_report(args.output, report)
    print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
