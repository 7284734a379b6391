"""The model client: one chat completion at a time, retried, bounded, measured.

It uses the official ``openai`` client (every OpenAI-compatible server speaks its protocol)
with its own retries off: :mod:`tenacity` retries what failed on the server's side (429,
408, 409, 5xx, connection errors, timeouts), waiting what a ``Retry-After`` header asks or
else an exponential backoff with jitter, and gives up with
:class:`~worldtrace.collectors.base.ModelUnavailable` when the retries run out or the server
refuses the request itself (a bad model name, a missing key). Those failures never become
transitions: the episode is set aside and collected again when the run resumes.

Requests in flight to one endpoint are bounded across the process (all the run's workers are
threads of it) by ``concurrency``, so a run with many workers never opens that many
unbounded connections.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import openai
import tenacity

from worldtrace.collectors.base import ModelUnavailable
from worldtrace.collectors.episode import stop_requested, wait_for_stop
from worldtrace.collectors.llm.params import LLMParams
from worldtrace.schemas import ModelUsage

NO_KEY = "no-key"
"""What the client sends when no key is configured: the ``openai`` client needs a value, and a
local server ignores it."""

_BEARER = re.compile(r"Bearer\s+\S+")

MAX_BACKOFF_S = 30.0
"""The longest wait between two attempts (a server's ``Retry-After`` is capped to it too)."""

_slots: dict[str, threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()


def endpoint_slots(base_url: str, concurrency: int) -> threading.BoundedSemaphore:
    """The process-wide bound on requests in flight to ``base_url`` (the first caller sets it)."""
    with _slots_lock:
        if base_url not in _slots:
            _slots[base_url] = threading.BoundedSemaphore(concurrency)
        return _slots[base_url]


@functools.lru_cache(maxsize=16)
def _shared_client(base_url: str, key: str, timeout_s: float) -> openai.OpenAI:
    """One ``openai`` client (one connection pool) per endpoint for all the run's episodes."""
    return openai.OpenAI(
        base_url=base_url,
        api_key=key,
        timeout=timeout_s,
        max_retries=0,  # tenacity retries, with the rules above
    )


@dataclass(frozen=True)
class ToolCall:
    """A function call the model returned."""

    id: str
    name: str
    arguments: str
    """The arguments as the model wrote them: JSON text, which may not parse."""


@dataclass(frozen=True)
class Reply:
    """One chat completion: the message, its usage, and the message as the server sent it."""

    content: str
    tool_calls: tuple[ToolCall, ...]
    usage: ModelUsage
    raw: dict[str, Any]


def _transient(error: BaseException) -> bool:
    """Whether ``error`` is the server's passing trouble (worth another attempt)."""
    if isinstance(error, openai.APIConnectionError | openai.APITimeoutError | _NoCompletion):
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code in (408, 409, 429) or error.status_code >= 500
    return False


def _retry_after_s(error: BaseException | None) -> float | None:
    """The wait a 429 or 503 reply asked for, in seconds, if it said one."""
    if not isinstance(error, openai.APIStatusError):
        return None
    value = error.response.headers.get("retry-after")
    try:
        return min(max(float(value), 0.0), MAX_BACKOFF_S) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare from model servers; the backoff applies


class _Wait(tenacity.wait.wait_base):
    """``Retry-After`` when the server gave one, else exponential backoff with jitter."""

    def __init__(self) -> None:
        self._backoff = tenacity.wait_random_exponential(multiplier=0.5, max=MAX_BACKOFF_S)

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        asked = _retry_after_s(outcome.exception() if outcome else None)
        return asked if asked is not None else self._backoff(retry_state)


class _StopRequested(tenacity.stop.stop_base):
    """Ends the retries of a run asked to stop (with :func:`_sleep`, no backoff is waited out)."""

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        return stop_requested()


def _sleep(seconds: float) -> None:
    """Tenacity's wait between attempts, cut short by a stop request."""
    wait_for_stop(seconds)


class _NoCompletion(Exception):
    """A 200 reply that is no chat completion (no choices, or not JSON: a proxy's page)."""


class _Stopped(Exception):
    """The run was asked to stop before an attempt: none is made."""


def _describe(error: BaseException | None) -> str:
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code} from the server"
    return type(error).__name__ if error else "no reply"


class ModelClient:
    """A chat-completions client for one endpoint and model, shared by a run's episodes."""

    def __init__(self, params: LLMParams) -> None:
        self.params = params
        key = os.environ.get(params.api_key_env) if params.api_key_env else None
        self._key = key
        self._client = _shared_client(params.base_url, key or NO_KEY, params.request_timeout_s)
        self._slots = endpoint_slots(params.base_url, params.concurrency)
        self._model = params.model

    def _server_message(self, error: openai.APIStatusError) -> str:
        """What the server said (it names a bad model or parameter), short and keyless.

        A server refusing a key may quote it: that answer is left out, and the key is masked
        wherever else it appears.
        """
        if error.status_code in (401, 403):
            return "the key was refused"
        body = error.body
        message = str((body.get("message") if isinstance(body, dict) else None) or error.message)
        if self._key:
            message = message.replace(self._key, "***")
        return _BEARER.sub("Bearer ***", message)[:300]

    def models(self) -> list[str]:
        """The ids of the models the endpoint lists (one request, retried)."""
        return self._retrying(lambda: [model.id for model in self._client.models.list()])

    def model_id(self) -> str:
        """The configured model, or the first one the endpoint lists (asked once)."""
        if self._model is None:
            models = self.models()
            if not models:
                raise ModelUnavailable(f"{self.params.base_url} lists no model")
            self._model = models[0]
        return self._model

    def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        seed: int | None = None,
    ) -> Reply:
        """Ask for one reply to ``messages``, offering ``tools`` (function definitions) if any.

        ``seed`` is the sampling seed sent (none: the server picks).
        """
        params = self.params
        request: dict[str, Any] = {
            "model": self.model_id(),
            "messages": list(messages),
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if seed is not None:
            request["seed"] = seed
        if tools:
            request["tools"] = list(tools)
            request["parallel_tool_calls"] = False
        timed: list[float] = []

        def call() -> Any:
            started = time.monotonic()
            response = self._client.chat.completions.create(**request)
            timed.append(time.monotonic() - started)
            if not getattr(response, "choices", None):
                raise _NoCompletion()
            return response

        response = self._retrying(call)
        return _reply(response, timed[-1], params)

    def _retrying(self, request: Any) -> Any:
        """Run ``request`` under the endpoint's bound, retried; ModelUnavailable at the end."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_transient),
            stop=tenacity.stop_after_attempt(self.params.max_retries + 1) | _StopRequested(),
            wait=_Wait(),
            sleep=_sleep,
            reraise=False,
        )
        try:
            for attempt in retrying:
                with attempt:
                    if stop_requested():
                        raise _Stopped()
                    with self._slots:
                        return request()
        except _Stopped:
            raise ModelUnavailable(f"{self.params.base_url}: the run was asked to stop") from None
        except tenacity.RetryError as error:
            last = error.last_attempt.exception()
            attempts = error.last_attempt.attempt_number
            raise ModelUnavailable(
                f"{self.params.base_url}: {_describe(last)} after {attempts} attempts",
                last.status_code if isinstance(last, openai.APIStatusError) else None,
            ) from None
        except openai.APIStatusError as error:  # the request itself was refused: no retry helps
            raise ModelUnavailable(
                f"{self.params.base_url} refused the request: HTTP {error.status_code} "
                f"({self._server_message(error)})",
                error.status_code,
            ) from None
        except openai.OpenAIError as error:
            raise ModelUnavailable(f"{self.params.base_url}: {type(error).__name__}") from None
        raise AssertionError("unreachable: tenacity returns or raises")


def _arguments_text(function: Any) -> str:
    """A call's arguments as JSON text (some servers send an object where text belongs)."""
    arguments = function.arguments
    if isinstance(arguments, dict | list):
        return json.dumps(arguments, ensure_ascii=False)
    return arguments or ""


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int) and value > 0 else 0


def _reply(response: Any, latency_s: float, params: LLMParams) -> Reply:
    """Read a completion into a :class:`Reply`; a reply without choices reads as empty."""
    choices = response.choices or []
    message = choices[0].message if choices else None
    usage = response.usage
    prompt = _count(getattr(usage, "prompt_tokens", 0))
    completion = _count(getattr(usage, "completion_tokens", 0))
    cached = _count(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0))
    reasoning = _count(
        getattr(getattr(usage, "completion_tokens_details", None), "reasoning_tokens", 0)
    )
    cost = params.prices.cost_usd(prompt, completion, cached) if params.prices else None
    calls = tuple(
        ToolCall(id=call.id, name=call.function.name, arguments=_arguments_text(call.function))
        for call in (message.tool_calls or [] if message else [])
        if getattr(call, "function", None) is not None
    )
    extra = (message.model_extra or {}) if message else {}
    reasoning_text = extra.get("reasoning_content") or extra.get("reasoning")
    kept: dict[str, Any] = {"content": (message.content if message else None) or ""}
    if calls:
        kept["tool_calls"] = [
            {"id": call.id, "name": call.name, "arguments": call.arguments} for call in calls
        ]
    if isinstance(reasoning_text, str) and reasoning_text:
        kept["reasoning"] = reasoning_text
    kept["finish_reason"] = choices[0].finish_reason if choices else None
    return Reply(
        content=kept["content"],
        tool_calls=calls,
        usage=ModelUsage(
            model=str(response.model or "unknown"),
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            reasoning_tokens=reasoning,
            latency_s=round(latency_s, 6),
            cost_usd=cost,
        ),
        raw=kept,
    )
