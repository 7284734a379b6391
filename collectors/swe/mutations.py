"""Synthetic bugs: small mutations of one function or method, found with the ``ast`` module.

SWE-smith style procedural bugs, our own code. :func:`find_mutations` lists every candidate
mutation of a module's functions; :func:`shuffled` orders them by a seed. A mutation is a text
edit of one span of the module (an operator, an expression, a statement's lines), so the rest
of the file keeps its formatting and the bug's diff is as small as the change itself.

Every candidate is checked before it is offered: the edited function must parse, and its
syntax tree must be exactly the original function's with the intended change made on the tree
(so an edit whose text would mean something else in its context, a missing pair of
parentheses, a dedent that changes a string, is never offered). Nothing outside function and
method bodies is touched: not decorators, default values, annotations, class attributes or
module code.

Kinds (:data:`MUTATION_KINDS`):

- ``flip-comparison``: one comparison operator to its opposite (``==``/``!=``, ``<``/``>=``,
  ``>``/``<=``, ``in``/``not in``, ``is``/``is not``).
- ``off-by-one``: an integer bound one more or one less (a compared constant, a slice or index
  bound, a ``+ n``/``- n`` operand, a ``range()`` argument); a computed slice bound or
  ``range()`` end gets ``+ 1`` or ``- 1``.
- ``drop-statement``: one statement that does something removed (``pass`` where the body would
  become empty).
- ``swap-arguments``: two adjacent positional arguments of a call exchanged.
- ``invert-condition``: an ``if``/``while``/conditional-expression test negated (or its
  ``not`` removed); not a constant test, nor a single comparison (that is a flip).
- ``change-return``: a returned boolean negated, any other returned value replaced by ``None``.
- ``remove-exception-handler``: a ``try``/``except`` (without ``finally``) unwrapped to its
  ``try`` body (and its ``else`` body).
"""

from __future__ import annotations

import ast
import difflib
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

MUTATION_KINDS: tuple[str, ...] = (
    "flip-comparison",
    "off-by-one",
    "drop-statement",
    "swap-arguments",
    "invert-condition",
    "change-return",
    "remove-exception-handler",
)
"""Every kind of mutation, in the order :func:`find_mutations` looks for them."""

_FLIPPED: dict[type[ast.cmpop], tuple[str, str, type[ast.cmpop]]] = {
    # operator: (pattern of its token in the source, replacement text, flipped operator)
    ast.Eq: (r"==", "!=", ast.NotEq),
    ast.NotEq: (r"!=", "==", ast.Eq),
    ast.Lt: (r"<(?![<=])", ">=", ast.GtE),
    ast.GtE: (r">=", "<", ast.Lt),
    ast.Gt: (r"(?<![>-])>(?![>=])", "<=", ast.LtE),
    ast.LtE: (r"<=", ">", ast.Gt),
    ast.In: (r"\bin\b", "not in", ast.NotIn),
    ast.NotIn: (r"\bnot\s+in\b", "in", ast.In),
    ast.Is: (r"\bis\b", "is not", ast.IsNot),
    ast.IsNot: (r"\bis\s+not\b", "is", ast.Is),
}

# Expressions that bind at least as tightly as `+`/`-` and as `not`: they need no parentheses
# as an operand of either. Anything else is parenthesized (the tree check is the final word).
_TIGHT = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.List, ast.Tuple)
_BOOLEAN_CALLS = frozenset({"isinstance", "issubclass", "callable", "hasattr", "all", "any"})
_DROPPABLE = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Expr,
    ast.Return,
    ast.Raise,
    ast.Delete,
    ast.Break,
    ast.Continue,
    ast.If,
    ast.For,
    ast.While,
    ast.With,
)
_MAX_DROPPED_LINES = 4
"""A dropped compound statement (``if``, ``for``...) spans at most this many lines."""
# An expression slot of a function body: (node, parent, field or index, holder). The holder is
# the parent itself or the list the node sits in (lists of expressions, operators, statements).
_Slot = tuple[ast.expr, ast.AST, str | int, list[Any] | ast.AST]


@dataclass(frozen=True)
class Mutation:
    """One mutation of one function: a text edit of ``original`` at ``start:end`` to ``mutated``.

    ``description`` says what changed, for us; it is never shown to an agent.
    """

    kind: str
    file: str
    """The module's path, relative to the repository root."""
    function: str
    """Qualified name of the mutated function or method (``Class.method``, ``f.<locals>.g``)."""
    line: int
    """First line (1-based) of the edited span."""
    original: str
    """The edited span's source text before the mutation."""
    mutated: str
    """The text that replaces it."""
    description: str
    start: int
    """Character offset of the span in the module's source."""
    end: int

    def apply(self, source: str) -> str:
        """Return ``source`` with the mutation made; raise ValueError if it is another source."""
        if source[self.start : self.end] != self.original:
            raise ValueError(
                f"{self.file} line {self.line}: the source differs from the one the mutation "
                "was found in"
            )
        return source[: self.start] + self.mutated + source[self.end :]

    def diff(self, source: str) -> str:
        """Return the unified diff (``a/``/``b/`` paths, like git's) that makes the mutation."""
        return unified_diff(self.file, source, self.apply(source))


def unified_diff(path: str, before: str, after: str) -> str:
    """Return a ``git apply``-able unified diff of one file from ``before`` to ``after``."""
    lines = difflib.unified_diff(
        _diff_lines(before), _diff_lines(after), f"a/{path}", f"b/{path}", n=3
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


@dataclass(frozen=True)
class _Candidate:
    """A mutation before its text edit is checked against its intended tree change."""

    kind: str
    function: str
    start: int
    end: int
    texts: tuple[str, ...]
    """Replacement texts to try in order (plain first, then with parentheses)."""
    description: str
    holder: list[Any] | ast.AST
    """Where the tree change is made: a statement list, or the node owning ``field``."""
    field: str | int
    """The field of ``holder`` (or index in it) that the change replaces."""
    replacement: object
    """The new value of that field (a node, an operator, or a list of statements)."""


class _Source:
    """A module's text with conversions from ast positions (UTF-8 columns) to offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of line ``lineno`` (1-based), UTF-8 byte column ``col``."""
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        return self.starts[lineno - 1] + len(line.encode()[:col].decode(errors="replace"))

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        """The character span of ``node``."""
        end_col = node.end_col_offset
        if end_col is None:
            raise ValueError(f"{type(node).__name__} has no end position: not parsed from source")
        return self.offset(node.lineno, node.col_offset), self.offset(_end_line(node), end_col)

    def segment(self, node: ast.expr | ast.stmt) -> str:
        """The source text of ``node``."""
        start, end = self.span(node)
        return self.text[start:end]

    def line_start(self, lineno: int) -> int:
        """Offset of the first character of line ``lineno``."""
        return self.starts[lineno - 1]

    def line_end(self, lineno: int) -> int:
        """Offset just past line ``lineno``, its newline included."""
        return self.starts[lineno]


def find_mutations(source: str, file: str) -> list[Mutation]:
    """Return every checked mutation of the functions and methods in ``source``, in file order.

    ``file`` is the module's repository-relative path, recorded in each mutation. A source
    that does not parse is a ValueError.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"{file} does not parse: {error}") from None
    text = _Source(source)
    mutations = []
    for qualname, function in _functions(tree.body, ""):
        finder = _Finder(text, qualname)
        for candidate in finder.candidates(function):
            mutation = _checked(candidate, function, text, file)
            if mutation is not None:
                mutations.append(mutation)
    return mutations


def shuffled(mutations: Sequence[Mutation], seed: int) -> list[Mutation]:
    """Return ``mutations`` in a seeded random order (the same order for the same seed)."""
    ordered = list(mutations)
    random.Random(seed).shuffle(ordered)
    return ordered


def _functions(
    body: Sequence[ast.stmt], prefix: str
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Yield every function in ``body`` (nested ones too) with its qualified name."""
    for statement in body:
        for node in _direct_definitions(statement):
            if isinstance(node, ast.ClassDef):
                yield from _functions(node.body, f"{prefix}{node.name}.")
            else:
                yield f"{prefix}{node.name}", node
                yield from _functions(node.body, f"{prefix}{node.name}.<locals>.")


def _direct_definitions(
    node: ast.AST,
) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Yield the definitions in ``node`` that are not inside another definition."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node
        return
    for child in ast.iter_child_nodes(node):
        yield from _direct_definitions(child)


def _own_nodes(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.AST]:
    """Yield the nodes of ``function``'s body, not those of nested definitions or f-strings.

    Positions inside f-strings are not reliable on every Python version, so they are left out.
    """
    stack: list[ast.AST] = list(reversed(function.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.JoinedStr):
            continue
        yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _statement_lists(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[list[ast.stmt]]:
    """Yield every statement list (bodies, else branches, handlers) of ``function`` itself."""
    yield function.body
    for node in _own_nodes(function):
        for field in ("body", "orelse", "finalbody"):
            value = getattr(node, field, None)
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                yield value
        if isinstance(node, ast.match_case):
            yield node.body


class _Finder:
    """Lists the candidate mutations of one function."""

    def __init__(self, text: _Source, qualname: str) -> None:
        self.text = text
        self.qualname = qualname

    def candidates(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[_Candidate]:
        """Yield every candidate, kind by kind in the order of :data:`MUTATION_KINDS`."""
        nodes = list(self._with_parents(function))
        yield from self._flip_comparisons(nodes)
        yield from self._off_by_ones(nodes)
        yield from self._dropped_statements(function)
        yield from self._swapped_arguments(nodes)
        yield from self._inverted_conditions(nodes)
        yield from self._changed_returns(nodes)
        yield from self._unwrapped_handlers(function)

    def _with_parents(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[_Slot]:
        """Yield (node, parent, field or index, holder) for each expression slot in the body."""
        for parent in [function, *_own_nodes(function)]:
            for field, value in ast.iter_fields(parent):
                if parent is function and field != "body":
                    continue  # decorators, defaults and annotations are not the body
                if isinstance(value, ast.expr):
                    yield value, parent, field, parent
                elif isinstance(value, list):
                    for index, item in enumerate(value):
                        if isinstance(item, ast.expr):
                            yield item, parent, index, value

    def _candidate(
        self,
        kind: str,
        node: ast.expr | ast.stmt,
        texts: tuple[str, ...],
        description: str,
        holder: list[Any] | ast.AST,
        field: str | int,
        replacement: object,
        span: tuple[int, int] | None = None,
    ) -> _Candidate:
        start, end = span or self.text.span(node)
        return _Candidate(
            kind, self.qualname, start, end, texts, description, holder, field, replacement
        )

    def _flip_comparisons(self, nodes: list[_Slot]) -> Iterator[_Candidate]:
        for node, *_ in nodes:
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            for index, operator in enumerate(node.ops):
                pattern, flipped_text, flipped = _FLIPPED[type(operator)]
                start = self.text.span(operands[index])[1]
                end = self.text.span(operands[index + 1])[0]
                between = self.text.text[start:end]
                if len(re.findall(pattern, between)) != 1:
                    continue  # a comment in the way: leave this one out
                yield self._candidate(
                    "flip-comparison",
                    node,
                    (re.sub(pattern, flipped_text, between),),
                    f"{between.strip()!r} -> {flipped_text!r}",
                    node.ops,
                    index,
                    flipped(),
                    span=(start, end),
                )

    def _off_by_ones(self, nodes: list[_Slot]) -> Iterator[_Candidate]:
        for node, parent, field, holder in nodes:
            value = _integer_value(node)
            if value is not None and _is_bound(parent, field):
                for delta in (1, -1):
                    new = value + delta
                    if value == 0 and delta == -1:
                        continue  # x[0] -> x[-1] is not an off-by-one
                    yield self._candidate(
                        "off-by-one",
                        node,
                        (str(new),),
                        f"{self.text.segment(node)} -> {new}",
                        holder,
                        field,
                        _integer_node(new),
                    )
            elif value is None and _is_computed_bound(parent, field):
                segment = self.text.segment(node)
                tight = isinstance(node, _TIGHT) or (
                    isinstance(node, ast.BinOp)
                    and isinstance(node.op, ast.Add | ast.Sub | ast.Mult | ast.Div | ast.FloorDiv)
                )
                operand = segment if tight else f"({segment})"
                for symbol, operator in (("+", ast.Add()), ("-", ast.Sub())):
                    yield self._candidate(
                        "off-by-one",
                        node,
                        (f"{operand} {symbol} 1", f"({segment}) {symbol} 1"),
                        f"{segment} -> {segment} {symbol} 1",
                        holder,
                        field,
                        ast.BinOp(left=node, op=operator, right=ast.Constant(1)),
                    )

    def _dropped_statements(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> Iterator[_Candidate]:
        for body in _statement_lists(function):
            for index, statement in enumerate(body):
                if not _droppable(statement):
                    continue
                lines = _end_line(statement) - statement.lineno + 1
                if isinstance(statement, ast.If | ast.For | ast.While | ast.With) and (
                    lines > _MAX_DROPPED_LINES
                ):
                    continue
                others = [other for other in body if other is not statement]
                alone = self._alone_on_lines(statement, body, index)
                description = f"dropped {self.text.segment(statement).splitlines()[0].strip()!r}"
                if alone and others and not _only_docstring(others):
                    start = self.text.line_start(statement.lineno)
                    end = self.text.line_end(_end_line(statement))
                    yield self._candidate(
                        "drop-statement",
                        statement,
                        ("",),
                        description,
                        body,
                        index,
                        [],
                        span=(start, end),
                    )
                else:
                    yield self._candidate(
                        "drop-statement",
                        statement,
                        ("pass",),
                        description,
                        body,
                        index,
                        [ast.Pass()],
                    )

    def _alone_on_lines(self, statement: ast.stmt, body: list[ast.stmt], index: int) -> bool:
        """Whether nothing but whitespace and a comment shares the statement's lines."""
        start, end = self.text.span(statement)
        before = self.text.text[self.text.line_start(statement.lineno) : start]
        after = self.text.text[end : self.text.line_end(_end_line(statement))]
        neighbours_apart = (index == 0 or _end_line(body[index - 1]) < statement.lineno) and (
            index == len(body) - 1 or body[index + 1].lineno > _end_line(statement)
        )
        return not before.strip() and after.strip()[:1] in ("", "#") and neighbours_apart

    def _swapped_arguments(self, nodes: list[_Slot]) -> Iterator[_Candidate]:
        for node, *_ in nodes:
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            if any(isinstance(argument, ast.Starred) for argument in node.args):
                continue
            for index in range(len(node.args) - 1):
                first, second = node.args[index], node.args[index + 1]
                if ast.dump(first) == ast.dump(second):
                    continue
                start, first_end = self.text.span(first)
                second_start, end = self.text.span(second)
                between = self.text.text[first_end:second_start]
                swapped = list(node.args)
                swapped[index], swapped[index + 1] = second, first
                yield self._candidate(
                    "swap-arguments",
                    node,
                    (self.text.segment(second) + between + self.text.segment(first),),
                    f"swapped arguments {index + 1} and {index + 2} of "
                    f"{self.text.segment(node.func)}()",
                    node,
                    "args",
                    swapped,
                    span=(start, end),
                )

    def _inverted_conditions(self, nodes: list[_Slot]) -> Iterator[_Candidate]:
        for node, parent, field, holder in nodes:
            if field != "test" or not isinstance(parent, ast.If | ast.While | ast.IfExp):
                continue
            if isinstance(node, ast.Constant):
                continue  # `while True`: negating it only stops the loop
            if isinstance(node, ast.Compare) and len(node.ops) == 1:
                continue  # the same as flipping the comparison, which reads better
            texts, replacement = self._negation(node)
            yield self._candidate(
                "invert-condition",
                node,
                texts,
                f"negated condition {self.text.segment(node).splitlines()[0]!r}",
                holder,
                field,
                replacement,
            )

    def _negation(self, node: ast.expr) -> tuple[tuple[str, ...], ast.expr]:
        """The texts (plain, parenthesized) and the tree of ``node`` negated."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.text.segment(node.operand)
            return (inner, f"({inner})"), node.operand
        segment = self.text.segment(node)
        plain = f"not {segment}" if isinstance(node, (*_TIGHT, ast.Compare, ast.UnaryOp)) else None
        wrapped = f"not ({segment})"
        texts = (plain, wrapped) if plain else (wrapped,)
        return texts, ast.UnaryOp(op=ast.Not(), operand=node)

    def _changed_returns(self, nodes: list[_Slot]) -> Iterator[_Candidate]:
        for node, parent, field, holder in nodes:
            if not isinstance(parent, ast.Return) or field != "value":
                continue
            if isinstance(node, ast.Constant) and node.value is None:
                continue
            segment = self.text.segment(node)
            if isinstance(node, ast.Constant) and isinstance(node.value, bool):
                texts: tuple[str, ...] = (str(not node.value),)
                replacement: ast.expr = ast.Constant(not node.value)
            elif _is_boolean(node):
                texts, replacement = self._negation(node)
            else:
                texts, replacement = ("None",), ast.Constant(None)
            yield self._candidate(
                "change-return",
                node,
                texts,
                f"return {segment.splitlines()[0]!r} -> return {texts[0]!r}",
                holder,
                field,
                replacement,
            )

    def _unwrapped_handlers(
        self, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> Iterator[_Candidate]:
        for body in _statement_lists(function):
            for index, statement in enumerate(body):
                if not isinstance(statement, ast.Try) or statement.finalbody:
                    continue
                if not statement.handlers or statement.body[0].lineno == statement.lineno:
                    continue
                kept = [*statement.body, *statement.orelse]
                text = self._dedented(statement, kept)
                if text is None:
                    continue
                start = self.text.line_start(statement.lineno)
                end = self.text.line_end(_end_line(statement))
                caught = ", ".join(
                    self.text.segment(handler.type) if handler.type else "everything"
                    for handler in statement.handlers
                )
                yield self._candidate(
                    "remove-exception-handler",
                    statement,
                    (text,),
                    f"removed the handler of {caught} around line {statement.body[0].lineno}",
                    body,
                    index,
                    kept,
                    span=(start, end),
                )

    def _dedented(self, statement: ast.Try, kept: list[ast.stmt]) -> str | None:
        """The lines of ``kept`` moved left to the ``try``'s indentation, or None if unclear."""
        outer = self.text.lines[statement.lineno - 1][: statement.col_offset]
        chunks = []
        for part in (statement.body, statement.orelse):
            if not part:
                continue
            first_line = self.text.lines[part[0].lineno - 1]
            inner = first_line[: len(first_line) - len(first_line.lstrip())]
            if not inner.startswith(outer) or inner == outer:
                return None
            for lineno in range(part[0].lineno, _end_line(part[-1]) + 1):
                line = self.text.lines[lineno - 1]
                chunks.append(outer + line[len(inner) :] if line.startswith(inner) else line)
        text = "".join(chunks)
        return text if text.endswith("\n") else text + "\n"


def _checked(
    candidate: _Candidate,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    text: _Source,
    file: str,
) -> Mutation | None:
    """The candidate as a Mutation if one of its texts parses to exactly its intended tree.

    Only the function's own lines are parsed again (not the whole module, which made large
    modules quadratic): an edit inside them that still parses to a complete definition leaves
    the tokens of every other line as they were. An indented definition is parsed as the body
    of an ``if 1:`` (any indentation is valid there), so its text is checked as it stands.
    """
    expected = _dump_with(function, candidate.holder, candidate.field, candidate.replacement)
    first_line = min(node.lineno for node in [function, *function.decorator_list])
    begin = text.line_start(first_line)
    finish = text.line_end(_end_line(function))
    nested = function.col_offset > 0
    original = text.text[candidate.start : candidate.end]
    for replacement in candidate.texts:
        if replacement == original:
            continue
        lines = text.text[begin : candidate.start] + replacement + text.text[candidate.end : finish]
        try:
            parsed = ast.parse(("if 1:\n" if nested else "") + lines).body
        except SyntaxError:
            continue
        if nested:
            wrapper = parsed[0] if len(parsed) == 1 else None
            parsed = wrapper.body if isinstance(wrapper, ast.If) else []
        if len(parsed) != 1 or ast.dump(parsed[0]) != expected:
            continue
        line = text.text.count("\n", 0, candidate.start) + 1
        return Mutation(
            kind=candidate.kind,
            file=file,
            function=candidate.function,
            line=line,
            original=original,
            mutated=replacement,
            description=f"{candidate.kind} in {candidate.function} (line {line}): "
            f"{candidate.description}",
            start=candidate.start,
            end=candidate.end,
        )
    return None


def _dump_with(
    tree: ast.AST, holder: list[Any] | ast.AST, field: str | int, replacement: object
) -> str:
    """The dump of ``tree`` with ``holder[field]`` replaced (restored before returning)."""
    if isinstance(holder, list):
        assert isinstance(field, int)
        saved = holder[field]
        if isinstance(replacement, list):
            holder[field : field + 1] = replacement
            try:
                return ast.dump(tree)
            finally:
                holder[field : field + len(replacement)] = [saved]
        holder[field] = replacement
        try:
            return ast.dump(tree)
        finally:
            holder[field] = saved
    assert isinstance(field, str)
    saved = getattr(holder, field)
    setattr(holder, field, replacement)
    try:
        return ast.dump(tree)
    finally:
        setattr(holder, field, saved)


def _end_line(node: ast.expr | ast.stmt) -> int:
    """The last line of ``node``: set on every node ``ast.parse`` makes (None only by hand)."""
    if node.end_lineno is None:
        raise ValueError(f"{type(node).__name__} has no end position: not parsed from source")
    return node.end_lineno


def _integer_value(node: ast.AST) -> int | None:
    """The value of an integer literal (``3``, ``-1``), or None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
    ):
        return -node.operand.value
    return None


def _integer_node(value: int) -> ast.expr:
    """The tree ``ast.parse`` gives for the literal ``value``."""
    if value < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-value))
    return ast.Constant(value)


def _is_bound(parent: ast.AST, field: str | int) -> bool:
    """Whether an integer in this slot is a bound: compared, sliced, indexed, added, a range."""
    if isinstance(parent, ast.Compare):
        return True
    if isinstance(parent, ast.Slice):
        return field in ("lower", "upper")
    if isinstance(parent, ast.Subscript):
        return field == "slice"
    if isinstance(parent, ast.BinOp):
        return isinstance(parent.op, ast.Add | ast.Sub)
    if isinstance(parent, ast.Call):
        return _is_range(parent) and isinstance(field, int)
    return False


def _is_computed_bound(parent: ast.AST, field: str | int) -> bool:
    """Whether a computed value here is a slice bound or the end of a ``range()``."""
    if isinstance(parent, ast.Slice):
        return field in ("lower", "upper")
    if isinstance(parent, ast.Call) and _is_range(parent) and isinstance(field, int):
        return field == (0 if len(parent.args) == 1 else 1)
    return False


def _is_range(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "range" and not call.keywords


def _is_boolean(node: ast.expr) -> bool:
    """Whether ``node`` is evidently a truth value (a comparison, ``not``, ``and``/``or``...)."""
    if isinstance(node, ast.Compare | ast.BoolOp):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _BOOLEAN_CALLS
    )


def _droppable(statement: ast.stmt) -> bool:
    """Whether dropping ``statement`` is a plausible bug (not a docstring, not a no-op)."""
    if not isinstance(statement, _DROPPABLE):
        return False
    if isinstance(statement, ast.Expr):
        return isinstance(statement.value, ast.Call | ast.Await | ast.Yield | ast.YieldFrom)
    if isinstance(statement, ast.AnnAssign):
        return statement.value is not None
    return True


def _only_docstring(statements: list[ast.stmt]) -> bool:
    """Whether ``statements`` is a lone string expression (a body must keep a real statement)."""
    return (
        len(statements) == 1
        and isinstance(statements[0], ast.Expr)
        and isinstance(statements[0].value, ast.Constant)
        and isinstance(statements[0].value.value, str)
    )
