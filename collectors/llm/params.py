"""The parameters of the model-driven policy (``policy.params`` of a ``kind: llm`` config)."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
"""Where ``vllm serve`` listens by default."""

EXPLORE_INSTRUCTION = (
    "There is no task in this episode. Explore the environment: find out what it offers and "
    "try its features one after another, the way a curious new user would, observing what "
    "each action does. Prefer actions you have not tried yet."
)
"""The instruction of an episode without a task (``mode: explore``)."""


class Prices(BaseModel):
    """What the endpoint charges, in US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    prompt: float = Field(ge=0, description="per million prompt tokens not served from cache")
    completion: float = Field(ge=0, description="per million completion tokens")
    cached: float | None = Field(
        default=None, ge=0, description="per million cached prompt tokens (default: `prompt`)"
    )

    def cost_usd(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> float:
        """The cost of one call's tokens."""
        cached_price = self.prompt if self.cached is None else self.cached
        cached_tokens = min(cached_tokens, prompt_tokens)  # never more than the prompt held
        fresh = prompt_tokens - cached_tokens
        total = fresh * self.prompt + cached_tokens * cached_price
        return (total + completion_tokens * self.completion) / 1_000_000


class LLMParams(BaseModel):
    """How the policy reaches its model and how it samples; every field has a default."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str | None = Field(
        default=None,
        min_length=1,
        description="the model id to ask for; default: the first model the endpoint lists "
        "(a vLLM or llama.cpp server serves one)",
    )
    base_url: str = Field(
        default=DEFAULT_BASE_URL,
        pattern=r"^https?://",
        description="the OpenAI-compatible endpoint, up to `/v1`: a local vLLM, SGLang, "
        "llama.cpp or Ollama server, or a hosted API",
    )
    api_key_env: str | None = Field(
        default="OPENAI_API_KEY",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the name of the environment variable holding the API key (never the key "
        "itself); unset or null: no key is sent (a local server needs none)",
    )
    temperature: float = Field(default=0.7, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    max_tokens: int = Field(default=1024, ge=1, description="the most a reply may hold")
    seed: int | None = Field(
        default=None, description="the sampling seed sent to the server; default: the episode's"
    )
    history_tokens: int = Field(
        default=24_000,
        ge=512,
        description="the prompt's budget (estimated tokens, see docs/llm-policy.md): the "
        "episode's oldest steps are left out to fit it",
    )
    request_timeout_s: float = Field(default=120.0, gt=0, description="per request")
    max_retries: int = Field(
        default=6,
        ge=0,
        description="retries of a request that failed on the server's side (429, 5xx, a "
        "connection error or a timeout), with backoff; then the run stops, resumable",
    )
    concurrency: int = Field(
        default=16,
        ge=1,
        description="requests in flight to this endpoint at once, across all the run's workers",
    )
    prices: Prices | None = Field(default=None, description="for the cost of each call")
    max_invalid_replies: int = Field(
        default=3,
        ge=1,
        description="replies in a row that are no action before the episode ends",
    )
    mode: Literal["tasks", "explore"] = Field(
        default="tasks",
        description="`tasks`: pursue the domain's task library (or `--task`), each episode "
        "checked like a scripted one; `explore`: no task, the explore instruction instead",
    )
    explore_instruction: str = Field(default=EXPLORE_INSTRUCTION, min_length=1)

    def settings_hash(self) -> str:
        """A short hash of everything that shapes the model's replies (not where it runs)."""
        shaping = self.model_dump(
            include={
                "temperature",
                "top_p",
                "max_tokens",
                "seed",
                "history_tokens",
                "mode",
                "explore_instruction",
            }
        )
        return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:12]
