"""A real Python repository in a Docker sandbox, worked on through tool calls.

One fresh container per episode from the repository's image (``worldtrace/swe-<repo>``), with
no network and the domain's limits. The host speaks to ``/opt/worldtrace/swe_driver.py`` over a
single exec stream (one JSON line each way per step), so a step costs one round trip. The raw
observation is the driver's reply: the tool's whole output, its exit code, whether it timed
out, its error, the working tree's ``git status --porcelain`` and ``git diff --stat`` after
it, and its wall time (see the driver's docstring for every field).

Every tool runs as the unprivileged ``user`` in ``/home/user/repo``; the driver runs as root
where nothing the agent starts can reach it. Each request carries an id (a per-episode random
token and a sequence number) that the driver echoes: a line on the channel that is not the
reply to the pending request is skipped and counted (``skipped_replies``), so a step is never
paired with another step's result.

A call that names no tool or has bad arguments is sent nowhere: the step's error says what is
wrong, and its observation is the unchanged state, looked at again (empty output). A tool's
own failure (``old string not found``), a non-zero exit (``exit status N``) and a timeout
(``timed out after Ns``; the command's whole process group is killed) are the step's error.

A sandbox that stops answering during an action, or reaches its wall-clock limit, is the
action's doing: the step returns the error with the best state there is (a fresh look by a
second driver process if the container still runs commands, else the last one; ``sandbox_lost``
and ``state_stale`` say which) and ends the episode (``truncated``). So does a step during
which the container's process limit refused new processes. A container gone before its clock
ran out was removed from outside: that is a ``SandboxError``, and the episode is retried.

A task with a ``bug_patch`` gets it applied at reset, as the user, folded into the
repository's one commit with the commit's own dates and the touched files' times kept, so no
git command and no file time shows where it is. A task with ``failing_tests`` and
``passing_tests`` is evaluated by running them after the episode, in a fresh sandbox of the
same image holding the task's bug and the agent's change to the package source alone (see
:mod:`~worldtrace.collectors.swe.evaluation`): nothing else the agent wrote, committed or left
running decides its reward.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import docker.errors
from pydantic import Field

from worldtrace.collectors.base import StepOutcome, TaskSetupError
from worldtrace.collectors.driven import (
    DriverEnvironment,
    LostSandbox,
    SandboxConfig,
    SandboxImage,
    SandboxLimits,
)
from worldtrace.collectors.swe.evaluation import (
    SourceTooLarge,
    agent_change,
    change_archive,
    read_packages,
    source_packages,
)
from worldtrace.collectors.swe.render import OUTPUT_LIMIT_CHARS
from worldtrace.collectors.swe.tools import check_tool_call, validated_arguments
from worldtrace.sandboxes import view
from worldtrace.sandboxes.channel import json_object
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas import Action, EnvironmentRef
from worldtrace.schemas.raw import RawObservation

logger = logging.getLogger(__name__)

DRIVER = ["python3", "/opt/worldtrace/swe_driver.py"]
RUN_TESTS = "/opt/worldtrace/run_tests.py"
REPO_PATH = "/home/user/repo"
USER = "user"
"""The unprivileged account every tool, the task's patch and the evaluation run as."""
USER_ENV = {"HOME": "/home/user", "USER": USER, "LOGNAME": USER}
"""Added to the image's environment for the evaluation's test run (as the driver does)."""
# The driver reads the working tree's state after each tool with two git runs of up to 10 s.
GIT_ALLOWANCE_S = 20.0
OBSERVE_TIMEOUT_S = 10.0
REPO_JSON = "/opt/worldtrace/repo.json"
"""The image's description of its repository: ``source_root`` and ``test_paths``."""
EVALUATION = "2"
"""How an episode is judged, recorded in the identity (``describe()``). 2: the task's tests run
in a fresh sandbox of the image on the agent's change to the package source
(:mod:`~worldtrace.collectors.swe.evaluation`). 1 (before issue 24): they ran in the episode's
own sandbox after a ``git checkout HEAD`` of the tests, which the agent could defeat."""
ISOLATED_PYTHON = {"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"}
"""The judge's test run: the working folder never goes on ``sys.path`` ahead of pytest and the
outcomes plugin (``python -m pytest`` would put it first), and no user site folder."""
REPORT_LIMIT_BYTES = 4 << 20
"""The last this many bytes of the judge's test output are read (the JSON report is last)."""
JUDGE_ALLOWANCE_S = 60.0
"""The judge's wall clock beyond the setup and evaluation limits (its start, reading, writing)."""
REPO_LABEL = "worldtrace.swe.repo"
VERSION_LABEL = "worldtrace.swe.version"

VERSION_PROBE = [
    "/opt/swe-venv/bin/python",
    "-c",
    "import json, platform, subprocess\n"
    "try:\n"
    "    info = json.load(open('/opt/worldtrace/repo.json'))\n"
    "except (OSError, ValueError):\n"
    "    info = {}\n"
    "git = subprocess.run(['git', '--version'], capture_output=True, text=True).stdout\n"
    "print(json.dumps({'repo': info.get('name', ''), 'repo_version': info.get('version', ''),\n"
    "    'sdist_sha256': info.get('sdist_sha256', ''), 'python': platform.python_version(),\n"
    "    'git': git.split()[-1] if git else ''}))\n",
]
"""Prints the repository's name, version and sdist hash, and the versions of Python and git."""


@runtime_checkable
class PatchedTask(Protocol):
    """A task whose bug is a patch applied at reset (``SweTask`` is one)."""

    name: str
    bug_patch: str


@runtime_checkable
class TestedTask(Protocol):
    """A task judged by tests: those that must be fixed and those that must keep passing."""

    name: str
    failing_tests: Sequence[str]
    passing_tests: Sequence[str]


class SweConfig(SandboxConfig):
    """Configuration of the swe environment."""

    repo: str = Field(
        default="toolz", pattern=r"^[a-z0-9][a-z0-9._-]*$", description="repository name"
    )
    image: SandboxImage = Field(
        default=None, description="sandbox image; default worldtrace/swe-<repo>:latest"
    )
    limits: SandboxLimits = Field(default_factory=Limits)
    output_limit_chars: int = Field(
        default=OUTPUT_LIMIT_CHARS,
        ge=200,
        description="most characters of a tool's output an observation's text shows (head and "
        "tail); raw records keep it whole",
    )
    setup_timeout_s: float = Field(
        default=60, gt=0, description="limit for applying the task's patch at reset"
    )
    evaluate_timeout_s: float = Field(
        default=600, gt=0, description="limit for the test run that scores an episode"
    )

    @property
    def image_tag(self) -> str:
        """The image episodes run in (each repository has its own)."""
        return self.image or f"worldtrace/swe-{self.repo}:latest"


class SweEnvironment(DriverEnvironment[SweConfig, Any]):
    """A repository in a fresh container per episode, worked on through tool calls."""

    domain = "swe"
    driver = DRIVER
    state_field = "git_status"

    def __init__(self, config: SweConfig | None = None, labels: dict[str, str] | None = None):
        super().__init__(config or SweConfig(), labels)

    def reset(self, seed: int, task: Any | None) -> RawObservation:
        """Start a fresh container, apply the task's bug, return the orientation observation."""
        self._start_sandbox(self.config.image_tag, self.config.limits)
        self._open_driver()
        if isinstance(task, PatchedTask) and task.bug_patch:
            patch = task.bug_patch
            reply = self._request(
                {"op": "apply_patch", "patch": patch, "timeout": self.config.setup_timeout_s},
                timeout_s=self.config.setup_timeout_s,
                raise_driver_error=False,
            )
            if "driver_error" in reply:
                raise TaskSetupError(
                    f"the bug patch of task {task.name!r} did not apply: {reply['driver_error']}"
                )
        self._last = self._observe(orientation=True)
        return self._last

    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Run one tool call and return its result and the working tree's state.

        An invalid call returns its problem as the error with the state unchanged. A sandbox
        that stops answering meanwhile, or reaches its wall-clock limit, ends the episode
        (``truncated``) with the error and the best state there is. A container that vanished
        otherwise was removed from outside: that raises ``SandboxError``.
        """
        if self._driver is None:
            raise SandboxError("the swe environment has no episode; call reset() first")
        started = time.monotonic()
        problem = check_tool_call(action)
        try:
            if problem is not None:
                # Nothing ran: the next state is the current one, looked at again.
                observation = self._observe(orientation=False)
                observation["error"] = problem
            else:
                request = _tool_request(action, timeout_s)
                observation = self._request(request, timeout_s=request["timeout"] + GIT_ALLOWANCE_S)
        except SandboxError as lost:
            if self._removed_from_outside():
                # No action caused this, so the episode is tried again.
                raise
            return self._lost_outcome(lost, started, action)
        observation["output_limit_chars"] = self.config.output_limit_chars
        limited = self._process_limit_outcome(observation, started, self.config.limits)
        if limited is not None:
            return limited
        error = problem if problem is not None else _tool_error(observation)
        return self._outcome(observation, started, error=error)

    def _lost_observation(self, lost: LostSandbox, action: Action) -> RawObservation:
        """The last look's state, else the one before: no output, no exit status."""
        observation = lost.look
        if observation is None:
            observation = {
                **(self._last or {}),
                "output": "",
                "exit_code": None,
                "timed_out": False,
                "error": None,
                "wall_s": 0.0,
                "output_dropped_bytes": 0,
            }
        observation.update(tool=action.name, **lost.marks())
        observation["output_limit_chars"] = self.config.output_limit_chars
        return observation

    def _observe(self, orientation: bool) -> RawObservation:
        """Look at the working tree without running a tool (with the orientation text, or not)."""
        observation = self._request(
            {"op": "observe", "orientation": orientation}, timeout_s=OBSERVE_TIMEOUT_S
        )
        observation["output_limit_chars"] = self.config.output_limit_chars
        return observation

    def evaluate(self, task: Any | None) -> float | None:
        """Judge the agent's change to the package source: 1.0 if every task test passes, else 0.0.

        The tests run in a fresh sandbox of the episode's image (the *judge*), on the task's
        bug and the agent's change to the source under test, with the image's own tests and
        pytest configuration (see :mod:`~worldtrace.collectors.swe.evaluation`): nothing the
        agent committed, left untracked or left running in its sandbox takes part. None when
        there is nothing to check with: a task without tests, or a sandbox the episode's
        actions left dead or unanswering (its steps stand; only the reward is unknown). A
        judge that cannot start is a :class:`SandboxError` (no action caused it).
        """
        if not isinstance(task, TestedTask):
            return None
        tests = [*task.failing_tests, *task.passing_tests]
        episode = self._sandbox
        if not tests or episode is None or self._unusable or not episode.is_running():
            return None
        started = time.monotonic()
        limits = self.config.limits.model_copy(
            update={
                "wall_clock_s": self.config.setup_timeout_s
                + self.config.evaluate_timeout_s
                + JUDGE_ALLOWANCE_S
            }
        )
        judge = DockerSandbox(
            episode.image_id,
            limits=limits,
            labels={**self._labels, "worldtrace.swe.role": "judge"},
            clock_start=self.config.clock_start,
        ).start()
        try:
            return self._judge(task, tests, episode, judge, started)
        finally:
            judge.close()

    def _judge(
        self,
        task: Any,
        tests: list[str],
        episode: DockerSandbox,
        judge: DockerSandbox,
        started: float,
    ) -> float | None:
        """Build the pristine tree in ``judge``, apply the agent's change, run ``tests``."""
        try:
            layout = json_object(judge.get_file(REPO_JSON).decode("utf-8", "replace")) or {}
        except FileNotFoundError:
            layout = {}  # an image of the user's: its top-level packages, tests by their names
        source_root = str(layout.get("source_root") or ".")
        test_paths = tuple(str(path) for path in layout.get("test_paths") or ())
        # One exec: the bug (as the agent got it, minus the hiding in the commit) and the
        # committed files (git apply leaves the index alone, so they are the image's).
        script = "git ls-files -z"
        patch = task.bug_patch if isinstance(task, PatchedTask) else ""
        if patch:
            judge.put_file("/tmp/task.patch", patch.encode("utf-8"))
            script = f"git apply /tmp/task.patch && {script}"
        listed = self._in_judge(judge, ["bash", "-c", script], "apply the task's bug")
        tracked = listed.stdout.decode("utf-8", "replace").split("\0")
        packages = source_packages(tracked, source_root)
        pristine = read_packages(judge, REPO_PATH, packages)
        try:
            agent = read_packages(episode, REPO_PATH, packages)
        except SourceTooLarge as error:
            logger.warning("the evaluation of %s read no change: %s", task.name, error)
            return 0.0
        except SandboxError:
            return None
        if not episode.is_running():
            # Gone while being read: what was read may be missing files, not the agent's doing.
            return None
        change = agent_change(pristine, agent, packages, test_paths)
        if change.dropped:
            logger.info(
                "the evaluation of %s leaves out the agent's changes to %s",
                task.name,
                ", ".join(change.dropped[:20]),
            )
        # Removed first: a file the agent turned into a folder (or back) must be gone before
        # its new kind is written.
        if change.removed:
            self._in_judge(judge, ["rm", "-f", "--", *change.removed], "remove files")
        if change.written:
            try:
                written = judge.container.put_archive(REPO_PATH, change_archive(change))
            except docker.errors.APIError as error:
                # The engine read these files from the agent's tree; one it cannot write back
                # (a path through a file, say) is a tree the judge cannot rebuild.
                logger.warning("the evaluation of %s cannot apply the change: %s", task.name, error)
                return 0.0
            if not written:
                raise SandboxError("could not write the agent's change into the judge's sandbox")
        prepared = time.monotonic()
        # The output is pytest's (the report last): capped inside the judge, since the agent's
        # code writes to it and the engine would bring all of it to this process.
        capped = f'python3 "$0" --json "$@" 2>&1 | tail -c {REPORT_LIMIT_BYTES}'
        result = judge.exec(
            ["bash", "-c", capped, RUN_TESTS, *tests],
            timeout=self.config.evaluate_timeout_s,
            workdir=REPO_PATH,
            env={**USER_ENV, **fresh_byte_code(), **ISOLATED_PYTHON},
            user=USER,
        )
        logger.debug(
            "the evaluation of %s: judge ready with the change in %.2f s, tests ran in %.2f s",
            task.name,
            prepared - started,
            time.monotonic() - prepared,
        )
        report = _last_json_line(result.text)
        if report is None:
            # The agent's source can break the test run itself (a syntax error in a module
            # every test imports, a deleted package): a failed episode, not a failed collector.
            logger.warning(
                "the evaluation of %s printed no JSON report (exit %s): %s",
                task.name,
                result.exit_code,
                result.text[-500:],
            )
            return 0.0
        passed = set(report.get("passed") or ())
        return 1.0 if all(test in passed for test in tests) else 0.0

    def _in_judge(self, judge: DockerSandbox, argv: list[str], what: str) -> Any:
        """Run a setup command as the user in the judge's repository; it must succeed."""
        result = judge.exec(
            argv, timeout=self.config.setup_timeout_s, workdir=REPO_PATH, env=USER_ENV, user=USER
        )
        if result.exit_code != 0:
            raise TaskSetupError(
                f"the evaluation could not {what}: {result.stderr.decode(errors='replace')[-500:]}"
            )
        return result

    def describe(self) -> EnvironmentRef:
        """Return the image id, the repository's name and version, and Python's and git's."""
        sandbox = self.sandbox
        image_id = sandbox.image_id
        versions = sandbox.image_versions(VERSION_PROBE)
        labels = sandbox.container.image.labels or {}
        components = {
            **versions,
            "repo": versions.get("repo") or labels.get(REPO_LABEL, self.config.repo),
            "repo_version": versions.get("repo_version") or labels.get(VERSION_LABEL, ""),
            "image": self.config.image_tag,
            "image_digest": image_id,
            # How the reward is judged (a reward of evaluation 1 could be faked).
            "evaluation": EVALUATION,
            # What the agent's view shows, beyond the image (sandboxes/view.py).
            "view": view.VERSION,
        }
        return EnvironmentRef(
            name=f"swe/{self.config.repo}",
            version=image_id,
            components=components,
            config_hash=self.config.config_hash(),
        )


def fresh_byte_code() -> dict[str, str]:
    """Environment variables that make a Python run compile every module from its source.

    Python would reuse byte code the episode left whose source had the same size and
    modification second (a same-size fix whose file time was put back) and score a fixed bug
    as still there. The cache folder is a new random one, so nothing the agent planted in
    ``/tmp`` can stand in for it.
    """
    return {
        "PYTHONPYCACHEPREFIX": f"/tmp/worldtrace-evaluation-{secrets.token_hex(8)}",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _tool_request(action: Action, timeout_s: float) -> dict[str, Any]:
    """The driver request for a valid call; the step's timeout caps the tool's own."""
    arguments = validated_arguments(action).model_dump()
    timeout = float(timeout_s)
    if action.name == "run_shell_command":
        timeout = min(arguments["timeout"], timeout)
    return {"op": "tool", "tool": action.name, "arguments": arguments, "timeout": timeout}


def _tool_error(observation: RawObservation) -> str | None:
    """The step's error: the tool's own, a timeout, or a non-zero exit status."""
    if observation.get("error"):
        return str(observation["error"])
    if observation.get("timed_out"):
        return f"timed out after {float(observation.get('timeout_s') or 0):g}s"
    if observation.get("exit_code") not in (None, 0):
        return f"exit status {observation['exit_code']}"
    return None


def _last_json_line(text: str) -> dict[str, Any] | None:
    """The last line of ``text`` that is a JSON object, or None."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            value = json_object(line)
            if value is not None:
                return value
    return None


__all__ = ["PatchedTask", "SweConfig", "SweEnvironment", "TaskSetupError", "TestedTask"]
