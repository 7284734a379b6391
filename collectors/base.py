"""The interfaces every domain implements: Environment, Policy, Task, Collector.

An environment turns a sandbox into domain-native *raw observations* (JSON-serializable
dicts, lossless: raw screens, raw trees, raw protocol messages). Canonical observation text is
the normalizers' job, so raw data can be re-normalized without collecting again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from worldtrace.schemas import Action, EnvironmentRef, PolicyRef
from worldtrace.schemas.records import PolicyKind

RawObservation = dict[str, Any]


@dataclass(frozen=True)
class Task:
    """Something a policy pursues in an episode. Domains subclass it with what they need."""

    name: str
    instruction: str


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


class Environment(ABC):
    """A real environment: reset to a fresh state, step with actions, describe its versions."""

    domain: ClassVar[str]

    @abstractmethod
    def reset(self, seed: int, task: Task | None) -> RawObservation:
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

    def evaluate(self, task: Task | None) -> float | None:
        """Return the task's success (0..1) after the episode, or None if it has no check."""
        return None

    @abstractmethod
    def describe(self) -> EnvironmentRef:
        """Return the environment's identity with every pinned version."""

    @abstractmethod
    def close(self) -> None:
        """Release the sandbox; safe to call more than once."""


class Policy(ABC):
    """Chooses actions from the current observation and the episode's history."""

    kind: ClassVar[PolicyKind]
    name: ClassVar[str]
    version: ClassVar[str] = "1"

    def reset(self, seed: int, task: Task | None) -> None:
        """Prepare for a new episode; the default keeps no state."""

    @abstractmethod
    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """Return the next action, or None when the policy is done."""

    def describe(self) -> PolicyRef:
        """Return who this policy is."""
        return PolicyRef(kind=self.kind, name=self.name, version=self.version)


@dataclass
class EpisodePlan:
    """What one episode runs: its task (if any) and seed."""

    index: int
    seed: int
    task: Task | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Collector(ABC):
    """A domain's entry in the registry: builds its environment and policies from config."""

    domain: ClassVar[str]
    environment_config: ClassVar[type[BaseModel]]

    @abstractmethod
    def make_environment(self, config: BaseModel) -> Environment:
        """Build an environment from a validated ``environment_config``."""

    @abstractmethod
    def make_policy(self, kind: str, params: dict[str, Any]) -> Policy:
        """Build a policy of ``kind`` ('script', 'explore', …) with its parameters."""

    def preflight(self, config: BaseModel) -> None:
        """Fail fast, before any episode starts, if the environment cannot run (default: ok)."""

    @abstractmethod
    def plan(
        self,
        index: int,
        seed: int,
        policy_kind: str,
        tasks: list[str] | None,
        environment: BaseModel | None = None,
    ) -> EpisodePlan:
        """Choose the task of episode ``index`` (e.g. cycle through the task library).

        ``environment`` is the run's validated environment config, for domains whose task
        library depends on it (the web domain's tasks belong to a site).
        """

    def task_library(self) -> list[Task]:
        """The domain's scripted tasks, for listing (`worldtrace tasks DOMAIN`); default none."""
        return []

    def interrupt(self) -> None:
        """Make every running step of this domain in this process return now.

        Called once from a signal handler (SIGTERM, Ctrl-C) after the run asked its episodes
        to stop and removed its sandboxes, so that a step blocked in something that is not a
        sandbox (a browser on the host) fails at once instead of running to its timeout. The
        interrupted episodes are set aside and collected again when the run resumes. Default:
        nothing to do (removing the sandboxes already ends their steps).
        """
