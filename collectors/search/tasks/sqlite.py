"""Questions about SQLite 3.40, answered by sqlite3-doc.

The pages are ``sqlite/<page>.html`` (the package ships them under /usr/share/doc/sqlite3/).
"""

from __future__ import annotations

from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.collectors.search.tasks import ANSWER_KEY, SearchTask, search_task

SQLITE = "http://docs.localhost/sqlite/"

TASKS: tuple[SearchTask, ...] = (
    search_task(
        "enable-foreign-keys",
        "sqlite",
        "My SQLite foreign key constraints are not enforced. Which PRAGMA turns foreign key "
        "enforcement on for a connection?",
        answers=("foreign_keys", "PRAGMA foreign_keys", "PRAGMA foreign_keys = ON"),
        documents=(SQLITE + "foreignkeys.html", SQLITE + "pragma.html"),
        passage="it must still be enabled by the application at runtime",
        query="sqlite enable foreign key constraints pragma",
        goal="the pragma that enables foreign key enforcement",
    ),
    search_task(
        "last-inserted-rowid",
        "sqlite",
        "Which SQLite SQL function returns the ROWID of the last row inserted by the current "
        "connection?",
        answers=("last_insert_rowid", "last_insert_rowid()"),
        documents=(SQLITE + "lang_corefunc.html", SQLITE + "c3ref/last_insert_rowid.html"),
        passage="of the last row insert from the database connection which invoked the",
        # The C interface's page comes first and names the SQL function; the refined query
        # finds the page of the core SQL functions.
        steps=(
            web_search("sqlite SQL function last inserted rowid"),
            web_search("sqlite core functions last_insert_rowid"),
            web_extractor(
                SQLITE + "lang_corefunc.html", "the function that returns the last inserted rowid"
            ),
            dict_memory("add", ANSWER_KEY, "last_insert_rowid()"),
        ),
    ),
    search_task(
        "largest-rowid",
        "sqlite",
        "What is the largest possible ROWID in SQLite?",
        answers=("9223372036854775807",),
        documents=(SQLITE + "autoinc.html",),
        passage="If the largest ROWID is equal to the largest possible integer",
        query="sqlite largest possible rowid autoincrement",
        goal="the largest possible ROWID value",
    ),
    search_task(
        "max-string-length",
        "sqlite",
        "What is the default maximum length of a string or BLOB in SQLite (SQLITE_MAX_LENGTH)?",
        answers=("1000000000", "1,000,000,000", "1 billion", "10^9"),
        documents=(SQLITE + "limits.html",),
        passage="of this macro is 1 billion",
        steps=(
            web_search("sqlite maximum length of a string or BLOB"),
            web_extractor(SQLITE + "limits.html", "the default of SQLITE_MAX_LENGTH"),
            dict_memory("add", ANSWER_KEY, "1,000,000,000 bytes (SQLITE_MAX_LENGTH)"),
            dict_memory("retrieve", ANSWER_KEY),
        ),
    ),
    search_task(
        "cli-import-csv",
        "sqlite",
        "Which dot-command of the sqlite3 command-line shell imports data from a CSV file "
        "into a table?",
        answers=(".import",),
        documents=(SQLITE + "cli.html",),
        passage="Import data from FILE into TABLE",
        query="sqlite3 command line shell import csv file into table",
        goal="the dot-command that imports a CSV file",
    ),
    search_task(
        "enable-wal",
        "sqlite",
        "Which PRAGMA switches an SQLite database to write-ahead logging (WAL)?",
        answers=("journal_mode", "journal_mode=WAL", "PRAGMA journal_mode=WAL"),
        documents=(SQLITE + "wal.html", SQLITE + "pragma.html"),
        passage="One has merely to run",
        query="sqlite write-ahead logging WAL mode enable",
        goal="the pragma that turns on WAL mode",
    ),
    search_task(
        "upsert-clause",
        "sqlite",
        "Which clause makes an SQLite INSERT update the existing row (or do nothing) instead "
        "of failing on a uniqueness constraint?",
        answers=("ON CONFLICT", "ON CONFLICT DO UPDATE", "DO UPDATE"),
        documents=(SQLITE + "lang_upsert.html",),
        passage="one or more ON CONFLICT clauses, as shown in the syntax diagram above",
        query="sqlite upsert insert update uniqueness constraint",
        goal="the clause that turns an INSERT into an upsert",
    ),
    search_task(
        "integrity-check",
        "sqlite",
        "Which SQLite PRAGMA checks a database for corruption (out-of-order index entries, "
        "missing pages, malformed records)?",
        answers=("integrity_check", "PRAGMA integrity_check", "quick_check"),
        documents=(SQLITE + "pragma.html",),
        passage="does a low-level formatting and consistency check",
        query="sqlite pragma consistency check of the database corruption",
        goal="the pragma that checks the database for corruption",
    ),
)
