"""Scripted search tasks: questions a user asks, answerable from one page of the corpus.

A task is a question (``question``; the agent's ``instruction`` adds where to put the answer),
the answers accepted for it (``answers``: an option name, a function name, a number), the
corpus pages that hold the answer (``documents``, URLs of the corpus site as
``notes/search-spec.md`` fixes them, first the one the script reads), a short exact phrase of
the first page (``passage``, next to the answer: tests of the real image look for it in the
fetched page's markdown) and the calls an engineer would make (``steps``): search, open the
page, put the answer in memory under :data:`ANSWER_KEY`; some tasks search twice (a vague
query, then a refined one) or list or retrieve their memory at the end. The last search
before the first page is opened is the one that finds that page in its top ten. One module
per collection (``git``, ``postgresql``, ``python``, ``man``, ``sqlite``,
``debian_reference``), each with ``TASKS``.

After the episode the environment calls :func:`answered` with the final memory: a task is
solved when a memory value holds one of its answers as a whole token (see
:func:`answer_in_text`). The documentation pages were read in the Debian bookworm packages
the image installs (git-doc 2.39, postgresql-doc-15, python3.11-doc, sqlite3-doc 3.40,
manpages 6.03, coreutils 9.1, debian-reference-en 2.100).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from worldtrace.collectors.base import ScriptedTask
from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.schemas import Action

CORPUS_BASE_URL = "http://docs.localhost/"
"""Where every corpus page lives (the site server in the search image)."""

COLLECTIONS = ("git", "postgresql", "python", "man", "sqlite", "debian-reference", "packages")
"""The corpus collections (the first path segment of a page's URL), in library order."""

TASK_MODULES = {
    "git": "git",
    "postgresql": "postgresql",
    "python": "python",
    "man": "man",
    "sqlite": "sqlite",
    "debian-reference": "debian_reference",
}
"""The collections with a task module here, and the module's name."""

ANSWER_KEY = "answer"
"""The memory key the instruction asks for (the check reads every key, not only this one)."""

ANSWER_INSTRUCTION = (
    "Find the answer in the documentation and store it with dict_memory under the key "
    f"'{ANSWER_KEY}', as short as possible (the option, function, value or number itself)."
)
"""What every task's instruction adds to its question."""


@dataclass(frozen=True)
class SearchTask(ScriptedTask):
    """A question answerable from the corpus, its accepted answers and the pages that hold them."""

    question: str = ""
    """The question as a user asks it (``instruction`` is this and :data:`ANSWER_INSTRUCTION`)."""
    answers: tuple[str, ...] = ()
    """Accepted answers; matched as whole tokens, case-insensitively unless ``case_sensitive``,
    with whitespace collapsed."""
    documents: tuple[str, ...] = ()
    """The corpus URLs that hold the answer, the one the script reads first."""
    passage: str = ""
    """A few exact words of the first document's text that hold or sit next to the answer."""
    collection: str = ""
    """The collection of the first document."""
    case_sensitive: bool = False
    """True where case tells a right answer from a wrong one (``ls -t`` and ``ls -T``)."""

    def __post_init__(self) -> None:
        problems = task_problems(self)
        if problems:
            raise ValueError(f"search task {self.name!r}: " + "; ".join(problems))


def task_problems(task: SearchTask) -> list[str]:
    """What is wrong with ``task``'s data (empty when nothing)."""
    problems: list[str] = []
    if not task.question.strip():
        problems.append("the question is empty")
    if task.instruction != f"{task.question} {ANSWER_INSTRUCTION}":
        problems.append("the instruction is not the question and the answer instruction")
    if not task.answers or any(not normalize(answer, True) for answer in task.answers):
        problems.append(f"it needs at least one non-empty answer, has {task.answers!r}")
    if not task.documents:
        problems.append("it names no document")
    problems.extend(
        f"{url!r} is not a corpus URL" for url in task.documents if url_collection(url) is None
    )
    if task.documents and url_collection(task.documents[0]) != task.collection:
        problems.append(f"its first document is not in the collection {task.collection!r}")
    if not task.passage.strip():
        problems.append("the passage is empty")
    if not task.steps:
        problems.append("it has no steps")
    return problems


def url_collection(url: str) -> str | None:
    """The collection of a corpus page's URL, or None when ``url`` is not one.

    A page is ``<base><collection>/<path>.html`` with a path of plain segments (no query, no
    fragment, no ``..``); a man page is ``man/<section>/<name>.html``.
    """
    if not url.startswith(CORPUS_BASE_URL) or not url.endswith(".html"):
        return None
    collection, _, path = url.removeprefix(CORPUS_BASE_URL).partition("/")
    if collection not in COLLECTIONS or not path:
        return None
    segments = path.split("/")
    if any(segment in ("", ".", "..") for segment in segments) or re.search(r"[?#\s]", path):
        return None
    if collection == "man" and not (
        len(segments) == 2 and re.fullmatch(r"[1-9][0-9a-z]*", segments[0])
    ):
        return None
    return collection


def search_task(
    name: str,
    collection: str,
    question: str,
    answers: Sequence[str],
    documents: Sequence[str],
    passage: str,
    *,
    query: str | None = None,
    goal: str | None = None,
    steps: Sequence[Action] | None = None,
    case_sensitive: bool = False,
) -> SearchTask:
    """Build a task named ``<collection>-<name>``.

    Its script is ``steps`` when given; otherwise the usual three calls: search ``query``,
    open the first document with ``goal``, add the first answer to memory under
    :data:`ANSWER_KEY`.
    """
    if steps is not None:
        if query is not None or goal is not None:
            raise ValueError(f"task {name!r}: give either steps or query and goal, not both")
        script = tuple(steps)
    elif query is None or goal is None or not documents or not answers:
        raise ValueError(f"task {name!r}: without steps it needs a query, a goal, a document")
    else:
        script = (
            web_search(query),
            web_extractor(documents[0], goal),
            dict_memory("add", ANSWER_KEY, answers[0]),
        )
    return SearchTask(
        name=f"{collection}-{name}",
        instruction=f"{question} {ANSWER_INSTRUCTION}",
        category=collection,
        steps=script,
        question=question,
        answers=tuple(answers),
        documents=tuple(documents),
        passage=passage,
        collection=collection,
        case_sensitive=case_sensitive,
    )


def normalize(text: str, case_sensitive: bool) -> str:
    """``text`` with runs of whitespace as one space, trimmed, and casefolded unless told."""
    collapsed = " ".join(text.split())
    return collapsed if case_sensitive else collapsed.casefold()


def answer_in_text(answer: str, text: str, case_sensitive: bool = False) -> bool:
    """True if ``text`` holds ``answer`` as a whole token.

    Whole token: not glued to a letter, digit, ``_`` or ``-`` on either side, so ``-t`` is
    not found in ``--time`` or ``-tr``, ``128`` not in ``1280``; punctuation around it (quotes,
    backticks, ``=``, a full stop) is fine.
    """
    needle = normalize(answer, case_sensitive)
    if not needle:
        return False
    pattern = rf"(?<![\w-]){re.escape(needle)}(?![\w-])"
    return re.search(pattern, normalize(text, case_sensitive)) is not None


def answered(task: SearchTask, memory: Mapping[str, str]) -> bool:
    """True if any value of ``memory`` (the episode's final memory) holds an accepted answer."""
    return any(
        answer_in_text(answer, value, task.case_sensitive)
        for value in memory.values()
        for answer in task.answers
    )


def scripted_memory(task: SearchTask) -> dict[str, str]:
    """The memory the task's script leaves, its memory calls applied in order.

    An add of an existing key and an update of a missing one change nothing, as the real
    memory refuses them.
    """
    memory: dict[str, str] = {}
    for step in task.steps:
        if step.name != "dict_memory":
            continue
        action = step.arguments.get("action")
        key = step.arguments.get("key")
        value = step.arguments.get("value")
        if not isinstance(key, str):
            continue  # the real memory refuses a call without a key
        adds = action == "add" and key not in memory
        updates = action == "update" and key in memory
        if (adds or updates) and value is not None:
            memory[key] = value
        elif action == "remove":
            memory.pop(key, None)
    return memory


def load_tasks(collection: str | None = None) -> tuple[SearchTask, ...]:
    """The scripted tasks of ``collection``, or of every collection when None.

    A collection without questions (``packages``) has none; a name that is not a collection
    is an error.
    """
    if collection is not None and collection not in COLLECTIONS:
        raise ValueError(
            f"unknown search collection {collection!r} (known: {', '.join(COLLECTIONS)})"
        )
    names = list(TASK_MODULES) if collection is None else [collection]
    tasks: list[SearchTask] = []
    for name in names:
        if name not in TASK_MODULES:
            continue
        module = importlib.import_module(f"{__name__}.{TASK_MODULES[name]}")
        tasks.extend(module.TASKS)
    return tuple(tasks)


__all__ = [
    "ANSWER_INSTRUCTION",
    "ANSWER_KEY",
    "COLLECTIONS",
    "CORPUS_BASE_URL",
    "TASK_MODULES",
    "SearchTask",
    "answer_in_text",
    "answered",
    "load_tasks",
    "normalize",
    "scripted_memory",
    "search_task",
    "task_problems",
    "url_collection",
]
