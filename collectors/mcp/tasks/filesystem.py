"""Scripted tasks on ``@modelcontextprotocol/server-filesystem`` over the seeded project.

The server's one allowed root is ``/srv/project``: "tidewatch", a small Python project that
reads tide-gauge CSV exports (README, CHANGELOG, ``config/settings.toml``, ``data/`` with
``stations.json`` and three month files of readings, ``docs/``, ``notes/``, ``src/tidewatch``,
``tests/``). The tasks edit, write, move and reorganize files after reading them, as an
engineer would; each check reads the real files in the container afterwards (their text, or a
recomputation from the project's own data) and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from worldtrace.collectors.mcp.tasks import (
    CheckContext,
    McpTask,
    all_of,
    container_json,
    file_text,
    path_exists,
)
from worldtrace.collectors.tool_calls import tool_call

ROOT = "/srv/project"


def _path(relative: str) -> str:
    return f"{ROOT}/{relative}"


def contains(relative: str, *snippets: str) -> Callable[[CheckContext], bool]:
    """The file holds every one of ``snippets``."""

    def check(context: CheckContext) -> bool:
        text = file_text(context, _path(relative))
        return all(snippet in text for snippet in snippets)

    return check


def lacks(relative: str, *snippets: str) -> Callable[[CheckContext], bool]:
    """The file exists and holds none of ``snippets``."""

    def check(context: CheckContext) -> bool:
        text = file_text(context, _path(relative))
        return not any(snippet in text for snippet in snippets)

    return check


def exists(*relatives: str) -> Callable[[CheckContext], bool]:
    """Every one of the paths exists."""
    return lambda context: all(path_exists(context, _path(path)) for path in relatives)


def gone(*relatives: str) -> Callable[[CheckContext], bool]:
    """None of the paths exists."""
    return lambda context: not any(path_exists(context, _path(path)) for path in relatives)


REPORT_RECOMPUTE = """
import csv, json, statistics, sys
with open(sys.argv[1], newline="", encoding="utf-8") as handle:
    heights = [float(row["height_m"]) for row in csv.DictReader(handle) if row["quality"] != "bad"]
print(json.dumps({"readings": len(heights), "mean_m": round(statistics.mean(heights), 3),
                  "highest_m": max(heights), "lowest_m": min(heights)}))
"""
"""The summary a monthly report gives of one CSV file, recomputed from the file itself."""


def report_matches(report: str, readings: str, station: str) -> Callable[[CheckContext], bool]:
    """The JSON report file summarizes the readings file correctly."""

    def check(context: CheckContext) -> bool:
        try:
            written = json.loads(file_text(context, _path(report)))
        except ValueError:
            return False
        truth = container_json(context, REPORT_RECOMPUTE, _path(readings))
        return (
            isinstance(written, dict)
            and written.get("station") == station
            and all(written.get(key) == value for key, value in truth.items())
        )

    return check


def csv_manifest_matches(relative: str) -> Callable[[CheckContext], bool]:
    """The manifest lists exactly the project's CSV files (relative paths, one a line)."""

    def check(context: CheckContext) -> bool:
        listed = sorted(line.strip() for line in file_text(context, _path(relative)).splitlines())
        found = context.run(["find", ROOT, "-name", "*.csv", "-type", "f", "-printf", "%P\\n"])
        return bool(listed) and listed == sorted(found.split())

    return check


def python_parses(relative: str) -> Callable[[CheckContext], bool]:
    """The file is valid Python."""

    def check(context: CheckContext) -> bool:
        code = "import ast, sys; ast.parse(open(sys.argv[1]).read()); print('true')"
        return container_json(context, code, _path(relative)) is True

    return check


NEWLYN_REPORT = {
    "gaps": 0,
    "highest_m": 5.3,
    "lowest_m": 1.1,
    "mean_m": 3.233,
    "readings": 192,
    "spikes": 0,
    "station": "newlyn",
}
"""The March 2024 Newlyn summary as an engineer would compute it from the CSV file."""

STATIONS_DOC = """# Stations

| id | name | country | datum offset (m) |
|---|---|---|---|
| brest | Brest | FR | -3.65 |
| newlyn | Newlyn | GB | -3.05 |
| cuxhaven | Cuxhaven | DE | -1.42 |
"""

TEST_REPORT = """from datetime import datetime, timedelta

from tidewatch.readings import Reading
from tidewatch.report import monthly_report


def test_monthly_report_counts_readings():
    start = datetime(2024, 3, 1)
    readings = [Reading(start + timedelta(minutes=15 * i), 4.0) for i in range(4)]
    report = monthly_report("brest", readings)
    assert report["readings"] == 4
    assert report["mean_m"] == 4.0
    assert report["gaps"] == 0
"""

TASKS: tuple[McpTask, ...] = (
    McpTask(
        name="filesystem-changelog-unreleased-entry",
        instruction=(
            "Open CHANGELOG.md and add an 'Unreleased' section at the top saying that "
            "Cuxhaven readings are now supported, then read the top of the file back."
        ),
        category="edit",
        server="filesystem",
        steps=(
            tool_call("read_text_file", {"path": _path("CHANGELOG.md"), "head": 6}),
            tool_call(
                "edit_file",
                {
                    "path": _path("CHANGELOG.md"),
                    "edits": [
                        {
                            "oldText": "# Changelog\n\n## 0.3.1 (2024-04-18)",
                            "newText": "# Changelog\n\n## Unreleased\n"
                            "- Cuxhaven station readings.\n\n## 0.3.1 (2024-04-18)",
                        }
                    ],
                },
            ),
            tool_call("read_text_file", {"path": _path("CHANGELOG.md"), "head": 6}),
        ),
        check=contains(
            "CHANGELOG.md",
            "# Changelog\n\n## Unreleased\n- Cuxhaven station readings.\n\n## 0.3.1 (2024-04-18)",
            "## 0.1.0 (2024-03-01)",
        ),
    ),
    McpTask(
        name="filesystem-archive-meeting-notes",
        instruction=(
            "Tidy the notes folder: move the March 2024 meeting notes into notes/archive/2024/ "
            "and list the notes folder afterwards."
        ),
        category="reorganize",
        server="filesystem",
        steps=(
            tool_call("list_directory", {"path": _path("notes")}),
            tool_call("create_directory", {"path": _path("notes/archive/2024")}),
            tool_call(
                "move_file",
                {
                    "source": _path("notes/meeting-2024-03-12.md"),
                    "destination": _path("notes/archive/2024/meeting-2024-03-12.md"),
                },
            ),
            tool_call("directory_tree", {"path": _path("notes")}),
        ),
        check=all_of(
            gone("notes/meeting-2024-03-12.md"),
            contains(
                "notes/archive/2024/meeting-2024-03-12.md",
                "# Meeting 2024-03-12",
                "Present: Maya, Tom, Inès",
            ),
        ),
    ),
    McpTask(
        name="filesystem-move-tests-into-unit-folder",
        instruction=(
            "Reorganize the tests: create tests/unit and move the three test modules into it, "
            "then show the tree of tests/."
        ),
        category="reorganize",
        server="filesystem",
        steps=(
            tool_call("search_files", {"path": _path("tests"), "pattern": "test_*.py"}),
            tool_call("create_directory", {"path": _path("tests/unit")}),
            *(
                tool_call(
                    "move_file",
                    {
                        "source": _path(f"tests/test_{name}.py"),
                        "destination": _path(f"tests/unit/test_{name}.py"),
                    },
                )
                for name in ("readings", "stations", "units")
            ),
            tool_call("directory_tree", {"path": _path("tests")}),
        ),
        check=all_of(
            exists(*(f"tests/unit/test_{name}.py" for name in ("readings", "stations", "units"))),
            gone(*(f"tests/test_{name}.py" for name in ("readings", "stations", "units"))),
            contains("tests/unit/test_units.py", "def test_chart_to_ordnance"),
        ),
    ),
    McpTask(
        name="filesystem-tick-off-todo",
        instruction=(
            "The CLI commands are now wired up: mark that item as done in notes/todo.md and "
            "leave the other open items as they are."
        ),
        category="edit",
        server="filesystem",
        steps=(
            tool_call("read_text_file", {"path": _path("notes/todo.md")}),
            tool_call(
                "edit_file",
                {
                    "path": _path("notes/todo.md"),
                    "edits": [
                        {
                            "oldText": "- [ ] wire up the CLI commands",
                            "newText": "- [x] wire up the CLI commands",
                        }
                    ],
                },
            ),
            tool_call("read_text_file", {"path": _path("notes/todo.md")}),
        ),
        check=all_of(
            contains(
                "notes/todo.md",
                "- [x] wire up the CLI commands",
                "- [ ] report in feet as an option",
                "- [ ] add Cuxhaven readings",
            ),
            lacks("notes/todo.md", "- [ ] wire up the CLI commands"),
        ),
    ),
    McpTask(
        name="filesystem-bump-version",
        instruction=(
            "Release 0.3.2: bump the version in pyproject.toml and src/tidewatch/__init__.py, "
            "and add a 0.3.2 entry (dated 2024-05-02) to the changelog for the datum fix."
        ),
        category="edit",
        server="filesystem",
        steps=(
            tool_call(
                "read_multiple_files",
                {"paths": [_path("pyproject.toml"), _path("src/tidewatch/__init__.py")]},
            ),
            tool_call(
                "edit_file",
                {
                    "path": _path("pyproject.toml"),
                    "edits": [{"oldText": 'version = "0.3.1"', "newText": 'version = "0.3.2"'}],
                },
            ),
            tool_call(
                "edit_file",
                {
                    "path": _path("src/tidewatch/__init__.py"),
                    "edits": [
                        {"oldText": '__version__ = "0.3.1"', "newText": '__version__ = "0.3.2"'}
                    ],
                },
            ),
            tool_call(
                "edit_file",
                {
                    "path": _path("CHANGELOG.md"),
                    "edits": [
                        {
                            "oldText": "# Changelog\n",
                            "newText": "# Changelog\n\n## 0.3.2 (2024-05-02)\n"
                            "- Fix: ordnance datum conversion rounding.\n",
                        }
                    ],
                },
            ),
        ),
        check=all_of(
            contains("pyproject.toml", 'version = "0.3.2"'),
            contains("src/tidewatch/__init__.py", '__version__ = "0.3.2"'),
            contains("CHANGELOG.md", "## 0.3.2 (2024-05-02)\n- Fix: ordnance datum"),
            lacks("pyproject.toml", 'version = "0.3.1"'),
        ),
    ),
    McpTask(
        name="filesystem-storm-spike-threshold",
        instruction=(
            "Raise the spike threshold in config/settings.toml from 0.5 m to 0.8 m: preview "
            "the change as a diff first, then apply it."
        ),
        category="edit",
        server="filesystem",
        steps=(
            tool_call("read_text_file", {"path": _path("config/settings.toml")}),
            tool_call(
                "edit_file",
                {
                    "path": _path("config/settings.toml"),
                    "edits": [
                        {
                            "oldText": "spike_threshold_m = 0.5",
                            "newText": "spike_threshold_m = 0.8",
                        }
                    ],
                    "dryRun": True,
                },
            ),
            tool_call(
                "edit_file",
                {
                    "path": _path("config/settings.toml"),
                    "edits": [
                        {
                            "oldText": "spike_threshold_m = 0.5",
                            "newText": "spike_threshold_m = 0.8",
                        }
                    ],
                },
            ),
            tool_call("get_file_info", {"path": _path("config/settings.toml")}),
        ),
        check=contains("config/settings.toml", "max_gap_minutes = 30\nspike_threshold_m = 0.8\n"),
    ),
    McpTask(
        name="filesystem-stations-page",
        instruction=(
            "Write docs/stations.md with a table of the stations in data/stations.json (id, "
            "name, country, datum offset) and link it from docs/index.md."
        ),
        category="write",
        server="filesystem",
        steps=(
            tool_call("read_text_file", {"path": _path("data/stations.json")}),
            tool_call("write_file", {"path": _path("docs/stations.md"), "content": STATIONS_DOC}),
            tool_call(
                "edit_file",
                {
                    "path": _path("docs/index.md"),
                    "edits": [
                        {
                            "oldText": "- [Architecture](architecture.md)\n",
                            "newText": "- [Architecture](architecture.md)\n"
                            "- [Stations](stations.md)\n",
                        }
                    ],
                },
            ),
            tool_call("read_text_file", {"path": _path("docs/index.md")}),
        ),
        check=all_of(
            contains(
                "docs/stations.md",
                "| brest | Brest | FR | -3.65 |",
                "| newlyn | Newlyn | GB | -3.05 |",
                "| cuxhaven | Cuxhaven | DE | -1.42 |",
            ),
            contains("docs/index.md", "- [Stations](stations.md)"),
        ),
    ),
    McpTask(
        name="filesystem-readings-manifest",
        instruction=(
            "Find every CSV file of readings in the project and write data/MANIFEST.txt listing "
            "them, one path relative to the project root per line."
        ),
        category="write",
        server="filesystem",
        steps=(
            tool_call("search_files", {"path": ROOT, "pattern": "**/*.csv"}),
            tool_call("list_directory_with_sizes", {"path": _path("data/readings")}),
            tool_call(
                "write_file",
                {
                    "path": _path("data/MANIFEST.txt"),
                    "content": "data/readings/2024-03-brest.csv\n"
                    "data/readings/2024-03-newlyn.csv\n"
                    "data/readings/2024-04-brest.csv\n",
                },
            ),
        ),
        check=csv_manifest_matches("data/MANIFEST.txt"),
    ),
    McpTask(
        name="filesystem-newlyn-monthly-report",
        instruction=(
            "Read the March 2024 Newlyn readings and write their monthly report to "
            "data/reports/newlyn-2024-03.json in the same shape as data/sample-report.json."
        ),
        category="write",
        server="filesystem",
        steps=(
            tool_call("read_text_file", {"path": _path("data/sample-report.json")}),
            tool_call("read_text_file", {"path": _path("data/readings/2024-03-newlyn.csv")}),
            tool_call("create_directory", {"path": _path("data/reports")}),
            tool_call(
                "write_file",
                {
                    "path": _path("data/reports/newlyn-2024-03.json"),
                    "content": json.dumps(NEWLYN_REPORT, indent=2, sort_keys=True) + "\n",
                },
            ),
            tool_call("read_text_file", {"path": _path("data/reports/newlyn-2024-03.json")}),
        ),
        check=report_matches(
            "data/reports/newlyn-2024-03.json", "data/readings/2024-03-newlyn.csv", "newlyn"
        ),
    ),
    McpTask(
        name="filesystem-add-report-test",
        instruction=(
            "There is no test for the monthly report. Look at the existing tests and the "
            "report module, then add tests/test_report.py with a test of monthly_report."
        ),
        category="write",
        server="filesystem",
        steps=(
            tool_call("list_directory", {"path": _path("tests")}),
            tool_call(
                "read_multiple_files",
                {"paths": [_path("tests/test_units.py"), _path("src/tidewatch/report.py")]},
            ),
            tool_call(
                "write_file", {"path": _path("tests/test_report.py"), "content": TEST_REPORT}
            ),
            tool_call("get_file_info", {"path": _path("tests/test_report.py")}),
        ),
        check=all_of(
            python_parses("tests/test_report.py"),
            contains("tests/test_report.py", "def test_monthly_report", "monthly_report("),
        ),
    ),
)
"""The filesystem server's tasks."""
