"""The mcp exploring policy on the real tool lists of the seven reference servers.

The tool lists in ``tests/mcp/data/tools/`` are the servers' own ``tools/list`` answers, raw
from the wire: recorded over stdio from the pinned releases (npm
``@modelcontextprotocol/server-filesystem``, ``server-memory``, ``server-everything``
2026.8.31, ``server-postgres`` 0.6.2; PyPI ``mcp-server-git``, ``mcp-server-time``
2026.10.19, ``mcp-server-fetch`` 2026.10.24), with a client that offers no capabilities like
mcp 2.3.0's default ``Client``; ``everything-capable.json`` with one that offers sampling,
elicitation and roots (server-everything then lists more tools).

No server runs here: the answers the policy reads are STAND-INS built by these tests (a few
files behind a dict, a JSON graph), labelled as such where they are made. They have the shape
of the real answers (``[FILE] name`` listings, JSON text) so that what the policy learns from
them is what it learns from the real servers.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import subprocess
import sys
import threading
import time
import zoneinfo
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from worldtrace.collectors.mcp.explore import (
    INVALID_KINDS,
    UNATTENDED_TOOLS,
    VOCABULARY,
    McpExplorePolicy,
    field_kind,
)
from worldtrace.collectors.tool_calls import schema_problems
from worldtrace.schemas import Action

TOOLS_DIR = Path(__file__).parent / "data" / "tools"
SERVERS = ("filesystem", "git", "memory", "postgres", "time", "fetch", "everything")
# The manifest's examples as the plan gives them (collectors/mcp/image/servers.json).
EXAMPLES = {
    "filesystem": ["/srv/project", "/srv/project/README.md"],
    "git": ["/srv/repo", "main"],
    "memory": [],
    "postgres": ["SELECT count(*) FROM orders"],
    "time": ["Europe/Paris", "America/New_York"],
    "fetch": ["http://127.0.0.1/"],
    "everything": [],
}

Answer = Callable[[Action], dict[str, Any]]


def tools_of(server: str) -> list[dict[str, Any]]:
    """The server's recorded tool definitions, as on the wire."""
    return json.loads((TOOLS_DIR / f"{server}.json").read_text())["tools"]


def text_result(text: str, error: bool = False) -> dict[str, Any]:
    """A tool result with one text block, the shape every reference server answers with."""
    return {"content": [{"type": "text", "text": text}], "isError": error}


def plain_answer(action: Action) -> dict[str, Any]:
    """A stand-in answer that only repeats the call: no values to learn but the arguments."""
    return {"result": text_result(f"called {action.name}"), "protocol_error": None}


def walk(
    policy: McpExplorePolicy,
    server: str,
    seed: int,
    answer: Answer = plain_answer,
    state: Callable[[], dict[str, Any]] | None = None,
) -> list[Action]:
    """Play one episode against stand-in answers; return the calls in order."""
    policy.reset(seed, None)
    snapshot = state or (lambda: {"kind": "none"})
    observation: dict[str, Any] = {
        "tools": tools_of(server),
        "examples": EXAMPLES[server],
        "state": snapshot(),
    }
    actions: list[Action] = []
    while (action := policy.act(observation, [])) is not None:
        actions.append(action)
        observation = {
            "tool": action.name,
            "arguments": action.arguments,
            **answer(action),
            "state": snapshot(),
            "schema_problems": schema_problems(action, tools_of(server)),
        }
    return actions


def walk_texts(server: str, seed: int, steps: int = 25) -> list[str]:
    """The canonical texts of an episode's calls (the subprocess test calls this too)."""
    policy = McpExplorePolicy(steps=steps, invalid_share=0.2)
    return [action.text for action in walk(policy, server, seed)]


class StandInFiles:
    """A STAND-IN for server-filesystem's answers (not the real server): files in a dict.

    Listings are ``[FILE] name`` / ``[DIR] name`` lines, reads return the content, writes
    create files in existing folders, and a path that does not exist is an error, as the
    real server does. Relative paths resolve against the root, as the real server does.
    """

    ROOT = "/srv/project"

    def __init__(self, listings: bool = True) -> None:
        self.listings = listings
        self.files = {
            "/srv/project/README.md": "# Demo project\nSee docs/guide.md.\n",
            "/srv/project/docs/guide.md": "# Guide\nRun the app.\n",
            "/srv/project/docs/api.md": "# API\nGET /items\n",
            "/srv/project/src/app.py": "print('hello')\n",
        }
        self.dirs = {"/srv/project", "/srv/project/docs", "/srv/project/src"}

    def resolve(self, path: Any) -> str | None:
        if not isinstance(path, str) or not path:
            return None
        return posixpath.normpath(posixpath.join(self.ROOT, path))

    def state(self) -> dict[str, Any]:
        names = {posixpath.relpath(p, self.ROOT): "0123456789abcdef" for p in self.files}
        names |= {posixpath.relpath(d, self.ROOT): "dir" for d in self.dirs if d != self.ROOT}
        return {"kind": "files", "root": self.ROOT, "files": names}

    def answer(self, action: Action) -> dict[str, Any]:
        arguments = action.arguments
        path = self.resolve(arguments.get("path"))
        name = action.name
        if name in ("list_directory", "list_directory_with_sizes") and path in self.dirs:
            entries = sorted(
                [
                    f"[DIR] {posixpath.basename(d)}"
                    for d in self.dirs
                    if posixpath.dirname(d) == path
                ]
                + [
                    f"[FILE] {posixpath.basename(f)}"
                    for f in self.files
                    if posixpath.dirname(f) == path
                ]
            )
            return {
                "result": text_result("\n".join(entries) if self.listings else ""),
                "protocol_error": None,
            }
        if name in ("read_file", "read_text_file", "get_file_info") and path in self.files:
            return {"result": text_result(self.files[path]), "protocol_error": None}
        if name == "write_file" and path and posixpath.dirname(path) in self.dirs:
            self.files[path] = str(arguments.get("content"))
            return {"result": text_result(f"Successfully wrote to {path}"), "protocol_error": None}
        if name == "list_allowed_directories":
            return {
                "result": text_result(f"Allowed directories:\n{self.ROOT}"),
                "protocol_error": None,
            }
        return {
            "result": text_result(f"Error: ENOENT: no such file or directory, '{path}'", True),
            "protocol_error": None,
        }


def path_arguments(action: Action) -> list[str]:
    """The path values of a filesystem call (``path``, ``paths``, ``source`` ...)."""
    values: list[str] = []
    for field, value in action.arguments.items():
        if field_kind(field, {}) != "path":
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                values.append(item)
    return values


# --- reproducibility -------------------------------------------------------------------------


@pytest.mark.parametrize("server", SERVERS)
def test_the_same_seed_gives_the_same_calls(server: str) -> None:
    first = walk_texts(server, seed=11)
    again = walk_texts(server, seed=11)
    assert len(first) == 25
    assert first == again


def test_the_same_seed_gives_the_same_calls_in_a_fresh_process() -> None:
    # Another interpreter with other string hashing: no order may come from a set or a hash.
    script = (
        "import json, runpy, sys\n"
        f"module = runpy.run_path({str(Path(__file__))!r})\n"
        f"print(json.dumps({{s: module['walk_texts'](s, 5) for s in {SERVERS!r}}}))\n"
    )
    here = {server: walk_texts(server, 5) for server in SERVERS}
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == here


def test_different_seeds_give_different_calls() -> None:
    for server in ("filesystem", "memory", "git"):
        walks = [walk_texts(server, seed) for seed in range(4)]
        assert len({json.dumps(w) for w in walks}) == 4, server


def test_episodes_in_threads_are_the_same_as_alone() -> None:
    alone = {server: walk_texts(server, 3) for server in ("filesystem", "memory")}
    found: dict[str, list[str]] = {}
    threads = [
        threading.Thread(target=lambda s=server: found.__setitem__(s, walk_texts(s, 3)))
        for server in alone
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == alone


# --- valid and invalid calls -----------------------------------------------------------------


@pytest.mark.parametrize("server", SERVERS)
def test_valid_calls_pass_the_schema_check(server: str) -> None:
    tools = tools_of(server)
    policy = McpExplorePolicy(steps=30, invalid_share=0.0)
    for seed in range(3):
        actions = walk(policy, server, seed)
        assert policy.call_kinds() == ("valid",) * 30
        for action in actions:
            assert schema_problems(action, tools) == [], action.text


def test_the_invalid_share_is_kept_over_many_calls() -> None:
    policy = McpExplorePolicy(steps=25, invalid_share=0.3)
    kinds: list[str] = []
    for seed in range(4):
        for server in SERVERS:
            walk(policy, server, seed)
            kinds += policy.call_kinds()
    invalid = sum(kind != "valid" for kind in kinds) / len(kinds)
    assert len(kinds) == 700
    # Binomial: the standard deviation of the share is 0.017 here; 0.05 is three of them.
    assert abs(invalid - 0.3) < 0.05, invalid


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_no_or_every_call_invalid(share: float) -> None:
    policy = McpExplorePolicy(steps=40, invalid_share=share)
    walk(policy, "git", 1)
    expected = share == 1.0
    assert all((kind != "valid") == expected for kind in policy.call_kinds())


def test_invalid_calls_fail_the_schema_or_name_nothing_that_exists() -> None:
    tools = tools_of("filesystem")
    names = {tool["name"] for tool in tools}
    seen_kinds: dict[str, int] = {}
    for seed in range(6):
        files = StandInFiles()
        missing_at_call: list[bool] = []  # whether a path of the call named nothing, then

        def answer(
            action: Action, files: StandInFiles = files, missing: list[bool] = missing_at_call
        ) -> dict[str, Any]:
            paths = [files.resolve(p) for p in path_arguments(action)]
            missing.append(any(p not in files.files and p not in files.dirs for p in paths))
            return files.answer(action)

        policy = McpExplorePolicy(steps=40, invalid_share=0.5)
        actions = walk(policy, "filesystem", seed, answer, files.state)
        for index, (action, kind) in enumerate(zip(actions, policy.call_kinds(), strict=True)):
            seen_kinds[kind] = seen_kinds.get(kind, 0) + 1
            problems = schema_problems(action, tools)
            if kind in ("wrong_type", "missing_required"):
                assert problems and action.name in names, action.text
            elif kind == "unknown_tool":
                assert action.name not in names, action.text
            elif kind == "nonexistent":
                assert problems == [] and missing_at_call[index], action.text
                assert not action.name.startswith(("write", "create")), action.text
    assert set(seen_kinds) == {"valid", *INVALID_KINDS}, seen_kinds
    assert min(seen_kinds.values()) >= 5, seen_kinds


@pytest.mark.parametrize("server", SERVERS)
def test_valid_calls_hold_readable_strings_and_numbers_in_sensible_ranges(server: str) -> None:
    # Stand-in answers that show nothing: every string comes from the manifest's examples,
    # the schema (enums, defaults, quoted examples) or the policy's vocabulary, never from
    # random code points; numbers stay near the default and inside the schema's range.
    tools = {tool["name"]: tool["inputSchema"] for tool in tools_of(server)}
    policy = McpExplorePolicy(steps=40, invalid_share=0.0)
    for seed in range(3):
        for action in walk(policy, server, seed):
            properties = tools[action.name].get("properties") or {}
            for field, value in action.arguments.items():
                schema = properties[field]
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, str):
                        assert re.fullmatch(r"[ -~]*", item), (action.text, field)
                        assert item.strip() or "enum" in schema, (action.text, field)
                    elif isinstance(item, int | float) and not isinstance(item, bool):
                        low = schema.get("minimum", 0)
                        high = schema.get("maximum", max(100, 2 * schema.get("default", 0)))
                        assert low <= item <= high, (action.text, field)


def test_it_reads_a_file_before_it_edits_it_and_quotes_its_text() -> None:
    edits = 0
    for seed in range(6):
        files = StandInFiles()

        def answer(action: Action, files: StandInFiles = files) -> dict[str, Any]:
            nonlocal edits
            if action.name == "edit_file":
                # The file as it is when the edit comes (the stand-in does not apply edits).
                edits += 1
                content = files.files.get(files.resolve(action.arguments["path"]) or "", "")
                quoted = [edit["oldText"] for edit in action.arguments["edits"]]
                assert all(text in content for text in quoted), action.text
                assert len(set(quoted)) == len(quoted), action.text
            return files.answer(action)

        walk(McpExplorePolicy(steps=40, invalid_share=0.0), "filesystem", seed, answer, files.state)
    assert edits >= 1


def test_a_new_file_or_folder_gets_a_readable_name_in_an_existing_folder() -> None:
    made = []
    for seed in range(6):
        files = StandInFiles()
        policy = McpExplorePolicy(steps=40, invalid_share=0.0)
        for action in walk(policy, "filesystem", seed, files.answer, files.state):
            for field in ("path", "destination"):
                path = files.resolve(action.arguments.get(field))
                making = action.name in ("write_file", "create_directory", "move_file")
                if making and path and path not in files.files and path not in files.dirs:
                    made.append(path)
    assert len(made) >= 5
    words = set(VOCABULARY) | {"md", "py", "txt", "guide", "api", "app", "readme"}
    for path in made:
        assert posixpath.dirname(path) in StandInFiles().dirs, path
        name = posixpath.basename(path)
        assert re.fullmatch(r"[a-z]+(?:-[a-z]+)*(?:\.[a-z]+)?", name), path
        assert set(re.findall(r"[a-z]+", name)) <= words, path


# --- chaining through seen values ------------------------------------------------------------


def test_paths_it_saw_listed_are_used_later() -> None:
    # No example names these: only a listing of /srv/project ("[DIR] docs", "[DIR] src") and
    # then of those folders ("[FILE] guide.md" ...) shows them.
    hidden = {
        "/srv/project/docs",
        "/srv/project/src",
        "/srv/project/docs/guide.md",
        "/srv/project/docs/api.md",
        "/srv/project/src/app.py",
    }

    def uses(listings: bool) -> list[int]:
        counts = []
        for seed in range(8):
            files = StandInFiles(listings=listings)
            policy = McpExplorePolicy(steps=30, invalid_share=0.0)
            actions = walk(policy, "filesystem", seed, files.answer, files.state)
            counts.append(sum(path in hidden for a in actions for path in path_arguments(a)))
        return counts

    assert uses(listings=False) == [0] * 8  # the paths come from the listings, nowhere else
    # About five uses an episode here, in three episodes out of four.
    with_listings = uses(listings=True)
    assert sum(with_listings) >= 16 and sum(n > 0 for n in with_listings) >= 4, with_listings


def test_a_written_file_is_read_back() -> None:
    chained = 0
    for seed in range(10):
        files = StandInFiles()
        policy = McpExplorePolicy(steps=30, invalid_share=0.0)
        actions = walk(policy, "filesystem", seed, files.answer, files.state)
        written: set[str] = set()
        for action in actions:
            path = files.resolve(action.arguments.get("path"))
            if action.name == "write_file" and path in files.files:
                written.add(path)
            elif action.name.startswith("read") and path in written:
                chained += 1
    assert chained >= 1


def test_names_from_json_results_are_used_in_later_calls() -> None:
    # A STAND-IN for server-memory's read_graph answer (its JSON shape, made-up entities).
    graph = {
        "entities": [
            {"name": "Ada Lovelace", "entityType": "person", "observations": ["wrote notes"]},
            {"name": "Analytical Engine", "entityType": "machine", "observations": []},
        ],
        "relations": [{"from": "Ada Lovelace", "to": "Analytical Engine", "relationType": "uses"}],
    }

    def answer(action: Action) -> dict[str, Any]:
        if action.name == "read_graph":
            return {
                "result": {**text_result(json.dumps(graph)), "structuredContent": graph},
                "protocol_error": None,
            }
        return plain_answer(action)

    def names_used(seed: int) -> int:
        policy = McpExplorePolicy(steps=30, invalid_share=0.0)
        actions = walk(policy, "memory", seed, answer)
        after = [a for i, a in enumerate(actions) if "read_graph" in {b.name for b in actions[:i]}]
        return sum(text in a.text for a in after for text in ("Ada Lovelace", "Analytical Engine"))

    assert sum(names_used(seed) for seed in range(6)) >= 6


def test_description_examples_and_manifest_examples_fill_fields() -> None:
    def answer(action: Action) -> dict[str, Any]:
        # A STAND-IN for mcp-server-time: a zone it does not know is an error, as there.
        zones = [v for k, v in action.arguments.items() if k.endswith("timezone")]
        if all(isinstance(z, str) and z in zoneinfo.available_timezones() for z in zones):
            return {"result": text_result(json.dumps({"zones": zones})), "protocol_error": None}
        return {"result": text_result("Error: Invalid timezone", True), "protocol_error": None}

    policy = McpExplorePolicy(steps=40, invalid_share=0.0)
    actions = [a for seed in range(3) for a in walk(policy, "time", seed, answer)]
    zones = [v for a in actions for k, v in a.arguments.items() if k.endswith("timezone")]
    # From the manifest and from the descriptions ("e.g., 'America/New_York', 'Europe/London'")
    known = {"Europe/Paris", "America/New_York", "Europe/London", "Asia/Tokyo", "UTC"}
    assert {"Europe/Paris", "Europe/London"} <= set(zones)
    assert sum(zone in known for zone in zones) >= 0.6 * len(zones)
    times = [a.arguments["time"] for a in actions if a.name == "convert_time"]
    clock = [t for t in times if len(t) == 5 and t[2] == ":" and t.replace(":", "").isdigit()]
    assert len(clock) >= 0.6 * len(times)


# --- tools it does not call, steps, parameters -----------------------------------------------


def test_skip_tools_are_never_called() -> None:
    skipped = ["read_file", "write_file", "list_directory", "move_file"]
    policy = McpExplorePolicy(steps=80, invalid_share=0.0, skip_tools=skipped)
    called = {a.name for seed in range(3) for a in walk(policy, "filesystem", seed)}
    assert not called & set(skipped)
    assert len(called) == len(tools_of("filesystem")) - len(skipped)
    assert policy.skipped_tools() == dict.fromkeys(skipped, "in skip_tools")


def test_tools_that_cannot_work_unattended_are_skipped_by_default() -> None:
    capable = [tool["name"] for tool in tools_of("everything-capable")]
    unattended = [n for n in capable if n in UNATTENDED_TOOLS or n == "simulate-research-query"]
    assert "trigger-sampling-request" in unattended and "trigger-elicitation-request" in unattended

    def called(skip_unattended: bool) -> set[str]:
        policy = McpExplorePolicy(steps=60, invalid_share=0.0, skip_unattended=skip_unattended)
        policy_walk = [walk(policy, "everything", seed) for seed in range(3)]
        # The recorded capable list, served as if it were the episode's server.
        policy.reset(0, None)
        observation = {"tools": tools_of("everything-capable"), "examples": [], "state": {}}
        names = {a.name for actions in policy_walk for a in actions}
        while (action := policy.act(observation, [])) is not None:
            names.add(action.name)
            observation = {"tool": action.name, **plain_answer(action), "state": {}}
        return names

    assert not called(skip_unattended=True) & set(unattended)
    assert called(skip_unattended=False) >= set(unattended)


def test_it_stops_after_its_steps_and_starts_again_on_reset() -> None:
    policy = McpExplorePolicy(steps=3)
    first = walk(policy, "git", 4)
    assert len(first) == 3
    assert policy.act({"tool": "x", **plain_answer(first[-1])}, []) is None
    assert walk(policy, "git", 4) == first


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"steps": 0}, "steps should be greater than or equal to 1, got 0"),
        ({"steps": 2.5}, "steps should be a valid integer, got 2.5"),
        ({"steps": True}, "steps should be a valid integer, got True"),
        ({"invalid_share": 1.5}, "invalid_share should be less than or equal to 1, got 1.5"),
        ({"invalid_share": "0.1"}, "invalid_share should be a valid number, got '0.1'"),
        ({"reuse_share": -0.1}, "reuse_share should be greater than or equal to 0"),
        ({"skip_tools": "read_file"}, "skip_tools should be a valid list, got 'read_file'"),
        ({"skip_tools": ["read_file", ""]}, r"skip_tools\[1\] should have at least 1 character"),
        ({"skip_unattended": "no"}, "skip_unattended should be a valid boolean, got 'no'"),
        ({"step": 5}, r"unknown parameters for the mcp explore policy: \['step'\]"),
    ],
)
def test_bad_parameters_are_refused(params: Mapping[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        McpExplorePolicy(**params)


def test_a_server_with_nothing_to_call_is_a_clear_error() -> None:
    names = [tool["name"] for tool in tools_of("time")]
    policy = McpExplorePolicy(skip_tools=names)
    with pytest.raises(ValueError, match="no tool to call: the server lists get_current_time"):
        walk(policy, "time", 0)
    with pytest.raises(ValueError, match="must carry `tools`"):
        McpExplorePolicy().act({"state": {}}, [])


def test_a_tool_whose_schema_gives_no_values_is_skipped_with_the_reason() -> None:
    # Made-up tool definitions (a server's schema is third-party data): a reference to
    # nowhere, an unknown type, a range nothing is in; then one tool that works.
    broken = {
        "to-nowhere": {
            "type": "object",
            "properties": {"a": {"$ref": "#/nope"}},
            "required": ["a"],
        },
        "unknown-type": {"type": "object", "properties": {"a": {"type": "wat"}}, "required": ["a"]},
        "empty-range": {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 5, "maximum": 1}},
            "required": ["n"],
        },
    }
    tools = [{"name": name, "inputSchema": schema} for name, schema in broken.items()]
    tools.append({"name": "works", "inputSchema": {"type": "object", "properties": {}}})
    policy = McpExplorePolicy(steps=30, invalid_share=0.0)
    policy.reset(0, None)
    observation: dict[str, Any] = {"tools": tools, "examples": []}
    called = set()
    while (action := policy.act(observation, [])) is not None:
        called.add(action.name)
        observation = {"tool": action.name, **plain_answer(action)}
    assert called == {"works"}
    reasons = policy.skipped_tools()
    assert set(reasons) == set(broken)
    assert "Unresolvable JSON pointer" in reasons["to-nowhere"]
    assert all(reason.startswith("no values from its input schema") for reason in reasons.values())


def test_describe_names_the_policy_and_the_libraries_its_values_come_from() -> None:
    ref = McpExplorePolicy().describe()
    assert (ref.kind, ref.name) == ("explore", "mcp-explore")
    # 2: arguments grounded in what the episode saw (issue 23); Hypothesis is the fallback.
    assert ref.version.startswith("2+hypothesis-6.")
    assert "+hypothesis-jsonschema-0.23" in ref.version


def test_generating_a_call_takes_a_few_milliseconds() -> None:
    policy = McpExplorePolicy(steps=20)
    for server in SERVERS:
        walk(policy, server, 1000)  # strategies built, Unicode tables loaded
    started = time.perf_counter()
    calls = sum(len(walk(policy, server, seed)) for seed in range(3) for server in SERVERS)
    per_call_ms = (time.perf_counter() - started) * 1000 / calls
    # About 2-6 ms here; hypothesis-jsonschema building whole objects took 10-30 ms a value.
    assert per_call_ms < 20, per_call_ms


# --- on the real servers ---------------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.parametrize("server", ["memory", "git"])
def test_a_walk_on_the_real_server_is_the_same_from_the_same_seed(
    server: str, mcp_image: str
) -> None:
    # These two servers answer the same calls the same way (no clock in their answers), so
    # the same seed must give the same calls, answers included, episode after episode.
    from worldtrace.collectors.mcp.environment import McpConfig, McpEnvironment

    def real_walk(seed: int) -> tuple[list[str], list[str], list[dict[str, Any]]]:
        environment = McpEnvironment(McpConfig(server=server))
        policy = McpExplorePolicy(steps=15, invalid_share=0.2)
        try:
            observation = environment.reset(seed, None)
            policy.reset(seed, None)
            texts, observations = [], []
            while (action := policy.act(observation, [])) is not None:
                outcome = environment.step(action, 30)
                assert not outcome.truncated, outcome.error
                observation = outcome.observation
                texts.append(action.text)
                observations.append(observation)
            return texts, list(policy.call_kinds()), observations
        finally:
            environment.close()

    texts, kinds, observations = real_walk(21)
    assert real_walk(21)[:2] == (texts, kinds)
    assert real_walk(22)[0] != texts
    answered = 0
    for kind, observation in zip(kinds, observations, strict=True):
        if kind == "valid":
            assert observation["schema_problems"] == []
        if kind in ("wrong_type", "missing_required", "unknown_tool"):
            assert observation["schema_problems"]
        result = observation["result"]
        answered += result is not None and not result.get("isError")
    assert answered >= 5  # calls that chain through seen values mostly work
