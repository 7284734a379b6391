"""Questions about PostgreSQL 15 functions and settings, answered by postgresql-doc-15.

The pages are ``postgresql/<page>.html``; the results of function examples are the manual's
own.
"""

from __future__ import annotations

from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.collectors.search.tasks import ANSWER_KEY, SearchTask, search_task

POSTGRESQL = "http://docs.localhost/postgresql/"

TASKS: tuple[SearchTask, ...] = (
    search_task(
        "initcap-result",
        "postgresql",
        "What does PostgreSQL's initcap('hi THOMAS') return?",
        answers=("Hi Thomas",),
        documents=(POSTGRESQL + "functions-string.html",),
        passage="Converts the first letter of each word to upper case",
        query="postgresql string functions initcap",
        goal="the result of initcap('hi THOMAS')",
        case_sensitive=True,
    ),
    search_task(
        "date-trunc-hour",
        "postgresql",
        "What does PostgreSQL return for date_trunc('hour', timestamp '2001-02-16 20:38:40')?",
        answers=("2001-02-16 20:00:00",),
        documents=(POSTGRESQL + "functions-datetime.html",),
        passage="Truncate to specified precision",
        query="postgresql date_trunc truncate timestamp to hour",
        goal="the result of date_trunc('hour', timestamp '2001-02-16 20:38:40')",
    ),
    search_task(
        "age-result",
        "postgresql",
        "What does PostgreSQL's age(timestamp '2001-04-10', timestamp '1957-06-13') return?",
        answers=("43 years 9 mons 27 days",),
        documents=(POSTGRESQL + "functions-datetime.html",),
        passage="result that uses years and months, rather than just days",
        query="postgresql age function subtract timestamps symbolic result years months",
        goal="the result of age(timestamp '2001-04-10', timestamp '1957-06-13')",
    ),
    search_task(
        "justify-days-result",
        "postgresql",
        "PostgreSQL's justify_days converts 30-day periods of an interval to months. What "
        "does justify_days(interval '1 year 65 days') return?",
        answers=("1 year 2 mons 5 days",),
        documents=(POSTGRESQL + "functions-datetime.html",),
        passage="converting 30-day time periods to months",
        query="justify_days interval 30-day periods months",
        goal="the result of justify_days(interval '1 year 65 days')",
    ),
    search_task(
        "default-port",
        "postgresql",
        "On which TCP port does a PostgreSQL server listen by default?",
        answers=("5432",),
        documents=(POSTGRESQL + "runtime-config-connection.html",),
        passage="The TCP port the server listens on",
        steps=(
            web_search("postgresql default TCP port"),
            web_search("postgresql server configuration TCP port listen_addresses"),
            web_extractor(
                POSTGRESQL + "runtime-config-connection.html", "the default TCP port of the server"
            ),
            dict_memory("add", ANSWER_KEY, "5432"),
        ),
    ),
    search_task(
        "first-non-null",
        "postgresql",
        "Which PostgreSQL function returns the first of its arguments that is not null, for "
        "example to show a default value instead of NULL?",
        answers=("COALESCE",),
        documents=(POSTGRESQL + "functions-conditional.html",),
        passage="returns the first of its",
        steps=(
            web_search("postgresql first non-null value of arguments"),
            web_search("postgresql conditional expressions null default value"),
            web_extractor(
                POSTGRESQL + "functions-conditional.html",
                "the function that returns its first non-null argument",
            ),
            dict_memory("add", ANSWER_KEY, "COALESCE"),
        ),
    ),
    search_task(
        "concatenate-group",
        "postgresql",
        "Which PostgreSQL aggregate function concatenates the values of a group into one "
        "string, separated by a delimiter I choose?",
        answers=("string_agg",),
        documents=(POSTGRESQL + "functions-aggregate.html",),
        passage="Concatenates the non-null input values into a string",
        query="postgresql aggregate concatenate values into a string delimiter",
        goal="the aggregate that joins strings with a delimiter",
    ),
    # The answer is stored, then corrected once the page says the default is "typically" 100.
    search_task(
        "max-connections-default",
        "postgresql",
        "What is the default value of PostgreSQL's max_connections setting?",
        answers=("100",),
        documents=(POSTGRESQL + "runtime-config-connection.html",),
        passage="The default is typically 100 connections",
        steps=(
            web_search("max_connections maximum number of concurrent connections default"),
            web_extractor(
                POSTGRESQL + "runtime-config-connection.html",
                "the default number of concurrent connections",
            ),
            dict_memory("add", ANSWER_KEY, "max_connections"),
            dict_memory("update", ANSWER_KEY, "100 (typically; less if the kernel cannot)"),
            dict_memory("list"),
        ),
    ),
)
