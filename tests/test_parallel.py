"""`make test`'s worker processes keep a module whole, and the web tests in one worker.

The grouping lives in tests/conftest.py (:func:`tests.conftest.xdist_group`); pytest-xdist
honours it only while it can rewrite test ids (pytest 9.2 stopped it, silently). This runs a
small part of the suite the way `make test` does and reads which worker ran what.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict

from tests.conftest import REPO

MODULES = [
    "tests/web/test_web_axtree.py",
    "tests/web/test_web_normalizer.py",
    "tests/schemas/test_schemas.py",
    "tests/schemas/test_volatile_spans.py",
]


def test_two_workers_run_each_module_whole_and_the_web_tests_in_one_worker() -> None:
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-m", "not docker"]
    command += ["-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder", *MODULES]
    # Run as `make test` runs it, also when this test itself runs in one of its workers.
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    ran = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module in re.findall(r"^\[(gw\d)\] .*?PASSED (tests/[^:]+)::", ran.stdout, re.M):
        workers[module].add(worker)
    assert set(workers) == set(MODULES), ran.stdout[-3000:]
    assert all(len(used) == 1 for used in workers.values()), dict(workers)
    web = set().union(*(workers[module] for module in MODULES if module.startswith("tests/web/")))
    assert len(web) == 1, dict(workers)
    # Both workers had work: the grouping is by module, not everything in one worker.
    assert len(set().union(*workers.values())) == 2, dict(workers)
