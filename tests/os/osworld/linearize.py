"""OSWorld's own ``linearize_accessibility_tree``, loaded from the ``desktop-env`` package.

Run by the reference venv's Python (``scripts/osworld_venv.sh``): reads ``{"apps": [[name,
xml], ...]}`` on stdin and prints ``{"apps": [[name, table], ...]}``. ``mm_agents/agent.py``
imports model clients at its top (openai, dashscope, groq...) that the venv leaves out, so
only what the function needs is taken from it: its namespace constants and the function
itself, found in the file's syntax tree and run with the package's own
``heuristic_retrieve.filter_nodes``. Nothing of the function is rewritten.
"""

from __future__ import annotations

import ast
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import mm_agents
from mm_agents.accessibility_tree_wrap.heuristic_retrieve import filter_nodes


def load_linearize():  # type: ignore[no-untyped-def]
    """OSWorld's ``linearize_accessibility_tree`` from the installed ``mm_agents/agent.py``."""
    source_path = Path(mm_agents.__file__).parent / "agent.py"
    module = ast.parse(source_path.read_text(encoding="utf-8"))
    kept: list[ast.stmt] = []
    for statement in module.body:
        if (
            isinstance(statement, ast.Assign)
            and all(
                isinstance(target, ast.Name) and "_ns_" in target.id for target in statement.targets
            )
        ) or (
            isinstance(statement, ast.FunctionDef)
            and statement.name == "linearize_accessibility_tree"
        ):
            kept.append(statement)
    namespace = {"ET": ET, "filter_nodes": filter_nodes}
    code = compile(ast.Module(body=kept, type_ignores=[]), str(source_path), "exec")
    exec(code, namespace)  # OSWorld's own function, as its package ships it
    return namespace["linearize_accessibility_tree"]


def main() -> None:
    """Linearize every application's tree given on stdin."""
    linearize = load_linearize()
    request = json.loads(sys.stdin.read())
    tables = [[name, linearize(xml, platform="ubuntu")] for name, xml in request["apps"]]
    sys.stdout.write(json.dumps({"apps": tables}) + "\n")


if __name__ == "__main__":
    main()
