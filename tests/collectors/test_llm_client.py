"""The model client, the history budget, reading replies and the usage columns, no sandbox.

The client talks to the stand-in model server (tests/llm_server.py) through the real
``openai`` library: these are the rules a run with many workers relies on.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pytest

from tests.llm_collecting import usage
from tests.llm_server import MODEL, StandInModelServer
from worldtrace.collectors.base import ModelUnavailable, PolicyGaveUp, RejectedReply
from worldtrace.collectors.episode import clear_stop, request_stop
from worldtrace.collectors.llm.client import ModelClient
from worldtrace.collectors.llm.history import estimate_tokens, fit, text_tokens
from worldtrace.collectors.llm.params import LLMParams, Prices
from worldtrace.collectors.llm.policy import LLMPolicy
from worldtrace.collectors.registry import get_collector
from worldtrace.schemas import Action, Episode, Transition, arrow_schema_of
from worldtrace.schemas.arrow import upgrade_episode_table, upgrade_transition_table

MESSAGES = [{"role": "user", "content": "hello"}]


def _client(url: str, **params: Any) -> ModelClient:
    return ModelClient(LLMParams(base_url=url, **params))


def test_requests_in_flight_never_exceed_the_endpoints_concurrency() -> None:
    in_flight, most = 0, 0
    lock = threading.Lock()

    def slow(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        time.sleep(0.3)
        with lock:
            in_flight -= 1
        return {"content": "ok"}

    with StandInModelServer(then=slow) as server:
        # One bound per endpoint, shared by every client of it (a run's workers are threads).
        clients = [_client(server.url, concurrency=2, model=MODEL) for _ in range(6)]
        with ThreadPoolExecutor(6) as pool:
            replies = list(pool.map(lambda client: client.complete(MESSAGES, []), clients))
    assert [reply.content for reply in replies] == ["ok"] * 6
    assert most == 2


def test_a_429_is_retried_after_the_wait_the_server_asked_for() -> None:
    replies = [{"status": 429, "headers": {"Retry-After": "1"}}, {"content": "ok"}]
    times: list[float] = []

    def timed(reply: dict[str, Any]) -> Any:
        def answer(body: dict[str, Any]) -> dict[str, Any]:
            times.append(time.monotonic())
            return reply

        return answer

    with StandInModelServer([timed(reply) for reply in replies]) as server:
        reply = _client(server.url, model=MODEL, max_retries=1).complete(MESSAGES, [])
    assert reply.content == "ok"
    assert times[1] - times[0] >= 1.0


def test_a_refused_request_is_not_retried_and_says_what_the_server_said() -> None:
    refused = {"status": 404, "message": "The model `nope` does not exist."}
    with StandInModelServer([refused], then={"content": "never"}) as server:
        with pytest.raises(ModelUnavailable, match=r"HTTP 404.*does not exist") as raised:
            _client(server.url, model="nope", max_retries=5).complete(MESSAGES, [])
        assert len(server.chat_requests()) == 1
    assert raised.value.status_code == 404


def test_the_model_defaults_to_the_first_one_the_endpoint_lists() -> None:
    with StandInModelServer(model="served/by-vllm") as server:
        client = _client(server.url)
        assert client.model_id() == "served/by-vllm"
        client.complete(MESSAGES, [])
        assert server.chat_requests()[0]["model"] == "served/by-vllm"


def test_usage_and_cost_come_from_the_servers_counts() -> None:
    counts = usage(1000, 200, cached=400, reasoning=50)
    prices = Prices(prompt=2.0, completion=8.0, cached=0.5)
    with StandInModelServer([{"content": "ok", "usage": counts}]) as server:
        reply = _client(server.url, model=MODEL, prices=prices).complete(MESSAGES, [])
    counted = reply.usage
    assert (counted.prompt_tokens, counted.completion_tokens) == (1000, 200)
    assert (counted.cached_tokens, counted.reasoning_tokens) == (400, 50)
    assert counted.cost_usd == pytest.approx((600 * 2.0 + 400 * 0.5 + 200 * 8.0) / 1e6)


def test_history_keeps_the_fixed_messages_and_the_latest_turns_that_fit() -> None:
    fixed = [{"role": "system", "content": "s" * 70}, {"role": "user", "content": "task"}]
    turns = [[{"role": "user", "content": f"{n}" * 700}] for n in range(5)]
    budget = estimate_tokens(fixed) + 2 * estimate_tokens(turns[0]) + 10
    prompt = fit(fixed, turns, budget)
    assert prompt.messages == [*fixed, turns[3][0], turns[4][0]]
    assert prompt.trimmed_turns == 3
    assert fit(fixed, turns, 10**6).trimmed_turns == 0


def test_shards_and_episode_tables_of_schema_1_2_read_with_no_usage() -> None:
    transitions = arrow_schema_of(Transition)
    older = pa.schema([field for field in transitions if field.name != "usage"])
    table = upgrade_transition_table(older.empty_table())
    assert table.schema.field("usage").type == transitions.field("usage").type
    episodes = arrow_schema_of(Episode)
    old_episodes = pa.schema([field for field in episodes if field.name != "usage"])
    row = {field.name: None for field in old_episodes}
    upgraded = upgrade_episode_table(pa.Table.from_pylist([row], schema=old_episodes))
    assert upgraded.column("usage").to_pylist() == [None]
    assert upgraded.schema.names == episodes.names


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ({"name": "", "arguments": {}}, "a tool call needs a tool name"),
        ({"name": "web_search", "arguments": "{not json"}, "are not JSON"),
        ({"name": "web_search", "arguments": "[1, 2]"}, "not a JSON object"),
    ],
)
def test_a_tool_call_that_is_no_action_is_a_rejected_reply(
    call: dict[str, Any], problem: str
) -> None:
    with StandInModelServer([{"tool_calls": [call]}]) as server:
        policy = LLMPolicy(get_collector("search"), LLMParams(base_url=server.url))
        policy.reset(seed=1, task=None)
        choice = policy.act({"tools": []}, [])
    assert isinstance(choice, RejectedReply) and problem in choice.problem
    assert choice.action().name == "invalid_reply"


def test_a_stop_word_alone_on_the_last_line_ends_the_episode() -> None:
    replies = [{"content": "The files are sorted.\nDONE"}, {"content": "ls<Enter>"}]
    with StandInModelServer(replies) as server:
        policy = LLMPolicy(get_collector("terminal"), LLMParams(base_url=server.url))
        policy.reset(seed=1, task=None)
        screen = {"screen": "user@sandbox:~$ ", "cwd": "/home/user"}
        assert policy.act(screen, []) is None
        assert policy.last_call() is not None  # its cost is kept for the episode's end


def _policy(domain: str, url: str, **params: Any) -> LLMPolicy:
    policy = LLMPolicy(get_collector(domain), LLMParams(base_url=url, **params))
    policy.reset(seed=1, task=None)
    return policy


SCREEN = {"screen": "user@sandbox:~$ ", "cwd": "/home/user"}


def test_a_prompt_the_server_refuses_ends_the_episode_not_the_run() -> None:
    too_long = {"status": 400, "message": "This model's maximum context length is 32768 tokens"}
    with StandInModelServer([too_long]) as server:
        with pytest.raises(PolicyGaveUp, match=r"refused the prompt.*maximum context length"):
            _policy("terminal", server.url, max_retries=3).act(SCREEN, [])
        assert len(server.chat_requests()) == 1  # not retried: the same prompt fails again


def test_a_reply_cut_off_at_max_tokens_is_no_action() -> None:
    cut = {"tool_calls": [{"name": "web_search", "arguments": '{"query": "git st'}]}
    with StandInModelServer([{**cut, "finish_reason": "length"}]) as server:
        choice = _policy("search", server.url).act({"tools": []}, [])
    assert isinstance(choice, RejectedReply) and "cut off by max_tokens" in choice.problem


@pytest.mark.parametrize("broken", [{"no_choices": True}, {"html": True}])
def test_a_reply_that_is_no_completion_is_the_servers_fault_and_retried(
    broken: dict[str, Any],
) -> None:
    with StandInModelServer([broken], then={"content": "ls<Enter>"}) as server:
        choice = _policy("terminal", server.url, max_retries=2).act(SCREEN, [])
        assert len(server.chat_requests()) == 2
    assert isinstance(choice, Action) and choice.text == "ls<Enter>"


def test_a_reasoning_block_in_the_reply_is_not_typed() -> None:
    reply = {"content": "<think>The user wants the files.\nI will list them.</think>\nls<Enter>"}
    with StandInModelServer([reply]) as server:
        choice = _policy("terminal", server.url).act(SCREEN, [])
    assert isinstance(choice, Action) and choice.text == "ls<Enter>"


def test_tool_call_arguments_sent_as_an_object_are_read() -> None:
    call = {"name": "web_search", "arguments": {"query": "git stash"}}
    with StandInModelServer([{"tool_calls": [call], "object_arguments": True}]) as server:
        choice = _policy("search", server.url).act({"tools": []}, [])
    assert isinstance(choice, Action) and choice.arguments == {"query": "git stash"}


def test_no_key_reaches_an_error_message(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-planted-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    quoting = {"status": 404, "message": f"no model for Bearer {key} (key {key})"}
    refused = {"status": 401, "message": f"Incorrect API key provided: {key}"}
    with StandInModelServer([quoting, refused]) as server:
        for expected in ("HTTP 404", "HTTP 401 (the key was refused)"):
            with pytest.raises(ModelUnavailable, match=re.escape(expected)) as raised:
                _client(server.url, model=MODEL).complete(MESSAGES, [])
            assert key not in str(raised.value)


def test_a_stop_request_ends_the_backoff() -> None:
    slow_down = {"status": 429, "headers": {"Retry-After": "20"}}
    with StandInModelServer([slow_down], then={"content": "never"}) as server:
        client = _client(server.url, model=MODEL, max_retries=3)
        threading.Timer(0.5, request_stop).start()
        started = time.monotonic()
        try:
            with pytest.raises(ModelUnavailable):
                client.complete(MESSAGES, [])
        finally:
            clear_stop()
        assert time.monotonic() - started < 10  # the 20 s wait was not waited out
        assert len(server.chat_requests()) == 1


def test_cost_never_counts_more_cached_tokens_than_the_prompt_held() -> None:
    prices = Prices(prompt=2.0, completion=0.0, cached=1.0)
    assert prices.cost_usd(100, 0, 200) == pytest.approx(100 * 1.0 / 1e6)


def test_text_in_other_scripts_is_estimated_at_a_token_a_character() -> None:
    assert text_tokens("a" * 350) == 100
    assert text_tokens("日本語" * 100) == 300
