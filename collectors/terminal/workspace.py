"""The seeded project trees that task-free exploring episodes start from.

:func:`workspace_setup` returns the shell commands that build one in the user's home: a small
Python project on one of a few themes, with data, logs, scripts, nested exports and sometimes a
git history. The same seed always builds the same tree.
"""

from __future__ import annotations

import random

from worldtrace.collectors.terminal.tasks.helpers import HOME, git_commit, git_init, write_file

_THEMES = (
    (
        "inventory-api",
        "inventory",
        "Item",
        ("sku", "name", "category", "quantity"),
        ("tools", "garden", "kitchen", "office"),
    ),
    (
        "weather-stats",
        "weather",
        "Reading",
        ("station", "city", "region", "temperature"),
        ("north", "south", "coast", "mountain"),
    ),
    (
        "recipe-box",
        "recipes",
        "Recipe",
        ("slug", "title", "cuisine", "minutes"),
        ("italian", "thai", "mexican", "french"),
    ),
    (
        "budget-tracker",
        "budget",
        "Expense",
        ("ref", "payee", "category", "amount"),
        ("rent", "food", "travel", "utilities"),
    ),
    (
        "log-analyzer",
        "logan",
        "Event",
        ("id", "service", "level", "latency"),
        ("api", "worker", "auth", "billing"),
    ),
    (
        "library-catalog",
        "catalog",
        "Book",
        ("isbn", "title", "genre", "copies"),
        ("fiction", "history", "science", "poetry"),
    ),
)
_NAMES = (
    "amber",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "maple",
    "nova",
    "orchid",
    "pebble",
    "quartz",
    "raven",
)
_MONTHS = ("01", "02", "03", "04", "05", "06")


def workspace_setup(seed: int) -> tuple[str, ...]:
    """Return shell commands that build a seeded project tree in the home folder to explore.

    Different seeds give different projects (theme, modules, data rows, log lines, nesting,
    sometimes a git history); the same seed always gives the same tree.
    """
    rng = random.Random(seed)
    project, package, entity, columns, groups = _THEMES[rng.randrange(len(_THEMES))]
    root = f"{HOME}/{project}"
    key, _, group, measure = columns
    table = f"{entity.lower()}s"

    rows = []
    for index in range(rng.randint(12, 30)):
        rows.append(
            f"{key[:2].upper()}-{1000 + index},{rng.choice(_NAMES)}-{index},"
            f"{rng.choice(groups)},{rng.randint(1, 500)}"
        )
    csv_text = ",".join(columns) + "\n" + "\n".join(rows) + "\n"

    log_lines = []
    for index in range(rng.randint(40, 160)):
        level = rng.choices(("INFO", "WARN", "ERROR", "DEBUG"), weights=(70, 12, 6, 12))[0]
        minute, second = divmod(index * 7, 60)
        message = rng.choice(
            (
                f"loaded {rng.randint(5, 80)} {table}",
                f"request GET /{table}/{rng.randint(1000, 1030)} took {rng.randint(3, 900)}ms",
                f"cache miss for {group}={rng.choice(groups)}",
                f"{group} {rng.choice(groups)} updated",
                "connection pool exhausted, retrying" if level in ("WARN", "ERROR") else "tick",
            )
        )
        log_lines.append(
            f"2024-03-0{1 + index // 60} 10:{minute % 60:02d}:{second:02d} "
            f"{level:<5} {package}: {message}"
        )

    models = f"from dataclasses import dataclass\n\n\n@dataclass\nclass {entity}:\n" + "".join(
        f"    {name}: str\n" for name in columns
    )
    loader = (
        "import csv\nfrom pathlib import Path\n\n"
        f"from .models import {entity}\n\n\n"
        f"def load_{table}(path: Path) -> list[{entity}]:\n"
        f'    """Read {table} from a CSV file with a header row."""\n'
        '    with path.open(newline="") as handle:\n'
        f"        return [{entity}(**row) for row in csv.DictReader(handle)]\n"
    )
    report = (
        "from collections import Counter\n\n\n"
        f"def count_by_{group}(items):\n"
        f"    return Counter(item.{group} for item in items)\n\n\n"
        f"def total_{measure}(items):\n"
        f"    return sum(int(item.{measure}) for item in items)\n\n\n"
        "def print_summary(items):\n"
        f"    for key, count in count_by_{group}(items).most_common():\n"
        '        print(f"{key:<12} {count:>4}")\n'
        f'    print(f"total {measure}: {{total_{measure}(items)}}")\n'
    )
    cli = (
        "import sys\nfrom pathlib import Path\n\n"
        f"from .loader import load_{table}\nfrom .report import print_summary\n\n\n"
        "def main(argv=None):\n"
        "    argv = sys.argv[1:] if argv is None else argv\n"
        f'    path = Path(argv[0] if argv else "data/{table}.csv")\n'
        f"    print_summary(load_{table}(path))\n\n\n"
        'if __name__ == "__main__":\n    main()\n'
    )
    test = (
        "import unittest\nfrom pathlib import Path\n\n"
        f"from {package}.loader import load_{table}\n"
        f"from {package}.report import count_by_{group}\n\n\n"
        f"class {entity}Test(unittest.TestCase):\n"
        "    def test_load(self):\n"
        f'        items = load_{table}(Path("data/{table}.csv"))\n'
        f"        self.assertEqual(len(items), {len(rows)})\n\n"
        "    def test_count(self):\n"
        f'        items = load_{table}(Path("data/{table}.csv"))\n'
        f"        self.assertEqual(sum(count_by_{group}(items).values()), {len(rows)})\n"
    )
    readme = (
        f"# {project}\n\n"
        f"Small tool that loads {table} from CSV and summarizes them by {group}.\n\n"
        "## Usage\n\n"
        f"    cd src && python3 -m {package}.cli ../data/{table}.csv\n\n"
        "## Layout\n\n"
        f"- `src/{package}/` - the package\n- `data/` - sample data\n"
        "- `logs/` - logs from the last runs\n- `scripts/` - helper scripts\n\n"
        f"TODO: add a `{measure}` histogram.\n"
    )
    settings = (
        "[app]\n"
        f"name = {project}\n"
        f"data_dir = data\nlog_level = {rng.choice(('info', 'debug', 'warning'))}\n"
        f"workers = {rng.randint(1, 8)}\n\n[cache]\nenabled = {rng.choice(('true', 'false'))}\n"
        f"ttl_seconds = {rng.choice((60, 300, 3600))}\n"
    )
    run_sh = (
        "#!/bin/sh\n# Run the summary on the sample data.\nset -e\n"
        f'cd "$(dirname "$0")/../src"\npython3 -m {package}.cli ../data/{table}.csv\n'
    )
    makefile = (
        ".PHONY: test run\n\n"
        "test:\n\tcd src && PYTHONPATH=. python3 -m unittest discover -s ../tests\n\n"
        "run:\n\tsh scripts/run.sh\n"
    )
    commands = [
        write_file(f"{root}/README.md", readme),
        write_file(f"{root}/Makefile", makefile),
        write_file(f"{root}/src/{package}/__init__.py", f'"""{project}."""\n'),
        write_file(f"{root}/src/{package}/models.py", models),
        write_file(f"{root}/src/{package}/loader.py", loader),
        write_file(f"{root}/src/{package}/report.py", report),
        write_file(f"{root}/src/{package}/cli.py", cli),
        write_file(f"{root}/tests/test_{package}.py", test),
        write_file(f"{root}/data/{table}.csv", csv_text),
        write_file(f"{root}/logs/app.log", "\n".join(log_lines) + "\n"),
        write_file(f"{root}/config/settings.ini", settings),
        write_file(f"{root}/scripts/run.sh", run_sh, mode="755"),
    ]
    # Nested monthly exports make deeper trees for cd and find.
    for month in rng.sample(_MONTHS, rng.randint(1, 3)):
        sample = rng.sample(rows, min(len(rows), rng.randint(3, 8)))
        commands.append(
            write_file(
                f"{root}/data/raw/2024/{month}/{table}-2024-{month}.csv",
                ",".join(columns) + "\n" + "\n".join(sample) + "\n",
            )
        )
    if rng.random() < 0.5:
        commands.append(
            write_file(
                f"{root}/docs/notes.md",
                f"# Notes\n\n- {group} values come from the upstream export\n"
                f"- {rng.choice(_NAMES)} owns the data pipeline\n",
            )
        )
    if rng.random() < 0.4:
        commands.append(
            write_file(f"{HOME}/todo.txt", f"- review {project}\n- renew certificate\n")
        )
    if rng.random() < 0.5:
        # Some workspaces come with history, so git log and diff have something to show.
        commands += [
            git_init(root),
            write_file(f"{root}/.gitignore", "__pycache__/\n*.pyc\n"),
            git_commit(root, f"Initial {project}", 0),
            f"cd {root} && printf '\\n## Changelog\\n- first release\\n' >> README.md",
            git_commit(root, "Add changelog to README", 30),
        ]
    return tuple(commands)
