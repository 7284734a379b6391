"""The base of environments run by a driver inside their sandbox (terminal, swe, mcp, search, os).

Each keeps one container per episode and speaks to a driver process in it over one exec stream
(:class:`~worldtrace.sandboxes.channel.DriverChannel`). They share what decides the fate of a
step whose sandbox stopped answering: a sandbox gone before its wall clock ran out was removed
from outside (retried); otherwise the action caused it, and the step is recorded with the best
state a second driver process can still see (:meth:`DriverEnvironment._lost_outcome`, with
one hook per domain). They share the process-limit rule too: a step during which the container
refused new processes ends the episode. Their configs share :class:`SandboxConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import Field

from worldtrace.collectors.base import ConfigT, Environment, EnvironmentConfig, StepOutcome, TaskT
from worldtrace.sandboxes.channel import DriverChannel, last_look
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.limits import Limits
from worldtrace.schemas.raw import RawObservation

LAST_LOOK_TIMEOUT_S = 10.0
"""How long a last look into a sandbox whose driver stopped answering may take."""

SandboxImage = Annotated[
    str | None, Field(description="sandbox image; null: the domain's own (its `image_tag`)")
]
"""The type of a sandboxed domain's ``image`` field (declare it ``= None``)."""

SandboxLimits = Annotated[Limits, Field(description="resource limits of each episode's container")]
"""The type of a sandboxed domain's ``limits`` field (declare it with a ``default_factory``)."""


class SandboxConfig(EnvironmentConfig):
    """Base of the config of a domain whose episodes run in a container of the domain's image.

    It gives :attr:`image_tag` (the ``image`` given, else the domain's :attr:`default_image`)
    and the types of the two fields every such domain has, :data:`SandboxImage` and
    :data:`SandboxLimits`, with their descriptions. Each domain declares those two fields
    itself, where its config has always had them: a config's hash is a hash of its JSON dump,
    whose keys follow the order of declaration, and fields declared here would come first in
    every domain's dump and change every recorded hash (swe and mcp have fields before them).
    """

    default_image: ClassVar[str]
    """The image episodes run in when the config names none."""

    if TYPE_CHECKING:  # declared by each domain, in its own place (see above)
        image: str | None
        limits: Limits

    @property
    def image_tag(self) -> str:
        """The image episodes run in."""
        return self.image or self.default_image


@dataclass(frozen=True)
class LostSandbox:
    """What a step that lost its sandbox knows, for the domain to make its observation of."""

    reason: str
    """Why the sandbox stopped answering (the step's error)."""
    look: RawObservation | None
    """What a second driver process saw afterwards; None when none answered."""
    skipped_replies: int
    """Lines the driver had written that were no reply."""
    stale_field: str = "state_stale"
    """The observation field saying the state shown is the one from before."""

    @property
    def stale(self) -> bool:
        """Whether the state shown is the last one seen before (no last look answered)."""
        return self.look is None

    def marks(self) -> dict[str, Any]:
        """The fields every lost step's observation has, in the order they are recorded."""
        return {
            "sandbox_lost": True,
            self.stale_field: self.stale,
            "skipped_replies": self.skipped_replies,
        }


class DriverEnvironment(Environment[ConfigT, TaskT]):
    """A fresh container per episode with a driver in it, spoken to over one channel."""

    domain: ClassVar[str]
    driver: ClassVar[Sequence[str]]
    """The driver's command line; with ``--observe`` it prints one observation and exits."""
    state_field: ClassVar[str]
    """A field every real observation of the domain has (how a last look is told apart)."""
    driver_error_field: ClassVar[str] = "driver_error"
    """The reply field in which the driver says it could not serve a request."""
    stale_field: ClassVar[str] = "state_stale"
    """The field of a lost step's observation saying its state is the one from before."""

    def __init__(self, config: ConfigT, labels: dict[str, str] | None = None) -> None:
        self.config = config
        self._labels = {"worldtrace.domain": self.domain, **(labels or {})}
        self._sandbox: DockerSandbox | None = None
        self._driver: DriverChannel | None = None
        self._last: RawObservation | None = None
        self._unusable = False

    @property
    def sandbox(self) -> DockerSandbox:
        """The sandbox of the current episode."""
        if self._sandbox is None:
            raise SandboxError(f"the {self.domain} environment has no episode; call reset() first")
        return self._sandbox

    def _start_sandbox(self, image: str, limits: Limits, network: str = "none") -> DockerSandbox:
        """End the last episode and start this one's container (no network by default)."""
        self.close()
        self._unusable = False
        self._sandbox = DockerSandbox(
            image,
            limits=limits,
            network=network,
            labels=self._labels,
            clock_start=self.config.clock_start,
        ).start()
        return self._sandbox

    def _open_driver(self) -> DriverChannel:
        """Start the driver in the episode's sandbox."""
        self._driver = DriverChannel(
            self.sandbox.open_stream(list(self.driver)), f"{self.domain} driver"
        )
        return self._driver

    def _request(
        self, request: dict[str, Any], timeout_s: float, raise_driver_error: bool = True
    ) -> dict[str, Any]:
        """Send one request; return the driver's reply to it, with ``skipped_replies`` added.

        A reply saying the driver could not serve the request raises :class:`SandboxError`,
        unless ``raise_driver_error`` is false (the caller records it as the step's answer).
        """
        if self._driver is None:
            raise SandboxError(f"the {self.domain} environment has no episode; call reset() first")
        reply = self._driver.request(request, timeout_s)
        if raise_driver_error and self.driver_error_field in reply:
            raise SandboxError(f"the {self._driver.name} failed: {reply[self.driver_error_field]}")
        reply["skipped_replies"] = self._driver.skipped
        return reply

    def _removed_from_outside(self) -> bool:
        """Whether the sandbox went away before its clock ran out (no action can do that).

        Asked again for a moment: a container removed from outside still says "running" for
        a few milliseconds after its processes died, which would pass for the action's doing.
        """
        sandbox = self._sandbox
        if sandbox is None or sandbox.wall_clock_expired:
            return False
        return not sandbox.still_running()

    def _abandon_driver(self) -> int:
        """The episode cannot go on: close the driver; return the lines it had skipped."""
        self._unusable = True
        skipped = 0
        if self._driver is not None:
            skipped = self._driver.skipped
            self._driver.close()
            self._driver = None
        return skipped

    def _lost_outcome(self, error: SandboxError, started: float, *step: Any) -> StepOutcome:
        """The sandbox stopped answering during a step: record why, and end the episode.

        The driver is abandoned, a second driver process takes a last look, and the domain's
        :meth:`_lost_observation` makes the step's observation from what is known; ``step`` is
        what that hook needs of the step (its action, the calls run so far, ...).
        """
        skipped = self._abandon_driver()
        lost = LostSandbox(
            reason=self._lost_reason(error),
            look=self._last_look(),
            skipped_replies=skipped,
            stale_field=self.stale_field,
        )
        observation = self._lost_observation(lost, *step)
        return self._outcome(observation, started, error=lost.reason, truncated=True)

    def _lost_observation(self, lost: LostSandbox, *step: Any) -> RawObservation:
        """The observation of a step that lost its sandbox: the domain's hook.

        From ``lost.look`` when a last look answered, else from the last observation seen
        (``self._last``), with ``lost.marks()`` recorded.
        """
        raise NotImplementedError(f"the {self.domain} environment records no lost step")

    def _lost_reason(self, error: SandboxError) -> str:
        """Why the step lost its sandbox, as the step's error says it."""
        return self.sandbox.lost_reason(error)

    def _last_look(self) -> RawObservation | None:
        """Return a fresh observation from a second driver process, or None if none answers."""
        if self._sandbox is None:
            return None
        observation = last_look(self._sandbox, [*self.driver, "--observe"], LAST_LOOK_TIMEOUT_S)
        if observation is None or not isinstance(observation.get(self.state_field), str):
            return None
        return observation

    def _process_limit_outcome(
        self, observation: RawObservation, started: float, limits: Limits
    ) -> StepOutcome | None:
        """End the episode if the container refused new processes during the step.

        The driver may still answer, but a sandbox out of processes cannot be trusted to run
        the next step (or the check).
        """
        refused = observation.get("forks_refused") or 0
        if not refused:
            return None
        self._unusable = True
        error = (
            f"the sandbox reached its process limit ({limits.pids}): "
            f"{refused} new processes were refused"
        )
        return self._outcome(observation, started, error=error, truncated=True)

    def close(self) -> None:
        """Stop the driver and remove the container."""
        if self._driver is not None:
            self._driver.close()
            self._driver = None
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
