"""How the swe domain presents itself to a model (the ``llm`` policy).

The tools go to the model as function definitions made from the pydantic models that validate
the environment's own calls (:data:`~worldtrace.collectors.swe.tools.TOOLS`): each model's
JSON schema is the tool's input schema and its docstring the tool's description, so what the
model is offered is what the environment accepts.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel

from worldtrace.collectors.llm.policy import AgentPrompt
from worldtrace.collectors.swe.tools import MAX_TIMEOUT_S, TOOLS
from worldtrace.schemas.raw import RawObservation

SYSTEM = f"""\
You are a software engineer fixing a bug in a Python project. The project is a git repository
in /home/user/repo inside a sandbox without network access; you work in it as an
unprivileged user, through the tools you are given, one tool call per reply.

The first message after the task shows the repository: its name and version, `git status`,
and the entries of its top-level folder. After each call you see the tool's result:

- the tool's output (a command's stdout and stderr interleaved, a file with line numbers,
  search hits as `path:line:text`), cut to about 16,000 characters when it is longer: the
  head and the tail are kept with `[... N characters truncated ...]` between them;
- then one line per fact: `[error: ...]` when the call failed (a bad argument, a missing
  file, an edit whose old text is absent or not unique: nothing was changed),
  `[timed out after Ns]`, and `[exit code: N]` for a shell command or a test run.

Relative paths are relative to the repository. Every shell command starts afresh in the
repository: a `cd` or an `export` does not outlive its call. A command is killed after its
`timeout` (at most {MAX_TIMEOUT_S:g} seconds). Prefer `read_file`, `search` and `list_dir`
for reading, `str_replace` for small edits (its `old` text must occur exactly once in the
file: include enough surrounding lines) and `run_tests` for the test suite (a pytest node id,
a file or several of them in `selector`).

How to work: run the failing tests to see the failure, find its cause in the library code,
fix it there with the smallest change that is right (the tests are correct: do not edit
them), and run the tests again, the failing ones and their neighbours.

When you are finished, reply without calling a tool, with a short summary of what you
changed: that ends the episode, and the repository's tests judge your change to the source.
"""


def _without_titles(schema: Any, in_properties: bool = False) -> Any:
    """``schema`` without pydantic's generated ``title`` keys (noise in a tool definition).

    Inside a ``properties`` mapping the keys are field names, kept whatever they are.
    """
    if isinstance(schema, dict):
        return {
            key: _without_titles(value, in_properties=key == "properties" and not in_properties)
            for key, value in schema.items()
            if in_properties or key != "title"
        }
    if isinstance(schema, list):
        return [_without_titles(item) for item in schema]
    return schema


def _description(model: type[BaseModel]) -> str:
    """The tool's docstring as plain text (reStructuredText's double backticks as single)."""
    return inspect.cleandoc(model.__doc__ or "").replace("``", "`")


def tool_definitions(first: RawObservation | None = None) -> list[dict[str, Any]]:
    """The swe tools as MCP-style ``{name, description, inputSchema}`` definitions.

    The same for every episode (the first observation is not needed): made from the models
    the environment validates each call with.
    """
    definitions = []
    for name, model in TOOLS.items():
        schema = _without_titles(model.model_json_schema())
        schema.pop("description", None)  # the docstring again: it is the tool's description
        definitions.append(
            {"name": name, "description": _description(model), "inputSchema": schema}
        )
    return definitions


AGENT_PROMPT = AgentPrompt(system=SYSTEM, tools=tool_definitions)
