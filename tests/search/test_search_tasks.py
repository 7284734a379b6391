"""The scripted search task library: its shape, its calls against the search tools, its check.

Fast and without Docker: the tasks' pages and passages were read in the Debian packages the
image installs; the image's own tests play every task against the real engine and site.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest

from worldtrace.collectors.search.actions import TOOLS, dict_memory, web_extractor, web_search
from worldtrace.collectors.search.tasks import (
    ANSWER_KEY,
    TASK_MODULES,
    SearchTask,
    answer_in_text,
    answered,
    load_tasks,
    scripted_memory,
    search_task,
)
from worldtrace.collectors.tool_calls import schema_problems

TASKS = load_tasks()
BY_NAME = {task.name: task for task in TASKS}

# The URL scheme of notes/search-spec.md, written out again here so a change on either side
# shows: man pages by section, the HTML collections by their path in the package.
URL_SCHEME = {
    "man": r"http://docs\.localhost/man/[1-9][0-9a-z]*/[A-Za-z0-9_.:+-]+\.html",
    "python": r"http://docs\.localhost/python/[a-z_-]+/[A-Za-z0-9_.-]+\.html",
    "postgresql": r"http://docs\.localhost/postgresql/[a-z0-9-]+\.html",
    "git": r"http://docs\.localhost/git/[a-z0-9-]+\.html",
    "sqlite": r"http://docs\.localhost/sqlite/[A-Za-z0-9_/-]+\.html",
    "debian-reference": r"http://docs\.localhost/debian-reference/[a-z0-9]+\.en\.html",
}


def test_library_has_thirty_tasks_with_unique_names_and_questions() -> None:
    assert len(TASKS) >= 30
    assert len(BY_NAME) == len(TASKS)
    questions = [" ".join(task.question.casefold().split()) for task in TASKS]
    assert len(set(questions)) == len(questions)
    counts = Counter(task.collection for task in TASKS)
    assert set(counts) == set(TASK_MODULES), counts
    assert all(counts[name] >= 5 for name in TASK_MODULES), counts


def test_load_tasks_by_collection() -> None:
    for collection in TASK_MODULES:
        tasks = load_tasks(collection)
        assert tasks and all(task.collection == collection for task in tasks)
        assert all(task.name.startswith(f"{collection}-") for task in tasks)
    # The package descriptions are a collection without questions; a misspelt name is an error.
    assert load_tasks("packages") == ()
    with pytest.raises(ValueError, match="unknown search collection 'gti'"):
        load_tasks("gti")


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_task_cites_corpus_urls_and_a_plain_passage(task: SearchTask) -> None:
    assert task.documents and len(set(task.documents)) == len(task.documents)
    for url in task.documents:
        collection = url.removeprefix("http://docs.localhost/").split("/")[0]
        assert re.fullmatch(URL_SCHEME[collection], url), url
    assert task.documents[0].startswith(f"http://docs.localhost/{task.collection}/")
    # The passage is looked for verbatim in the page's markdown: a few words, without the
    # characters a markdown converter escapes or turns into markup.
    assert 2 <= len(task.passage.split()) <= 14, task.passage
    assert not re.search(r"[*_`\[\]|#<>\\]", task.passage), task.passage
    assert task.passage == task.passage.strip() and "  " not in task.passage


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_task_steps_are_valid_tool_calls_that_read_the_cited_page(task: SearchTask) -> None:
    for step in task.steps:
        assert schema_problems(step, TOOLS) == [], (task.name, step.text)
    names = [step.name for step in task.steps]
    assert names[0] == "web_search"
    opened = [step.arguments["url"] for step in task.steps if step.name == "web_extractor"]
    assert opened and opened[0] == task.documents[0]
    assert set(opened) <= set(task.documents)
    # The answer goes into memory after the page is read.
    adds = [i for i, step in enumerate(task.steps) if step.arguments.get("action") == "add"]
    assert adds and adds[0] > names.index("web_extractor")
    assert task.question in task.instruction and f"'{ANSWER_KEY}'" in task.instruction


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.name)
def test_scripted_memory_answers_and_empty_or_wrong_memory_does_not(task: SearchTask) -> None:
    memory = scripted_memory(task)
    assert ANSWER_KEY in memory
    assert answered(task, memory)
    assert not answered(task, {})
    assert not answered(task, {ANSWER_KEY: "I could not find it in the documentation."})
    for answer in task.answers:
        assert answered(task, {"notes": "see the manual", ANSWER_KEY: f"It is `{answer}`."})
        # Glued to other characters it is a different word (``-t`` in ``--time``), unless it
        # holds a shorter accepted answer as a word of its own (``PRAGMA foreign_keys = ON``).
        shorter = [other for other in task.answers if other != answer]
        if not any(answer_in_text(other, answer, task.case_sensitive) for other in shorter):
            assert not answered(task, {ANSWER_KEY: f"x{answer}x"}), answer


@pytest.mark.parametrize(
    ("name", "right", "wrong"),
    [
        ("man-ls-sort-by-time", "ls -t", "ls -T"),
        ("man-ls-sort-by-time", "--sort=time", "--time=birth"),
        ("man-du-summarize", "du -s", "du -S"),
        ("man-tar-extract-into-directory", "tar -xf a.tar -C /tmp", "tar -c"),
        ("debian-reference-which-package-owns-file", "dpkg -S /bin/ls", "dpkg -s coreutils"),
        ("python-lru-cache-default-size", "maxsize=128", "1280"),
        ("postgresql-initcap-result", "'Hi Thomas'", "HI THOMAS"),
        ("postgresql-age-result", "43  years\n9 mons 27 days", "43 years 9 mons"),
        ("git-rebase-autostash", "git rebase --AUTOSTASH", "--autostash-all"),
        ("git-stash-untracked", "git stash -u", "git stash -a"),
        ("sqlite-cli-import-csv", "sqlite> .import data.csv t", "import"),
    ],
)
def test_answered_tells_near_misses_apart(name: str, right: str, wrong: str) -> None:
    task = BY_NAME[name]
    assert answered(task, {ANSWER_KEY: right})
    assert not answered(task, {ANSWER_KEY: wrong})


def test_bad_task_data_is_refused() -> None:
    def build(**changes: object) -> SearchTask:
        arguments: dict[str, object] = {
            "name": "x",
            "collection": "git",
            "question": "How?",
            "answers": ("--x",),
            "documents": ("http://docs.localhost/git/git-x.html",),
            "passage": "some words",
            "query": "x",
            "goal": "x",
        }
        arguments.update(changes)
        return search_task(**arguments)  # type: ignore[arg-type]

    assert build().name == "git-x"
    with pytest.raises(ValueError, match="at least one non-empty answer"):
        build(answers=(" ",))
    with pytest.raises(ValueError, match="is not a corpus URL"):
        build(documents=("https://git-scm.com/docs/git-x",))
    with pytest.raises(ValueError, match="is not a corpus URL"):
        build(documents=("http://docs.localhost/man/ls.html",))
    with pytest.raises(ValueError, match="not in the collection 'git'"):
        build(documents=("http://docs.localhost/man/1/git.html",))
    with pytest.raises(ValueError, match="the passage is empty"):
        build(passage="")
    with pytest.raises(ValueError, match="not both"):
        build(steps=(), query="x")
    with pytest.raises(ValueError, match="it has no steps"):
        dataclasses.replace(build(), steps=())


def test_scripted_memory_follows_the_memory_rules() -> None:
    url = "http://docs.localhost/git/git-x.html"
    task = search_task(
        "memory-rules",
        "git",
        "How?",
        answers=("--x",),
        documents=(url,),
        passage="some words",
        steps=(
            web_search("x"),
            web_extractor(url, "x"),
            dict_memory("add", ANSWER_KEY, "--y"),
            dict_memory("add", ANSWER_KEY, "--z"),  # refused: the key exists
            dict_memory("update", "missing", "--x"),  # refused: no such key
            dict_memory("add", "draft", "--x"),
            dict_memory("update", ANSWER_KEY, "--x"),
            dict_memory("remove", "draft"),
            dict_memory("list"),
        ),
    )
    assert scripted_memory(task) == {ANSWER_KEY: "--x"}
