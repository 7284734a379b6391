"""Environment tasks: exporting and persisting variables, PATH, and a ``.env`` file."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    all_of,
    same_content,
    write_file,
)

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

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="env-export-and-persist",
        instruction=(
            "Set APP_ENV=staging and API_URL=http://api.staging.local:8080 for this shell, check "
            "that programs see them, and make them permanent in ~/.bashrc. Note the current "
            "APP_ENV in ~/work/current-env.txt."
        ),
        category="environment",
        setup=(f"mkdir -p {WORK}",),
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
            same_content(f"{WORK}/current-env.txt", "APP_ENV=staging\n"),
        ),
    ),
    TerminalTask(
        name="path-add-tools-dir",
        instruction=(
            "I want to run the scripts in ~/work/tools by name, like `cleanup-logs --dry-run`. "
            "Put that folder on PATH now and for future login shells."
        ),
        category="environment",
        setup=(write_file(f"{WORK}/tools/cleanup-logs", _CLEANUP_LOGS, mode="755"),),
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
            f'[ "$(cat {WORK}/tools/last-run.txt)" = --dry-run ]'
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
            write_file(f"{WORK}/api-server/.env", _DOTENV),
            write_file(f"{WORK}/api-server/app.py", _ENV_APP_PY),
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
            f"{WORK}/api-server/startup.txt",
            "connecting to localhost:5432/app (cache ttl 300s)\nsignup enabled\n",
        ),
    ),
)
