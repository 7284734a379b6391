"""Synthesize validated SWE tasks: mutate a function, keep the bug only if its tests catch it.

:func:`synthesize` starts one sandbox of the repository's image (no network), reads the
package's modules (never the tests), lists every mutation of their functions
(:mod:`.mutations`) and tries them in a seeded order that takes the kinds in turn and spreads
over functions (at most :data:`MAX_TASKS_PER_FUNCTION` tasks per function). For each:

1. the bug, as a unified diff, is applied with ``git apply`` (so the shipped patch is the one
   tested) and the test files likely to cover the function run: those that mention its
   module, its name or its class (the whole suite when none does);
2. the mutation is kept when at least one test that passed at baseline fails, at most
   :data:`MAX_FAILING_FRACTION` of the tests run fail (a bug that breaks everything, an
   import for instance, is no localized bug), no test file fails to be collected, and the run
   ends within its time limit (a mutant that hangs is rejected);
3. it is validated: the failing tests fail again when run by themselves with the must-pass
   tests, which pass; then the gold patch (the reverse diff) is applied on top with
   ``git apply``, every failing and must-pass test passes, and ``git status`` is clean;
4. the working tree is restored (``git checkout -- . && git clean -fdq``) for the next one.

The instruction is written from the failing tests' node ids and their error lines (exception
and assertion messages, the test's own line that failed), never from the diff, the mutated
line, the mutation kind or the mutated file's path; the wording is chosen by the seed.
Byte code is never written during synthesis (``PYTHONDONTWRITEBYTECODE``): Python trusts a
``.pyc`` whose source has the same size and modification second, and a mutant restored within
the same second as it was written would otherwise run from the mutant's byte code.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shlex
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from worldtrace.collectors.swe.evaluation import is_source_path, source_packages
from worldtrace.collectors.swe.mutations import (
    MUTATION_KINDS,
    Mutation,
    find_mutations,
    shuffled,
    unified_diff,
)
from worldtrace.collectors.swe.repos import (
    REPOSITORY_PATH,
    RUN_TESTS,
    Baseline,
    Repo,
    get_repo,
    read_baseline,
)
from worldtrace.collectors.swe.tasks import (
    GENERATOR_VERSION,
    PASSING_TESTS_CAP,
    SweTask,
)
from worldtrace.sandboxes.docker import DockerSandbox, ExecResult
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits

MAX_TASKS_PER_FUNCTION = 2
MAX_TRIES_PER_FUNCTION = 6
"""Mutants of one function tried at most (a function no test covers is left soon)."""
MAX_FAILING_FRACTION = 0.5
"""A mutant that fails more than this share of the tests run is rejected as not localized."""
LIMITS = Limits(cpus=2.0, memory_mb=2048, pids=512, wall_clock_s=6 * 3600, disk_mb=1024)
"""The synthesis sandbox: tests run at full speed, a runaway mutant still hits a memory cap."""
USER = "user"
BUG_PATCH = "/tmp/worldtrace-bug.patch"
GOLD_PATCH = "/tmp/worldtrace-gold.patch"
NO_BYTE_CODE = {"PYTHONDONTWRITEBYTECODE": "1"}
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")
_NOT_SOURCE = re.compile(
    r"(^|/)(tests?|testing|docs?|examples?|benchmarks?|bench|artwork)/|(^|/)(_version|version)\.py$"
)


@dataclass
class SynthesisStats:
    """How a synthesis went so far: candidates tried, kept, and why the others were not."""

    repo: str
    tried: int = 0
    validated: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    """Reasons: ``no-test-failed``, ``too-many-failed``, ``timeout``, ``collection-error``,
    ``not-applied``, ``validation``, ``leak``."""
    candidates: int = 0
    """Mutations found in the package's modules."""
    elapsed_s: float = 0.0
    test_runs: int = 0
    test_run_s: float = 0.0

    @property
    def acceptance_rate(self) -> float:
        """Validated tasks per candidate tried."""
        return self.validated / self.tried if self.tried else 0.0

    @property
    def tasks_per_minute(self) -> float:
        """Validated tasks per minute of synthesis (sandbox start included)."""
        return self.validated / self.elapsed_s * 60 if self.elapsed_s else 0.0

    def summary(self) -> str:
        """One line for a person."""
        reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(self.rejected.items()))
        return (
            f"{self.repo}: {self.validated} validated of {self.tried} tried "
            f"({self.acceptance_rate:.0%}; rejected: {reasons or 'none'}) in "
            f"{self.elapsed_s:.0f} s = {self.tasks_per_minute:.1f} tasks/min; "
            f"{self.test_runs} test runs, {self.test_run_s:.0f} s in tests"
        )


@dataclass(frozen=True)
class TestRun:
    """The outcome of one run of ``run_tests.py --json``."""

    passed: tuple[str, ...]
    failed: tuple[str, ...]
    errors: tuple[str, ...]
    skipped: tuple[str, ...]
    exit_code: int
    output: str
    timed_out: bool = False

    @property
    def not_passed(self) -> tuple[str, ...]:
        """Tests that failed or errored."""
        return self.failed + self.errors

    @property
    def collection_errors(self) -> tuple[str, ...]:
        """Errors of whole files or folders (they are not test node ids)."""
        return tuple(item for item in self.errors if "::" not in item)


class _Repository:
    """The repository in the synthesis sandbox: files, patches, test runs."""

    def __init__(self, sandbox: DockerSandbox, run_timeout_s: float, stats: SynthesisStats):
        self.sandbox = sandbox
        self.run_timeout_s = run_timeout_s
        self.stats = stats

    def shell(self, command: str, timeout: float = 60) -> ExecResult:
        """Run ``command`` as the user in the repository."""
        return self.sandbox.exec(
            command, timeout=timeout, workdir=REPOSITORY_PATH, user=USER, env=NO_BYTE_CODE
        )

    def checked(self, command: str) -> str:
        """Run ``command``; raise SandboxError when it fails; return its output."""
        result = self.shell(command)
        if result.exit_code != 0:
            raise SandboxError(
                f"`{command}` failed in the synthesis sandbox (exit {result.exit_code}): "
                f"{result.stderr.decode(errors='replace')[-500:]}"
            )
        return result.text

    def read_files(self, paths: Sequence[str]) -> dict[str, str]:
        """Return the text of each of ``paths`` (relative to the repository)."""
        program = (
            "import json,sys\n"
            "print(json.dumps({p: open(p, encoding='utf-8').read() for p in sys.argv[1:]}))"
        )
        texts: dict[str, str] = {}
        for chunk in _chunks(list(paths), 200):
            texts.update(json.loads(self.checked(shlex.join(["python3", "-c", program, *chunk]))))
        return texts

    def apply(self, patch: str, path: str) -> bool:
        """Apply ``patch`` with ``git apply``; return whether it applied."""
        self.sandbox.put_file(path, patch.encode())
        return self.shell(f"git apply {path}").exit_code == 0

    def restore(self) -> None:
        """Bring the working tree back to the commit."""
        self.checked("git checkout -q -- . && git clean -fdq")

    def status(self) -> str:
        """``git status --porcelain``."""
        return self.checked("git status --porcelain")

    def run_tests(self, selectors: Sequence[str]) -> TestRun:
        """Run the selected tests (short tracebacks) and return their outcome."""
        command = [*RUN_TESTS, "--json", "--tb=short", *selectors]
        started = time.monotonic()
        result = self.sandbox.exec(
            command,
            timeout=self.run_timeout_s,
            workdir=REPOSITORY_PATH,
            user=USER,
            env=NO_BYTE_CODE,
        )
        self.stats.test_runs += 1
        self.stats.test_run_s += time.monotonic() - started
        output = result.text
        if result.timed_out:
            self._kill_leftovers()
            return TestRun((), (), (), (), -1, output, timed_out=True)
        lines = output.rstrip("\n").splitlines()
        try:
            outcome = json.loads(lines[-1]) if lines else None
        except ValueError:
            outcome = None
        if not isinstance(outcome, dict):
            error = result.stderr.decode(errors="replace")[-500:]
            return TestRun((), (), (), (), result.exit_code, output + error)
        return TestRun(
            passed=tuple(outcome["passed"]),
            failed=tuple(outcome["failed"]),
            errors=tuple(outcome["errors"]),
            skipped=tuple(outcome["skipped"]),
            exit_code=int(outcome["exit_code"]),
            output="\n".join(lines[:-1]),
        )

    def _kill_leftovers(self) -> None:
        """Kill, by process id, whatever a timed-out run left running as the user."""
        result = self.sandbox.exec(["ps", "-o", "pid=", "-u", USER], timeout=10)
        pids = result.text.split()
        if pids:
            self.sandbox.exec(["kill", "-KILL", *pids], timeout=10)


def source_files(paths: Sequence[str], repo: Repo) -> list[str]:
    """The package modules among the repository's files: not tests, docs, examples, setup.

    Only files the evaluation takes as the agent's change (``evaluation.is_source_path``): a
    bug anywhere else could not be fixed.
    """
    root = "" if repo.source_root in (".", "") else repo.source_root.rstrip("/") + "/"
    packages = source_packages(paths, repo.source_root)
    chosen = []
    for path in paths:
        if not path.endswith(".py") or not path.startswith(root):
            continue
        if not is_source_path(path, packages, repo.test_paths):
            continue
        inside = path[len(root) :]
        if "/" not in inside:
            continue  # setup.py, versioneer.py, conftest.py: not in a package
        if _TEST_FILE.search(path) or _NOT_SOURCE.search(path):
            continue
        chosen.append(path)
    return chosen


def test_files(paths: Sequence[str], repo: Repo) -> list[str]:
    """The test modules under the repository's test paths."""
    roots = [test_path.rstrip("/") for test_path in repo.test_paths]
    return [
        path
        for path in paths
        if path.endswith(".py")
        and re.search(r"(^|/)(test_[^/]*|[^/]*_test)\.py$", path)
        and any(path == root or path.startswith(root + "/") for root in roots)
    ]


def related_test_files(mutation: Mutation, tests: dict[str, str]) -> list[str]:
    """The test files that mention the mutated module, function or class by name."""
    module = PurePosixPath(mutation.file)
    module_name = module.parent.name if module.stem == "__init__" else module.stem
    parts = [part for part in mutation.function.split(".") if part != "<locals>"]
    names = {module_name, *parts}
    names = {name for name in names if not (name.startswith("__") and name.endswith("__"))}
    patterns = [re.compile(rf"\b{re.escape(name)}\b") for name in names]
    return [path for path, text in tests.items() if any(p.search(text) for p in patterns)]


def ordered_candidates(mutations: Sequence[Mutation], seed: int) -> Iterator[Mutation]:
    """Yield ``mutations`` in a seeded order that takes the kinds in turn.

    Within a kind the order is random; the kinds are visited round-robin, so a kind with few
    candidates (an exception handler) is not drowned by a common one (a statement).
    """
    rng = random.Random(seed)
    by_kind: dict[str, list[Mutation]] = defaultdict(list)
    for mutation in shuffled(mutations, seed):
        by_kind[mutation.kind].append(mutation)
    kinds = [kind for kind in MUTATION_KINDS if by_kind[kind]]
    rng.shuffle(kinds)
    positions = dict.fromkeys(kinds, 0)
    while kinds:
        for kind in list(kinds):
            queue = by_kind[kind]
            if positions[kind] >= len(queue):
                kinds.remove(kind)
                continue
            yield queue[positions[kind]]
            positions[kind] += 1


def synthesize(
    repo: str,
    count: int,
    seed: int = 0,
    progress: Callable[[SynthesisStats], None] | None = None,
    files: Sequence[str] | None = None,
    image: str | None = None,
) -> list[SweTask]:
    """Return ``count`` validated tasks for ``repo``, made in one sandbox of its image.

    ``files`` restricts the mutated modules (repository-relative paths); ``progress`` is
    called with the running :class:`SynthesisStats` after every candidate and once at the end.
    Fewer than ``count`` tasks is a RuntimeError saying how many mutants were tried.
    """
    stats = SynthesisStats(repo=repo)
    tasks = list(_synthesize(get_repo(repo), count, seed, stats, progress, files, image))
    if len(tasks) < count:
        raise RuntimeError(
            f"only {len(tasks)} of {count} tasks for {repo} after trying every candidate: "
            f"{stats.summary()}"
        )
    return tasks


def _synthesize(
    repo: Repo,
    count: int,
    seed: int,
    stats: SynthesisStats,
    progress: Callable[[SynthesisStats], None] | None,
    files: Sequence[str] | None,
    image: str | None,
) -> Iterator[SweTask]:
    started = time.monotonic()
    with DockerSandbox(image or repo.image, limits=LIMITS, network="none") as sandbox:
        baseline = read_baseline(sandbox)
        if baseline.version != repo.version:
            raise SandboxError(
                f"the image of {repo.name} holds version {baseline.version}, the repository "
                f"description {repo.version}; rebuild it with `worldtrace sandboxes build`"
            )
        repository = _Repository(sandbox, max(20.0, 5 * baseline.duration_s), stats)
        tracked = repository.checked("git ls-files").splitlines()
        sources = source_files(tracked, repo)
        if files is not None:
            unknown = sorted(set(files) - set(sources))
            if unknown:
                raise ValueError(f"not package modules of {repo.name}: {', '.join(unknown)}")
            sources = [path for path in sources if path in set(files)]
        texts = repository.read_files(sources)
        tests = repository.read_files(test_files(tracked, repo))
        mutations = [m for path in sources for m in find_mutations(texts[path], path)]
        stats.candidates = len(mutations)
        made: list[SweTask] = []
        kept: Counter[str] = Counter()
        tried: Counter[str] = Counter()
        for mutation in ordered_candidates(mutations, seed):
            if len(made) >= count:
                break
            key = f"{mutation.file}:{mutation.function}"
            if kept[key] >= MAX_TASKS_PER_FUNCTION or tried[key] >= MAX_TRIES_PER_FUNCTION:
                continue
            tried[key] += 1
            stats.tried += 1
            try:
                task = _try(repository, repo, baseline, mutation, texts, tests, seed, stats)
            finally:
                repository.restore()
            if task is not None:
                kept[key] += 1
                made.append(task)
                stats.validated += 1
                yield task
            stats.elapsed_s = time.monotonic() - started
            if progress is not None:
                progress(stats)
    stats.elapsed_s = time.monotonic() - started
    if progress is not None:
        progress(stats)


def _try(
    repository: _Repository,
    repo: Repo,
    baseline: Baseline,
    mutation: Mutation,
    texts: dict[str, str],
    tests: dict[str, str],
    seed: int,
    stats: SynthesisStats,
) -> SweTask | None:
    """Test one mutant; return its validated task, or None (the reason counted in ``stats``)."""
    source = texts[mutation.file]
    bug_patch = mutation.diff(source)
    gold_patch = _reverse(mutation, source)
    if not repository.apply(bug_patch, BUG_PATCH):
        stats.rejected["not-applied"] += 1
        return None
    selectors = related_test_files(mutation, tests) or list(repo.test_paths)
    run = repository.run_tests(selectors)
    reason = _rejection(run, baseline)
    if reason is not None:
        stats.rejected[reason] += 1
        return None
    passed_at_baseline = set(baseline.passed)
    failing = tuple(test for test in run.not_passed if test in passed_at_baseline)
    passing = _must_pass(run, failing, passed_at_baseline, mutation, seed)
    # Validation: the failing tests fail again on their own, next to the must-pass tests.
    again = repository.run_tests([*failing, *passing])
    if (
        again.timed_out
        or set(again.not_passed) != set(failing)
        or set(again.passed) != set(passing)
    ):
        stats.rejected["validation"] += 1
        return None
    if not repository.apply(gold_patch, GOLD_PATCH):
        stats.rejected["validation"] += 1
        return None
    fixed = repository.run_tests([*failing, *passing])
    if fixed.timed_out or fixed.not_passed or set(fixed.passed) != {*failing, *passing}:
        stats.rejected["validation"] += 1
        return None
    if repository.status().strip():
        stats.rejected["validation"] += 1
        return None
    changed = _changed_lines(bug_patch)
    digest = hashlib.sha256(bug_patch.encode()).hexdigest()
    instruction = write_instruction(run.output, failing, mutation.file, changed, seed, digest)
    if any(_leaks(line, mutation.file, changed) for line in instruction.splitlines()):
        stats.rejected["leak"] += 1  # the test names or the template give the change away
        return None
    return SweTask(
        name=f"{repo.name}-{digest[:10]}",
        instruction=instruction,
        category=mutation.kind,
        repo=repo.name,
        repo_version=repo.version,
        file=mutation.file,
        function=mutation.function,
        failing_tests=failing,
        passing_tests=passing,
        bug_patch=bug_patch,
        gold_patch=gold_patch,
        generator_version=GENERATOR_VERSION,
    )


def _reverse(mutation: Mutation, source: str) -> str:
    """The diff that undoes ``mutation``: from the mutated module back to ``source``."""
    return unified_diff(mutation.file, mutation.apply(source), source)


def _rejection(run: TestRun, baseline: Baseline) -> str | None:
    """Why a mutant's first run disqualifies it, or None when it is a localized, caught bug."""
    if run.timed_out:
        return "timeout"
    if run.collection_errors or run.exit_code not in (0, 1):
        return "collection-error"
    passed_at_baseline = set(baseline.passed)
    broken = [test for test in run.not_passed if test in passed_at_baseline]
    if not broken:
        return "no-test-failed"
    ran = len(run.passed) + len(run.not_passed)
    if len(run.not_passed) > MAX_FAILING_FRACTION * ran:
        return "too-many-failed"
    return None


def _must_pass(
    run: TestRun,
    failing: tuple[str, ...],
    passed_at_baseline: set[str],
    mutation: Mutation,
    seed: int,
) -> tuple[str, ...]:
    """The tests that must keep passing: the failing tests' files first, then others, capped."""
    files = {test.split("::")[0] for test in failing}
    still = [test for test in run.passed if test in passed_at_baseline]
    near = [test for test in still if test.split("::")[0] in files]
    far = [test for test in still if test.split("::")[0] not in files]
    rng = random.Random(f"{seed}:{mutation.file}:{mutation.line}:{mutation.kind}")
    if len(near) > PASSING_TESTS_CAP:
        near = sorted(rng.sample(near, PASSING_TESTS_CAP), key=near.index)
    room = PASSING_TESTS_CAP - len(near)
    others = sorted(rng.sample(far, min(room, len(far))), key=far.index) if room > 0 else []
    return tuple(near + others)


def _changed_lines(patch: str) -> list[str]:
    """The stripped text of every removed and added line of a diff."""
    return [
        line[1:].strip()
        for line in patch.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---")) and line[1:].strip()
    ]


# --- the instruction -------------------------------------------------------------------------

_TITLES = (
    "{test} fails",
    "Failing test: {test}",
    "{count_tests} no longer {succeed} in {test_file}",
    "Regression in {test_file}",
    "Unexpected {error_type} in {test}",
    "Bug: {test} is broken",
)
_OPENINGS = (
    "Running the test suite shows {count_tests} failing:",
    "After the latest changes, {count_tests} no longer {succeed}:",
    "I ran `pytest {test_files}` and got failures in:",
    "The following {count_tests} {fail} on a clean checkout:",
    "CI reports {count_tests} failing:",
)
_ERROR_LEADS = (
    "The output ends with:",
    "Here is what pytest prints:",
    "The error:",
    "Relevant part of the output:",
)
_CLOSINGS = (
    "Please fix the library so that {these_tests} {succeed} again. The tests themselves are "
    "correct and must not be changed.",
    "The tests are right; the problem is in the library code. Please find the cause and fix "
    "it without editing the tests.",
    "Could you track down what causes this and fix it? The tests should not need any changes, "
    "and the rest of the test suite has to keep working.",
    "Expected: {these_tests} {succeed}, as before. Please fix the code (not the tests).",
)
MAX_LISTED_TESTS = 5
MAX_SHOWN_ERRORS = 2
MAX_ERROR_LINES = 6
MAX_LINE_CHARS = 200


def write_instruction(
    output: str,
    failing: Sequence[str],
    changed_file: str,
    changed_lines: Sequence[str],
    seed: int,
    salt: str,
) -> str:
    """An issue-like text from the failing tests' ids and errors in a pytest ``output``.

    Nothing of the change gets in: a line of the output that names ``changed_file`` or holds
    one of ``changed_lines`` (the diff's lines) is left out. The wording is chosen by
    ``seed`` and ``salt`` (the same for the same task).
    """
    rng = random.Random(f"{seed}:{salt}")
    errors = failure_excerpts(output, failing)
    shown = []
    for test in failing:
        lines = [
            line for line in errors.get(test, []) if not _leaks(line, changed_file, changed_lines)
        ][:MAX_ERROR_LINES]
        if lines:
            shown.append((test, lines))
        if len(shown) == MAX_SHOWN_ERRORS:
            break
    first = failing[0]
    error_type = _error_type(shown[0][1]) if shown else None
    values = {
        "test": first.split("::", 1)[1] if "::" in first else first,
        "test_file": first.split("::")[0],
        "count_tests": f"{len(failing)} test{'s' if len(failing) != 1 else ''}",
        "error_type": error_type or "failure",
        "fail": "fails" if len(failing) == 1 else "fail",
        "succeed": "succeeds" if len(failing) == 1 else "succeed",
        "these_tests": "this test" if len(failing) == 1 else "these tests",
        "test_files": " ".join(dict.fromkeys(test.split("::")[0] for test in failing)),
    }
    titles = [t for t in _TITLES if error_type or "{error_type}" not in t]
    paragraphs = [rng.choice(titles).format(**values), rng.choice(_OPENINGS).format(**values)]
    listed = [f"- `{test}`" for test in failing[:MAX_LISTED_TESTS]]
    if len(failing) > MAX_LISTED_TESTS:
        listed.append(f"- and {len(failing) - MAX_LISTED_TESTS} more")
    paragraphs.append("\n".join(listed))
    if shown:
        paragraphs.append(rng.choice(_ERROR_LEADS))
        block = "\n\n".join(f"{test}\n" + "\n".join(lines) for test, lines in shown)
        paragraphs.append(f"```\n{block}\n```")
    paragraphs.append(rng.choice(_CLOSINGS).format(**values))
    return "\n\n".join(paragraphs) + "\n"


def failure_excerpts(output: str, tests: Sequence[str]) -> dict[str, list[str]]:
    """For each failed test, the lines worth quoting from pytest's ``--tb=short`` report.

    Those are the test's own frame (its location and the line that failed, when it is in the
    test's file) and the ``E`` lines (the exception and the assertion's explanation). Frames in
    other files, the library's, are never quoted: they would show the bug.
    """
    sections = _failure_sections(output)
    excerpts: dict[str, list[str]] = {}
    for test in tests:
        test_file, _, rest = test.partition("::")
        lines = sections.get(rest.replace("::", "."))
        if lines is None:
            continue
        quoted: list[str] = []
        in_test_frame = False
        for line in lines:
            frame = re.match(r"^(\S+?):\d+: in \S+", line)
            if frame:
                in_test_frame = frame.group(1) == test_file
                if in_test_frame:
                    quoted.append(line)
                continue
            if line.startswith("E ") or (
                in_test_frame and line.startswith("    ") and line.strip()
            ):
                quoted.append(_clip(line))
        excerpts[test] = quoted
    return excerpts


def _failure_sections(output: str) -> dict[str, list[str]]:
    """The lines of each ``____ name ____`` section of pytest's failure report, by name."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        header = re.match(r"^_{3,} (.+?) _{3,}$", line)
        if header:
            current = sections.setdefault(header.group(1), [])
            continue
        if re.match(r"^={3,} .* ={3,}$", line):
            current = None  # the next part of the report (summary, warnings)
            continue
        if current is not None:
            current.append(line)
    return sections


def _error_type(lines: Sequence[str]) -> str | None:
    for line in lines:
        match = re.match(
            r"^E\s+([A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Iteration))\b", line
        )
        if match:
            return match.group(1)
    return None


def _leaks(line: str, changed_file: str, changed_lines: Sequence[str]) -> bool:
    """Whether ``line`` names the changed module or holds a line of the change."""
    # The module's name as a path or file name of its own: `test_itertoolz.py` is no leak of
    # `toolz/itertoolz.py`, `toolz/itertoolz.py:12` is.
    name = PurePosixPath(changed_file).name
    if re.search(rf"(?<![\w.-])({re.escape(changed_file)}|{re.escape(name)})\b", line):
        return True
    text = line.strip()
    return any(len(changed) >= 4 and changed in text for changed in changed_lines)


def _clip(line: str) -> str:
    # Object addresses differ from run to run; the instruction must not.
    line = re.sub(r" at 0x[0-9a-f]+", " at 0x...", line)
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 3] + "..."


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
