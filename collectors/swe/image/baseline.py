"""Image build step of the swe images: record which tests pass, or refuse the repository.

Run as root during ``docker build``, after the repository and ``run_tests.py`` are in place.
Runs the whole test suite twice through ``run_tests.py --json --offline`` (as ``user``, with
no proxy and the test process cut off from the network), then writes
``/opt/worldtrace/baseline.json``: ``{"repo", "version", "passed", "skipped", "duration_s"}``
(the first run's).

A repository with any failing or erroring test is refused: the build fails with a message
naming the tests, because a task built on it could not tell its bug from the failures that were
already there. So is one whose two runs differ (flaky tests, test ids that change), a run that
collects no test, and one that leaves files in the working tree. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

WORLDTRACE = Path("/opt/worldtrace")
REPOSITORY = Path("/home/user/repo")
BASELINE = WORLDTRACE / "baseline.json"
PROXY_VARIABLES = ("http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy")
SHOWN = 20  # failing tests named in the refusal


def refuse(message: str) -> None:
    """Fail the build with ``message``."""
    print(f"refused: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def listed(tests: list[str]) -> str:
    """The first :data:`SHOWN` of ``tests``, comma-separated, and how many more there are."""
    more = f" and {len(tests) - SHOWN} more" if len(tests) > SHOWN else ""
    return ", ".join(tests[:SHOWN]) + more


def run_suite(name: str, version: str, environment: dict[str, str]) -> tuple[dict, float]:
    """Run the whole suite offline; return its outcomes and duration, or refuse the repository."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(WORLDTRACE / "run_tests.py"), "--json", "--offline"],
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    duration = time.monotonic() - started
    lines = result.stdout.strip().splitlines()
    print("\n".join(lines[:-1]), flush=True)  # pytest's report, in the build log
    try:
        outcome = json.loads(lines[-1])
    except (IndexError, ValueError):
        refuse(f"run_tests.py printed no result for {name} {version} (exit {result.returncode})")
    broken = outcome["failed"] + outcome["errors"]
    if broken:
        refuse(
            f"{len(broken)} tests of {name} {version} fail offline at baseline: {listed(broken)}"
        )
    if not outcome["passed"]:
        refuse(
            f"no test of {name} {version} passes at baseline (pytest exit {outcome['exit_code']})"
        )
    if outcome["exit_code"] != 0:
        refuse(f"pytest exited {outcome['exit_code']} on {name} {version} at baseline")
    return outcome, duration


def main() -> None:
    """Run the suite, write baseline.json, and refuse the repository if a test does not pass."""
    repo = json.loads((WORLDTRACE / "repo.json").read_text(encoding="utf-8"))
    name, version = repo["name"], repo["version"]
    environment = {
        key: value
        for key, value in os.environ.items()
        if key.lower() not in PROXY_VARIABLES  # the sandbox has no proxy: neither has this run
    }
    first, duration = run_suite(name, version, environment)
    # A second run must agree test for test: a flaky test, or one whose id changes from run to
    # run (parametrized with the time, say), could not be told from a bug's failure later.
    second, _ = run_suite(name, version, environment)
    differing = sorted(
        set(first["passed"]) ^ set(second["passed"])
        | set(first["skipped"]) ^ set(second["skipped"])
    )
    if differing:
        refuse(
            f"{len(differing)} tests of {name} {version} differ between two runs at baseline "
            f"(flaky, or ids that change; deselect them in repo.json): {listed(differing)}"
        )
    # Byte code is ignored by git and dropped; anything else the tests wrote is a refusal.
    clean = ["git", "-C", str(REPOSITORY), "clean", "-d", "-X", "--force", "--quiet"]
    status = ["git", "-C", str(REPOSITORY), "status", "--porcelain", "--untracked-files=all"]
    for command in (clean, status):
        ran = subprocess.run(
            command,
            user="user",
            group="user",
            extra_groups=[],
            env={**environment, "HOME": "/home/user"},
            capture_output=True,
            text=True,
            check=False,
        )
        if ran.returncode != 0 or ran.stdout.strip():
            refuse(
                f"{name} {version}: the tests left the working tree changed:\n"
                f"{ran.stdout}{ran.stderr}"
            )
    baseline = {
        "repo": name,
        "version": version,
        "passed": first["passed"],
        "skipped": first["skipped"],
        "duration_s": round(duration, 2),
    }
    BASELINE.write_text(json.dumps(baseline, indent=1) + "\n", encoding="utf-8")
    print(
        f"baseline of {name} {version}: {len(first['passed'])} passed, "
        f"{len(first['skipped'])} skipped, {len(repo.get('deselect', []))} deselected "
        f"in {duration:.1f}s"
    )


if __name__ == "__main__":
    main()
