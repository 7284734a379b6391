"""Pipe tasks: redirecting output and errors, here-documents and tee."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    join_lines,
    same_content,
    write_file,
)

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
    return join_lines(*(f"{t},{e},{ms}" for t, e, ms in slow))


_APP_YAML = """\
service: billing
port: 8081
replicas: 2
healthcheck: http://localhost:8081/health
# owner: platform-team
"""

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="redirect-build-output",
        instruction=(
            "Run ~/work/proj/build.sh so its normal output goes to build.log and warnings to "
            "warnings.log. Then run it again, seeing everything on screen and also saving it "
            "to full.log, and append one more run to full.log."
        ),
        category="pipes",
        setup=(write_file(f"{WORK}/proj/build.sh", _BUILD_SH, mode="755"),),
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
            f'cd {WORK}/proj && [ "$(wc -l < build.log)" -eq {_BUILD_STDOUT_LINES} ] && '
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
        setup=(f"mkdir -p {WORK}/deploy",),
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
        check=same_content(f"{WORK}/deploy/app.yaml", _APP_YAML),
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
                f"{WORK}/metrics/requests.csv",
                join_lines(
                    "timestamp,endpoint,ms", *(f"{t},{e},{ms}" for t, e, ms in _REQUEST_ROWS)
                ),
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
        check=same_content(f"{WORK}/metrics/slow.csv", _slow_requests()),
    ),
)
