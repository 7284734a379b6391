"""Process tasks: background jobs, and finding and stopping runaway processes."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command, keys
from worldtrace.collectors.terminal.tasks.helpers import WORK, TerminalTask, write_file

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
TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="background-dev-server",
        instruction=(
            "Start the dev server in ~/work/site2 in the background with its output going to "
            "server.log, check that it is running, then stop it."
        ),
        category="processes",
        setup=(
            write_file(f"{WORK}/site2/server.sh", _SERVER_SH, mode="755"),
            write_file(f"{WORK}/site2/public/index.html", "<h1>It works</h1>\n"),
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
        check=(f"grep -q 'serving ./public' {WORK}/site2/server.log && ! pgrep -f '[s]erver.sh'"),
    ),
    TerminalTask(
        name="sleep-jobs-and-kill",
        instruction=(
            "Start two long sleeps in the background, record which sleep processes are running "
            "in ~/work/sleeping.txt, then get rid of both: kill one and interrupt the other in "
            "the foreground."
        ),
        category="processes",
        setup=(f"mkdir -p {WORK}",),
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
            f"grep -qx 'sleep 300' {WORK}/sleeping.txt && grep -qx 'sleep 400' {WORK}/sleeping.txt "
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
        setup=(write_file(f"{WORK}/reports-job/spin.py", _SPIN_PY),),
        steps=(
            command("cd ~/work/reports-job"),
            command("python3 spin.py &"),
            command("ps -eo pid,pcpu,etime,args --sort=-pcpu | head -4"),
            command("pgrep -af spin.py"),
            command("kill $(pgrep -f spin.py)"),
            command("sleep 0.2; pgrep -af spin.py || echo 'spin.py is gone'"),
        ),
        check=(
            f"test -s {WORK}/reports-job/spin.pid && "
            f'! kill -0 "$(cat {WORK}/reports-job/spin.pid)" '
            "2>/dev/null && ! pgrep -f '[s]pin.py'"
        ),
    ),
)
