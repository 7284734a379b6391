"""Run the repository's tests in a swe sandbox, the one way every part of the domain runs them.

Usage (inside the container)::

    python3 /opt/worldtrace/run_tests.py [--json] [--offline] [selector ...]

Runs pytest from the image's venv in the repository with ``-p no:cacheprovider`` (nothing is
written into the working tree but byte code, which git is told to ignore) and prints pytest's
own output as it comes. The selectors are pytest's (node ids, files, folders); without any, the
repository's test paths from ``repo.json``. The deselections recorded in ``repo.json`` (tests
that need a network, with the reason) are applied to every run, so the baseline, the synthesis
of tasks and the evaluation of an episode all see the same test suite.

With ``--json`` the last line of the output is one JSON object: ``{"passed", "failed",
"errors", "skipped", "exit_code"}``, the lists holding pytest node ids that can be passed back
as selectors (see ``pytest_outcome_log.py``). The exit code is pytest's.
``--offline`` cuts the test process off the network even where the container has one (the
baseline at image build time).

Run as root, it runs pytest as ``user``, so that no root-owned byte code lands in the
repository. Standard library only: it runs under the system python3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path("/home/user/repo")
REPO_JSON = Path("/opt/worldtrace/repo.json")
VENV_PYTHON = Path("/opt/swe-venv/bin/python")
PLUGIN = "pytest_outcome_log"
USER = "user"
EMPTY = {"passed": [], "failed": [], "errors": [], "skipped": []}


def pytest_command(repo: dict, selectors: list[str], outcomes: str, offline: bool) -> list[str]:
    """Return the pytest command line for ``selectors`` (the repo's test paths when empty)."""
    command = [str(VENV_PYTHON), "-m", "pytest", "-p", "no:cacheprovider", "-p", PLUGIN]
    command += [f"--outcome-log={outcomes}", *repo.get("pytest_args", [])]
    if offline:
        command.append("--outcome-log-offline")
    for deselected in repo.get("deselect", []):
        command.append(f"--deselect={deselected['id']}")
    return command + (selectors or list(repo["test_paths"]))


def run(selectors: list[str], offline: bool = False) -> dict:
    """Run pytest on ``selectors``, its output going to ours; return the outcomes and exit code."""
    repo = json.loads(REPO_JSON.read_text(encoding="utf-8"))
    handle, outcomes = tempfile.mkstemp(prefix="outcomes-", suffix=".json")
    os.close(handle)
    try:
        as_user: dict = {}
        environment = dict(os.environ)
        if os.geteuid() == 0:
            os.chown(outcomes, 1000, 1000)
            as_user = {"user": USER, "group": USER, "extra_groups": []}
            environment.update(HOME=f"/home/{USER}", USER=USER, LOGNAME=USER)
        sys.stdout.flush()
        command = pytest_command(repo, selectors, outcomes, offline)
        exit_code = subprocess.run(
            command, cwd=REPOSITORY, env=environment, check=False, **as_user
        ).returncode
        try:
            with open(outcomes, encoding="utf-8") as report:
                result = json.loads(report.read() or "null") or dict(EMPTY)
        except ValueError:
            result = dict(EMPTY)  # pytest stopped before the session ended (a usage error)
    finally:
        os.unlink(outcomes)
    return {**EMPTY, **result, "exit_code": exit_code}


def main(argv: list[str]) -> int:
    """Command line: ``[--json] [--offline] [selector ...]``; returns pytest's exit code."""
    as_json = "--json" in argv
    offline = "--offline" in argv
    selectors = [arg for arg in argv if arg not in ("--json", "--offline")]
    result = run(selectors, offline=offline)
    if as_json:
        sys.stdout.write("\n" + json.dumps(result) + "\n")
        sys.stdout.flush()
    return int(result["exit_code"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
