"""The import direction of the design: shared stages ask the registry, never a domain.

Read from the source with :mod:`ast` (imports inside functions count too), so a shortcut
taken anywhere in a module fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO
from worldtrace.collectors.registry import available_domains

SHARED_STAGES = (
    "schemas",
    "sandboxes",
    "normalizers",
    "curation",
    "publishing",
    "exports",
    "flows",
)
LOWER_LAYERS = {
    "schemas": {
        "sandboxes",
        "collectors",
        "normalizers",
        "curation",
        "publishing",
        "exports",
        "flows",
    },
    "sandboxes": {"collectors", "normalizers", "curation", "publishing", "exports", "flows"},
    "collectors": {"normalizers", "curation", "publishing", "exports", "flows"},
    "normalizers": {"curation", "publishing", "exports", "flows"},
}
"""What each layer may not import: imports point from flows down to schemas."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return {name for name in names if name.startswith("worldtrace.")}


def _modules(folder: str) -> list[Path]:
    return sorted(path for path in (REPO / folder).rglob("*.py") if "image" not in path.parts)


def test_no_shared_stage_imports_a_domain() -> None:
    domains = set(available_domains())
    shared = [path for stage in SHARED_STAGES for path in _modules(stage)]
    shared += sorted((REPO / "collectors").glob("*.py"))  # the shared collector machinery
    shared += _modules("collectors/llm")
    assert len(shared) > 50 and {"terminal", "web", "swe"} <= domains
    offending = {
        f"{path.relative_to(REPO)} imports {name}"
        for path in shared
        for name in _imports(path)
        if name.split(".")[1] == "collectors"
        and len(name.split(".")) > 2
        and name.split(".")[2] in domains
    }
    assert offending == set()


def test_imports_point_down_the_layers() -> None:
    offending = {
        f"{path.relative_to(REPO)} imports {name}"
        for layer, forbidden in LOWER_LAYERS.items()
        for path in _modules(layer)
        for name in _imports(path)
        if name.split(".")[1] in forbidden
    }
    assert offending == set()


def test_no_domain_imports_another() -> None:
    domains = set(available_domains())
    offending = {
        f"{path.relative_to(REPO)} imports {name}"
        for domain in domains
        if (REPO / "collectors" / domain).is_dir()  # a built-in domain
        for path in _modules(f"collectors/{domain}")
        for name in _imports(path)
        if name.startswith("worldtrace.collectors.") and name.split(".")[2] in domains - {domain}
    }
    assert offending == set()


def _sandbox_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``sandboxes/`` that ``path`` imports, at module level or in a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from worldtrace.sandboxes import remote` names a module; `from ….docker import X`
            # names the module it comes from.
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["worldtrace", "sandboxes"] and len(parts) > 2 and parts[2] in modules:
                found.add(parts[2])
    return found - {path.stem}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in import order, the first repeated), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for target in sorted(graph[module]):
            cycle = visit(target, [*path, module])
            if cycle:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle:
            return cycle
    return None


def test_sandbox_modules_import_each_other_one_way() -> None:
    """No circle among the modules of ``sandboxes/``, counting imports inside functions.

    A circle broken only by an import inside a function hides which module builds on which;
    the errors, the limits, the choice of engine and the container each live in a module of
    their own so that every import points one way.
    """
    files = {path.stem: path for path in sorted((REPO / "sandboxes").glob("*.py"))}
    files.pop("__init__")  # it re-exports names for callers; no module here imports it
    graph = {stem: _sandbox_imports(path, set(files)) for stem, path in files.items()}
    assert {"docker", "engine", "images", "remote"} <= graph.keys()
    assert {"images", "remote"} <= graph["docker"]  # the walk sees what docker.py imports
    assert _cycle(graph) is None, (
        f"sandboxes modules import each other in a circle: {_cycle(graph)}"
    )
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
