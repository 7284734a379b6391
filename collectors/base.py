"""The interfaces every domain implements: Environment, Policy, Task, Renderer, Collector.

An environment turns a sandbox into domain-native *raw observations* (JSON-serializable
dicts, lossless: raw screens, raw trees, raw protocol messages). A renderer turns those into
the canonical observation text, so raw data can be rendered again without collecting again.
A collector is a domain's one entry in the registry: it knows the domain's environment config,
environment, policies, task library, renderer, what it needs installed, and which of its
actions only read (a curation hint).

Types follow the domain: ``Collector[ConfigT, TaskT]`` builds ``Environment[ConfigT, TaskT]``
from a ``ConfigT`` and plans episodes over ``TaskT``, so nothing downstream needs ``isinstance``
or ``getattr`` to find out what it was given.
"""

from __future__ import annotations

import hashlib
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, Protocol, Self, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from worldtrace.collectors.requirements import Requirements
from worldtrace.sandboxes.clock import DEFAULT_CLOCK_START
from worldtrace.schemas import Action, EnvironmentRef, ModelUsage, Observation, PolicyRef, Span
from worldtrace.schemas.raw import RawEpisode, RawObservation, RawStep
from worldtrace.schemas.records import PolicyKind

if TYPE_CHECKING:
    from worldtrace.collectors.llm.policy import AgentPrompt


class EnvironmentConfig(BaseModel):
    """Base of every domain's environment config: unknown fields are errors, and it has a hash."""

    # inf and nan are no limits, and a run's JSON manifest could not record them as given.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    clock_start: AwareDatetime | None = Field(
        default=DEFAULT_CLOCK_START,
        description="where each episode's wall clock starts in the sandbox (then it runs "
        "normally), so collection dates never reach an observation; null: the real clock",
    )

    def config_hash(self) -> str:
        """Return a short hash identifying this configuration."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]


class PolicyParams(BaseModel):
    """Base of a policy's typed parameters (a config's ``policy.params``); all have defaults.

    Unknown names are errors. :meth:`validated` turns a config's mapping into the model, or
    raises one ``ValueError`` naming each bad field (a config error, not a traceback).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    policy: ClassVar[str]
    """How errors name the policy (``"swe explore policy"``)."""

    @classmethod
    def validated(cls, params: Mapping[str, Any]) -> Self:
        """The parameters of ``params``; a ``ValueError`` names each bad one."""
        try:
            return cls.model_validate(params)
        except ValidationError as error:
            raise ValueError(cls._problems(error.errors())) from None

    @classmethod
    def given(cls, params: Self | None, keywords: Mapping[str, Any]) -> Self:
        """A policy constructor's parameters: the model, or the same as keywords (validated)."""
        if params is None:
            return cls.validated(keywords)
        if keywords:
            raise TypeError(f"give the {cls.policy} its parameters or keywords, not both")
        return params

    @classmethod
    def _problems(cls, errors: Sequence[ErrorDetails]) -> str:
        unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
        problems = [_param_problem(e) for e in errors if e["type"] != "extra_forbidden"]
        parts = []
        if unknown:
            parts.append(
                f"unknown parameters for the {cls.policy}: {unknown} "
                f"(it takes {', '.join(cls.model_fields)})"
            )
        if problems:
            parts.append(f"invalid parameters for the {cls.policy}: " + "; ".join(problems))
        return "; ".join(parts)


def _param_problem(error: ErrorDetails) -> str:
    """One bad parameter in words: ``max_steps should be greater than or equal to 1, got 0``."""
    if error["type"] == "value_error":  # a validator's own message, which names its field
        return error["msg"].removeprefix("Value error, ")
    where = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
    ).lstrip(".")
    _, should, rest = error["msg"].partition(" should ")
    text = f"{where} should {rest}" if should else f"{where}: {error['msg']}"
    return f"{text}, got {error['input']!r}"


Weight = Annotated[float, Field(ge=0, strict=True)]
"""A relative frequency of a policy's choice: a number, 0 or more (0: never)."""

Share = Annotated[float, Field(ge=0, le=1, strict=True)]
"""A chance: a number from 0 to 1."""


def merged_weights(
    given: Mapping[str, float], defaults: Mapping[str, float], field: str, what: str
) -> dict[str, float]:
    """``defaults`` with the ``given`` weights in place of theirs (a parameter validator).

    Names that ``defaults`` lacks are an error, and so are weights that are all 0 (nothing
    left to choose). ``field`` and ``what`` name them in errors (``"action kinds in weights"``).
    """
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"unknown {what}: {unknown} (known: {list(defaults)})")
    merged = {name: float(weight) for name, weight in {**defaults, **given}.items()}
    if not any(merged.values()):
        raise ValueError(f"{field} are all 0: nothing is left to choose")
    return merged


@dataclass(frozen=True)
class Task:
    """Something a policy pursues in an episode. Domains subclass it with what they need."""

    name: str
    instruction: str
    category: str = "misc"


@dataclass(frozen=True)
class ScriptedTask(Task):
    """A task whose solution is a fixed list of actions (:class:`ScriptPolicy` plays it)."""

    steps: tuple[Action, ...] = ()


ConfigT = TypeVar("ConfigT", bound=EnvironmentConfig)
TaskT = TypeVar("TaskT", bound=Task)


class TaskSetupError(RuntimeError):
    """A task's own starting point could not be made: the task is broken, retrying won't help.

    Raised at reset when a task's setup command fails or its patch does not apply.
    """


@dataclass(frozen=True)
class StepOutcome:
    """What the environment returned for one action."""

    observation: RawObservation
    latency_s: float
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    error: str | None = None


@dataclass(frozen=True)
class HistoryItem:
    """One past step as a policy sees it."""

    action: Action
    observation: RawObservation
    error: str | None = None


INVALID_REPLY = "invalid_reply"
"""The action name of a model's reply that is no action of the domain. Its step is recorded
with the reply as the action's text and the problem as its error, and the environment is not
touched: the next observation is the one the model was shown."""


@dataclass(frozen=True)
class RejectedReply:
    """What a model-driven policy returns for a reply that is not an action of the domain."""

    reply: str
    problem: str

    def action(self) -> Action:
        """The recorded action: the reply as the model wrote it."""
        return Action(name=INVALID_REPLY, arguments={}, text=self.reply)


@dataclass(frozen=True)
class ModelCall:
    """The model call behind a policy's last choice: what it cost, and the reply as sent."""

    usage: ModelUsage
    reply: dict[str, Any]


class PolicyGaveUp(Exception):
    """A policy cannot go on (too many unusable model replies in a row); the message says why.

    The episode ends as ``truncated`` with that reason, keeping every step recorded.
    """


class ModelUnavailable(Exception):
    """The model server did not answer after every retry (not the agent's doing).

    The episode's attempt is set aside and the run stops, resumable: a resumed run collects
    the episode again. ``status_code`` is the HTTP status of the last answer, if there was one.
    """

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class Environment(ABC, Generic[ConfigT, TaskT]):
    """A real environment: reset to a fresh state, step with actions, describe its versions."""

    config: ConfigT
    _last: RawObservation | None = None
    """The observation the environment returned last (what a step that changed nothing, or
    could not be observed, shows again)."""

    def _outcome(
        self,
        observation: RawObservation,
        started: float,
        error: str | None,
        truncated: bool = False,
        terminated: bool = False,
    ) -> StepOutcome:
        """Keep ``observation`` as the last one; the step's outcome, timed from ``started``."""
        self._last = observation
        return StepOutcome(
            observation=observation,
            latency_s=time.monotonic() - started,
            terminated=terminated,
            truncated=truncated,
            error=error,
        )

    @abstractmethod
    def reset(self, seed: int, task: TaskT | None) -> RawObservation:
        """Start a fresh episode (a new sandbox) and return the first observation."""

    @abstractmethod
    def step(self, action: Action, timeout_s: float) -> StepOutcome:
        """Apply ``action`` and return within about ``timeout_s`` seconds.

        The agent's own failures (bad input, non-zero exit, a hung program) are returned as
        ``StepOutcome.error``. A sandbox that dies or stops answering during the action is the
        action's doing too (a fork bomb, a killed server, the wall-clock limit reached): return
        the error with ``truncated=True`` and the last state that could be observed, so the
        transition is recorded and the episode ends. Raise ``sandboxes.SandboxError`` only for
        failures no action caused; those are retried.
        """

    def evaluate(self, task: TaskT | None) -> float | None:
        """Return the task's success (0..1) after the episode, or None if it has no check."""
        return None

    @abstractmethod
    def describe(self) -> EnvironmentRef:
        """Return the environment's identity with every pinned version."""

    @abstractmethod
    def close(self) -> None:
        """Release the sandbox; safe to call more than once."""


class Policy(ABC, Generic[TaskT]):
    """Chooses actions from the current observation and the episode's history."""

    kind: ClassVar[PolicyKind]
    name: ClassVar[str]
    version: ClassVar[str] = "1"

    def reset(self, seed: int, task: TaskT | None) -> None:
        """Prepare for a new episode; the default keeps no state."""

    @abstractmethod
    def act(
        self, observation: RawObservation, history: Sequence[HistoryItem]
    ) -> Action | RejectedReply | None:
        """Return the next action, or None when the policy is done.

        A model-driven policy returns a :class:`RejectedReply` for a reply that is no action
        (recorded as an error, the environment untouched) and raises :class:`PolicyGaveUp`
        when it cannot go on.
        """

    def preflight(self) -> None:
        """Fail fast, before any episode starts, if the policy cannot act (default: it can)."""

    @property
    def plans_as(self) -> str:
        """The policy kind whose episode plans this policy plays (:meth:`Collector.plan`).

        A policy plays its own kind's plans; a model pursuing the task library plays the
        scripted ones.
        """
        return self.kind

    def last_call(self) -> ModelCall | None:
        """The model call behind the last :meth:`act` (None for policies without a model)."""
        return None

    def describe(self) -> PolicyRef:
        """Return who this policy is."""
        return PolicyRef(kind=self.kind, name=self.name, version=self.version)


class ScriptPolicy(Policy[ScriptedTask]):
    """Plays the ``steps`` of a scripted task in order, whatever the environment shows."""

    kind = "script"
    name = "task-script"

    def __init__(self) -> None:
        self._steps: tuple[Action, ...] = ()

    def reset(self, seed: int, task: ScriptedTask | None) -> None:
        """Load the task's steps; a task without steps is an error."""
        if task is None or not task.steps:
            raise ValueError(f"the script policy needs a task with steps, got {task!r}")
        self._steps = task.steps

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the step after the ones already taken, or None at the end of the script."""
        return self._steps[len(history)] if len(history) < len(self._steps) else None


class ReplayPolicy(Policy[Task]):
    """Re-executes a given list of actions to record the ground-truth next states."""

    kind = "replay"
    name = "replay"

    def __init__(self, actions: Sequence[Action]) -> None:
        self._actions = tuple(actions)

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next recorded action, or None when all were replayed."""
        return self._actions[len(history)] if len(history) < len(self._actions) else None


class Renderer(ABC):
    """How a domain's raw records become canonical observations and actions."""

    volatile_patterns: ClassVar[tuple[re.Pattern[str], ...]] = ()
    """Where this domain's observation text shows values that vary by nature (a measured
    duration, an object address): each match is a volatile span of the observation (see
    ``Observation.volatile``), or each of the match's groups if the pattern has groups (for
    a context that a fixed-width lookbehind cannot say, or several values on one line). Keep
    them narrow: a span hides its text from run comparisons."""

    @abstractmethod
    def observation(self, raw: RawObservation) -> Observation:
        """Return the canonical observation of a raw observation."""

    def volatile_spans(self, text: str) -> tuple[Span, ...]:
        """Return the spans of ``text`` the domain's volatile patterns match, merged, in order."""
        ranges = sorted(
            span
            for pattern in self.volatile_patterns
            for match in pattern.finditer(text)
            for span in (
                [match.span(group) for group in range(1, pattern.groups + 1)]
                if pattern.groups
                else [match.span()]
            )
            if span[1] > span[0]
        )
        merged: list[list[int]] = []
        for start, end in ranges:
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return tuple(Span(start=start, end=end) for start, end in merged)

    def marked_observation(self, raw: RawObservation) -> Observation:
        """Return :meth:`observation` with its volatile spans marked."""
        observation = self.observation(raw)
        spans = self.volatile_spans(observation.text)
        return observation.model_copy(update={"volatile": spans}) if spans else observation

    def action(self, action: Action) -> Action:
        """Return the canonical action (default: as recorded; domains re-render the text)."""
        return action

    def action_error(self, step: RawStep) -> str | None:
        """Return the transition's ``action_error`` (default: the error the step recorded).

        One rule for every domain (the field's description in ``schemas.Transition``): the
        environment's own report that the action failed: rejected, not finished, or run and
        signalled as failed (a non-zero exit status, a tool result flagged as an error). A
        domain whose older recordings missed such a failure derives it from the raw record.
        """
        return step.error

    def upgrade(self, episode: RawEpisode) -> RawEpisode:
        """Bring an episode recorded by an older collector to today's form (default: as is)."""
        return episode


@dataclass
class EpisodePlan(Generic[TaskT]):
    """What one episode runs: its task (if any) and seed."""

    index: int
    seed: int
    task: TaskT | None = None


PolicyFactory = Callable[["Collector[Any, Any]", dict[str, Any]], Policy[Any]]
"""Builds a policy of one kind for a collector from the config's ``policy.params``."""


def script_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``script`` policy: plays the task library's scripted steps; takes no parameters."""
    if params:
        raise ValueError(f"the script policy takes no parameters, got {sorted(params)}")
    return ScriptPolicy()


def replay_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``replay`` policy: re-executes ``params["actions"]`` (action texts or objects)."""
    actions = params.get("actions")
    if not isinstance(actions, list) or not actions or set(params) != {"actions"}:
        raise ValueError("the replay policy takes `actions`: a non-empty list of actions")
    return ReplayPolicy([collector.parse_action(action) for action in actions])


def llm_policy(collector: Collector[Any, Any], params: dict[str, Any]) -> Policy[Any]:
    """The ``llm`` policy: a chat model behind an OpenAI-compatible endpoint chooses actions.

    Its parameters are :class:`~worldtrace.collectors.llm.params.LLMParams`; the domain
    presents itself to the model with :meth:`Collector.agent_prompt`.
    """
    from worldtrace.collectors.llm.params import LLMParams  # openai: only when used
    from worldtrace.collectors.llm.policy import LLMPolicy

    return LLMPolicy(collector, LLMParams.model_validate(params))


class TaskCommands(Protocol):
    """A domain's ``worldtrace tasks <domain>`` commands: a click command, or a typer one.

    typer (0.29) builds its commands on its own copy of click, so they are no ``click.Command``;
    the command line needs only this of either.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        *,
        standalone_mode: bool = True,
    ) -> Any:
        """Parse ``args`` and run the command (with ``standalone_mode`` off, errors raise)."""


class Collector(ABC, Generic[ConfigT, TaskT]):
    """A domain's entry in the registry: everything the rest of the pipeline asks of it."""

    domain: ClassVar[str]
    environment_config: ClassVar[type[EnvironmentConfig]]
    policies: ClassVar[Mapping[str, PolicyFactory]] = {
        "script": script_policy,
        "replay": replay_policy,
        "llm": llm_policy,
    }
    """The policy kinds the domain offers, each with its factory."""
    read_only_actions: ClassVar[frozenset[str]] = frozenset()
    """Action names that never change the state on purpose (curation labels their no-ops)."""
    requirements: ClassVar[Requirements] = Requirements()
    """What the domain needs on the machine (`worldtrace doctor`, `make setup`)."""
    screen_formats: ClassVar[frozenset[str]] = frozenset()
    """Observation formats that are a screen wrapped at ``meta["columns"]`` characters: curation
    joins the wrapped lines before it looks for secrets."""

    def typed_text(self, name: str, arguments: Mapping[str, Any]) -> list[str]:
        """The literal text an action ``name`` typed, in order (not the keys it pressed).

        Curation's scrubber reads it for a command that prints a secret and for a password
        typed at a prompt. Default: none.
        """
        return []

    @abstractmethod
    def make_environment(self, config: ConfigT) -> Environment[ConfigT, TaskT]:
        """Build an environment from a validated ``environment_config``."""

    @abstractmethod
    def renderer(self) -> Renderer:
        """The domain's renderer from raw records to canonical observations and actions."""

    def parse_action(self, action: str | dict[str, Any]) -> Action:
        """Return the action a replay gives as text or as ``{name, arguments, text}``."""
        if isinstance(action, dict):
            try:
                return Action.model_validate(action)
            except ValueError as error:
                raise ValueError(f"not an action: {error}") from None
        raise ValueError(
            f"the {self.domain} domain reads no action text; give actions as "
            "{name, arguments, text} objects"
        )

    def agent_prompt(self) -> AgentPrompt:
        """How the domain presents itself to a model (the ``llm`` policy).

        Its system prompt, its tools or its action grammar, its stop words.
        """
        raise LookupError(f"the {self.domain} domain has no prompt for a model-driven policy")

    def make_policy(self, kind: str, params: dict[str, Any]) -> Policy[TaskT]:
        """Build a policy of ``kind`` with its parameters; the error lists the kinds offered."""
        factory = self.policies.get(kind)
        if factory is None:
            offered = ", ".join(repr(name) for name in self.policies)
            raise ValueError(f"unknown {self.domain} policy {kind!r} (expected {offered})")
        return factory(self, params)

    def task_commands(self) -> TaskCommands | None:
        """The domain's own ``worldtrace tasks <domain> COMMAND`` subcommands, if it has any.

        A domain whose tasks are made rather than written (synthesized, downloaded) offers the
        commands that make them here, so the generic command line knows no domain.
        """
        return None

    def task_library(self, environment: ConfigT | None = None) -> Sequence[TaskT]:
        """The scripted tasks (of ``environment``, when they depend on it; all otherwise)."""
        return ()

    def plan(
        self,
        index: int,
        seed: int,
        policy_kind: str,
        tasks: Sequence[str] | None,
        environment: ConfigT,
    ) -> EpisodePlan[TaskT]:
        """Choose episode ``index``'s task: episodes cycle ``tasks``, or scripted ones the library.

        ``policy_kind`` is the policy's :attr:`Policy.plans_as`.

        A policy of any kind that names tasks plays them: the episode is set up and evaluated
        as the task says, so a replayed (or model-driven) episode earns the task's reward like
        a scripted one. Other policies without tasks get none. A name not in the environment's
        library is a LookupError that says where to find the names.
        """
        if policy_kind != "script" and not tasks:
            return EpisodePlan(index=index, seed=seed)
        library = list(self.task_library(environment))
        if tasks:
            by_name = {task.name: task for task in library}
            unknown = [name for name in tasks if name not in by_name]
            if unknown:
                raise LookupError(
                    f"no {self.domain} task {', '.join(map(repr, unknown))} for this "
                    f"environment; see `worldtrace tasks {self.domain}`"
                )
            library = [by_name[name] for name in tasks]
        if not library:
            raise LookupError(f"the {self.domain} domain has no scripted tasks to play here")
        return EpisodePlan(index=index, seed=seed, task=library[index % len(library)])

    def preflight(self, config: ConfigT) -> None:
        """Fail fast, before any episode starts, if the environment cannot run.

        Default: every image the domain requires exists.
        """
        self.requirements.require_images()

    def interrupt(self) -> None:
        """Make every running step of this domain in this process return now.

        Called once from a signal handler (SIGTERM, Ctrl-C) after the run asked its episodes
        to stop and removed its sandboxes, so that a step blocked in something that is not a
        sandbox (a browser on the host) fails at once instead of running to its timeout. The
        interrupted episodes are set aside and collected again when the run resumes. Default:
        nothing to do (removing the sandboxes already ends their steps).
        """
