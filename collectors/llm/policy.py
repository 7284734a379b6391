"""The model-driven policy: a domain's prompt, the episode's history, a reply, an action.

Each step the policy shows the model the domain's system prompt, the task's instruction (or
the explore instruction) and the episode so far, as the domain's renderer renders it: the
model sees the canonical observation text a world model is trained on. The reply becomes the
action through the domain's own parser (a text domain: the reply's last fenced block, or the
whole reply) or through the tool call the model returned (a tool domain). A reply that is no
action comes back as a :class:`~worldtrace.collectors.base.RejectedReply` (recorded, the
environment untouched); a stop word, or a reply without a tool call in a tool domain, ends the
episode without a step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from worldtrace.collectors.base import (
    INVALID_REPLY,
    HistoryItem,
    ModelCall,
    ModelUnavailable,
    Policy,
    PolicyGaveUp,
    RejectedReply,
    Renderer,
    Task,
)
from worldtrace.collectors.llm.client import ModelClient, Reply
from worldtrace.collectors.llm.history import Message, estimate_tokens, fit
from worldtrace.collectors.llm.params import LLMParams
from worldtrace.schemas import Action, PolicyRef
from worldtrace.schemas.errors import ConfigError, InputError, SetupError
from worldtrace.schemas.raw import RawObservation

if TYPE_CHECKING:
    from worldtrace.collectors.base import Collector

ToolList = Callable[[RawObservation], Sequence[dict[str, Any]]]
"""A tool domain's tools as the environment defines them (``{name, description, inputSchema}``,
as MCP's ``tools/list`` gives them), from the episode's first observation."""


@dataclass(frozen=True)
class AgentPrompt:
    """How a domain presents itself to a model.

    ``system`` explains the observation format and the action grammar (or the tools).
    ``tools`` makes the domain a tool domain: its tools go to the model as function
    definitions and a returned call is the action; a reply without one ends the episode.
    Otherwise the reply's text is parsed as an action, and a reply that is exactly one of
    ``stop_words`` ends the episode.
    """

    system: str
    tools: ToolList | None = None
    stop_words: frozenset[str] = field(default_factory=lambda: frozenset({"DONE"}))


_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
"""A reasoning block a model writes into its reply when the server does not split it off."""

REFUSED_PROMPT = frozenset({400, 413, 422})
"""Statuses with which a server refuses a prompt itself (too long for the context, say): the
episode ends there with the reason, where a server that is down stops the run."""

_FENCED = re.compile(r"```[A-Za-z0-9_-]*\n?(.*?)```", re.DOTALL)


def action_text(reply: str) -> str:
    """The action a text reply holds: its last fenced block, else the whole reply, stripped."""
    blocks = _FENCED.findall(reply)
    return (blocks[-1] if blocks else reply).strip()


def function_definitions(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """MCP-style tool definitions as the chat-completions ``tools`` parameter."""
    return [
        {
            "type": "function",
            "function": {
                "name": str(tool["name"]),
                "description": str(tool.get("description") or ""),
                "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}},
            },
        }
        for tool in tools
    ]


class LLMPolicy(Policy[Task]):
    """Asks a chat model for each action; records each call's usage and reply."""

    kind = "llm"
    name = "llm"
    """The kind's name; :meth:`ref` names each instance by its settings (``llm-<hash>``)."""

    def __init__(self, collector: Collector[Any, Any], params: LLMParams) -> None:
        self.params = params
        self._prompt: AgentPrompt = collector.agent_prompt()
        self._renderer: Renderer = collector.renderer()
        self._parse_action = collector.parse_action
        self._client = ModelClient(params)
        self._name = f"llm-{params.settings_hash()}"
        self._instruction = params.explore_instruction
        self._tools: list[dict[str, Any]] = []
        self._first: RawObservation = {}
        self._seed: int | None = None
        self._call: ModelCall | None = None
        self._invalid_in_row = 0
        self._rendered: list[list[Message]] = []
        self._budget = params.history_tokens

    @property
    def plans_as(self) -> str:
        """Pursuing the task library plans episodes as scripted ones; exploring, as explorers."""
        return "script" if self.params.mode == "tasks" else "explore"

    def reset(self, seed: int, task: Task | None) -> None:
        """Start an episode: its instruction, its seed, no history."""
        self._instruction = task.instruction if task else self.params.explore_instruction
        self._seed = seed
        self._first = {}
        self._tools = []
        self._call = None
        self._invalid_in_row = 0
        self._rendered = []
        self._client.model_id()  # asked of the endpoint once, before the episode's record

    def preflight(self) -> None:
        """Ask the endpoint for its models once, without retries.

        A run whose model server is down, or does not serve the model, fails at once instead
        of after its backoff.
        """
        check = ModelClient(self.params.model_copy(update={"max_retries": 0}))
        try:
            listed = check.models()
        except ModelUnavailable as error:
            raise SetupError(
                f"the model server does not answer ({error}); start it or fix "
                "policy.params.base_url (`worldtrace doctor --policy-config FILE` checks it)"
            ) from None
        if self.params.model is not None and self.params.model not in listed:
            raise ConfigError(
                f"{self.params.base_url} does not serve the model {self.params.model!r} "
                f"(it lists {', '.join(listed[:10]) or 'none'})"
            )

    def describe(self) -> PolicyRef:
        """``kind: llm``, the settings' hash in the name, the model id as the version."""
        return PolicyRef(kind="llm", name=self._name, version=self._client.model_id())

    def last_call(self) -> ModelCall | None:
        """The call behind the last :meth:`act`."""
        return self._call

    def act(
        self, observation: RawObservation, history: Sequence[HistoryItem]
    ) -> Action | RejectedReply | None:
        """Ask the model; return its action, a rejected reply, or None when it is done."""
        if self._invalid_in_row >= self.params.max_invalid_replies:
            raise PolicyGaveUp(
                f"the model's last {self._invalid_in_row} replies in a row were no action"
            )
        if not history:
            self._first = observation
            if self._prompt.tools is not None:
                self._tools = function_definitions(self._prompt.tools(observation))
            # The tools are part of every prompt of the episode: counted once.
            self._budget = self.params.history_tokens - estimate_tokens(self._tools_message())
        budget = self._budget
        prompt = fit(self._fixed_messages(), self._turns(history), budget)
        seed = self.params.seed if self.params.seed is not None else self._seed
        try:
            reply = self._client.complete(prompt.messages, self._tools, seed)
        except ModelUnavailable as error:
            if error.status_code in REFUSED_PROMPT:
                # This prompt, not the server: a resumed run would send it again.
                raise PolicyGaveUp(f"the model server refused the prompt: {error}") from None
            raise
        usage = reply.usage.model_copy(update={"trimmed_steps": prompt.trimmed_turns})
        self._call = ModelCall(usage=usage, reply=reply.raw)
        choice = self._choice(reply)
        self._invalid_in_row = self._invalid_in_row + 1 if isinstance(choice, RejectedReply) else 0
        return choice

    def _tools_message(self) -> list[Message]:
        """The tool definitions as the estimate counts them (they are part of the prompt)."""
        return [{"role": "system", "content": json.dumps(self._tools)}] if self._tools else []

    def _choice(self, reply: Reply) -> Action | RejectedReply | None:
        cut = reply.raw.get("finish_reason")
        if cut in ("length", "content_filter"):
            shown = reply.content or json.dumps(reply.raw.get("tool_calls") or [])
            why = "max_tokens" if cut == "length" else "the server's content filter"
            return RejectedReply(shown, f"the reply was cut off by {why}")
        if self._prompt.tools is not None:
            if not reply.tool_calls:
                return None  # a tool agent that calls no tool has finished
            call = reply.tool_calls[0]
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError as error:
                return RejectedReply(
                    json.dumps({"name": call.name, "arguments": call.arguments}),
                    f"the arguments of {call.name!r} are not JSON: {error}",
                )
            if not isinstance(arguments, dict):
                return RejectedReply(
                    json.dumps({"name": call.name, "arguments": call.arguments}),
                    f"the arguments of {call.name!r} are not a JSON object",
                )
            try:
                return self._parse_action({"name": call.name, "arguments": arguments})
            except (ValueError, InputError) as error:  # tool_calls raises InputError
                return RejectedReply(
                    json.dumps({"name": call.name, "arguments": arguments}), str(error)
                )
        content = _THINKING.sub("", reply.content)  # a reasoning model served without a parser
        text = action_text(content)
        lines = content.strip().splitlines()
        if text in self._prompt.stop_words or (
            lines and lines[-1].strip() in self._prompt.stop_words
        ):
            return None  # a stop word alone, or alone on the reply's last line
        if not text:
            return RejectedReply(reply.content, "the reply holds no action")
        try:
            return self._parse_action(text)
        except (ValueError, InputError) as error:
            return RejectedReply(reply.content, f"not an action: {error}")

    def _fixed_messages(self) -> list[Message]:
        return [
            {"role": "system", "content": self._prompt.system},
            {"role": "user", "content": f"Instruction: {self._instruction}"},
        ]

    def _observation_text(self, observation: RawObservation) -> str:
        return self._renderer.observation(observation).text

    def _turns(self, history: Sequence[HistoryItem]) -> list[list[Message]]:
        """The first state, then each step's action and the state after it.

        Each turn is rendered once and kept: history only grows within an episode.
        """
        if not self._rendered:
            first = self._observation_text(self._first)
            self._rendered.append([{"role": "user", "content": first}])
        for number in range(len(self._rendered) - 1, len(history)):
            item = history[number]
            shown = self._observation_text(item.observation)
            if item.error:
                shown = f"The action failed: {item.error}\n\n{shown}"
            self._rendered.append(self._step_messages(number, item.action, shown))
        return self._rendered

    def _step_messages(self, number: int, action: Action, shown: str) -> list[Message]:
        if self._prompt.tools is None or action.name == INVALID_REPLY:
            return [
                {"role": "assistant", "content": action.text},
                {"role": "user", "content": shown},
            ]
        call_id = f"call_{number}"
        return [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": action.name,
                            "arguments": json.dumps(action.arguments, ensure_ascii=False),
                        },
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": shown},
        ]


def llm_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``llm`` policy: a chat model through an OpenAI-compatible endpoint (see params)."""
    return LLMPolicy(collector, LLMParams.model_validate(params))
