"""Questions about the Python 3.11 standard library, answered by python3.11-doc.

The pages are ``python/library/<module>.html``.
"""

from __future__ import annotations

from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.collectors.search.tasks import ANSWER_KEY, SearchTask, search_task

LIBRARY = "http://docs.localhost/python/library/"

TASKS: tuple[SearchTask, ...] = (
    search_task(
        "copy-directory-tree",
        "python",
        "Which Python function copies a whole directory tree, with all its files and "
        "subdirectories, to a new place?",
        answers=("shutil.copytree", "copytree"),
        documents=(LIBRARY + "shutil.html",),
        passage="Recursively copy an entire directory tree rooted at",
        query="python recursively copy entire directory tree",
        goal="the function that copies a directory tree",
    ),
    search_task(
        "lru-cache-default-size",
        "python",
        "How many results does Python's functools.lru_cache keep by default, when maxsize is "
        "not given?",
        answers=("128", "maxsize=128"),
        documents=(LIBRARY + "functools.html",),
        passage="at its default value of 128",
        steps=(
            web_search("functools lru_cache maxsize default"),
            web_extractor(LIBRARY + "functools.html", "the default maxsize of lru_cache"),
            dict_memory("add", ANSWER_KEY, "128"),
            dict_memory("retrieve", ANSWER_KEY),
        ),
    ),
    search_task(
        "json-sorted-keys",
        "python",
        "Which argument of Python's json.dumps makes it write the keys of dictionaries in "
        "sorted order?",
        answers=("sort_keys", "sort_keys=True"),
        documents=(LIBRARY + "json.html",),
        passage="dictionaries will be sorted by key",
        query="json dumps output of dictionaries sorted by key",
        goal="the argument that sorts dictionary keys",
    ),
    search_task(
        "subprocess-capture-output",
        "python",
        "Which argument of Python's subprocess.run captures the command's stdout and stderr?",
        answers=("capture_output", "capture_output=True"),
        documents=(LIBRARY + "subprocess.html",),
        passage="stdout and stderr will be captured",
        query="subprocess run capture stdout and stderr",
        goal="the argument that captures stdout and stderr",
    ),
    search_task(
        "makedirs-exists",
        "python",
        "Which argument of Python's os.makedirs stops it from raising FileExistsError when "
        "the directory already exists?",
        answers=("exist_ok", "exist_ok=True"),
        documents=(LIBRARY + "os.html", LIBRARY + "pathlib.html"),
        passage="raised if the target directory already exists",
        query="os makedirs FileExistsError directory already exists",
        goal="the argument that allows an existing directory",
    ),
    search_task(
        "remove-common-indentation",
        "python",
        "Which function of Python's textwrap module removes the common leading whitespace "
        "from every line of a text?",
        answers=("textwrap.dedent", "dedent"),
        documents=(LIBRARY + "textwrap.html",),
        passage="Remove any common leading whitespace from every line in",
        query="textwrap remove common leading whitespace every line",
        goal="the function that removes common indentation",
    ),
    search_task(
        "random-hex-token",
        "python",
        "Which function of Python's secrets module returns a random text string in "
        "hexadecimal, for example for a password reset token?",
        answers=("secrets.token_hex", "token_hex"),
        documents=(LIBRARY + "secrets.html",),
        passage="Return a random text string, in hexadecimal",
        query="secrets random token hexadecimal string",
        goal="the function that returns a random hexadecimal string",
    ),
    search_task(
        "counter-most-common",
        "python",
        "Which method of collections.Counter returns the n most common elements with their counts?",
        answers=("most_common", "Counter.most_common"),
        documents=(LIBRARY + "collections.html",),
        passage="most common elements and their counts from the",
        query="Counter most common elements and their counts",
        goal="the method that lists the most common elements",
    ),
    search_task(
        "group-consecutive",
        "python",
        "Which itertools function groups consecutive elements of an iterable that have the "
        "same key?",
        answers=("itertools.groupby", "groupby"),
        documents=(LIBRARY + "itertools.html",),
        passage="Make an iterator that returns consecutive keys and groups from the",
        query="itertools consecutive keys and groups",
        goal="the function that groups consecutive elements by key",
    ),
)
