"""World-model prompts: a system prompt per domain and the per-turn rendering of a transition.

A world model trained on this corpus reads the task, the environment's state and an action,
and writes the state the environment shows next. The texts here are ours; their layout follows
AgentWorldBench: each turn's prompt is ``### Turn k`` followed by ``**Action:**`` and the
action text, and each turn's response is ``**Environment Observation:**`` followed by the
observation text, exactly as recorded. The first turn a row shows also carries
``**Task:** <instruction>`` and the state the turn starts from (``**Initial Observation:**``
for step 0, else ``**Current Observation:**``); a later turn carries its state only where the
recorded chain breaks.

A response starts with an ``**Error:** <action_error>`` line exactly when the transition's
``action_error`` is set, i.e. when the action failed in the environment's own terms: it was
rejected (malformed, unknown tool, element or key, invalid arguments), could not finish (a
timeout, a sandbox, server or browser that died), or ran and signalled failure (a command's
non-zero exit status, a tool result flagged as an error). The system prompts state the same
rule, so prompt and targets agree in every domain.

Every row has an instruction: the recorded task, or for a task-less episode the text
:func:`instruction_for` makes from the policy kind and the environment's name ("Explore the
web/trac environment …").

:func:`parse_response` inverts :func:`render_response`, so a consumer (or a test) can recover
the recorded observation and error from a rendered target.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from worldtrace.schemas import DOMAINS

OBSERVATION_HEADER = "**Environment Observation:**"
ERROR_PREFIX = "**Error:** "
ACTION_HEADER = "**Action:**"
TASK_PREFIX = "**Task:** "
INITIAL_OBSERVATION_HEADER = "**Initial Observation:**"
CURRENT_OBSERVATION_HEADER = "**Current Observation:**"

_COMMON = """\
You are a world model: a simulator of {world}. An agent works on a task in this environment. \
Each turn you are given the agent's action. The task and the state the first turn shown starts \
from are given with that turn (the earliest turns of a long episode may be left out: the turn \
numbers count from the start of the episode), and a state is given again wherever the \
recorded history has a gap. Your job \
is to predict the environment's next observation after the action: exactly what the \
environment would show, in its own observation format, {format_hint}

Rules:
- Write only the observation, never commentary, explanations or advice to the agent.
- Be faithful, not helpful: reproduce the environment's real behaviour, including failures, \
error messages, empty results, timeouts and unchanged states when an action has no effect.
- Keep everything that did not change exactly as before; change only what the action changes.
- Stay consistent with every earlier observation in the conversation.
- When the action fails, start with a line `{error_prefix}<the environment's report of the \
failure>`, then give the observation as usual. An action fails when the environment rejects it \
(malformed, unknown tool, element or key, invalid arguments), cannot finish it (a timeout, or a \
sandbox, server or browser that died), or runs it and signals failure in its own terms (a \
command's non-zero exit status, a tool result flagged as an error). When the action does not \
fail there is no such line.

Answer in this format:
{observation_header}
<the next observation>"""

_WORLDS: dict[str, tuple[str, str]] = {
    "terminal": (
        "a Linux terminal: a bash shell running in a tmux pane",
        "i.e. the full text of the terminal screen as `tmux capture-pane` prints it: the "
        "prompt, the echoed keystrokes, the commands' output and the cursor's line. Keys are "
        "written as text, with special keys such as <Enter> or <C-c> in angle brackets.",
    ),
    "swe": (
        "a software-engineering workspace: a repository checked out in a container where an "
        "agent runs shell commands, edits files and runs tests",
        "i.e. the tool's output verbatim: command output with its exit status, file contents, "
        "diffs, and test runner reports with their pass/fail counts and tracebacks.",
    ),
    "mcp": (
        "a set of tools served over the Model Context Protocol (MCP)",
        "i.e. the tool call's result as the MCP server returns it, usually JSON or text "
        "content, or the server's error for an unknown tool or bad arguments.",
    ),
    "search": (
        "a web search and browsing tool",
        "i.e. a search results page (titles, URLs and snippets in rank order) or the text of "
        "the fetched page, as the tool returns it.",
    ),
    "web": (
        "a web browser",
        "i.e. the page's accessibility tree flattened one node per line with element ids, "
        "e.g. `[6] link 'Go to page 2', url='…'`, elements in the viewport marked `visible`, "
        "together with the URL, the title and the open tabs when the environment shows them.",
    ),
    "os": (
        "a desktop operating system with graphical applications",
        "i.e. the open windows (topmost first, with how much of each is in view), open "
        "menus, the focused element with its caret and selection, then the accessibility "
        "tree of the screen one element per line (tag, name, text, class, description, "
        "position, size), as the environment prints it.",
    ),
    "android": (
        "an Android phone",
        "i.e. a header naming the app in front, whether the keyboard shows and the focused "
        "element, then the screen's UI elements one per line (index, class, text, "
        "description, hint, resource id, bounds and flags), as the environment prints it.",
    ),
}

SYSTEM_PROMPTS: dict[str, str] = {
    domain: _COMMON.format(
        world=world,
        format_hint=format_hint,
        error_prefix=ERROR_PREFIX,
        observation_header=OBSERVATION_HEADER,
    )
    for domain, (world, format_hint) in _WORLDS.items()
}
assert set(SYSTEM_PROMPTS) == set(DOMAINS), "every domain of the design has its own prompt"


TOOLS_INTRO = (
    "# Tools\n\nThe environment serves these tools, and the agent's actions are calls to them "
    "(their definitions as the server lists them, one JSON object per line: name, "
    "description, input schema, and output schema when the tool has one):"
)


def render_tool_definitions(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tool definitions section of a system prompt (see :data:`TOOLS_INTRO`).

    Each tool is ``{"name", "description", "inputSchema"[, "outputSchema"]}`` as compact JSON,
    keys in that order, so the same tools give the same text.
    """
    lines = [TOOLS_INTRO]
    for tool in tools:
        definition = {
            "name": tool.get("name"),
            "description": tool.get("description") or "",
            "inputSchema": tool.get("inputSchema") or {"type": "object"},
        }
        if tool.get("outputSchema"):
            definition["outputSchema"] = tool["outputSchema"]
        lines.append(json.dumps(definition, ensure_ascii=False))
    return "\n".join(lines)


def system_prompt(domain: str, tools: Sequence[Mapping[str, Any]] = ()) -> str:
    """Return the world-model system prompt of ``domain``, with its tools when given.

    ``tools`` are the tool definitions of the episode's environment (an MCP server's
    ``tools/list``): AgentWorldBench's tool world model is conditioned on them, so they are
    appended as a section of their own (:func:`render_tool_definitions`).

    A domain registered by another package, outside the design's seven, gets the common
    prompt naming it.
    """
    prompt = SYSTEM_PROMPTS.get(domain) or _COMMON.format(
        world=f"the `{domain}` environment",
        format_hint="in the format its earlier observations show.",
        error_prefix=ERROR_PREFIX,
        observation_header=OBSERVATION_HEADER,
    )
    if tools:
        prompt += "\n\n" + render_tool_definitions(tools)
    return prompt


def render_state(observation: str, *, task: str | None, initial: bool) -> str:
    """Render the task and a state given in full (the first turn shown, or a chain break)."""
    header = INITIAL_OBSERVATION_HEADER if initial else CURRENT_OBSERVATION_HEADER
    lines = [] if task is None else [f"{TASK_PREFIX}{task}"]
    lines += [header, observation]
    return "\n".join(lines)


def render_action_prompt(
    turn: int,
    action: str,
    *,
    task: str | None = None,
    observation: str | None = None,
    initial: bool | None = None,
) -> str:
    """Render the prompt of turn ``turn`` (1-based): ``### Turn k`` and the action.

    When ``observation`` is given the state before the action is shown first (with the task,
    if any): on turn 1 as the initial observation, otherwise as the current observation,
    which is how a history window or a gap in the recorded steps restarts the chain.
    ``initial`` overrides the choice of header.
    """
    parts = [f"### Turn {turn}"]
    if observation is not None:
        is_initial = turn == 1 if initial is None else initial
        parts.append(render_state(observation, task=task, initial=is_initial))
    elif task is not None and turn == 1:
        parts.append(f"{TASK_PREFIX}{task}")
    parts.append(f"{ACTION_HEADER}\n{action}")
    return "\n".join(parts)


def render_response(next_observation: str, action_error: str | None = None) -> str:
    """Render a turn's target: an error line if the action failed, then the observation.

    The error line is ``**Error:** <action_error>``, written exactly when ``action_error`` is
    set; then come the ``**Environment Observation:**`` header and the observation verbatim.
    """
    body = f"{OBSERVATION_HEADER}\n{next_observation}"
    if action_error:
        return f"{ERROR_PREFIX}{action_error}\n{body}"
    return body


def parse_response(response: str) -> tuple[str, str | None]:
    """Return ``(observation, action_error)`` from a text made by :func:`render_response`."""
    error: str | None = None
    if response.startswith(ERROR_PREFIX):
        marker = f"\n{OBSERVATION_HEADER}\n"
        head, sep, _ = response.partition(marker)
        if not sep:
            raise ValueError("response has an error line but no observation header")
        error = head[len(ERROR_PREFIX) :]
        response = response[len(head) + 1 :]
    prefix = f"{OBSERVATION_HEADER}\n"
    if not response.startswith(prefix):
        raise ValueError(f"response does not start with {OBSERVATION_HEADER!r}")
    return response[len(prefix) :], error


_INSTRUCTIONS: dict[str, str] = {
    "explore": "Explore the {env} environment: try its actions and see how it responds "
    "(no specific task).",
    "replay": "Replay a recorded sequence of actions in the {env} environment (no specific task).",
}
_NO_TASK = "Act in the {env} environment (no specific task)."


def instruction_for(task: str | None, policy_kind: str | None, env_name: str | None) -> str | None:
    """What the agent was doing: ``task`` if it has one, else a sentence naming the environment.

    An exploring episode gets "Explore the <env> environment: try its actions and see how it
    responds (no specific task).", a replay "Replay a recorded sequence of actions in the
    <env> environment (no specific task).", any other task-less one "Act in the <env>
    environment (no specific task)." Only a row with neither a task nor an environment name
    has none.
    """
    if task:
        return task
    if not env_name:
        return None
    return _INSTRUCTIONS.get(policy_kind or "", _NO_TASK).format(env=env_name)
