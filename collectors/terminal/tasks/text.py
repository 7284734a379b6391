"""Text tasks: counting, summing, editing and filtering logs, CSV, INI and JSON files.

The scripts use the standard tools: awk, cut, sort, uniq, sed, grep, tr and jq.
"""

from __future__ import annotations

from collections import Counter

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    all_of,
    join_lines,
    same_content,
    write_file,
)


def _access_log() -> str:
    # 20-entry status cycle without ties in the counts: 200 x11, 404 x4, 500 x3, 301 x2.
    statuses = "200 200 404 200 500 200 301 200 404 200 200 500 200 404 200 301 200 404 500 200"
    paths = ("/", "/login", "/api/items", "/api/users", "/static/app.js", "/health")
    rows = []
    for i in range(60):
        status = statuses.split()[i % 20]
        rows.append(
            f"10.0.0.{i % 7 + 1} - - [01/Mar/2024:10:{i:02d}:07 +0000] "
            f'"GET {paths[i % 6]} HTTP/1.1" {status} {120 + i * 13} "-" "curl/7.88.1"'
        )
    return join_lines(*rows)


_SALES = (
    ("2024-03-01", "north", "widget", 12, 3.50),
    ("2024-03-01", "south", "gadget", 4, 12.00),
    ("2024-03-02", "east", "widget", 7, 3.50),
    ("2024-03-02", "north", "gizmo", 3, 25.00),
    ("2024-03-03", "west", "widget", 20, 3.50),
    ("2024-03-03", "south", "widget", 9, 3.50),
    ("2024-03-04", "east", "gadget", 5, 12.00),
    ("2024-03-04", "west", "gizmo", 2, 25.00),
    ("2024-03-05", "north", "gadget", 6, 12.00),
    ("2024-03-05", "east", "gizmo", 1, 25.00),
    ("2024-03-06", "south", "gizmo", 4, 25.00),
    ("2024-03-06", "west", "gadget", 8, 12.00),
    ("2024-03-07", "north", "widget", 15, 3.50),
    ("2024-03-07", "east", "widget", 11, 3.50),
)


def _sales_totals() -> str:
    totals: Counter[str] = Counter()
    for _, region, _, units, _ in _SALES:
        totals[region] += units
    return join_lines(*(f"{region},{totals[region]}" for region in sorted(totals)))


_SETTINGS_INI = """\
[database]
db_host = localhost
db_port = 5432
db_name = orders

[app]
debug = true
log_level = debug
workers = 4
"""


def _service_log(day: int) -> str:
    events = (
        ("INFO", "request handled path=/api/orders ms=42"),
        ("INFO", "cache hit key=user:17"),
        ("WARN", "slow query ms=812 table=orders"),
        ("ERROR", "payment gateway timeout order=A-1021"),
        ("INFO", "request handled path=/api/users ms=18"),
        ("ERROR", "database connection reset by peer"),
        ("INFO", "request handled path=/health ms=1"),
    )
    rows = []
    for i in range(5 + day * 4):
        level, message = events[(i * day + i) % len(events)]
        rows.append(f"2024-03-0{day} 09:{i:02d}:00 {level:<5} {message}")
    return join_lines(*rows)


def _service_error_count() -> int:
    return sum(_service_log(day).count(" ERROR ") for day in (1, 2, 3))


_ESSAY = """\
The shell is the oldest user interface that is still in daily use. The shell reads a line,
splits it into words, and runs a program. Programs read text and write text, and the shell
connects them with pipes. A pipe sends the output of one program to the input of the next.
Because every program speaks text, small programs combine into large ones: the shell is the
glue. Learning the shell is learning to see a task as a pipe of small steps, where each step
does one thing, and does it well. The same habit helps in every language.
"""


def _essay_top_word() -> str:
    words = "".join(c.lower() if c.isalpha() else " " for c in _ESSAY).split()
    (top, top_count), (_, runner_up_count) = Counter(words).most_common(2)
    # sort -rn breaks ties by whole line, so the check relies on a unique winner.
    if top_count == runner_up_count:
        raise ValueError("the essay's most common word must be unique")
    return top


_JAN_SUBSCRIBERS = join_lines(
    "ada@example.org",
    "Bob.Stone@example.org",
    "carol@example.org",
    "dave@example.org",
    "erin@example.org",
    "ada@example.org",
    "frank@example.org",
)
_FEB_SUBSCRIBERS = join_lines(
    "ADA@example.org",
    "bob.stone@example.org",
    "erin@example.org",
    "grace@example.org",
    "heidi@example.org",
    "grace@example.org",
)


def _emails(text: str) -> set[str]:
    return {line.lower() for line in text.split()}


_STATUS_JSON = """\
{
  "checked_at": "2024-03-05T10:00:00Z",
  "services": [
    {"name": "api", "status": "ok", "latency_ms": 41},
    {"name": "billing", "status": "degraded", "latency_ms": 930},
    {"name": "search", "status": "ok", "latency_ms": 88},
    {"name": "mailer", "status": "down", "latency_ms": null},
    {"name": "auth", "status": "ok", "latency_ms": 23}
  ]
}
"""

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="count-http-status-codes",
        instruction=(
            "How many requests got each HTTP status in ~/work/nginx/access.log? Save the "
            "counts, most frequent first, to status_counts.txt, and tell me which paths gave 500s."
        ),
        category="text",
        setup=(write_file(f"{WORK}/nginx/access.log", _access_log()),),
        steps=(
            command("cd ~/work/nginx"),
            command("head -3 access.log"),
            command("wc -l access.log"),
            command("awk '{print $9}' access.log | sort | uniq -c | sort -rn"),
            command("awk '{print $9}' access.log | sort | uniq -c | sort -rn > status_counts.txt"),
            command("grep '\" 500 ' access.log | awk '{print $7}' | sort | uniq -c"),
        ),
        check=(
            f"[ \"$(awk '{{print $2\"=\"$1}}' {WORK}/nginx/status_counts.txt | paste -sd' ')\" "
            "= '200=33 404=12 500=9 301=6' ]"
        ),
    ),
    TerminalTask(
        name="csv-sales-by-region",
        instruction=(
            "Using ~/work/sales/sales.csv, compute the total units sold per region and write "
            "them as region,total lines sorted by region to totals.csv."
        ),
        category="text",
        setup=(
            write_file(
                f"{WORK}/sales/sales.csv",
                join_lines(
                    "date,region,product,units,unit_price",
                    *(f"{d},{r},{p},{u},{price:.2f}" for d, r, p, u, price in _SALES),
                ),
            ),
        ),
        steps=(
            command("cd ~/work/sales"),
            command("head -5 sales.csv"),
            command("cut -d, -f2 sales.csv | tail -n +2 | sort | uniq -c"),
            command(
                'tail -n +2 sales.csv | awk -F, \'{u[$2] += $4} END {for (r in u) print r "," '
                "u[r]}' | sort > totals.csv"
            ),
            command("cat totals.csv"),
        ),
        check=same_content(f"{WORK}/sales/totals.csv", _sales_totals()),
    ),
    TerminalTask(
        name="sed-update-settings",
        instruction=(
            "Point the orders API at production: in ~/work/api/settings.ini set db_host to "
            "db.prod.internal, turn debug off and set log_level to warning. Keep a backup."
        ),
        category="text",
        setup=(write_file(f"{WORK}/api/settings.ini", _SETTINGS_INI),),
        steps=(
            command("cd ~/work/api"),
            command("cat settings.ini"),
            command("grep -n -e '^db_host' -e '^debug' -e '^log_level' settings.ini"),
            command(
                "sed -i.orig -e 's/^db_host = .*/db_host = db.prod.internal/' "
                "-e 's/^debug = true/debug = false/' "
                "-e 's/^log_level = debug/log_level = warning/' settings.ini"
            ),
            command("diff settings.ini.orig settings.ini"),
            command("cat settings.ini"),
        ),
        check=all_of(
            same_content(
                f"{WORK}/api/settings.ini",
                _SETTINGS_INI.replace("db_host = localhost", "db_host = db.prod.internal")
                .replace("debug = true", "debug = false")
                .replace("log_level = debug", "log_level = warning"),
            ),
            same_content(f"{WORK}/api/settings.ini.orig", _SETTINGS_INI),
        ),
    ),
    TerminalTask(
        name="grep-errors-in-logs",
        instruction=(
            "Find all ERROR lines in the service logs under ~/work/service/logs, count them per "
            "file and per message, and save the error lines with file names to errors.txt."
        ),
        category="text",
        setup=tuple(
            write_file(f"{WORK}/service/logs/app-2024-03-0{day}.log", _service_log(day))
            for day in (1, 2, 3)
        ),
        steps=(
            command("cd ~/work/service"),
            command("ls -l logs"),
            command("grep -c ERROR logs/*.log"),
            command("grep -n ERROR logs/app-2024-03-02.log"),
            command("grep -h ERROR logs/*.log | cut -d' ' -f4- | sort | uniq -c | sort -rn"),
            command("grep ERROR logs/*.log > errors.txt"),
            command("wc -l errors.txt"),
        ),
        check=(
            f'[ "$(wc -l < {WORK}/service/errors.txt)" -eq {_service_error_count()} ] '
            f"&& ! grep -qv '^logs/app-2024-03-0[123].log:.* ERROR ' {WORK}/service/errors.txt"
        ),
    ),
    TerminalTask(
        name="word-frequency",
        instruction=(
            "What are the five most common words in ~/work/docs/essay.txt, ignoring case and "
            "punctuation? Save the counts to top-words.txt."
        ),
        category="text",
        setup=(write_file(f"{WORK}/docs/essay.txt", _ESSAY),),
        steps=(
            command("cd ~/work/docs"),
            command("wc -lw essay.txt"),
            command(
                "tr -cs 'A-Za-z' '\\n' < essay.txt | tr 'A-Z' 'a-z' | sort | uniq -c "
                "| sort -rn | head -5"
            ),
            command(
                "tr -cs 'A-Za-z' '\\n' < essay.txt | tr 'A-Z' 'a-z' | sort | uniq -c "
                "| sort -rn | head -5 > top-words.txt"
            ),
            command("cat top-words.txt"),
        ),
        check=(
            f'[ "$(wc -l < {WORK}/docs/top-words.txt)" -eq 5 ] && '
            f"[ \"$(head -1 {WORK}/docs/top-words.txt | awk '{{print $2}}')\" = "
            f"{_essay_top_word()} ]"
        ),
    ),
    TerminalTask(
        name="dedupe-mailing-list",
        instruction=(
            "Merge the January and February subscriber lists in ~/work/newsletter into one "
            "lowercase, sorted, duplicate-free all-subscribers.txt, and save who was in January "
            "but not February to unsubscribed.txt."
        ),
        category="text",
        setup=(
            write_file(f"{WORK}/newsletter/subscribers-jan.txt", _JAN_SUBSCRIBERS),
            write_file(f"{WORK}/newsletter/subscribers-feb.txt", _FEB_SUBSCRIBERS),
        ),
        steps=(
            command("cd ~/work/newsletter"),
            command("wc -l subscribers-*.txt"),
            command("cat subscribers-*.txt | tr 'A-Z' 'a-z' | sort -u > all-subscribers.txt"),
            command("wc -l all-subscribers.txt"),
            command(
                "comm -23 <(tr 'A-Z' 'a-z' < subscribers-jan.txt | sort -u) "
                "<(tr 'A-Z' 'a-z' < subscribers-feb.txt | sort -u) | tee unsubscribed.txt"
            ),
        ),
        check=all_of(
            same_content(
                f"{WORK}/newsletter/all-subscribers.txt",
                join_lines(*sorted(_emails(_JAN_SUBSCRIBERS) | _emails(_FEB_SUBSCRIBERS))),
            ),
            same_content(
                f"{WORK}/newsletter/unsubscribed.txt",
                join_lines(*sorted(_emails(_JAN_SUBSCRIBERS) - _emails(_FEB_SUBSCRIBERS))),
            ),
        ),
    ),
    TerminalTask(
        name="jq-failing-services",
        instruction=(
            "Which services in ~/work/monitor/status.json are not ok? Write their names, one per "
            "line, to failing.txt."
        ),
        category="text",
        setup=(write_file(f"{WORK}/monitor/status.json", _STATUS_JSON),),
        steps=(
            command("cd ~/work/monitor"),
            command("jq '.services | length' status.json"),
            command("jq -r '.services[] | \"\\(.name) \\(.status)\"' status.json"),
            command(
                "jq -r '.services[] | select(.status != \"ok\") | .name' status.json > failing.txt"
            ),
            command("cat failing.txt"),
        ),
        check=same_content(f"{WORK}/monitor/failing.txt", join_lines("billing", "mailer")),
    ),
)
