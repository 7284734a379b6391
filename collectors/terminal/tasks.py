"""The scripted terminal task library.

Each task prepares its sandbox with ``setup`` (shell commands run before the first
observation and never recorded), then plays ``steps`` (terminal actions), and is checked by
``check`` (a shell command run after the episode; exit status 0 means success).

Tasks work in ``~/work`` (``/home/user/work``) of the ``worldtrace/terminal`` image (Debian
bookworm, no network), as the unprivileged ``user`` that the shell runs as; setup and checks
run as that user in its home too. Setup content is fixed text generated here, so every run
starts from the same files; repositories made in setup commit with fixed dates, so their
hashes are stable too.
Checks are POSIX ``sh`` and test the end state, never the screen.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
from collections import Counter
from dataclasses import dataclass

from worldtrace.collectors.base import ScriptedTask
from worldtrace.collectors.terminal.actions import command, keys, wait


@dataclass(frozen=True)
class TerminalTask(ScriptedTask):
    """A shell task: setup commands, scripted actions and a success check."""

    setup: tuple[str, ...] = ()
    check: str | None = None


CATEGORIES: tuple[str, ...] = (
    "files",
    "text",
    "git",
    "python",
    "editor",
    "pager",
    "pipes",
    "archives",
    "processes",
    "environment",
    "errors",
    "interrupt",
)
"""Every category the library covers; each has at least one task."""

# A delimiter no task file contains, quoted so the shell expands nothing inside.
_EOF = "__WT_EOF__"
_GIT_EPOCH = 1709280000  # 2024-03-01T08:00:00Z: fixed dates give stable commit hashes.


def write_file(path: str, text: str, mode: str | None = None) -> str:
    """Return a setup command that writes ``text`` to ``path`` (parents created, no expansion)."""
    if not text.endswith("\n"):
        text += "\n"
    if f"\n{_EOF}\n" in f"\n{text}":
        raise ValueError(f"content of {path} contains the here-document delimiter")
    quoted = shlex.quote(path)
    chmod = f" && chmod {mode} {quoted}" if mode else ""
    return (
        f"mkdir -p {shlex.quote(posixpath.dirname(path))} && "
        f"cat > {quoted} <<'{_EOF}'{chmod}\n{text}{_EOF}"
    )


def git_commit(repo: str, message: str, minute: int) -> str:
    """Return a setup command committing everything in ``repo`` at a fixed time."""
    stamp = f"@{_GIT_EPOCH + 60 * minute} +0000"
    return (
        f"cd {shlex.quote(repo)} && git add -A && "
        f"GIT_AUTHOR_DATE='{stamp}' GIT_COMMITTER_DATE='{stamp}' "
        f"git commit -q -m {shlex.quote(message)}"
    )


def git_init(repo: str) -> str:
    """Return a setup command creating an empty repository on branch main."""
    return f"mkdir -p {shlex.quote(repo)} && git -C {shlex.quote(repo)} init -q"


def same_content(path: str, text: str) -> str:
    """Return a check that ``path`` holds exactly ``text`` (compared by SHA-256)."""
    if not text.endswith("\n"):
        text += "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"echo '{digest}  {path}' | sha256sum -c --quiet - >/dev/null 2>&1"


def all_of(*checks: str) -> str:
    """Join shell checks so that all must pass."""
    return " && ".join(f"{{ {check}; }}" for check in checks)


def _lines(*rows: str) -> str:
    return "\n".join(rows) + "\n"


# --- files -------------------------------------------------------------------------------

_W = "/home/user/work"

_FILES_TASKS = (
    TerminalTask(
        name="organize-downloads",
        instruction=(
            "My ~/work/downloads folder is a mess. Sort the files into images/, docs/ and data/ "
            "subfolders (pictures, documents and CSV files) and show me the result."
        ),
        category="files",
        setup=(
            f"mkdir -p {_W}/downloads && cd {_W}/downloads && "
            "printf '\\377\\330\\377\\340JFIF-beach' > IMG_2041.jpg && "
            "printf '\\377\\330\\377\\340JFIF-dinner' > IMG_2042.jpg && "
            "printf '\\211PNG-login-page' > screenshot-login.png && "
            "printf '%%PDF-1.4 invoice 2024-03' > invoice-2024-03.pdf",
            write_file(
                f"{_W}/downloads/meeting-notes.txt",
                "Planning meeting 2024-03-05\n- ship v1.4 by Friday\n- hire a second SRE\n",
            ),
            write_file(
                f"{_W}/downloads/contacts.csv",
                "name,email\nAda Lovelace,ada@example.org\nAlan Turing,alan@example.org\n",
            ),
            write_file(f"{_W}/downloads/budget.csv", "month,amount\n2024-01,1200\n2024-02,950\n"),
        ),
        steps=(
            command("cd ~/work/downloads"),
            command("ls -l"),
            command("mkdir -p images docs data"),
            command("mv *.jpg *.png images/"),
            command("mv *.pdf *.txt docs/"),
            command("mv *.csv data/"),
            command("tree"),
        ),
        check=(
            f"cd {_W}/downloads && test -f images/IMG_2041.jpg && test -f images/IMG_2042.jpg "
            "&& test -f images/screenshot-login.png && test -f docs/invoice-2024-03.pdf "
            "&& test -f docs/meeting-notes.txt && test -f data/contacts.csv "
            '&& test -f data/budget.csv && [ -z "$(find . -maxdepth 1 -type f)" ]'
        ),
    ),
    TerminalTask(
        name="find-large-logs",
        instruction=(
            "Disk is filling up. Which log files under ~/work/logs are bigger than 50 KB? "
            "Save their paths, sorted, to ~/work/big-logs.txt."
        ),
        category="files",
        setup=(
            f"mkdir -p {_W}/logs/app {_W}/logs/nginx {_W}/logs/cron",
            f"seq 1 40 | sed 's/^/2024-03-01 12:00:01 INFO worker heartbeat seq=/' "
            f"> {_W}/logs/app/app.log",
            f"seq 1 4000 | sed 's/^/2024-02-29 23:59:59 INFO worker heartbeat seq=/' "
            f"> {_W}/logs/app/app.log.1",
            f"seq 1 5000 | sed 's|^|10.0.0.7 - - \"GET /api/items?page=|' "
            f"> {_W}/logs/nginx/access.log",
            f"seq 1 25 | sed 's/^/2024-03-01 [warn] upstream slow, request=/' "
            f"> {_W}/logs/nginx/error.log",
            f"seq 1 12 | sed 's/^/CRON run backup.sh job=/' > {_W}/logs/cron/cron.log",
        ),
        steps=(
            command("cd ~/work/logs"),
            command("du -sh *"),
            command("find . -name '*.log*' -size +50k"),
            command("find . -name '*.log*' -size +50k | sort > ~/work/big-logs.txt"),
            command("cat ~/work/big-logs.txt"),
            command("ls -lh app nginx"),
        ),
        check=same_content(f"{_W}/big-logs.txt", _lines("./app/app.log.1", "./nginx/access.log")),
    ),
    TerminalTask(
        name="backup-config-files",
        instruction=(
            "Before I touch the configs, back up every .conf file in ~/work/site/config into "
            "~/work/site/backup with a .bak suffix and make sure the copies are identical."
        ),
        category="files",
        setup=(
            write_file(
                f"{_W}/site/config/app.conf",
                "[server]\nport = 8080\nworkers = 4\n\n[features]\nsearch = on\n",
            ),
            write_file(
                f"{_W}/site/config/db.conf",
                "host = localhost\nport = 5432\nname = site\nuser = site_rw\npool = 10\n",
            ),
            write_file(f"{_W}/site/config/cache.conf", "backend = memory\nttl_seconds = 300\n"),
            write_file(f"{_W}/site/config/README.md", "# Config\nOne file per subsystem.\n"),
        ),
        steps=(
            command("cd ~/work/site"),
            command("ls -l config"),
            command("mkdir -p backup"),
            command('for f in config/*.conf; do cp -v "$f" "backup/$(basename "$f").bak"; done'),
            command("ls -l backup"),
            command("diff config/db.conf backup/db.conf.bak && echo identical"),
        ),
        check=(
            f"cd {_W}/site && cmp -s config/app.conf backup/app.conf.bak "
            "&& cmp -s config/db.conf backup/db.conf.bak "
            "&& cmp -s config/cache.conf backup/cache.conf.bak "
            '&& [ "$(ls backup | wc -l)" -eq 3 ]'
        ),
    ),
    TerminalTask(
        name="clean-build-artifacts",
        instruction=(
            "Clean up ~/work/webapp before I zip it: remove __pycache__ folders, *.tmp files, "
            "the build/ directory and any empty directories, but keep the sources."
        ),
        category="files",
        setup=(
            write_file(f"{_W}/webapp/src/app.py", "from views import index\n\nprint(index())\n"),
            write_file(f"{_W}/webapp/src/views.py", "def index():\n    return 'hello'\n"),
            write_file(f"{_W}/webapp/tests/test_views.py", "from views import index\n"),
            write_file(f"{_W}/webapp/README.md", "# webapp\nA tiny web app.\n"),
            f"mkdir -p {_W}/webapp/src/__pycache__ {_W}/webapp/tests/__pycache__ "
            f"{_W}/webapp/build/lib {_W}/webapp/logs/old {_W}/webapp/uploads && "
            f"cd {_W}/webapp && printf 'pyc' > src/__pycache__/views.cpython-311.pyc && "
            "printf 'pyc' > src/__pycache__/app.cpython-311.pyc && "
            "printf 'pyc' > tests/__pycache__/test_views.cpython-311.pyc && "
            "printf 'bin' > build/lib/app.bin && printf 'x' > src/.views.py.tmp && "
            "printf 'x' > upload-chunk.tmp",
        ),
        steps=(
            command("cd ~/work/webapp"),
            command("tree -a"),
            command("find . -name '__pycache__' -type d -prune -exec rm -rf {} +"),
            command("find . -name '*.tmp' -print -delete"),
            command("rm -rf build"),
            command("find . -type d -empty -print -delete"),
            command("tree -a"),
        ),
        check=(
            f"cd {_W}/webapp && [ -z \"$(find . -name '__pycache__' -o -name '*.tmp' "
            '-o -name build -o -type d -empty)" ] && test -f src/app.py && test -f src/views.py '
            "&& test -f tests/test_views.py && test -f README.md"
        ),
    ),
    TerminalTask(
        name="rename-photos-batch",
        instruction=(
            "Rename the camera files in ~/work/photos from IMG_0001.JPG style to "
            "lisbon-0001.jpg style (lowercase extension)."
        ),
        category="files",
        setup=(
            f"mkdir -p {_W}/photos && cd {_W}/photos && "
            "for n in 0001 0002 0003 0004 0005 0006; do printf 'JPEG%s' $n > IMG_$n.JPG; done",
        ),
        steps=(
            command("cd ~/work/photos"),
            command("ls"),
            command('for f in IMG_*.JPG; do n=${f#IMG_}; mv -v "$f" "lisbon-${n%.JPG}.jpg"; done'),
            command("ls -l"),
        ),
        check=(
            f"cd {_W}/photos && [ \"$(ls | tr '\\n' ' ')\" = "
            "'lisbon-0001.jpg lisbon-0002.jpg lisbon-0003.jpg lisbon-0004.jpg lisbon-0005.jpg "
            'lisbon-0006.jpg \' ] && [ "$(cat lisbon-0004.jpg)" = JPEG0004 ]'
        ),
    ),
)


# --- text processing -----------------------------------------------------------------------


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
    return _lines(*rows)


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
    return _lines(*(f"{region},{totals[region]}" for region in sorted(totals)))


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
    return _lines(*rows)


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


_JAN_SUBSCRIBERS = _lines(
    "ada@example.org",
    "Bob.Stone@example.org",
    "carol@example.org",
    "dave@example.org",
    "erin@example.org",
    "ada@example.org",
    "frank@example.org",
)
_FEB_SUBSCRIBERS = _lines(
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

_TEXT_TASKS = (
    TerminalTask(
        name="count-http-status-codes",
        instruction=(
            "How many requests got each HTTP status in ~/work/nginx/access.log? Save the "
            "counts, most frequent first, to status_counts.txt, and tell me which paths gave 500s."
        ),
        category="text",
        setup=(write_file(f"{_W}/nginx/access.log", _access_log()),),
        steps=(
            command("cd ~/work/nginx"),
            command("head -3 access.log"),
            command("wc -l access.log"),
            command("awk '{print $9}' access.log | sort | uniq -c | sort -rn"),
            command("awk '{print $9}' access.log | sort | uniq -c | sort -rn > status_counts.txt"),
            command("grep '\" 500 ' access.log | awk '{print $7}' | sort | uniq -c"),
        ),
        check=(
            f"[ \"$(awk '{{print $2\"=\"$1}}' {_W}/nginx/status_counts.txt | paste -sd' ')\" "
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
                f"{_W}/sales/sales.csv",
                _lines(
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
        check=same_content(f"{_W}/sales/totals.csv", _sales_totals()),
    ),
    TerminalTask(
        name="sed-update-settings",
        instruction=(
            "Point the orders API at production: in ~/work/api/settings.ini set db_host to "
            "db.prod.internal, turn debug off and set log_level to warning. Keep a backup."
        ),
        category="text",
        setup=(write_file(f"{_W}/api/settings.ini", _SETTINGS_INI),),
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
                f"{_W}/api/settings.ini",
                _SETTINGS_INI.replace("db_host = localhost", "db_host = db.prod.internal")
                .replace("debug = true", "debug = false")
                .replace("log_level = debug", "log_level = warning"),
            ),
            same_content(f"{_W}/api/settings.ini.orig", _SETTINGS_INI),
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
            write_file(f"{_W}/service/logs/app-2024-03-0{day}.log", _service_log(day))
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
            f'[ "$(wc -l < {_W}/service/errors.txt)" -eq {_service_error_count()} ] '
            f"&& ! grep -qv '^logs/app-2024-03-0[123].log:.* ERROR ' {_W}/service/errors.txt"
        ),
    ),
    TerminalTask(
        name="word-frequency",
        instruction=(
            "What are the five most common words in ~/work/docs/essay.txt, ignoring case and "
            "punctuation? Save the counts to top-words.txt."
        ),
        category="text",
        setup=(write_file(f"{_W}/docs/essay.txt", _ESSAY),),
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
            f'[ "$(wc -l < {_W}/docs/top-words.txt)" -eq 5 ] && '
            f"[ \"$(head -1 {_W}/docs/top-words.txt | awk '{{print $2}}')\" = {_essay_top_word()} ]"
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
            write_file(f"{_W}/newsletter/subscribers-jan.txt", _JAN_SUBSCRIBERS),
            write_file(f"{_W}/newsletter/subscribers-feb.txt", _FEB_SUBSCRIBERS),
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
                f"{_W}/newsletter/all-subscribers.txt",
                _lines(*sorted(_emails(_JAN_SUBSCRIBERS) | _emails(_FEB_SUBSCRIBERS))),
            ),
            same_content(
                f"{_W}/newsletter/unsubscribed.txt",
                _lines(*sorted(_emails(_JAN_SUBSCRIBERS) - _emails(_FEB_SUBSCRIBERS))),
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
        setup=(write_file(f"{_W}/monitor/status.json", _STATUS_JSON),),
        steps=(
            command("cd ~/work/monitor"),
            command("jq '.services | length' status.json"),
            command("jq -r '.services[] | \"\\(.name) \\(.status)\"' status.json"),
            command(
                "jq -r '.services[] | select(.status != \"ok\") | .name' status.json > failing.txt"
            ),
            command("cat failing.txt"),
        ),
        check=same_content(f"{_W}/monitor/failing.txt", _lines("billing", "mailer")),
    ),
)


# --- git -----------------------------------------------------------------------------------

_TODO_PY = """\
import json
import sys

PATH = "todo.json"


def load():
    try:
        with open(PATH) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return []


def main(argv):
    items = load()
    if argv and argv[0] == "add":
        items.append(" ".join(argv[1:]))
        with open(PATH, "w") as handle:
            json.dump(items, handle)
    for number, item in enumerate(items, 1):
        print(f"{number}. {item}")


if __name__ == "__main__":
    main(sys.argv[1:])
"""

_GREET_V1 = """\
import sys


def greet(name):
    return f"Hello, {name}!"


if __name__ == "__main__":
    print(greet(sys.argv[1] if len(sys.argv) > 1 else "world"))
"""

_GREET_V2 = """\
import sys


def greet(name, shout=False):
    text = f"Hello, {name}!"
    return text.upper() if shout else text


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--shout"]
    print(greet(args[0] if args else "world", shout="--shout" in sys.argv))
"""

_CART_PY = """\
TAX_RATE = 0.25
CURRENCY = "EUR"


def subtotal(items):
    return sum(price * qty for price, qty in items)


def tax(amount):
    return round(amount * TAX_RATE, 2)


def total(items):
    amount = subtotal(items)
    return amount + tax(amount)
"""

_CART_WIP = """

def apply_discount(amount, percent):
    return round(amount * (1 - percent / 100), 2)
"""

_CALC_V1 = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
_CALC_TEST = """\
from calc import add, mul

assert add(2, 3) == 5, "add(2, 3) should be 5"
assert mul(4, 5) == 20, "mul(4, 5) should be 20"
print("all tests passed")
"""

_GIT_TASKS = (
    TerminalTask(
        name="git-init-first-commit",
        instruction=(
            "Put my todo CLI in ~/work/todo-cli under git: ignore Python bytecode, add "
            "everything else and make the first commit."
        ),
        category="git",
        setup=(
            write_file(f"{_W}/todo-cli/todo.py", _TODO_PY),
            write_file(f"{_W}/todo-cli/README.md", "# todo-cli\n\n    python3 todo.py add milk\n"),
            f"mkdir -p {_W}/todo-cli/__pycache__ && "
            f"printf 'pyc' > {_W}/todo-cli/__pycache__/todo.cpython-311.pyc",
        ),
        steps=(
            command("cd ~/work/todo-cli"),
            command("git init"),
            command("git status --short"),
            command("printf '__pycache__/\\n*.pyc\\n' > .gitignore"),
            command("git add ."),
            command("git status --short"),
            command('git commit -m "Initial commit of todo CLI"'),
            command("git log --oneline"),
        ),
        check=(
            f'cd {_W}/todo-cli && [ "$(git rev-list --count HEAD)" -eq 1 ] && '
            "[ \"$(git ls-files | paste -sd' ')\" = '.gitignore README.md todo.py' ] && "
            "[ \"$(git log -1 --format=%s)\" = 'Initial commit of todo CLI' ]"
        ),
    ),
    TerminalTask(
        name="git-feature-branch-merge",
        instruction=(
            "In ~/work/greeter, add a --shout option to greet.py on a feature branch, commit "
            "it, and merge it back into main."
        ),
        category="git",
        setup=(
            git_init(f"{_W}/greeter"),
            write_file(f"{_W}/greeter/README.md", "# greeter\nSays hello.\n"),
            git_commit(f"{_W}/greeter", "Add README", 0),
            write_file(f"{_W}/greeter/greet.py", _GREET_V1),
            git_commit(f"{_W}/greeter", "Add greet.py", 5),
        ),
        steps=(
            command("cd ~/work/greeter"),
            command("git log --oneline"),
            command("git checkout -b feature/shout"),
            command(f"cat > greet.py <<'EOF'\n{_GREET_V2}EOF"),
            command("python3 greet.py --shout Ada"),
            command('git commit -am "Add --shout option"'),
            command("git checkout main"),
            command("git merge feature/shout"),
            command("git log --oneline --graph --all"),
        ),
        check=(
            f'cd {_W}/greeter && [ "$(git branch --show-current)" = main ] && '
            "git rev-parse -q --verify feature/shout >/dev/null && "
            "[ \"$(git log -1 --format=%s main)\" = 'Add --shout option' ] && "
            "[ \"$(python3 greet.py --shout Ada)\" = 'HELLO, ADA!' ] && "
            '[ -z "$(git status --porcelain)" ]'
        ),
    ),
    TerminalTask(
        name="git-stash-hotfix",
        instruction=(
            "I'm halfway through adding discounts in ~/work/shop when a bug report comes in: "
            "TAX_RATE in cart.py must be 0.2, not 0.25. Stash my work, commit the fix, then "
            "bring my work back."
        ),
        category="git",
        setup=(
            git_init(f"{_W}/shop"),
            write_file(f"{_W}/shop/cart.py", _CART_PY),
            git_commit(f"{_W}/shop", "Add cart totals", 0),
            f"printf '%s' {shlex.quote(_CART_WIP)} >> {_W}/shop/cart.py",
        ),
        steps=(
            command("cd ~/work/shop"),
            command("git status --short"),
            command("git diff"),
            command("git stash"),
            command("sed -i 's/^TAX_RATE = 0.25/TAX_RATE = 0.2/' cart.py"),
            command('git commit -am "Fix tax rate: 20%, not 25%"'),
            command("git stash pop"),
            command("git diff --stat"),
            command("git log --oneline"),
        ),
        check=(
            f"cd {_W}/shop && [ \"$(git log -1 --format=%s)\" = 'Fix tax rate: 20%, not 25%' ] "
            "&& git show HEAD:cart.py | grep -qx 'TAX_RATE = 0.2' "
            "&& ! git show HEAD:cart.py | grep -q apply_discount "
            "&& grep -qx 'TAX_RATE = 0.2' cart.py && grep -q 'def apply_discount' cart.py "
            '&& [ -z "$(git stash list)" ]'
        ),
    ),
    TerminalTask(
        name="git-resolve-merge-conflict",
        instruction=(
            "Merge the update-version branch into main in ~/work/docs-site. It conflicts on the "
            "version line; resolve it as 'Version: 2.0' and finish the merge."
        ),
        category="git",
        setup=(
            git_init(f"{_W}/docs-site"),
            write_file(
                f"{_W}/docs-site/README.md",
                "# Docs site\n\nVersion: 1.0\n\nBuild with `make html`.\n",
            ),
            git_commit(f"{_W}/docs-site", "Initial docs site", 0),
            f"cd {_W}/docs-site && git checkout -q -b update-version && "
            "sed -i 's/^Version: 1.0/Version: 1.1/' README.md && "
            "printf 'Changelog\\n=========\\n1.1: typo fixes\\n' > CHANGELOG",
            git_commit(f"{_W}/docs-site", "Bump version to 1.1", 10),
            f"cd {_W}/docs-site && git checkout -q main && "
            "sed -i 's/^Version: 1.0/Version: 2.0-beta/' README.md",
            git_commit(f"{_W}/docs-site", "Start 2.0 beta", 20),
        ),
        steps=(
            command("cd ~/work/docs-site"),
            command("git branch"),
            command("git merge update-version"),
            command("git status --short"),
            command("cat README.md"),
            command("git checkout --ours README.md"),
            command("sed -i 's/^Version: 2.0-beta$/Version: 2.0/' README.md"),
            command("git add README.md"),
            command("git commit --no-edit"),
            command("git log --oneline --graph"),
        ),
        check=(
            f'cd {_W}/docs-site && [ "$(git rev-list --parents -1 HEAD | wc -w)" -eq 3 ] && '
            "grep -qx 'Version: 2.0' README.md && ! grep -q '^[<=>]\\{7\\}' README.md && "
            'test -f CHANGELOG && [ -z "$(git status --porcelain)" ]'
        ),
    ),
    TerminalTask(
        name="git-revert-bad-commit",
        instruction=(
            "The last commit in ~/work/calc broke add(). Find it and undo it without rewriting "
            "history, then make sure the tests pass."
        ),
        category="git",
        setup=(
            git_init(f"{_W}/calc"),
            write_file(f"{_W}/calc/calc.py", _CALC_V1),
            write_file(f"{_W}/calc/test_calc.py", _CALC_TEST),
            git_commit(f"{_W}/calc", "Add calc with tests", 0),
            f"printf '\\n\\ndef sub(a, b):\\n    return a - b\\n' >> {_W}/calc/calc.py",
            git_commit(f"{_W}/calc", "Add sub()", 30),
            f"sed -i '2s/a + b/a - b  # faster/' {_W}/calc/calc.py",
            git_commit(f"{_W}/calc", "Speed up add()", 60),
        ),
        steps=(
            command("cd ~/work/calc"),
            command("python3 test_calc.py"),
            command("git log --oneline"),
            command("git show HEAD"),
            command("git revert --no-edit HEAD"),
            command("python3 test_calc.py"),
            command("git log --oneline"),
        ),
        check=(
            f'cd {_W}/calc && [ "$(git rev-list --count HEAD)" -eq 4 ] && '
            "git log -1 --format=%s | grep -q '^Revert \"Speed up add()\"' && "
            "python3 test_calc.py >/dev/null && grep -q 'def sub' calc.py"
        ),
    ),
    TerminalTask(
        name="git-tag-from-history",
        instruction=(
            "In ~/work/fetcher, find the commit that introduced the retries setting, tag it "
            "v0.3, and show what changed in it."
        ),
        category="git",
        setup=(
            git_init(f"{_W}/fetcher"),
            write_file(f"{_W}/fetcher/settings.py", "TIMEOUT = 10\n"),
            git_commit(f"{_W}/fetcher", "Add settings", 0),
            f"printf 'URL = \"http://localhost:8000\"\\n' >> {_W}/fetcher/settings.py",
            git_commit(f"{_W}/fetcher", "Configure the base URL", 15),
            f"printf 'RETRIES = 3\\n' >> {_W}/fetcher/settings.py",
            git_commit(f"{_W}/fetcher", "Retry failed requests", 30),
            f"sed -i 's/TIMEOUT = 10/TIMEOUT = 30/' {_W}/fetcher/settings.py",
            git_commit(f"{_W}/fetcher", "Raise the timeout", 45),
        ),
        steps=(
            command("cd ~/work/fetcher"),
            command("git log --oneline"),
            command("git log -S RETRIES --oneline"),
            command("git tag v0.3 $(git log -S RETRIES --format=%h)"),
            command("git show --stat v0.3"),
            command("git log --oneline --decorate"),
        ),
        check=(
            f'cd {_W}/fetcher && [ "$(git log -1 --format=%s v0.3)" = '
            "'Retry failed requests' ] && [ \"$(git rev-list --count HEAD)\" -eq 4 ]"
        ),
    ),
)


# --- python --------------------------------------------------------------------------------

_GRADES = (
    ("amira", "math", 91),
    ("amira", "physics", 84),
    ("amira", "history", 77),
    ("ben", "math", 68),
    ("ben", "physics", 72),
    ("ben", "history", 90),
    ("chloe", "math", 99),
    ("chloe", "physics", 95),
    ("chloe", "history", 88),
    ("dmitri", "math", 55),
    ("dmitri", "physics", 61),
    ("dmitri", "history", 70),
)

_AVERAGE_PY = """\
import csv
from collections import defaultdict

scores = defaultdict(list)
with open("grades.csv", newline="") as handle:
    for row in csv.DictReader(handle):
        scores[row["name"]].append(int(row["score"]))

for name in sorted(scores):
    values = scores[name]
    print(f"{name}: {sum(values) / len(values):.1f}")
"""


def _grade_averages() -> str:
    names = sorted({name for name, _, _ in _GRADES})
    rows = []
    for name in names:
        values = [score for who, _, score in _GRADES if who == name]
        rows.append(f"{name}: {sum(values) / len(values):.1f}")
    return _lines(*rows)


_STOCK_PY = """\
import json

with open("items.json") as handle:
    items = json.load(handle)

total = 0
for item in items:
    print(f"{item['sku']:<8} {item['name']:<14} {item['qty']:>4}")
    total += item['qty']
print(f"Total units: {total}")
"""

_ITEMS = (
    ("A-100", "bolts", 250),
    ("A-101", "nuts", 310),
    ("B-200", "washers", 75),
    ("C-300", "brackets", 12),
)
_ITEMS_JSON = (
    "[\n"
    + ",\n".join(f'  {{"sku": "{s}", "name": "{n}", "quantity": {q}}}' for s, n, q in _ITEMS)
    + "\n]\n"
)

_SERVICE_CONFIG = """\
{
  "name": "thumbnailer",
  "workers": 6,
  "queue": "redis://localhost:6379/2",
  "features": {"webp": true, "avif": false, "face_crop": true, "watermark": false,
               "progressive_jpeg": true}
}
"""

_TEXTUTILS_PY = """\
import re


def slugify(title):
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower())
    return slug


def word_count(text):
    return len(text.split())
"""

_TEST_TEXTUTILS_PY = """\
import unittest

from textutils import slugify, word_count


class TextUtilsTest(unittest.TestCase):
    def test_slugify_simple(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_slugify_punctuation(self):
        self.assertEqual(slugify("Ship it! (v1.4)"), "ship-it-v1-4")

    def test_word_count(self):
        self.assertEqual(word_count("one two  three"), 3)


if __name__ == "__main__":
    unittest.main()
"""

_PYTHON_TASKS = (
    TerminalTask(
        name="python-grade-averages",
        instruction=(
            "Write a small Python script that prints each student's average score from "
            "~/work/grades/grades.csv, run it, and save its output to averages.txt."
        ),
        category="python",
        setup=(
            write_file(
                f"{_W}/grades/grades.csv",
                _lines("name,subject,score", *(f"{n},{s},{v}" for n, s, v in _GRADES)),
            ),
        ),
        steps=(
            command("cd ~/work/grades"),
            command("head -4 grades.csv"),
            command(f"cat > average.py <<'EOF'\n{_AVERAGE_PY}EOF"),
            command("python3 average.py"),
            command("python3 average.py > averages.txt"),
            command("cat averages.txt"),
        ),
        check=all_of(
            same_content(f"{_W}/grades/averages.txt", _grade_averages()),
            f"test -f {_W}/grades/average.py",
        ),
    ),
    TerminalTask(
        name="python-fix-keyerror",
        instruction=(
            "~/work/inventory/stock.py crashes. Figure out why, fix it, and save its report "
            "to report.txt."
        ),
        category="python",
        setup=(
            write_file(f"{_W}/inventory/stock.py", _STOCK_PY),
            write_file(f"{_W}/inventory/items.json", _ITEMS_JSON),
        ),
        steps=(
            command("cd ~/work/inventory"),
            command("python3 stock.py"),
            command("echo $?"),
            command("python3 -m json.tool items.json | head -8"),
            command("grep -n qty stock.py"),
            command("sed -i \"s/item\\['qty'\\]/item['quantity']/g\" stock.py"),
            command("python3 stock.py"),
            command("python3 stock.py > report.txt"),
        ),
        check=(
            f"cd {_W}/inventory && python3 stock.py >/dev/null && "
            f"[ \"$(tail -1 report.txt)\" = 'Total units: {sum(q for _, _, q in _ITEMS)}' ]"
        ),
    ),
    TerminalTask(
        name="python-repl-inspect-config",
        instruction=(
            "Use the Python REPL to look at ~/work/thumbnailer/config.json: how many workers "
            "are configured and which features are on? Write the enabled features to "
            "enabled.txt, one per line."
        ),
        category="python",
        setup=(write_file(f"{_W}/thumbnailer/config.json", _SERVICE_CONFIG),),
        steps=(
            command("cd ~/work/thumbnailer"),
            command("python3"),
            keys("import json", "Enter"),
            keys("cfg = json.load(open('config.json'))", "Enter"),
            keys("cfg['workers']", "Enter"),
            keys("enabled = [name for name, on in cfg['features'].items() if on]", "Enter"),
            keys("enabled", "Enter"),
            keys("open('enabled.txt', 'w').write('\\n'.join(enabled) + '\\n')", "Enter"),
            keys("exit()", "Enter"),
            command("cat enabled.txt"),
        ),
        check=same_content(
            f"{_W}/thumbnailer/enabled.txt", _lines("webp", "face_crop", "progressive_jpeg")
        ),
    ),
    TerminalTask(
        name="python-unittest-fix",
        instruction=(
            "The tests in ~/work/textutils fail. Run them, fix slugify in textutils.py (not the "
            "tests), and run them again."
        ),
        category="python",
        setup=(
            write_file(f"{_W}/textutils/textutils.py", _TEXTUTILS_PY),
            write_file(f"{_W}/textutils/test_textutils.py", _TEST_TEXTUTILS_PY),
        ),
        steps=(
            command("cd ~/work/textutils"),
            command("python3 -m unittest -v"),
            command("cat textutils.py"),
            command("sed -i 's/    return slug$/    return slug.strip(\"-\")/' textutils.py"),
            command("python3 -m unittest -v"),
        ),
        check=all_of(
            f"cd {_W}/textutils && python3 -m unittest -q 2>/dev/null",
            same_content(f"{_W}/textutils/test_textutils.py", _TEST_TEXTUTILS_PY),
        ),
    ),
)


# --- editor (vim) --------------------------------------------------------------------------

_TODO_TXT = """\
- [x] rotate the TLS certificates
- [ ] upgrade postgres to 16
- [ ] review the on-call schedule
- [ ] clean up old feature flags
"""

_SITE_CONF = """\
server {
    listen 8080;
    server_name shop.example.local;
    root /srv/shop/public;

    client_max_body_size 1m;
    # debug_log /var/log/shop/debug.log;

    location /api/ {
        proxy_pass http://127.0.0.1:9000;
    }
}
"""

_DEPLOY_YML = """\
service: checkout
image: registry.local/checkout:1.8.2
replicas: 3
resources:
  cpu: 500m
  memory: 256Mi
env:
  LOG_LEVEL: info
  PAYMENT_PROVIDER: sandbox
"""

_EDITOR_TASKS = (
    TerminalTask(
        name="vim-add-todo-item",
        instruction=(
            "Open ~/work/todo.txt in vim and add '- [ ] write release notes for v1.4' as the "
            "last item, save, and show me the file."
        ),
        category="editor",
        setup=(write_file(f"{_W}/todo.txt", _TODO_TXT),),
        steps=(
            command("cd ~/work"),
            command("vim todo.txt"),
            keys("G"),
            keys("o", "- [ ] write release notes for v1.4", "Escape"),
            keys(":wq", "Enter"),
            command("cat todo.txt"),
        ),
        check=same_content(f"{_W}/todo.txt", _TODO_TXT + "- [ ] write release notes for v1.4\n"),
    ),
    TerminalTask(
        name="vim-edit-nginx-conf",
        instruction=(
            "Uploads to the shop fail. In ~/work/nginx/site.conf raise client_max_body_size "
            "from 1m to 20m and delete the commented-out debug_log line. Use vim."
        ),
        category="editor",
        setup=(write_file(f"{_W}/nginx/site.conf", _SITE_CONF),),
        steps=(
            command("cd ~/work/nginx"),
            command("vim site.conf"),
            keys("/client_max_body_size", "Enter"),
            keys(":s/1m;/20m;/", "Enter"),
            keys("/debug_log", "Enter"),
            keys("dd"),
            keys(":wq", "Enter"),
            command("grep -n -e body_size -e debug site.conf"),
        ),
        check=same_content(
            f"{_W}/nginx/site.conf",
            _SITE_CONF.replace("size 1m;", "size 20m;").replace(
                "    # debug_log /var/log/shop/debug.log;\n", ""
            ),
        ),
    ),
    TerminalTask(
        name="git-commit-message-in-vim",
        instruction=(
            "Commit the new meeting notes in ~/work/notes with the message 'Add notes from "
            "the March 5 planning meeting', writing the message in the editor."
        ),
        category="editor",
        setup=(
            git_init(f"{_W}/notes"),
            write_file(f"{_W}/notes/index.md", "# Meeting notes\n"),
            git_commit(f"{_W}/notes", "Start meeting notes", 0),
            write_file(
                f"{_W}/notes/2024-03-05-planning.md",
                "# Planning 2024-03-05\n\n- v1.4 ships Friday\n- Hiring: second SRE\n",
            ),
        ),
        steps=(
            command("cd ~/work/notes"),
            command("git status --short"),
            command("git add 2024-03-05-planning.md"),
            command("git commit"),
            keys("i", "Add notes from the March 5 planning meeting", "Escape"),
            keys(":wq", "Enter"),
            command("git log --oneline"),
        ),
        check=(
            f'cd {_W}/notes && [ "$(git log -1 --format=%s)" = '
            "'Add notes from the March 5 planning meeting' ] && "
            '[ -z "$(git status --porcelain)" ]'
        ),
    ),
    TerminalTask(
        name="vim-look-without-changing",
        instruction=(
            "Check how many replicas ~/work/k8s/deploy.yml asks for, in vim, without changing "
            "the file, and note the line in replicas.txt."
        ),
        category="editor",
        setup=(write_file(f"{_W}/k8s/deploy.yml", _DEPLOY_YML),),
        steps=(
            command("cd ~/work/k8s"),
            command("vim deploy.yml"),
            keys("/replicas", "Enter"),
            # A slip of the finger: the buffer is modified, so :q refuses (E37).
            keys("x"),
            keys(":q", "Enter"),
            keys(":q!", "Enter"),
            command("grep -n replicas deploy.yml | tee replicas.txt"),
        ),
        check=all_of(
            same_content(f"{_W}/k8s/deploy.yml", _DEPLOY_YML),
            same_content(f"{_W}/k8s/replicas.txt", "3:replicas: 3\n"),
        ),
    ),
)


# --- pager (less) --------------------------------------------------------------------------

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
    return _lines(*rows)


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
    return _lines(*rows)


def _portugal_count() -> int:
    return _customers_csv().count(",Portugal,")


_PAGER_TASKS = (
    TerminalTask(
        name="less-search-server-log",
        instruction=(
            "Page through ~/work/server/server.log with less and find the 'Connection refused' "
            "errors, then save their line numbers to refused.txt."
        ),
        category="pager",
        setup=(write_file(f"{_W}/server/server.log", _server_log()),),
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
        check=same_content(f"{_W}/server/refused.txt", _lines(*map(str, _REFUSED_LINES))),
    ),
    TerminalTask(
        name="less-browse-wide-csv",
        instruction=(
            "Have a look at ~/work/crm/customers.csv in less without wrapping the long lines, "
            "check the last record, then count the customers from Portugal into portugal.txt."
        ),
        category="pager",
        setup=(write_file(f"{_W}/crm/customers.csv", _customers_csv()),),
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
        check=f'[ "$(cat {_W}/crm/portugal.txt)" = {_portugal_count()} ]',
    ),
)


# --- pipes and redirects -------------------------------------------------------------------

_BUILD_SH = """\
#!/bin/sh
for module in core api cli web; do
    echo "compiling $module"
done
echo "warning: api/handlers.py: unused import 'os'" >&2
echo "linking dist/app"
echo "warning: web/static: 3 images larger than 1 MB" >&2
echo "build finished"
"""
_BUILD_STDOUT_LINES = 6
_BUILD_STDERR_LINES = 2

_REQUEST_ROWS = tuple(
    (
        f"2024-03-01T11:{n:02d}:00",
        ("/api/search", "/api/cart", "/api/users", "/")[n % 4],
        (n * 97) % 1000 + n,
    )
    for n in range(40)
)


def _slow_requests() -> str:
    slow = sorted((row for row in _REQUEST_ROWS if row[2] > 500), key=lambda r: -r[2])
    if len({r[2] for r in slow}) != len(slow):
        raise ValueError("latencies must be unique so the sort order is well defined")
    return _lines(*(f"{t},{e},{ms}" for t, e, ms in slow))


_APP_YAML = """\
service: billing
port: 8081
replicas: 2
healthcheck: http://localhost:8081/health
# owner: platform-team
"""

_PIPES_TASKS = (
    TerminalTask(
        name="redirect-build-output",
        instruction=(
            "Run ~/work/proj/build.sh so its normal output goes to build.log and warnings to "
            "warnings.log. Then run it again, seeing everything on screen and also saving it "
            "to full.log, and append one more run to full.log."
        ),
        category="pipes",
        setup=(write_file(f"{_W}/proj/build.sh", _BUILD_SH, mode="755"),),
        steps=(
            command("cd ~/work/proj"),
            command("./build.sh > build.log 2> warnings.log"),
            command("cat warnings.log"),
            command("wc -l build.log warnings.log"),
            command("./build.sh 2>&1 | tee full.log"),
            command("./build.sh >> full.log 2>&1"),
            command("wc -l full.log"),
        ),
        check=(
            f'cd {_W}/proj && [ "$(wc -l < build.log)" -eq {_BUILD_STDOUT_LINES} ] && '
            "! grep -q warning build.log && "
            f"[ \"$(grep -c '^warning' warnings.log)\" -eq {_BUILD_STDERR_LINES} ] && "
            f'[ "$(wc -l < full.log)" -eq {2 * (_BUILD_STDOUT_LINES + _BUILD_STDERR_LINES)} ]'
        ),
    ),
    TerminalTask(
        name="heredoc-service-config",
        instruction=(
            "Create ~/work/deploy/app.yaml for the billing service on port 8081 with two "
            "replicas, using shell variables and a here-document, then append an owner comment."
        ),
        category="pipes",
        setup=(f"mkdir -p {_W}/deploy",),
        steps=(
            command("cd ~/work/deploy"),
            command("SERVICE=billing PORT=8081"),
            command(
                "cat > app.yaml <<EOF\nservice: $SERVICE\nport: $PORT\nreplicas: 2\n"
                "healthcheck: http://localhost:$PORT/health\nEOF"
            ),
            command("echo '# owner: platform-team' >> app.yaml"),
            command("cat app.yaml"),
        ),
        check=same_content(f"{_W}/deploy/app.yaml", _APP_YAML),
    ),
    TerminalTask(
        name="tee-slow-requests",
        instruction=(
            "From ~/work/metrics/requests.csv, save every request slower than 500 ms, slowest "
            "first, to slow.csv, count them, and show which endpoints they hit."
        ),
        category="pipes",
        setup=(
            write_file(
                f"{_W}/metrics/requests.csv",
                _lines("timestamp,endpoint,ms", *(f"{t},{e},{ms}" for t, e, ms in _REQUEST_ROWS)),
            ),
        ),
        steps=(
            command("cd ~/work/metrics"),
            command("head -3 requests.csv"),
            command(
                "awk -F, 'NR > 1 && $3 > 500' requests.csv | sort -t, -k3,3nr "
                "| tee slow.csv | wc -l"
            ),
            command("head -5 slow.csv"),
            command("cut -d, -f2 slow.csv | sort | uniq -c | sort -rn"),
        ),
        check=same_content(f"{_W}/metrics/slow.csv", _slow_requests()),
    ),
)


# --- archives ------------------------------------------------------------------------------

_ARCHIVE_TASKS = (
    TerminalTask(
        name="tar-backup-and-restore",
        instruction=(
            "Make a gzipped tarball of ~/work/blog called blog-backup.tar.gz, list what is in "
            "it, and verify it by restoring it to /tmp/restore and comparing."
        ),
        category="archives",
        setup=(
            write_file(f"{_W}/blog/config.toml", 'title = "Notes from the shell"\ntheme = "ink"\n'),
            write_file(f"{_W}/blog/posts/2024-01-pipes.md", "# Pipes\n\nSmall tools, joined.\n"),
            write_file(f"{_W}/blog/posts/2024-02-grep.md", "# grep\n\nSearch all the things.\n"),
            write_file(f"{_W}/blog/posts/drafts/awk.md", "# awk (draft)\n"),
            f"mkdir -p {_W}/blog/static && printf 'PNGDATA' > {_W}/blog/static/logo.png",
        ),
        steps=(
            command("cd ~/work"),
            command("tar czf blog-backup.tar.gz blog"),
            command("tar tzf blog-backup.tar.gz"),
            command("ls -lh blog-backup.tar.gz"),
            command("mkdir -p /tmp/restore && tar xzf blog-backup.tar.gz -C /tmp/restore"),
            command("diff -r blog /tmp/restore/blog && echo 'backup verified'"),
        ),
        check=(
            f"tar tzf {_W}/blog-backup.tar.gz | grep -qx blog/posts/drafts/awk.md && "
            f"tar tzf {_W}/blog-backup.tar.gz | grep -qx blog/static/logo.png && "
            f"diff -r {_W}/blog /tmp/restore/blog >/dev/null"
        ),
    ),
    TerminalTask(
        name="zip-quarterly-reports",
        instruction=(
            "Zip the CSV reports in ~/work/reports (not the drafts) into q1-reports.zip, list "
            "its contents, and unzip it into ~/work/shared to check."
        ),
        category="archives",
        setup=(
            write_file(f"{_W}/reports/2024-01-revenue.csv", "day,eur\n01,1200\n02,980\n"),
            write_file(f"{_W}/reports/2024-02-revenue.csv", "day,eur\n01,1310\n02,1045\n"),
            write_file(f"{_W}/reports/2024-03-revenue.csv", "day,eur\n01,1422\n02,1101\n"),
            write_file(f"{_W}/reports/summary.txt", "Q1 revenue grew 18% over Q4.\n"),
            write_file(f"{_W}/reports/drafts/2024-04-revenue.csv", "day,eur\n01,?\n"),
        ),
        steps=(
            command("cd ~/work/reports"),
            command("ls -R"),
            command("zip q1-reports.zip *.csv"),
            command("unzip -l q1-reports.zip"),
            command("mkdir -p ../shared && unzip -o q1-reports.zip -d ../shared"),
            command("ls -l ../shared"),
        ),
        check=(
            f"[ \"$(unzip -Z1 {_W}/reports/q1-reports.zip | sort | paste -sd' ')\" = "
            "'2024-01-revenue.csv 2024-02-revenue.csv 2024-03-revenue.csv' ] && "
            f"cmp -s {_W}/reports/2024-02-revenue.csv {_W}/shared/2024-02-revenue.csv"
        ),
    ),
    TerminalTask(
        name="gzip-rotated-logs",
        instruction=(
            "Compress the rotated logs in ~/work/applogs (app.log.1 to app.log.3, not the live "
            "app.log) and then find the 'timeout' lines in them without unpacking, saving them "
            "to timeouts.txt."
        ),
        category="archives",
        setup=(
            f"mkdir -p {_W}/applogs && cd {_W}/applogs && "
            "for n in 1 2 3; do seq 1 300 | awk -v d=$n '{ if ($1 % 40 == 0) "
            'print "2024-02-2" d " ERROR upstream timeout after 30s req=" $1; '
            'else print "2024-02-2" d " INFO ok req=" $1 }\' > app.log.$n; done && '
            "seq 1 20 | sed 's/^/2024-03-01 INFO ok req=/' > app.log",
        ),
        steps=(
            command("cd ~/work/applogs"),
            command("ls -lh"),
            command("gzip app.log.[0-9]"),
            command("ls -lh"),
            command("zcat app.log.2.gz | head -3"),
            command("zgrep -c timeout app.log.*.gz"),
            command("zgrep -h timeout app.log.*.gz > timeouts.txt"),
            command("wc -l timeouts.txt"),
        ),
        check=(
            f"cd {_W}/applogs && test -f app.log.1.gz && test -f app.log.2.gz && "
            "test -f app.log.3.gz && ! test -e app.log.1 && test -f app.log && "
            '[ "$(wc -l < timeouts.txt)" -eq 21 ]'
        ),
    ),
)


# --- processes -----------------------------------------------------------------------------

_SERVER_SH = """\
#!/bin/sh
echo "dev server: serving ./public on http://127.0.0.1:8000"
while true; do
    sleep 1
done
"""

_SPIN_PY = """\
# Nightly report generator. Bug: the retry loop never ends.
import os

with open("spin.pid", "w") as handle:
    handle.write(str(os.getpid()))
attempts = 0
while True:
    attempts += 1
"""

# pgrep -f also sees the check's own `sh -c` command line, so patterns are written not to
# match themselves ('[s]pin.py', '^sleep 300$'); plain `pgrep -x sleep` would match the
# sandbox's own `sleep` init process.
_PROCESS_TASKS = (
    TerminalTask(
        name="background-dev-server",
        instruction=(
            "Start the dev server in ~/work/site2 in the background with its output going to "
            "server.log, check that it is running, then stop it."
        ),
        category="processes",
        setup=(
            write_file(f"{_W}/site2/server.sh", _SERVER_SH, mode="755"),
            write_file(f"{_W}/site2/public/index.html", "<h1>It works</h1>\n"),
        ),
        steps=(
            command("cd ~/work/site2"),
            command("./server.sh > server.log 2>&1 &"),
            command("jobs"),
            command("ps -ef | grep '[s]erver.sh'"),
            command("cat server.log"),
            command("kill %1"),
            command("jobs"),
            command("pgrep -f server.sh || echo 'server stopped'"),
        ),
        check=(f"grep -q 'serving ./public' {_W}/site2/server.log && ! pgrep -f '[s]erver.sh'"),
    ),
    TerminalTask(
        name="sleep-jobs-and-kill",
        instruction=(
            "Start two long sleeps in the background, record which sleep processes are running "
            "in ~/work/sleeping.txt, then get rid of both: kill one and interrupt the other in "
            "the foreground."
        ),
        category="processes",
        setup=(f"mkdir -p {_W}",),
        steps=(
            command("cd ~/work"),
            command("sleep 300 &"),
            command("sleep 400 &"),
            command("jobs -l"),
            command("ps -C sleep -o pid,etime,args"),
            command("ps -C sleep -o args= > sleeping.txt"),
            command("kill %2"),
            command("jobs"),
            command("fg %1"),
            keys("C-c"),
            command("jobs"),
        ),
        check=(
            f"grep -qx 'sleep 300' {_W}/sleeping.txt && grep -qx 'sleep 400' {_W}/sleeping.txt "
            "&& ! pgrep -f '^sleep [34]00$'"
        ),
    ),
    TerminalTask(
        name="kill-runaway-process",
        instruction=(
            "The nightly report script in ~/work/reports-job eats a whole CPU. Start it in the "
            "background, find it by CPU usage, and kill it."
        ),
        category="processes",
        setup=(write_file(f"{_W}/reports-job/spin.py", _SPIN_PY),),
        steps=(
            command("cd ~/work/reports-job"),
            command("python3 spin.py &"),
            command("ps -eo pid,pcpu,etime,args --sort=-pcpu | head -4"),
            command("pgrep -af spin.py"),
            command("kill $(pgrep -f spin.py)"),
            command("sleep 0.2; pgrep -af spin.py || echo 'spin.py is gone'"),
        ),
        check=(
            f'test -s {_W}/reports-job/spin.pid && ! kill -0 "$(cat {_W}/reports-job/spin.pid)" '
            "2>/dev/null && ! pgrep -f '[s]pin.py'"
        ),
    ),
)


# --- environment variables -----------------------------------------------------------------

_CLEANUP_LOGS = """\
#!/bin/sh
echo "cleanup-logs: would remove logs older than 14 days from /var/log/app ($*)"
echo "$*" > "$HOME/work/tools/last-run.txt"
"""

_DOTENV = """\
DATABASE_URL=postgres://app:app@localhost:5432/app
CACHE_TTL=300
FEATURE_SIGNUP=on
"""

_ENV_APP_PY = """\
import os

url = os.environ["DATABASE_URL"]
ttl = int(os.environ.get("CACHE_TTL", "60"))
print(f"connecting to {url.split('@')[-1]} (cache ttl {ttl}s)")
print("signup enabled" if os.environ.get("FEATURE_SIGNUP") == "on" else "signup disabled")
"""

_ENVIRONMENT_TASKS = (
    TerminalTask(
        name="env-export-and-persist",
        instruction=(
            "Set APP_ENV=staging and API_URL=http://api.staging.local:8080 for this shell, check "
            "that programs see them, and make them permanent in ~/.bashrc. Note the current "
            "APP_ENV in ~/work/current-env.txt."
        ),
        category="environment",
        setup=(f"mkdir -p {_W}",),
        steps=(
            command("echo \"APP_ENV is '$APP_ENV'\""),
            command("export APP_ENV=staging API_URL=http://api.staging.local:8080"),
            command("env | grep -E '^(APP_ENV|API_URL)=' | sort"),
            command(
                'python3 -c \'import os; print(os.environ["APP_ENV"], os.environ["API_URL"])\''
            ),
            command(
                "printf 'export APP_ENV=staging\\nexport API_URL=http://api.staging.local"
                ":8080\\n' >> ~/.bashrc"
            ),
            command("tail -2 ~/.bashrc"),
            command('echo "APP_ENV=$APP_ENV" > ~/work/current-env.txt'),
        ),
        check=all_of(
            '[ "$(tail -2 /home/user/.bashrc)" = "$(printf \'export APP_ENV=staging\\n'
            "export API_URL=http://api.staging.local:8080')\" ]",
            same_content(f"{_W}/current-env.txt", "APP_ENV=staging\n"),
        ),
    ),
    TerminalTask(
        name="path-add-tools-dir",
        instruction=(
            "I want to run the scripts in ~/work/tools by name, like `cleanup-logs --dry-run`. "
            "Put that folder on PATH now and for future login shells."
        ),
        category="environment",
        setup=(write_file(f"{_W}/tools/cleanup-logs", _CLEANUP_LOGS, mode="755"),),
        steps=(
            command("cleanup-logs --dry-run"),
            command("echo $PATH"),
            command("ls -l ~/work/tools"),
            command('export PATH="$HOME/work/tools:$PATH"'),
            command("which cleanup-logs"),
            command("cleanup-logs --dry-run"),
            command("echo 'export PATH=\"$HOME/work/tools:$PATH\"' >> ~/.profile"),
            command("tail -1 ~/.profile"),
        ),
        check=(
            '[ "$(tail -1 /home/user/.profile)" = \'export PATH="$HOME/work/tools:$PATH"\' ] && '
            f'[ "$(cat {_W}/tools/last-run.txt)" = --dry-run ]'
        ),
    ),
    TerminalTask(
        name="dotenv-load-and-run",
        instruction=(
            "~/work/api-server/app.py needs the settings from its .env file. Get it to start "
            "and save its startup output to startup.txt."
        ),
        category="environment",
        setup=(
            write_file(f"{_W}/api-server/.env", _DOTENV),
            write_file(f"{_W}/api-server/app.py", _ENV_APP_PY),
        ),
        steps=(
            command("cd ~/work/api-server"),
            command("python3 app.py"),
            command("ls -a"),
            command("cat .env"),
            command("set -a; . ./.env; set +a"),
            command("env | grep -e DATABASE_URL -e CACHE_TTL"),
            command("python3 app.py"),
            command("python3 app.py > startup.txt"),
        ),
        check=same_content(
            f"{_W}/api-server/startup.txt",
            "connecting to localhost:5432/app (cache ttl 300s)\nsignup enabled\n",
        ),
    ),
)


# --- failing commands ----------------------------------------------------------------------

_DEPLOY_SH = """\
#!/bin/sh
set -e
. ./config/prod.conf
echo "deploying $APP $VERSION to $TARGET"
echo "$APP $VERSION $TARGET" > deployed.txt
echo "deploy complete"
"""

_PARSER_PY = """\
def parse(tokens):
    # TODO: report the position of unexpected tokens
    tree = []
    for token in tokens:
        tree.append(token)  # TODO: build real nodes
    return tree
"""

_LEXER_PY = """\
def tokenize(text):
    # TODO: handle string literals
    return text.split()
"""

_CONFIG_EXAMPLE_YML = "strict: true\nmax_depth: 64\n"

_ERROR_TASKS = (
    TerminalTask(
        name="typo-command-not-found",
        instruction=(
            "Write the versions of git, python3 and jq into ~/work/tool-versions.txt, one per line."
        ),
        category="errors",
        setup=(f"mkdir -p {_W}",),
        steps=(
            command("cd ~/work"),
            command("gti --version"),
            command("git --version > tool-versions.txt"),
            command("pyhton3 --version"),
            command("python3 --version >> tool-versions.txt"),
            command("jq --verison"),
            command("jq --version >> tool-versions.txt"),
            command("cat tool-versions.txt"),
        ),
        check=(
            f'[ "$(wc -l < {_W}/tool-versions.txt)" -eq 3 ] && '
            f"sed -n 1p {_W}/tool-versions.txt | grep -q '^git version ' && "
            f"sed -n 2p {_W}/tool-versions.txt | grep -q '^Python 3\\.' && "
            f"sed -n 3p {_W}/tool-versions.txt | grep -q '^jq-'"
        ),
    ),
    TerminalTask(
        name="deploy-permission-and-missing-config",
        instruction=(
            "Run the deploy script in ~/work/deploy-tool and get it to finish successfully."
        ),
        category="errors",
        setup=(
            write_file(f"{_W}/deploy-tool/deploy.sh", _DEPLOY_SH, mode="644"),
            write_file(
                f"{_W}/deploy-tool/config/prod.conf.example",
                "APP=checkout\nVERSION=1.8.3\nTARGET=prod-eu-1\n",
            ),
        ),
        steps=(
            command("cd ~/work/deploy-tool"),
            command("./deploy.sh"),
            command("ls -l deploy.sh"),
            command("chmod +x deploy.sh"),
            command("./deploy.sh"),
            command("ls config"),
            command("cp config/prod.conf.example config/prod.conf"),
            command("./deploy.sh"),
            command("cat deployed.txt"),
        ),
        check=(
            f"test -x {_W}/deploy-tool/deploy.sh && "
            f"[ \"$(cat {_W}/deploy-tool/deployed.txt)\" = 'checkout 1.8.3 prod-eu-1' ]"
        ),
    ),
    TerminalTask(
        name="exit-codes-release-check",
        instruction=(
            "Before releasing ~/work/minilang: are there FIXME or TODO markers left in src/, and "
            "is there a config.yml? Create the config from the example if needed and save the "
            "TODO counts per file to todo-count.txt."
        ),
        category="errors",
        setup=(
            write_file(f"{_W}/minilang/src/parser.py", _PARSER_PY),
            write_file(f"{_W}/minilang/src/lexer.py", _LEXER_PY),
            write_file(f"{_W}/minilang/config.example.yml", _CONFIG_EXAMPLE_YML),
        ),
        steps=(
            command("cd ~/work/minilang"),
            command('grep -rn FIXME src/; echo "exit status: $?"'),
            command("grep -rn TODO src/"),
            command("test -f config.yml; echo $?"),
            command("ls config.yml"),
            command("cp config.example.yml config.yml && test -f config.yml && echo 'config ok'"),
            command("grep -c TODO src/*.py > todo-count.txt"),
            command("cat todo-count.txt"),
        ),
        check=all_of(
            same_content(f"{_W}/minilang/config.yml", _CONFIG_EXAMPLE_YML),
            same_content(f"{_W}/minilang/todo-count.txt", "src/lexer.py:1\nsrc/parser.py:2\n"),
        ),
    ),
    TerminalTask(
        name="remove-old-project-mistakes",
        instruction=(
            "Delete the old-site project from ~/work/projects (keep new-site) and add an empty "
            "archive/ folder there."
        ),
        category="errors",
        setup=(
            write_file(f"{_W}/projects/old-site/index.html", "<h1>Old site</h1>\n"),
            write_file(f"{_W}/projects/old-site/css/site.css", "body { color: #333; }\n"),
            write_file(f"{_W}/projects/new-site/index.html", "<h1>New site</h1>\n"),
            write_file(f"{_W}/notes.txt", "old-site is retired since February.\n"),
        ),
        steps=(
            command("cd ~/work"),
            command("cd notes.txt"),
            command("ls projects"),
            command("rmdir projects/old-site"),
            command("rm projects/old-site"),
            command("rm -r projects/old-site"),
            command("mkdir projects"),
            command("mkdir projects/archive"),
            command("ls -l projects"),
        ),
        check=(
            f"! test -e {_W}/projects/old-site && test -f {_W}/projects/new-site/index.html && "
            f"test -d {_W}/projects/archive && test -f {_W}/notes.txt"
        ),
    ),
)


# --- interrupting with C-c -----------------------------------------------------------------

_NIGHTLY_SH = """\
#!/bin/sh
# Nightly export: waits while another export holds the lock.
while [ -e .lock ]; do
    echo "waiting for the lock held by another export..."
    sleep 1000
done
echo "export finished" | tee nightly.out
"""

_INTERRUPT_TASKS = (
    TerminalTask(
        name="interrupt-mistyped-sleep",
        instruction=(
            "Pause for a second and then write 'ready' to ~/work/ready.txt. (The first attempt "
            "says 1000 seconds by mistake: stop it and do it right.)"
        ),
        category="interrupt",
        setup=(f"mkdir -p {_W}",),
        steps=(
            command("cd ~/work"),
            command("sleep 1000 && echo ready > ready.txt"),
            keys("C-c"),
            command("echo $?"),
            command("sleep 1 && echo ready > ready.txt"),
            wait(3),
            command("cat ready.txt"),
        ),
        check=same_content(f"{_W}/ready.txt", "ready\n") + " && ! pgrep -fx 'sleep 1000'",
    ),
    TerminalTask(
        name="interrupt-stale-lock",
        instruction=(
            "The nightly export in ~/work/export hangs. Stop it, find out why, fix it and run "
            "it to completion."
        ),
        category="interrupt",
        setup=(
            write_file(f"{_W}/export/nightly.sh", _NIGHTLY_SH, mode="755"),
            write_file(f"{_W}/export/.lock", "pid 4242 started 2024-03-01T02:00:00Z\n"),
        ),
        steps=(
            command("cd ~/work/export"),
            command("./nightly.sh"),
            keys("C-c"),
            command("ls -la"),
            command("cat .lock"),
            command("ps aux | grep 4242 | grep -v grep || echo 'no process 4242'"),
            command("rm .lock"),
            command("./nightly.sh"),
        ),
        check=(
            f"! test -e {_W}/export/.lock && "
            + same_content(f"{_W}/export/nightly.out", "export finished\n")
            + " && ! pgrep -fx 'sleep 1000'"
        ),
    ),
    TerminalTask(
        name="interrupt-grep-waiting-on-stdin",
        instruction="Count the lines mentioning 'error' (any case) in ~/work/app/app.log.",
        category="interrupt",
        setup=(
            write_file(
                f"{_W}/app/app.log",
                _lines(
                    "09:00:01 INFO starting app",
                    "09:00:02 ERROR could not open cache dir",
                    "09:00:03 INFO listening on :8080",
                    "09:01:10 WARN retrying request (error=timeout)",
                    "09:02:44 Error: upstream returned 502",
                    "09:03:00 INFO request ok",
                ),
            ),
        ),
        steps=(
            command("cd ~/work/app"),
            command("grep -i error"),
            keys("C-c"),
            command("grep -i error app.log"),
            command("grep -ic error app.log > error-count.txt"),
            command("cat error-count.txt"),
        ),
        check=same_content(f"{_W}/app/error-count.txt", "3\n"),
    ),
    TerminalTask(
        name="interrupt-tail-follow",
        instruction=(
            "Watch ~/work/worker/worker.log for new lines, then stop watching and save the last "
            "five lines to last-lines.txt."
        ),
        category="interrupt",
        setup=(
            f"mkdir -p {_W}/worker && seq 1 30 | "
            f"sed 's/^/2024-03-01 10:00:00 worker-2 processed job /' > {_W}/worker/worker.log",
        ),
        steps=(
            command("cd ~/work/worker"),
            command("tail -f worker.log"),
            keys("C-c"),
            command("tail -n 5 worker.log > last-lines.txt"),
            command("cat last-lines.txt"),
        ),
        check=(
            f'[ "$(wc -l < {_W}/worker/last-lines.txt)" -eq 5 ] && '
            f"tail -1 {_W}/worker/last-lines.txt | grep -q 'processed job 30$'"
        ),
    ),
)


TASKS: tuple[TerminalTask, ...] = (
    *_FILES_TASKS,
    *_TEXT_TASKS,
    *_GIT_TASKS,
    *_PYTHON_TASKS,
    *_EDITOR_TASKS,
    *_PAGER_TASKS,
    *_PIPES_TASKS,
    *_ARCHIVE_TASKS,
    *_PROCESS_TASKS,
    *_ENVIRONMENT_TASKS,
    *_ERROR_TASKS,
    *_INTERRUPT_TASKS,
)


def task_by_name(name: str) -> TerminalTask:
    """Return the task called ``name``; raise KeyError listing the known names."""
    for task in TASKS:
        if task.name == name:
            return task
    raise KeyError(f"unknown terminal task {name!r}; known: {', '.join(t.name for t in TASKS)}")
