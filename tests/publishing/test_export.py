from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.records import make_transition
from worldtrace.exports import EXPORTERS, export_agentworld, export_openai
from worldtrace.exports.prompts import (
    SYSTEM_PROMPTS,
    instruction_for,
    parse_response,
    render_action_prompt,
    render_response,
    system_prompt,
)
from worldtrace.schemas import (
    DOMAINS,
    Action,
    EnvironmentRef,
    Observation,
    PolicyRef,
    Transition,
    to_table,
)
from worldtrace.schemas.layouts import LayoutError

ERROR = "unknown key name 'Ctrl+Q'"


def _screen(episode: str, k: int) -> str:
    # Distinct, chaining screens; trailing spaces and a newline must survive verbatim.
    return f"[{episode} screen {k}]\n$ cmd{k} \n"


def _episode(episode_id: str, length: int, task: str, error_step: int | None) -> list[Transition]:
    steps = []
    for k in range(length):
        steps.append(
            make_transition(
                k,
                episode_id,
                task=task,
                observation=Observation(format="terminal-screen", text=_screen(episode_id, k)),
                action=Action(
                    name="keys",
                    arguments={"keys": [f"cmd{k + 1}", "Enter"]},
                    text=f"{episode_id} action {k}<Enter>",
                ),
                next_observation=Observation(
                    format="terminal-screen", text=_screen(episode_id, k + 1)
                ),
                action_error=ERROR if k == error_step else None,
            )
        )
    return steps


EPISODES = {
    "ep-a": _episode("ep-a", 4, "list the files", error_step=2),
    "ep-b": _episode("ep-b", 3, "make a folder", error_step=None),
}
ALL = [t for steps in EPISODES.values() for t in steps]
BY_ID = {t.id: t for t in ALL}


def _write(root: Path, layout: str, name: str, records: list[Transition]) -> None:
    folder = root / layout / "terminal"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_table(records, Transition), folder / name)


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    # Shuffled order: the exporter must group by episode and sort by step itself.
    records = [ALL[i] for i in (5, 0, 3, 6, 1, 4, 2)]
    _write(tmp_path / "data", "data", "train-00000-of-00001.parquet", records)
    return tmp_path / "data"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]  # every line is valid JSON


def _evaluator_messages(row: dict[str, Any]) -> list[dict[str, str]]:
    """Build the chat the way the AgentWorldBench reference evaluator does."""
    messages = [{"role": "system", "content": row["system_str"]}]
    for i in range(row["turn_idx"] - 1):
        messages.append({"role": "user", "content": row["prompt"][i]})
        messages.append({"role": "assistant", "content": row["response"][i]})
    messages.append({"role": "user", "content": row["current_prompt"]})
    return messages


def _evaluator_subtask(row: dict[str, Any]) -> str:
    """The domain key the reference evaluator reads to pick its judge prompt and parser."""
    task = row.get("task", "mcp")
    return task.split("/")[-1] if "/" in task else task


def _previous(t: Transition, n: int) -> list[Transition]:
    """The transitions of t's episode from n steps back up to and including t."""
    return [BY_ID[f"{t.episode_id}:{s:05d}"] for s in range(max(0, t.step - n), t.step + 1)]


def test_agentworld_rows_rebuild_the_recorded_transitions(hub: Path, tmp_path: Path) -> None:
    out = tmp_path / "aw"
    counts = export_agentworld(hub, out)
    assert counts == {"terminal": len(ALL)}
    rows = _read_jsonl(out / "terminal_train.jsonl")
    assert len(rows) == len(ALL)
    assert sorted(r["transition_id"] for r in rows) == sorted(BY_ID)
    # AgentWorldBench's own field types: an integer id, the domain key as the task.
    assert [r["id"] for r in rows] == list(range(len(rows)))
    for row in rows:
        t = BY_ID[row["transition_id"]]
        assert row["task"] == "terminal" == _evaluator_subtask(row)
        assert row["instruction"] == t.task
        assert row["trimmed_turns"] == 0
        assert isinstance(row["turn_idx"], int) and isinstance(row["total_turns"], int)
        assert row["system_str"] == system_prompt("terminal")
        assert row["turn_idx"] == row["total_turns"] == t.step + 1
        assert len(row["prompt"]) == len(row["response"]) == row["total_turns"]
        assert row["prompt"][row["turn_idx"] - 1] == row["current_prompt"]

        messages = _evaluator_messages(row)
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assert len(messages) == 2 * row["turn_idx"]
        assert messages[-1]["content"] == row["current_prompt"]
        assert f"### Turn {t.step + 1}\n" in row["current_prompt"]
        assert row["current_prompt"].endswith(f"**Action:**\n{t.action.text}")

        # The target is exactly the recorded next observation (and error, if any).
        target = row["response"][row["turn_idx"] - 1]
        assert parse_response(target) == (t.next_observation.text, t.action_error)
        assert target.endswith(t.next_observation.text)
        assert (f"**Error:** {ERROR}\n" in target) == (t.action_error is not None)

        # History turns' responses are the earlier recorded next observations, in order.
        history = _previous(t, t.step)[:-1]
        assistants = [m["content"] for m in messages if m["role"] == "assistant"]
        assert [parse_response(a)[0] for a in assistants] == [
            h.next_observation.text for h in history
        ]
        # Turn 1 carries the task and the initial observation.
        first = messages[1]["content"]
        assert first.startswith("### Turn 1\n")
        assert f"**Task:** {t.task}" in first
        assert f"**Initial Observation:**\n{_screen(t.episode_id, 0)}" in first
        # Later prompts carry only the action: the state comes from the previous response.
        for prompt in row["prompt"][1:]:
            assert "**Task:**" not in prompt
            assert "Observation:**" not in prompt


def test_agentworld_history_window(hub: Path, tmp_path: Path) -> None:
    out = tmp_path / "aw1"
    export_agentworld(hub, out, history=1)
    rows = {r["transition_id"]: r for r in _read_jsonl(out / "terminal_train.jsonl")}
    assert len(rows) == len(ALL)
    for row_id, row in rows.items():
        t = BY_ID[row_id]
        shown = _previous(t, 1)
        assert row["total_turns"] == row["turn_idx"] == len(shown) <= 2
        # Turn numbering is the episode's, not the window's.
        for prompt, s in zip(row["prompt"], shown, strict=True):
            assert prompt.startswith(f"### Turn {s.step + 1}\n")
            assert prompt.endswith(f"**Action:**\n{s.action.text}")
        assert [parse_response(r) for r in row["response"]] == [
            (s.next_observation.text, s.action_error) for s in shown
        ]
        # The first turn shown restates the task and the state it starts from.
        head = row["prompt"][0]
        assert f"**Task:** {t.task}" in head
        assert shown[0].observation.text in head
        assert row["current_prompt"] == row["prompt"][-1]

    # The window bounds the prompt: the last turn of ep-a has 2 turns instead of 4.
    full = {r["transition_id"]: r for r in _read_jsonl(_export(hub, tmp_path / "awfull"))}
    last = "ep-a:00003"
    assert full[last]["total_turns"] == 4
    assert rows[last]["total_turns"] == 2
    assert sum(map(len, rows[last]["prompt"] + rows[last]["response"])) < sum(
        map(len, full[last]["prompt"] + full[last]["response"])
    )
    # history=0: a single-step example holding the task, the state and the action.
    export_agentworld(hub, tmp_path / "aw0", history=0)
    for row in _read_jsonl(tmp_path / "aw0" / "terminal_train.jsonl"):
        t = BY_ID[row["transition_id"]]
        assert row["total_turns"] == 1
        assert t.observation.text in row["current_prompt"]
        assert parse_response(row["response"][0])[0] == t.next_observation.text


def _export(hub: Path, out: Path) -> Path:
    export_agentworld(hub, out)
    return out / "terminal_train.jsonl"


def test_openai_messages(hub: Path, tmp_path: Path) -> None:
    out = tmp_path / "oa"
    assert export_openai(hub, out) == {"terminal": len(ALL)}
    lines = _read_jsonl(out / "terminal.jsonl")
    assert len(lines) == len(ALL)
    assert sorted(line["transition_id"] for line in lines) == sorted(BY_ID)
    for line in lines:
        t = BY_ID[line["transition_id"]]
        assert line["instruction"] == t.task and line["trimmed_turns"] == 0
        messages = line["messages"]
        assert messages[0] == {"role": "system", "content": system_prompt("terminal")}
        roles = [m["role"] for m in messages[1:]]
        assert roles == ["user", "assistant"] * (t.step + 1)
        users = [m["content"] for m in messages[1::2]]
        assistants = messages[2::2]
        # The last pair is the target: the one message a trainer learns (weight 1).
        assert [m["weight"] for m in assistants] == [0] * t.step + [1]
        assert users[-1].endswith(f"**Action:**\n{t.action.text}")
        assert parse_response(assistants[-1]["content"]) == (
            t.next_observation.text,
            t.action_error,
        )
        assert (f"**Error:** {ERROR}" in assistants[-1]["content"]) == (t.action_error is not None)
        # The same texts as the agentworld row: the state and task once, at the start.
        shown = _previous(t, t.step)
        assert users[0].startswith("### Turn 1\n")
        assert (
            f"**Task:** {t.task}\n**Initial Observation:**\n{shown[0].observation.text}"
            in (users[0])
        )
        for user, h in zip(users, shown, strict=True):
            assert user.endswith(f"**Action:**\n{h.action.text}")
        for user in users[1:]:
            assert "Observation:**" not in user and "**Task:**" not in user
        assert [parse_response(m["content"])[0] for m in assistants] == [
            h.next_observation.text for h in shown
        ]

    export_openai(hub, tmp_path / "oa1", history=1)
    for line in _read_jsonl(tmp_path / "oa1" / "terminal.jsonl"):
        assert len(line["messages"]) in (3, 5)
        t = BY_ID[line["transition_id"]]
        assert line["trimmed_turns"] == max(0, t.step - 1)


def test_openai_user_turns_never_repeat_the_state_the_assistant_gave(
    hub: Path, tmp_path: Path
) -> None:
    # Each state of the episode appears once in a line: the initial one in the first user
    # turn, every later one as the assistant message that produced it.
    export_openai(hub, tmp_path / "oa")
    for line in _read_jsonl(tmp_path / "oa" / "terminal.jsonl"):
        t = BY_ID[line["transition_id"]]
        text = "\n".join(m["content"] for m in line["messages"])
        for k in range(t.step + 2):
            assert text.count(_screen(t.episode_id, k)) == 1, (t.id, k)
    # A window restates the state it starts from once, as the current observation.
    export_openai(hub, tmp_path / "oa1", history=1)
    line = next(
        x
        for x in _read_jsonl(tmp_path / "oa1" / "terminal.jsonl")
        if x["transition_id"] == "ep-a:00003"
    )
    users = [m["content"] for m in line["messages"][1::2]]
    assert users[0].startswith(
        f"### Turn 3\n**Task:** list the files\n**Current Observation:**\n{_screen('ep-a', 2)}"
    )
    assert users[1] == "### Turn 4\n**Action:**\nep-a action 3<Enter>"


def _tool_episode() -> list[Transition]:
    """A swe episode as the collector records it: tool calls, results with status lines."""
    results = [
        "Repository toolz at /workspace (3 files)\n",
        "1\tdef add(a, b):\n2\t    return a - b\n",
        "[error: old string not found]\n",
        "bash: pytst: command not found\n[exit code: 127]\n",
        "F\n1 failed in 0.02s\n[exit code: 1]\n",
    ]
    calls = [
        ("read_file", {"path": "toolz/a.py", "start_line": 1, "end_line": 2}),
        ("str_replace", {"path": "toolz/a.py", "old": "x", "new": "y"}),
        ("run_shell_command", {"command": "pytst -q"}),
        ("run_shell_command", {"command": "pytest -q"}),
    ]
    errors = ["old string not found", "exit status 127", "exit status 1"]
    steps = []
    for k, (name, arguments) in enumerate(calls):
        steps.append(
            make_transition(
                k,
                "ep-swe",
                domain="swe",
                env=EnvironmentRef(
                    name="swe/toolz", version="sha256:def", config_hash="beef", components={}
                ),
                task="fix add",
                observation=Observation(format="tool-result", text=results[k]),
                action=Action(
                    name=name,
                    arguments=arguments,
                    text=json.dumps({"name": name, "arguments": arguments}),
                ),
                next_observation=Observation(format="tool-result", text=results[k + 1]),
                action_error=errors[k - 1] if k else None,
            )
        )
    return steps


def _write_domain(root: Path, domain: str, records: list[Transition]) -> Path:
    folder = root / "data" / domain
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(to_table(records, Transition), folder / "train-0.parquet")
    return root


def test_openai_tool_episodes_put_the_environment_in_the_assistant_turn(tmp_path: Path) -> None:
    # World-model training: the agent's tool call is the input, the tool's result the target.
    steps = _tool_episode()
    pub = _write_domain(tmp_path / "pub", "swe", steps[::-1])
    assert export_openai(pub, tmp_path / "oa") == {"swe": 4}
    lines = _read_jsonl(tmp_path / "oa" / "swe.jsonl")
    for line, step in zip(lines, steps, strict=True):
        assert set(line) == {"messages", "transition_id", "instruction", "trimmed_turns"}
        assert line["transition_id"] == step.id
        messages = line["messages"]
        assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * (step.step + 1)
        assert all(set(m) <= {"role", "content", "weight"} for m in messages)
        assert all(isinstance(m["content"], str) for m in messages)
        assert messages[1]["content"].startswith(
            f"### Turn 1\n**Task:** fix add\n**Initial Observation:**\n{steps[0].observation.text}"
        )
        for k, (user, assistant) in enumerate(zip(messages[1::2], messages[2::2], strict=True)):
            assert user["content"].endswith(f"**Action:**\n```json\n{steps[k].action.text}\n```")
            assert parse_response(assistant["content"]) == (
                steps[k].next_observation.text,
                steps[k].action_error,
            )
    # A window starts from the state before its first call, labelled as the current one.
    export_openai(pub, tmp_path / "oa1", history=0)
    windowed = _read_jsonl(tmp_path / "oa1" / "swe.jsonl")[-1]
    assert len(windowed["messages"]) == 3 and windowed["trimmed_turns"] == 3
    assert windowed["messages"][1]["content"].startswith(
        f"### Turn 4\n**Task:** fix add\n**Current Observation:**\n{steps[3].observation.text}"
    )


def test_error_line_is_written_exactly_when_the_action_failed_as_the_prompt_says(
    tmp_path: Path,
) -> None:
    steps = _tool_episode()
    pub = _write_domain(tmp_path / "pub", "swe", steps)
    terminal = [
        make_transition(
            0,
            "ep-term",
            observation=Observation(format="terminal-screen", text="root@box:~# "),
            action=Action(name="keys", arguments={"keys": ["sl", "Enter"]}, text="sl<Enter>"),
            next_observation=Observation(
                format="terminal-screen",
                text="root@box:~# sl\nbash: sl: command not found\nroot@box:~# ",
                meta={"exit_code": 127},
            ),
            action_error="exit status 127",
        )
    ]
    _write_domain(pub, "terminal", terminal)
    export_agentworld(pub, tmp_path / "aw")
    export_openai(pub, tmp_path / "oa")
    for domain, records in (("swe", steps), ("terminal", terminal)):
        # The system prompt states the rule the targets follow: a failed action, in the
        # action_error sense (rejected, unfinished, or ran and signalled failure).
        prompt = system_prompt(domain)
        assert "non-zero exit status" in prompt and "tool result flagged as an error" in prompt
        assert "rejects it" in prompt and "cannot finish it" in prompt
        assert "When the action does not fail there is no such line." in prompt
        assert "invalid or malformed action)" not in prompt
        aw = _read_jsonl(tmp_path / "aw" / f"{domain}_train.jsonl")
        oa = _read_jsonl(tmp_path / "oa" / f"{domain}.jsonl")
        for row, line, record in zip(aw, oa, records, strict=True):
            assert row["system_str"] == line["messages"][0]["content"] == prompt
            for target in (row["response"][-1], line["messages"][-1]["content"]):
                if record.action_error:
                    assert target.startswith(f"**Error:** {record.action_error}\n")
                else:
                    assert target.startswith("**Environment Observation:**\n")
                assert parse_response(target) == (
                    record.next_observation.text,
                    record.action_error,
                )
    assert aw[0]["response"][-1].startswith("**Error:** exit status 127\n")


MCP_TOOLS = [
    {
        "name": "write_file",
        "description": "Create or overwrite a file.",
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
    {
        "name": "read_text_file",
        "description": "Read a file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        "outputSchema": {"type": "object", "properties": {"content": {"type": "string"}}},
    },
]

STORED_TOOLS = json.loads(json.dumps(MCP_TOOLS, sort_keys=True))
"""The definitions as a record's meta keeps them (JSON with sorted keys)."""


def _mcp_episode() -> list[Transition]:
    """An mcp episode whose first observation lists the server's tools in its meta."""
    texts = ["MCP server fs 1.0 over stdio\n2 tools", "Wrote a.txt", "hello"]
    calls = [
        ("write_file", {"content": "hello", "path": "a.txt"}),
        ("read_text_file", {"path": "a.txt"}),
    ]
    steps = []
    for k, (name, arguments) in enumerate(calls):
        meta = {"tools": MCP_TOOLS, "state": {"kind": "files"}} if k == 0 else {"state": {}}
        steps.append(
            make_transition(
                k,
                "ep-mcp",
                domain="mcp",
                task=None,
                env=EnvironmentRef(
                    name="mcp/filesystem", version="sha256:f00", config_hash="c0", components={}
                ),
                policy=PolicyRef(kind="explore", name="schema-explorer", version="1"),
                observation=Observation(format="tool-result", text=texts[k], meta=meta),
                action=Action(
                    name=name,
                    arguments=arguments,
                    text=json.dumps({"arguments": arguments, "name": name}, sort_keys=True),
                ),
                next_observation=Observation(format="tool-result", text=texts[k + 1]),
            )
        )
    return steps


def test_mcp_exports_carry_the_tool_definitions(tmp_path: Path) -> None:
    steps = _mcp_episode()
    folder = tmp_path / "pub" / "data" / "mcp"
    folder.mkdir(parents=True)
    pq.write_table(to_table(steps[::-1], Transition), folder / "train-0.parquet")
    export_openai(tmp_path / "pub", tmp_path / "oa")
    for line in _read_jsonl(tmp_path / "oa" / "mcp.jsonl"):
        # The definitions condition the world model through its system prompt; no `tools`
        # key tells a trainer that the assistant may call them.
        assert "tools" not in line
        assert line["messages"][0]["content"] == system_prompt("mcp", STORED_TOOLS)
        assert all(m["role"] in ("system", "user", "assistant") for m in line["messages"])
        assert line["instruction"] == (
            "Explore the mcp/filesystem environment: try its actions and see how it responds "
            "(no specific task)."
        )
    export_agentworld(tmp_path / "pub", tmp_path / "aw")
    rows = _read_jsonl(tmp_path / "aw" / "mcp_train.jsonl")
    assert [row["task"] for row in rows] == ["mcp", "mcp"]
    system = rows[0]["system_str"]
    assert system.startswith(system_prompt("mcp")) and system == system_prompt("mcp", STORED_TOOLS)
    # One JSON definition per line, the output schema kept where the tool has one.
    definitions = [json.loads(line) for line in system.split("\n") if line.startswith('{"name"')]
    assert [d["name"] for d in definitions] == ["write_file", "read_text_file"]
    assert "outputSchema" not in definitions[0] and definitions[1]["outputSchema"]
    # The call is a fenced JSON block, as in AgentWorldBench's MCP rows.
    assert rows[1]["current_prompt"].endswith(f"**Action:**\n```json\n{steps[1].action.text}\n```")
    assert parse_response(rows[1]["response"][-1]) == ("hello", None)


SEARCH_TOOLS = [
    {
        "name": "web_search",
        "description": "Search the corpus.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
    }
]


def test_an_episode_that_lists_tools_is_exported_as_tool_calls_whatever_its_formats(
    tmp_path: Path,
) -> None:
    # A search episode: results and pages have their own formats, not `tool-result`; the tools
    # listed in its first observation's meta make its steps tool calls.
    texts = ["Documentation search\nTools: web_search", "[1] http://docs.localhost/a.html", "# A"]
    formats = ["tool-result", "search-results", "markdown"]
    calls = [("web_search", {"query": "rebase"}), ("web_search", {"query": "stash"})]
    steps = [
        make_transition(
            k,
            "ep-search",
            domain="search",
            task=None,
            observation=Observation(
                format=formats[k], text=texts[k], meta={"tools": SEARCH_TOOLS} if k == 0 else {}
            ),
            action=Action(
                name=name,
                arguments=arguments,
                text=json.dumps({"arguments": arguments, "name": name}, sort_keys=True),
            ),
            next_observation=Observation(format=formats[k + 1], text=texts[k + 1]),
        )
        for k, (name, arguments) in enumerate(calls)
    ]
    folder = tmp_path / "pub" / "data" / "search"
    folder.mkdir(parents=True)
    pq.write_table(to_table(steps, Transition), folder / "train-0.parquet")
    export_openai(tmp_path / "pub", tmp_path / "oa")
    last = _read_jsonl(tmp_path / "oa" / "search.jsonl")[-1]
    assert "tools" not in last
    assert '{"name": "web_search"' in last["messages"][0]["content"]
    assert [m["role"] for m in last["messages"]] == ["system"] + ["user", "assistant"] * 2
    assert last["messages"][-2]["content"].endswith(
        f"**Action:**\n```json\n{steps[1].action.text}\n```"
    )
    assert parse_response(last["messages"][-1]["content"]) == ("# A", None)
    export_agentworld(tmp_path / "pub", tmp_path / "aw")
    rows = _read_jsonl(tmp_path / "aw" / "search_train.jsonl")
    assert rows[1]["current_prompt"].endswith(f"**Action:**\n```json\n{steps[1].action.text}\n```")
    assert '{"name": "web_search"' in rows[0]["system_str"]


def test_transitions_layout_and_multiple_shards(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write(run, "transitions", "part-00000.parquet", EPISODES["ep-a"][:2])
    _write(run, "transitions", "part-00001.parquet", EPISODES["ep-a"][2:] + EPISODES["ep-b"])
    for name, exporter in EXPORTERS.items():
        counts = exporter(run, tmp_path / name, None)
        assert counts == {"terminal": len(ALL)}
    rows = _read_jsonl(tmp_path / "agentworld" / "terminal_train.jsonl")
    row = next(r for r in rows if r["transition_id"] == "ep-a:00003")
    assert [parse_response(r)[0] for r in row["response"]] == [
        t.next_observation.text for t in EPISODES["ep-a"]
    ]
    assert len(_read_jsonl(tmp_path / "openai" / "terminal.jsonl")) == len(ALL)


def test_chain_break_restates_the_state(tmp_path: Path) -> None:
    # Step 1 of ep-a was dropped (e.g. by curation): turn for step 2 must show its own state.
    records = [EPISODES["ep-a"][i] for i in (0, 2, 3)]
    _write(tmp_path, "data", "x.parquet", records)
    export_agentworld(tmp_path, tmp_path / "out")
    rows = {r["transition_id"]: r for r in _read_jsonl(tmp_path / "out" / "terminal_train.jsonl")}
    prompts = rows["ep-a:00003"]["prompt"]
    assert f"**Current Observation:**\n{_screen('ep-a', 2)}" in prompts[1]
    assert "Observation:**" not in prompts[2]


def test_missing_source_and_bad_history(tmp_path: Path) -> None:
    with pytest.raises(LayoutError):
        export_agentworld(tmp_path, tmp_path / "out")
    _write(tmp_path, "data", "x.parquet", ALL)
    with pytest.raises(ValueError, match="history"):
        export_openai(tmp_path, tmp_path / "out", history=-1)
    assert not list((tmp_path / "out").glob("*.jsonl"))
    assert not list((tmp_path / "out").glob(".*"))


def test_prompts_cover_every_domain_and_round_trip() -> None:
    assert set(SYSTEM_PROMPTS) == set(DOMAINS)
    for domain in [*DOMAINS, "toy"]:
        text = system_prompt(domain)
        assert "next observation" in text and "**Environment Observation:**" in text
        assert "**Error:** <the environment's report of the failure>" in text
        assert "non-zero exit status" in text
    # A domain another package registered gets the common prompt, naming it.
    assert "the `toy` environment" in system_prompt("toy")
    assert render_action_prompt(3, "ls") == "### Turn 3\n**Action:**\nls"
    first = render_action_prompt(1, "ls", task="t", observation="$ ")
    assert first == "### Turn 1\n**Task:** t\n**Initial Observation:**\n$ \n**Action:**\nls"
    for obs, err in [("a\nb\n", None), ("", "bad\nkey"), ("**Error:** x", None)]:
        assert parse_response(render_response(obs, err)) == (obs, err)


def test_cli(hub: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from worldtrace.flows.cli import app

    out = tmp_path / "cli"
    args = ["export", str(hub), "--format", "openai", "--out", str(out), "--history", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"terminal: {len(ALL)} rows" in result.output
    assert len((out / "terminal.jsonl").read_text().splitlines()) == len(ALL)
    unknown = CliRunner().invoke(app, ["export", str(hub), "--format", "csv", "--out", str(out)])
    assert unknown.exit_code == 2 and "unknown format 'csv'" in unknown.output


def test_rows_of_an_episode_without_a_task_state_what_the_agent_was_doing(
    tmp_path: Path,
) -> None:
    explore = PolicyRef(kind="explore", name="terminal-explorer", version="1")
    replay = PolicyRef(kind="replay", name="replay", version="1")
    exploring = [t.model_copy(update={"task": None, "policy": explore}) for t in EPISODES["ep-b"]]
    replaying = [t.model_copy(update={"task": None, "policy": replay}) for t in EPISODES["ep-a"]]
    _write(tmp_path, "data", "x.parquet", exploring + replaying)
    export_agentworld(tmp_path, tmp_path / "out", history=1)
    export_openai(tmp_path, tmp_path / "oa", history=1)
    rows = _read_jsonl(tmp_path / "out" / "terminal_train.jsonl")
    lines = {
        line["transition_id"]: line for line in _read_jsonl(tmp_path / "oa" / "terminal.jsonl")
    }
    assert len(rows) == len(lines) == len(exploring) + len(replaying)
    expected = {
        "ep-b": "Explore the terminal/bash-tmux environment: try its actions and see how it "
        "responds (no specific task).",
        "ep-a": "Replay a recorded sequence of actions in the terminal/bash-tmux environment "
        "(no specific task).",
    }
    for row in rows:
        instruction = expected[row["transition_id"].split(":")[0]]
        assert _evaluator_subtask(row) == "terminal"
        # The same text in `instruction` and in the task line of the first turn shown.
        assert row["instruction"] == instruction
        assert f"\n**Task:** {instruction}\n" in row["prompt"][0]
        line = lines[row["transition_id"]]
        assert line["instruction"] == instruction
        assert line["messages"][1]["content"] == row["prompt"][0]
    assert instruction_for("fix add", "explore", "swe/toolz") == "fix add"
    assert instruction_for(None, "llm", "web/trac") == (
        "Act in the web/trac environment (no specific task)."
    )
