"""The episode as chat messages, trimmed from the oldest step to fit a token budget.

A prompt is the domain's system prompt, the instruction, then one *turn* per state the agent
saw: the first observation, then for each step the model's action and what the environment
showed after it. When the estimate exceeds the budget, whole turns are left out from the
oldest (the system prompt, the instruction and the current state always stay), and the
number left out is recorded with the call.

Tokens are estimated, not counted: :data:`CHARS_PER_TOKEN` ASCII characters per token, one
token per other character (CJK text runs about one to one and a half characters a token), and
:data:`TOKENS_PER_MESSAGE` per message; the tool definitions offered count as part of the
prompt. That is close for English and code with the common BPE vocabularies and needs no
tokenizer download; set ``history_tokens`` with a margin below the model's context (the
default leaves room in a 32k context). A prompt the server still refuses (HTTP 400: too long)
ends the episode with the reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 3.5
TOKENS_PER_MESSAGE = 4

Message = dict[str, Any]


def text_tokens(text: str) -> int:
    """The estimated tokens of ``text``: ASCII at :data:`CHARS_PER_TOKEN`, others one each."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_chars / CHARS_PER_TOKEN) + (len(text) - ascii_chars)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """The estimated prompt tokens of ``messages`` (content and tool calls)."""
    total = 0
    for message in messages:
        text = message.get("content") or ""
        if message.get("tool_calls"):
            text += json.dumps(message["tool_calls"])
        total += text_tokens(text) + TOKENS_PER_MESSAGE
    return total


def cut_to_tokens(text: str, tokens: int) -> str:
    """``text`` with its middle left out (and said so) if it exceeds ``tokens``."""
    total = text_tokens(text)
    if total <= tokens:
        return text
    keep = max(tokens * len(text) // total, 200)  # the share of the characters that fits
    head = keep * 2 // 3
    tail = keep - head
    left_out = len(text) - head - tail
    return f"{text[:head]}\n[... {left_out} characters left out ...]\n{text[-tail:]}"


@dataclass(frozen=True)
class Prompt:
    """The messages of one request and how many past turns were left out."""

    messages: list[Message]
    trimmed_turns: int


def fit(fixed: Sequence[Message], turns: Sequence[Sequence[Message]], budget: int) -> Prompt:
    """``fixed`` then as many of the latest ``turns`` as fit ``budget`` (the last one always).

    The last turn (the current state) is cut in its middle if alone it leaves no room.
    """
    room = budget - estimate_tokens(fixed)
    current = [dict(message) for message in turns[-1]]
    if estimate_tokens(current) > room:
        for message in current:
            if message.get("content"):
                share = max(room // len(current), 64)
                message["content"] = cut_to_tokens(message["content"], share)
    room -= estimate_tokens(current)
    kept: list[Sequence[Message]] = []
    for turn in reversed(turns[:-1]):
        cost = estimate_tokens(turn)
        if cost > room:
            break
        kept.append(turn)
        room -= cost
    kept.reverse()
    messages = [*fixed, *(message for turn in kept for message in turn), *current]
    return Prompt(messages=messages, trimmed_turns=len(turns) - 1 - len(kept))
