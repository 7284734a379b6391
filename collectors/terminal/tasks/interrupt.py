"""Interrupt tasks: stopping a foreground program with C-c.

A mistyped sleep, a wait on a stale lock, a grep reading the terminal, and tail -f.
"""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command, keys, wait
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    join_lines,
    same_content,
    write_file,
)

_NIGHTLY_SH = """\
#!/bin/sh
# Nightly export: waits while another export holds the lock.
while [ -e .lock ]; do
    echo "waiting for the lock held by another export..."
    sleep 1000
done
echo "export finished" | tee nightly.out
"""

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="interrupt-mistyped-sleep",
        instruction=(
            "Pause for a second and then write 'ready' to ~/work/ready.txt. (The first attempt "
            "says 1000 seconds by mistake: stop it and do it right.)"
        ),
        category="interrupt",
        setup=(f"mkdir -p {WORK}",),
        steps=(
            command("cd ~/work"),
            command("sleep 1000 && echo ready > ready.txt"),
            keys("C-c"),
            command("echo $?"),
            command("sleep 1 && echo ready > ready.txt"),
            wait(3),
            command("cat ready.txt"),
        ),
        check=same_content(f"{WORK}/ready.txt", "ready\n") + " && ! pgrep -fx 'sleep 1000'",
    ),
    TerminalTask(
        name="interrupt-stale-lock",
        instruction=(
            "The nightly export in ~/work/export hangs. Stop it, find out why, fix it and run "
            "it to completion."
        ),
        category="interrupt",
        setup=(
            write_file(f"{WORK}/export/nightly.sh", _NIGHTLY_SH, mode="755"),
            write_file(f"{WORK}/export/.lock", "pid 4242 started 2024-03-01T02:00:00Z\n"),
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
            f"! test -e {WORK}/export/.lock && "
            + same_content(f"{WORK}/export/nightly.out", "export finished\n")
            + " && ! pgrep -fx 'sleep 1000'"
        ),
    ),
    TerminalTask(
        name="interrupt-grep-waiting-on-stdin",
        instruction="Count the lines mentioning 'error' (any case) in ~/work/app/app.log.",
        category="interrupt",
        setup=(
            write_file(
                f"{WORK}/app/app.log",
                join_lines(
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
        check=same_content(f"{WORK}/app/error-count.txt", "3\n"),
    ),
    TerminalTask(
        name="interrupt-tail-follow",
        instruction=(
            "Watch ~/work/worker/worker.log for new lines, then stop watching and save the last "
            "five lines to last-lines.txt."
        ),
        category="interrupt",
        setup=(
            f"mkdir -p {WORK}/worker && seq 1 30 | "
            f"sed 's/^/2024-03-01 10:00:00 worker-2 processed job /' > {WORK}/worker/worker.log",
        ),
        steps=(
            command("cd ~/work/worker"),
            command("tail -f worker.log"),
            keys("C-c"),
            command("tail -n 5 worker.log > last-lines.txt"),
            command("cat last-lines.txt"),
        ),
        check=(
            f'[ "$(wc -l < {WORK}/worker/last-lines.txt)" -eq 5 ] && '
            f"tail -1 {WORK}/worker/last-lines.txt | grep -q 'processed job 30$'"
        ),
    ),
)
