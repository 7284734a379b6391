"""Mutations of one function (collectors/swe/mutations.py), on inline code and on real modules
(the sdists in the swe images)."""

from __future__ import annotations

import ast
import random
from collections import Counter
from contextlib import closing

import pytest

from worldtrace.collectors.swe.mutations import (
    MUTATION_KINDS,
    Mutation,
    find_mutations,
    shuffled,
)
from worldtrace.collectors.swe.repos import REPOSITORY_PATH, get_repo
from worldtrace.sandboxes.docker import DockerSandbox

SNIPPET = '''\
import os

LIMIT = 3 == 3  # module code: never mutated


def helper(value, factor=2 > 1):
    return value


class Box:
    size = max(1, 2)  # a class attribute: never mutated

    @staticmethod
    def label(name="é" if 1 < 2 else "e"):
        """Docstring."""
        text = "é" + name  # a non-ASCII character before code on the line
        return text[1:]

    def fits(self, items):
        if not items:
            return False
        total = 0
        for item in items[1:]:
            total += item
        try:
            value = os.path.join(items[0], "x")
        except TypeError:
            value = None
        while total > 10:
            total -= 10
        return total < self.size
'''


def mutations_of(kind: str, function: str | None = None) -> list[Mutation]:
    return [
        mutation
        for mutation in find_mutations(SNIPPET, "pkg/box.py")
        if mutation.kind == kind and (function is None or mutation.function == function)
    ]


def mutated_lines(mutation: Mutation, source: str = SNIPPET) -> tuple[list[str], list[str]]:
    """The lines that differ: (removed, added), each stripped."""
    import difflib

    removed, added = [], []
    for line in difflib.ndiff(source.splitlines(), mutation.apply(source).splitlines()):
        if line.startswith("- "):
            removed.append(line[2:].strip())
        elif line.startswith("+ "):
            added.append(line[2:].strip())
    return removed, added


def test_flip_comparison_changes_only_the_operator() -> None:
    (mutation,) = [m for m in mutations_of("flip-comparison", "Box.fits") if m.line == 31]
    assert (mutation.original, mutation.mutated) == (" < ", " >= ")
    assert mutated_lines(mutation) == (["return total < self.size"], ["return total >= self.size"])
    flipped = {mutated_lines(m)[1][0] for m in mutations_of("flip-comparison", "Box.fits")}
    assert flipped == {"while total <= 10:", "return total >= self.size"}


def test_off_by_one_moves_bounds_not_plain_numbers() -> None:
    added = sorted(mutated_lines(m)[1][0] for m in mutations_of("off-by-one", "Box.fits"))
    assert added == [
        "for item in items[0:]:",
        "for item in items[2:]:",
        "value = os.path.join(items[1], 'x')".replace("'", '"'),
        "while total > 11:",
        "while total > 9:",
    ]  # `total = 0` and `total += item` hold no bound: untouched


def test_drop_statement_removes_lines_or_leaves_pass() -> None:
    dropped = {m.description.split("dropped ")[1]: m for m in mutations_of("drop-statement")}
    removed, added = mutated_lines(dropped["'total = 0'"])
    assert (removed, added) == (["total = 0"], [])
    # The only statement of the loop's body becomes `pass`, on the same line.
    sole = dropped["'total += item'"]
    assert mutated_lines(sole) == (["total += item"], ["pass"])
    assert '\'"""Docstring."""\'' not in dropped  # a docstring is never dropped
    assert all(ast.parse(m.apply(SNIPPET)) for m in dropped.values())


def test_swap_arguments_exchanges_the_argument_texts() -> None:
    (mutation,) = mutations_of("swap-arguments", "Box.fits")
    assert mutated_lines(mutation)[1] == ['value = os.path.join("x", items[0])']
    assert mutation.original == 'items[0], "x"'


def test_invert_condition_negates_or_removes_not() -> None:
    added = sorted(mutated_lines(m)[1][0] for m in mutations_of("invert-condition", "Box.fits"))
    # `if not items` loses its `not`; a single comparison is left to flip-comparison.
    assert added == ["if items:"]


def test_change_return_negates_booleans_and_nones_the_rest() -> None:
    added = sorted(mutated_lines(m)[1][0] for m in mutations_of("change-return"))
    assert added == [
        "return None",  # helper's `return value`
        "return None",  # label's `return text[1:]`
        "return True",
        "return not total < self.size",
    ]


def test_remove_exception_handler_unwraps_the_try_body() -> None:
    (mutation,) = mutations_of("remove-exception-handler")
    result = mutation.apply(SNIPPET)
    assert '        value = os.path.join(items[0], "x")\n        while total > 10:' in result
    assert "try:" not in result and "except TypeError" not in result


def test_every_mutation_parses_and_stays_in_its_function_body() -> None:
    found = find_mutations(SNIPPET, "pkg/box.py")
    assert {m.kind for m in found} == set(MUTATION_KINDS)
    for mutation in found:
        assert_sound(mutation, SNIPPET)
    # Module code, class attributes, decorators and default values are never touched.
    lines = SNIPPET.splitlines()
    untouchable = {index + 1 for index, line in enumerate(lines) if "never mutated" in line}
    untouchable |= {
        index + 1 for index, line in enumerate(lines) if line.strip().startswith(("def ", "@"))
    }
    assert not {m.line for m in found} & untouchable


def test_mutations_are_deterministic_by_seed() -> None:
    first = find_mutations(SNIPPET, "pkg/box.py")
    assert first == find_mutations(SNIPPET, "pkg/box.py")
    assert shuffled(first, 3) == shuffled(first, 3)
    assert shuffled(first, 3) != shuffled(first, 4)
    assert sorted(shuffled(first, 3), key=first.index) == first


def test_a_mutation_refuses_another_source_and_a_broken_module_is_an_error() -> None:
    mutation = mutations_of("swap-arguments")[0]
    with pytest.raises(ValueError, match="differs from the one"):
        mutation.apply(SNIPPET.replace("items[0]", "items[9]"))
    with pytest.raises(ValueError, match=r"pkg/bad\.py does not parse"):
        find_mutations("def f(:\n", "pkg/bad.py")


def test_the_diff_applies_with_git_apply_semantics() -> None:
    mutation = mutations_of("flip-comparison", "Box.fits")[0]
    diff = mutation.diff(SNIPPET)
    assert diff.startswith("--- a/pkg/box.py\n+++ b/pkg/box.py\n@@ ")
    assert (
        sum(1 for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))
        == 2
    )


def assert_sound(mutation: Mutation, source: str) -> None:
    """The mutant parses, differs from ``source`` exactly in the span, inside the function."""
    mutated = mutation.apply(source)
    ast.parse(mutated)
    assert mutated != source
    assert mutated[: mutation.start] == source[: mutation.start]
    tail = len(source) - mutation.end
    assert mutated[len(mutated) - tail :] == source[mutation.end :]
    # A module may define a name twice (`if WIN: def f...` / `else: def f...`): one holds it.
    last_line = mutation.line + mutation.original.count("\n")
    assert any(
        min(node.lineno for node in function.body) <= mutation.line
        and last_line <= function.end_lineno + 1  # a dropped last line ends on the next line
        for function in functions_named(ast.parse(source), mutation.function)
    ), mutation


def functions_named(
    tree: ast.Module, qualname: str
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function of ``tree`` with this qualified name."""
    found = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for statement in body:
            for node in ast.walk(statement):
                if isinstance(node, ast.ClassDef) and f"{prefix}{node.name}." in qualname + ".":
                    visit(node.body, f"{prefix}{node.name}.")
                elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    if f"{prefix}{node.name}" == qualname:
                        found.append(node)
                    visit(node.body, f"{prefix}{node.name}.<locals>.")

    visit(tree.body, "")
    return found


REAL_MODULES = {
    "toolz": ("toolz/itertoolz.py", "toolz/dicttoolz.py"),
    "sqlparse": ("sqlparse/sql.py", "sqlparse/lexer.py", "sqlparse/utils.py"),
    "click": ("src/click/parser.py", "src/click/formatting.py"),
}


@pytest.mark.docker
@pytest.mark.parametrize("repo", sorted(REAL_MODULES))
def test_real_modules(repo: str, swe_images: dict[str, str]) -> None:
    # The modules as the repository's image holds them (its PyPI sdist, unpacked).
    with closing(DockerSandbox(swe_images[get_repo(repo).image]).start()) as box:
        sources = {
            relative: box.get_file(f"{REPOSITORY_PATH}/{relative}").decode("utf-8")
            for relative in REAL_MODULES[repo]
        }
    kinds: Counter[str] = Counter()
    rng = random.Random(0)
    for relative, source in sources.items():
        found = find_mutations(source, relative)
        kinds.update(m.kind for m in found)
        # Each check parses the whole module again: a sample keeps the test quick.
        for mutation in rng.sample(found, min(len(found), 30)):
            assert mutation.file == relative
            assert_sound(mutation, source)
    assert set(kinds) == set(MUTATION_KINDS), kinds
    assert find_mutations(source, relative) == found  # the same again
