"""Questions about commands and C functions, answered by manual pages rendered to HTML.

The pages are ``man/<section>/<name>.html`` (coreutils, grep, sed, findutils, tar, manpages,
manpages-dev).

Short options differ by case (``ls -t`` sorts by time, ``ls -T`` sets tab stops), so these
tasks match case-sensitively where the case matters.
"""

from __future__ import annotations

from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.collectors.search.tasks import ANSWER_KEY, SearchTask, search_task

MAN = "http://docs.localhost/man/"

TASKS: tuple[SearchTask, ...] = (
    search_task(
        "ls-sort-by-time",
        "man",
        "Which option of ls sorts the listing by modification time, newest first?",
        answers=("-t", "--sort=time"),
        documents=(MAN + "1/ls.html",),
        passage="sort by time, newest first",
        query="ls sort by modification time newest first",
        goal="the option that sorts by time",
        case_sensitive=True,
    ),
    search_task(
        "ls-directories-first",
        "man",
        "How do I make ls list directories before files? Which option does that?",
        answers=("--group-directories-first",),
        documents=(MAN + "1/ls.html",),
        passage="group directories before files",
        query="ls list directories before files",
        goal="the option that lists directories first",
    ),
    search_task(
        "grep-recursive",
        "man",
        "Which option of grep searches all files under a directory, recursively?",
        answers=("-r", "--recursive", "-R", "--dereference-recursive"),
        documents=(MAN + "1/grep.html",),
        passage="Read all files under each directory, recursively",
        query="grep read all files under each directory recursively",
        goal="the option that searches directories recursively",
        case_sensitive=True,
    ),
    search_task(
        "sort-human-numeric",
        "man",
        "I want to sort the output of du -h, with sizes like 2K and 1G. Which option of sort "
        "compares such human readable numbers?",
        answers=("-h", "--human-numeric-sort"),
        documents=(MAN + "1/sort.html",),
        passage="compare human readable numbers",
        query="sort compare human readable numbers 2K 1G",
        goal="the option that sorts human readable sizes",
        case_sensitive=True,
    ),
    search_task(
        "sed-in-place",
        "man",
        "How do I make sed change a file itself instead of printing the result? Which option "
        "edits files in place?",
        answers=("-i", "--in-place"),
        documents=(MAN + "1/sed.html",),
        passage="edit files in place",
        query="sed edit files in place",
        goal="the option that edits files in place",
        case_sensitive=True,
    ),
    search_task(
        "tar-extract-into-directory",
        "man",
        "Which option of tar changes to another directory before it does anything, so that "
        "an archive is extracted there?",
        answers=("-C", "--directory"),
        documents=(MAN + "1/tar.html",),
        passage="before performing any operations",
        query="tar change to directory before performing any operations",
        goal="the option that changes directory before extracting",
        case_sensitive=True,
    ),
    search_task(
        "du-summarize",
        "man",
        "Which option of du prints only a total for each argument instead of every subdirectory?",
        answers=("-s", "--summarize"),
        documents=(MAN + "1/du.html",),
        passage="display only a total for each argument",
        query="du display only a total for each argument",
        goal="the option that prints only totals",
        case_sensitive=True,
    ),
    search_task(
        "find-modified-days",
        "man",
        "Which test of find selects files whose data was last modified n days (n*24 hours) ago?",
        answers=("-mtime",),
        documents=(MAN + "1/find.html",),
        passage="data was last modified less than, more than or exactly",
        query="find file data last modified days ago",
        goal="the test on the modification time in days",
    ),
    search_task(
        "strtol-overflow",
        "man",
        "What does the C function strtol return when the converted value overflows a long?",
        answers=("LONG_MAX",),
        documents=(MAN + "3/strtol.html",),
        passage="If an overflow occurs",
        query="strtol overflow return value",
        goal="what strtol returns on overflow",
    ),
    search_task(
        "open-exclusive-create",
        "man",
        "Which flag of open(2), together with O_CREAT, makes the call fail with EEXIST when "
        "the file already exists?",
        answers=("O_EXCL",),
        documents=(MAN + "2/open.html",),
        passage="Ensure that this call creates the file",
        # The first results are mq_open and sem_open; their pages name open, openat and creat.
        steps=(
            web_search("open O_CREAT fail if file already exists EEXIST"),
            web_search("open openat creat O_CREAT already exists"),
            web_extractor(MAN + "2/open.html", "the flag that makes open fail on an existing file"),
            dict_memory("add", ANSWER_KEY, "O_EXCL"),
        ),
    ),
    # The name first (the summary list), then the number from the numbering table further
    # down the same page; the script checks its memory at the end.
    search_task(
        "sigkill-number",
        "man",
        "What is the signal number of SIGKILL on Linux x86?",
        answers=("9",),
        documents=(MAN + "7/signal.html",),
        passage="Kill signal",
        steps=(
            web_search("SIGKILL signal number"),
            web_search("signal numbering for standard signals x86"),
            web_extractor(MAN + "7/signal.html", "the number of SIGKILL on x86"),
            dict_memory("add", ANSWER_KEY, "9"),
            dict_memory("list"),
        ),
    ),
)
