"""Pager tasks: searching and browsing long files in less."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command, keys
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    join_lines,
    same_content,
    write_file,
)

_REFUSED_LINES = (137, 251, 388)


def _server_log() -> str:
    rows = []
    for n in range(1, 401):
        stamp = f"2024-03-01T10:{n // 60:02d}:{n % 60:02d}Z"
        if n in _REFUSED_LINES:
            rows.append(f"{stamp} ERROR upstream db-1:5432 Connection refused (attempt {n % 5})")
        elif n % 23 == 0:
            rows.append(f"{stamp} WARN  slow request id={n:04d} path=/api/orders ms={800 + n}")
        else:
            rows.append(
                f"{stamp} INFO  request id={n:04d} path=/api/orders status=200 "
                f"ms={(n * 37) % 250 + 5}"
            )
    return join_lines(*rows)


_COUNTRIES = (
    "Portugal",
    "Germany",
    "Brazil",
    "Japan",
    "Canada",
    "Portugal",
    "Kenya",
    "France",
    "Spain",
)


def _customers_csv() -> str:
    rows = ["id,first_name,last_name,email,country,signup_date,plan,notes"]
    for n in range(1, 201):
        country = _COUNTRIES[(n * 5) % len(_COUNTRIES)]
        rows.append(
            f"{n},Name{n:03d},Surname{(n * 7) % 200:03d},user{n:03d}@example.org,{country},"
            f"2023-{(n % 12) + 1:02d}-{(n % 28) + 1:02d},{('free', 'pro', 'team')[n % 3]},"
            "imported from the legacy CRM during the 2023 migration; verify billing address "
            "and marketing consent before the next campaign"
        )
    return join_lines(*rows)


def _portugal_count() -> int:
    return _customers_csv().count(",Portugal,")


TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="less-search-server-log",
        instruction=(
            "Page through ~/work/server/server.log with less and find the 'Connection refused' "
            "errors, then save their line numbers to refused.txt."
        ),
        category="pager",
        setup=(write_file(f"{WORK}/server/server.log", _server_log()),),
        steps=(
            command("cd ~/work/server"),
            command("wc -l server.log"),
            command("less server.log"),
            keys("Space"),
            keys("Space"),
            keys("/Connection refused", "Enter"),
            keys("n"),
            keys("q"),
            command("grep -n 'Connection refused' server.log | cut -d: -f1 > refused.txt"),
            command("cat refused.txt"),
        ),
        check=same_content(f"{WORK}/server/refused.txt", join_lines(*map(str, _REFUSED_LINES))),
    ),
    TerminalTask(
        name="less-browse-wide-csv",
        instruction=(
            "Have a look at ~/work/crm/customers.csv in less without wrapping the long lines, "
            "check the last record, then count the customers from Portugal into portugal.txt."
        ),
        category="pager",
        setup=(write_file(f"{WORK}/crm/customers.csv", _customers_csv()),),
        steps=(
            command("cd ~/work/crm"),
            command("less -S customers.csv"),
            # less -S scrolls sideways by half a screen; Left brings the ids back into view.
            keys("Right"),
            keys("Left"),
            keys("G"),
            keys("q"),
            command("grep -c ',Portugal,' customers.csv"),
            command("grep -c ',Portugal,' customers.csv > portugal.txt"),
        ),
        check=f'[ "$(cat {WORK}/crm/portugal.txt)" = {_portugal_count()} ]',
    ),
)
