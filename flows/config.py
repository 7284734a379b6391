"""The collection config: the same fields as the ``worldtrace collect`` flags, from YAML.

Example ``collect.yaml``::

    domain: terminal
    episodes: 20
    workers: 4
    out: runs/                # or any fsspec URL every worker reaches: s3://bucket/runs
    seed: 0
    max_steps: 30
    step_timeout_s: 30
    policy:
      kind: script            # script | explore | replay (what the domain offers)
      tasks: [grep-logs]      # any policy; default: script plays the whole library
    environment:              # validated by the domain's own config model
      limits: {cpus: 1, memory_mb: 512, pids: 256}
    # sandbox_host: ssh://user@build-1   # another machine's Docker engine (needs
    #                                    # limits: {disk_mb: null}; see sandboxes/remote.py)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from worldtrace.collectors.base import Collector
from worldtrace.collectors.recorder import RunRecorder
from worldtrace.collectors.registry import get_collector
from worldtrace.schemas.errors import ConfigError, InputError, validation_problems
from worldtrace.schemas.layouts import LayoutError, RunLayout
from worldtrace.schemas.storage import (
    RemoteFolder,
    check_persistent,
    check_writable_folder,
    is_remote,
    join,
    local_path,
)


class PolicyConfig(BaseModel):
    """Which policy chooses the actions."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(
        default="script",
        description="'script' (task library), 'explore', 'replay' or 'llm' (a chat model, "
        "docs/llm-policy.md); the domain's kinds",
    )
    tasks: list[str] | None = Field(
        default=None,
        description="task names the episodes cycle (set up and evaluated as the task says; "
        "any policy kind); default: script plays the whole library, others have no task",
    )
    params: dict[str, Any] = Field(default_factory=dict, description="policy parameters")


_NOT_IDENTITY = {"workers", "out", "normalize", "retries", "sandbox_host"}
"""How and where a run collects, not what: a run resumed with other values is the same run."""

CHECK_DOMAIN = "check_domain"
"""The validation context key that, False, skips asking the domain about a config (for the
read-back of a config just checked: see :func:`claim_run`)."""


class _CollectorMemo:
    """The collector a config was checked with, kept for whoever runs the config.

    Not part of the config's value: any two memos compare equal, so configs with the same
    fields are equal whichever collector instance checked them.
    """

    def __init__(self) -> None:
        self.domain: str | None = None
        self.collector: Collector[Any, Any] | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CollectorMemo)


class CollectConfig(BaseModel):
    """Everything a collection run needs."""

    # inf and nan are no limits: run.json (JSON) could not record them as they were given.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    domain: str = Field(description="collector domain, e.g. 'terminal'")
    episodes: int = Field(ge=1, description="number of episodes in the run")
    workers: int = Field(default=1, ge=1, le=64, description="episodes run at the same time")
    out: str = Field(
        default="runs",
        description="folder that holds run directories: a local path, or an fsspec URL "
        "(s3://…, sftp://…) recorded through a local staged copy (schemas/storage.py)",
    )
    run_name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        max_length=200,  # its episodes' file names add to it, under the 255-byte name limit
        description="run directory name; default: domain plus a hash of the config",
    )
    seed: int = Field(default=0, description="episode i uses seed + i")
    max_steps: int = Field(default=50, ge=1, description="steps before an episode is truncated")
    step_timeout_s: float = Field(default=30.0, gt=0, description="limit for one step")
    retries: int = Field(default=2, ge=0, description="retries of an episode whose sandbox died")
    licence: str = Field(default="cc-by-4.0", description="licence recorded on every row")
    normalize: bool = Field(default=True, description="write transitions after collecting")
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    environment: dict[str, Any] = Field(
        default_factory=dict, description="the domain's environment config"
    )
    sandbox_host: str | None = Field(
        default=None,
        description="the Docker engine the run's sandboxes use: ssh://user@host[:port] or "
        "tcp://host:port with TLS (see worldtrace.sandboxes.remote; no disk cap there); "
        "default: WORLDTRACE_SANDBOX_HOST of the process running the episodes, else this "
        "machine's engine. Where, not what: not part of the run's identity",
    )
    # Building a collector reads the entry points and imports its domain: done once per config.
    _memo: _CollectorMemo = PrivateAttr(default_factory=_CollectorMemo)

    @field_validator("sandbox_host")
    @classmethod
    def _a_sandbox_host_url(cls, value: str | None) -> str | None:
        if value is not None:
            from worldtrace.sandboxes.remote import SandboxHost  # paramiko: only when used

            SandboxHost.parse(value)
        return value

    @model_validator(mode="after")
    def _known_to_the_domain(self, info: ValidationInfo) -> CollectConfig:
        if not (info.context or {}).get(CHECK_DOMAIN, True):
            return self
        try:
            collector = self.collector()
            environment = collector.environment_config.model_validate(self.environment)
            policy = collector.make_policy(self.policy.kind, self.policy.params)
            collector.plan(0, self.seed, policy.plans_as, self.policy.tasks, environment)
        except LookupError as error:  # unknown domain or task: pydantic reports ValueErrors
            raise ValueError(error.args[0]) from None
        return self

    def collector(self) -> Collector[Any, Any]:
        """The domain's collector: the one this config was checked with, else a new one."""
        memo = self._memo
        if memo.collector is None or memo.domain != self.domain:  # a copy with another domain
            memo.collector, memo.domain = get_collector(self.domain), self.domain
        return memo.collector

    def identity(self) -> dict[str, Any]:
        """The fields that define what is collected (not how fast or where)."""
        return self.model_dump(mode="json", exclude=_NOT_IDENTITY) | {
            "run_name": self.resolved_run_name()
        }

    def resolved_run_name(self) -> str:
        """The run directory name: ``run_name`` or the domain plus a config hash."""
        if self.run_name:
            return self.run_name
        what = self.model_dump(mode="json", exclude=_NOT_IDENTITY | {"run_name"})
        digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
        return f"{self.domain}-{digest[:10]}"

    def episode_id(self, index: int) -> str:
        """The id of episode ``index``: derived from the run and the episode's seed."""
        return f"{self.resolved_run_name()}-s{self.seed + index:06d}"

    @field_validator("out", mode="before")
    @classmethod
    def _out_as_text(cls, value: Any) -> Any:
        value = str(value) if isinstance(value, Path) else value
        if isinstance(value, str):
            try:
                check_persistent(value)
            except InputError as error:
                raise ValueError(str(error)) from None
        return value

    @property
    def run_location(self) -> str:
        """Where this run lives: a local path or an fsspec URL."""
        return join(self.out, self.resolved_run_name())

    @property
    def run_dir(self) -> Path:
        """Where this run is recorded on this machine (a remote run's staged copy)."""
        if is_remote(self.out):
            return RemoteFolder(self.run_location).local
        return local_path(self.run_location)


def config_digest(identity: dict[str, Any]) -> str:
    """Return the sha256 of a run's recorded configuration (canonical JSON)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def check_run_location(config: CollectConfig) -> None:
    """Raise :class:`InputError` when the run's folder (or its local stage) cannot be written."""
    check_writable_folder(config.run_dir, "run directory")


def claim_run(config: CollectConfig) -> str:
    """Create the run directory with its ``run.json`` (or check it matches); return its sha256.

    The flow is then started with the directory and this digest only, so that no field of the
    configuration (a replay policy's actions may hold anything) passes through Prefect. A
    remote run's ``run.json`` is checked against the one already there, and put there if none.
    """
    check_run_location(config)
    recorded = json.loads(json.dumps(config.identity()))
    # A resume reads the config back from run.json: it must be the same config. Its fields
    # are what is compared; the domain has just checked them (``config`` is validated).
    read_back = validate_config({**recorded, "out": config.out}, check_domain=False)
    if read_back.identity() != recorded:
        raise ConfigError("the config does not read back from run.json as it was given")
    remote = RemoteFolder(config.run_location) if is_remote(config.out) else None
    if remote is not None:
        remote.download(RunLayout.MANIFEST)
    RunRecorder(config.run_dir, config.identity())
    if remote is not None:
        remote.upload(RunLayout.MANIFEST, overwrite=False)
    return config_digest(config.identity())


def load_run(run_dir: Path, config_sha256: str) -> CollectConfig:
    """Read the configuration a run was claimed with; refuse one whose digest differs."""
    layout = RunLayout(Path(run_dir))
    try:
        identity = layout.read_config()
    except LayoutError as error:
        raise ConfigError(f"cannot read the run's configuration: {error}") from None
    if config_digest(identity) != config_sha256:
        raise ConfigError(f"{layout.manifest} changed after the run was started; start it again")
    return validate_config({**identity, "out": str(layout.root.parent)})


def validate_config(data: dict[str, Any], check_domain: bool = True) -> CollectConfig:
    """Validate a config dict; raise :class:`ConfigError` naming each bad field.

    ``check_domain`` False skips asking the domain whether it knows the config's environment,
    policy and tasks: only for a config that was checked already.
    """
    try:
        return CollectConfig.model_validate(data, context={CHECK_DOMAIN: check_domain})
    except ValidationError as error:
        problems = validation_problems(error, "config")
        raise ConfigError("invalid collection config:\n  " + "\n  ".join(problems)) from None


def load_config(path: Path, overrides: dict[str, Any] | None = None) -> CollectConfig:
    """Read a YAML config, apply ``overrides`` (e.g. from flags), and validate it."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config fields")
    overrides = overrides or {}
    merged = {**data, **overrides}
    # Flags name single fields (--site, --env k=v, --policy, --task); the file keeps the others.
    for section in ("environment", "policy"):
        if isinstance(data.get(section), dict) and section in overrides:
            merged[section] = {**data[section], **overrides[section]}
    # --model and --base-url name single policy parameters: the file keeps the others.
    policy = overrides.get("policy") or {}
    file_params = (
        (data.get("policy") or {}).get("params") if isinstance(data.get("policy"), dict) else None
    )
    if isinstance(file_params, dict) and "params" in policy:
        merged["policy"]["params"] = {**file_params, **policy["params"]}
    return validate_config(merged)
