"""`worldtrace doctor`: check that this machine can collect, and say how to fix what is missing.

Every check runs even when an earlier one failed, and none raises: an exception becomes a
failed check whose detail is the error, so the report is complete on a half-set-up machine.
What the core needs is listed here; what each domain needs (Debian packages, images, further
checks) is asked of the registered domains, and `make setup` installs from the same lists
(:func:`debian_packages`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.table import Table
from rich.text import Text

from worldtrace.collectors.registry import get_collector, registered_collectors
from worldtrace.collectors.requirements import Check
from worldtrace.sandboxes.images import ImageDefinition
from worldtrace.schemas.errors import ConfigError, SetupError, validation_problems

if TYPE_CHECKING:
    from worldtrace.collectors.base import Collector
    from worldtrace.collectors.llm.params import LLMParams

# Python distributions whose versions matter to the pipeline.
KEY_PACKAGES = (
    "prefect",
    "fastapi",
    "pydantic",
    "pyarrow",
    "datasets",
    "polars",
    "docker",
    "multiprocess",
)
# Versions of these are pinned because other versions are known to break (see pyproject.toml).
PINNED_PACKAGES = ("prefect", "fastapi", "multiprocess")
CORE_DEBIAN_PACKAGES = ("python3-venv", "docker.io", "debootstrap", "e2fsprogs")
"""What every run needs: the venv, the Docker engine, the base image builder, capped disks."""
# What the commands run: importing these imports every layer (flows → curation/publishing →
# normalizers → collectors → sandboxes → schemas), and the domains come from the registry.
ENTRY_MODULES = ("worldtrace.flows.pipeline", "worldtrace.exports")
MIN_PYTHON = (3, 11)
MIN_FREE_GB = 5.0

_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def set_up_command(domain: str) -> str:
    """The command that installs ``domain``'s Debian packages and builds its images."""
    return f"make setup WORLDTRACE_DOMAINS={domain}"


def chosen_collectors(domains: str) -> list[Collector[Any, Any]]:
    """The registered domains ``domains`` names, as setup's ``WORLDTRACE_DOMAINS`` does.

    ``"all"``: every registered domain; ``""`` or ``"none"``: none; otherwise domain names
    separated by spaces or commas (``UnknownDomainError`` for one that is not registered).
    """
    names = domains.replace(",", " ").split()
    if names == ["all"]:
        return registered_collectors()
    if names in ([], ["none"]):
        return []
    return [get_collector(name) for name in dict.fromkeys(names)]


def debian_packages(domains: str = "all") -> list[str]:
    """The Debian packages the core needs, then those of ``domains``, without repeats.

    ``domains`` as :func:`chosen_collectors` reads it; by default every registered domain's.
    """
    wanted = list(CORE_DEBIAN_PACKAGES)
    for collector in chosen_collectors(domains):
        wanted += [p for p in collector.requirements.debian_packages if p not in wanted]
    return wanted


@functools.cache
def _installed_version(package: str) -> str | None:
    """The installed version of a Debian package, or None when it is not installed.

    Cached: one report asks for each domain package twice (its line, and whether the domain
    is set up), and packages are not installed while `worldtrace doctor` runs.
    """
    result = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status}\t${Version}", package],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    status, _, version = result.stdout.partition("\t")
    return version if result.returncode == 0 and status.endswith(" installed") else None


def _domains_without_packages() -> set[str]:
    """The registered domains a Debian package of which is not installed here."""
    if shutil.which("dpkg-query") is None:
        return set()  # not Debian: the domain's own checks say what is missing
    return {
        c.domain
        for c in registered_collectors()
        if any(_installed_version(p) is None for p in c.requirements.debian_packages)
    }


def _images() -> list[ImageDefinition]:
    return [image for c in registered_collectors() for image in c.requirements.images]


def _guarded(name: str, fix: str | None, check: Callable[[], list[Check]]) -> list[Check]:
    """Run ``check``; any exception becomes one failed check instead of aborting the report."""
    try:
        return check()
    except Exception as error:
        return [Check(name, False, f"{type(error).__name__}: {error}", fix)]


def _python() -> list[Check]:
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MIN_PYTHON
    fix = None if ok else "use Python 3.11+: `python3 -m venv .venv` then `make setup`"
    return [Check("python", ok, f"{version} ({sys.executable})", fix)]


def _worldtrace() -> list[Check]:
    fix = "make setup  (runs `pip install -e '.[dev]'` in .venv)"
    try:
        version = importlib.metadata.version("worldtrace")
    except importlib.metadata.PackageNotFoundError:
        return [Check("worldtrace", False, "the worldtrace distribution is not installed", fix)]
    broken = []
    for module in ENTRY_MODULES:
        try:
            importlib.import_module(module)
        except Exception as error:
            broken.append(f"{module}: {type(error).__name__}: {error}")
    if broken:
        return [Check("worldtrace", False, f"{version}; cannot import " + "; ".join(broken), fix)]
    return [Check("worldtrace", True, f"{version} (imports {', '.join(ENTRY_MODULES)})", None)]


def _pins() -> dict[str, str]:
    """Return ``{distribution: version}`` for the ``==`` pins of worldtrace's dependencies.

    The checkout's pyproject.toml is the truth when it is there (it may be newer than the
    installed metadata); an installed wheel falls back to its own metadata.
    """
    if _PYPROJECT.is_file():
        requirements = tomllib.loads(_PYPROJECT.read_text())["project"]["dependencies"]
    else:
        requirements = importlib.metadata.requires("worldtrace") or []
    pins = {}
    for requirement in requirements:
        match = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*==\s*([^\s;,]+)", requirement)
        if match:
            pins[_normalize(match.group(1))] = match.group(2)
    return pins


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _python_packages() -> list[Check]:
    pins = _pins()
    checks = []
    for package in KEY_PACKAGES:
        name = f"python package {package}"
        try:
            version = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            checks.append(Check(name, False, "not installed", "make setup"))
            continue
        pin = pins.get(_normalize(package))
        if package in PINNED_PACKAGES and pin and version != pin:
            detail = f"{version}, but pyproject.toml pins {pin} (other versions are known to break)"
            fix = f".venv/bin/pip install '{package}=={pin}'"
            checks.append(Check(name, False, detail, fix))
        else:
            detail = version + (f" (pinned {pin})" if pin else "")
            checks.append(Check(name, True, detail, None))
    return checks


def _debian_packages() -> list[Check]:
    """The core's packages must be installed; a domain's are installed by its own setup.

    A domain's missing package is not a fault of the machine, as a domain's unbuilt image is
    not: `make setup` installs the core's packages and only the named domains' (the demo's
    terminal needs no browser), so the line says which command sets that domain up.
    """
    users: dict[str, list[str]] = {}
    for collector in registered_collectors():
        for package in collector.requirements.debian_packages:
            users.setdefault(package, []).append(collector.domain)
    checks = []
    for package in debian_packages():
        name = f"debian package {package}"
        fix = f"make setup  (or `apt-get install {package}` as root)"
        if shutil.which("dpkg-query") is None:
            checks.append(Check(name, False, "dpkg-query not found: not a Debian system?", fix))
            continue
        version = _installed_version(package)
        if version is not None:
            checks.append(Check(name, True, version, None))
        elif package not in users:  # the core's
            checks.append(Check(name, False, "not installed", fix))
        else:
            setups = ", ".join(f"`{set_up_command(d)}`" for d in users[package])
            detail = f"not installed; needed by {', '.join(users[package])}: {setups} as root"
            checks.append(Check(name, True, detail, None))
    return checks


def _docker_checks() -> list[Check]:
    """Engine, base image, each sandbox image, leaked sandboxes: all need the engine."""
    # Imported here so that a broken sandboxes package fails these checks, not the report.
    import docker.errors

    from worldtrace.sandboxes import docker as sandbox_docker
    from worldtrace.sandboxes import images
    from worldtrace.sandboxes.engine import docker_client

    definitions = _images()
    try:
        client = docker_client()
        engine = client.version()
    except Exception as error:
        detail = str(error) or type(error).__name__
        unreachable = "docker engine unreachable"
        fix = "make setup"
        return [
            Check("docker engine", False, detail, fix),
            Check("base image", False, unreachable, fix),
            *(Check(f"image {d.name}", False, unreachable, fix) for d in definitions),
            Check("leaked sandboxes", False, unreachable, fix),
        ]
    checks = [
        Check(
            "docker engine",
            True,
            f"{engine.get('Version', '?')} (API {engine.get('ApiVersion', '?')})",
            None,
        )
    ]
    build = "worldtrace sandboxes build  (or `make setup`)"

    def base() -> list[Check]:
        try:
            image = client.images.get(images.BASE_IMAGE)
        except docker.errors.ImageNotFound:
            return [Check("base image", False, f"{images.BASE_IMAGE} is missing", build)]
        return [Check("base image", True, f"{images.BASE_IMAGE} {image.short_id}", None)]

    checks += _guarded("base image", build, base)
    for definition in definitions:

        def one(definition: ImageDefinition = definition) -> list[Check]:
            status = images.image_status(definition, client)
            detail = f"{definition.tag}: {status}"
            if status == "stale":
                detail += " (its definition or the base image changed since it was built)"
            if status != "current":
                # Not a fault: `worldtrace collect` builds a domain's images on first use.
                detail += "; built when a collection first uses it (or: worldtrace sandboxes build)"
            return [Check(f"image {definition.name}", True, detail, None)]

        checks += _guarded(f"image {definition.name}", build, one)

    def leaked() -> list[Check]:
        containers = sandbox_docker.live_sandboxes(client)
        # The same rule as sandboxes.docker.gc(): stopped, or its owning process is gone.
        orphans = [
            c
            for c in containers
            if c.status != "running" or not sandbox_docker.owner_alive(c.labels)
        ]
        detail = f"{len(orphans)} orphaned of {len(containers)} sandbox containers"
        fix = "worldtrace sandboxes gc" if orphans else None
        return [Check("leaked sandboxes", not orphans, detail, fix)]

    checks += _guarded("leaked sandboxes", "worldtrace sandboxes gc", leaked)
    return checks


def _disk() -> list[Check]:
    cwd = Path.cwd()
    usage = shutil.disk_usage(cwd)
    free_gb = usage.free / 1e9
    detail = f"{free_gb:.1f} GB free of {usage.total / 1e9:.0f} GB in {cwd}"
    ok = free_gb >= MIN_FREE_GB
    fix = None
    if not ok:
        fix = "free space: remove old runs/, `worldtrace sandboxes gc --all`, `docker image prune`"
    return [Check("disk space", ok, detail, fix)]


def _sandbox_disks() -> list[Check]:
    """A sandbox's disk cap needs root, loop devices and mkfs.ext4: make and drop one."""
    import time
    import uuid

    from worldtrace.sandboxes.disk import DiskError, SandboxDisk, disk_root

    fix = (
        "run as root on a machine with loop devices and e2fsprogs (`make setup`), or give "
        "sandboxes `limits: {disk_mb: null}` to run them without a disk cap"
    )
    started = time.monotonic()
    try:
        SandboxDisk(f"doctor-{uuid.uuid4().hex[:8]}", 16).create().release()
    except (DiskError, OSError) as error:
        return [Check("sandbox disks", False, str(error), fix)]
    took = (time.monotonic() - started) * 1000
    return [
        Check("sandbox disks", True, f"capped disks work in {disk_root()} ({took:.0f} ms)", None)
    ]


def _domain_checks() -> list[Check]:
    """Each registered domain's own checks (beyond packages and images).

    A domain whose Debian packages are not installed is not set up here: one line says so
    instead of its checks, which would only fail on what is missing.
    """
    checks: list[Check] = []
    not_set_up = _domains_without_packages()
    for collector in registered_collectors():
        if collector.domain in not_set_up:
            detail = f"not set up on this machine: `{set_up_command(collector.domain)}` as root"
            checks.append(Check(f"{collector.domain}: set up", True, detail, None))
            continue
        for check in collector.requirements.checks:
            name = f"{collector.domain}: {check.__name__}"  # if it raises, name it after itself

            def run(check: Callable[[], Check] = check) -> list[Check]:
                return [check()]

            checks += _guarded(name, "make setup", run)
    return checks


def run_checks() -> list[Check]:
    """Run every check and return them in display order; never raises."""
    steps: list[tuple[str, str | None, Callable[[], list[Check]]]] = [
        ("python", None, _python),
        ("worldtrace", "make setup", _worldtrace),
        ("python packages", "make setup", _python_packages),
        ("debian packages", "make setup", _debian_packages),
        ("domains", "make setup", _domain_checks),
        ("docker", "make setup", _docker_checks),
        ("sandbox disks", None, _sandbox_disks),
        ("disk space", None, _disk),
    ]
    checks: list[Check] = []
    for name, fix, step in steps:
        checks += _guarded(name, fix, step)
    return checks


def render(checks: list[Check]) -> Table:
    """Return a rich table of ``checks``: a mark, the check, what was found, and the fix."""
    table = Table(title="worldtrace doctor", title_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("detail", overflow="fold")
    table.add_column("fix", overflow="fold")
    for check in checks:
        mark = "[green]ok[/]" if check.ok else "[red]FAIL[/]"
        # Text(), not markup: details quote error messages, which may contain [brackets].
        table.add_row(mark, Text(check.name), Text(check.detail), Text(check.fix or ""))
    return table


def policy_params(path: Path) -> LLMParams:
    """Read the llm policy's parameters from a YAML file.

    The file is a collection config (its ``policy`` block is read), a policy block
    (``{kind: llm, params: {...}}``) or the ``params`` mapping alone. A bad file, another
    policy kind or an invalid parameter is a :class:`ConfigError` naming it.
    """
    from pydantic import ValidationError

    from worldtrace.collectors.llm.params import LLMParams  # openai: only when asked

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"policy config {path} does not exist") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path} is not valid YAML: {error}") from None
    block = data.get("policy") if isinstance(data, dict) and "policy" in data else data
    if not isinstance(block, dict):
        raise ConfigError(f"{path} must hold a collection config, a policy block or its params")
    where = "policy.params"
    if "kind" in block or "params" in block:
        if block.get("kind", "llm") != "llm":
            raise ConfigError(
                f"{path}: the policy is {block.get('kind')!r}; only an `llm` policy has an "
                "endpoint to check"
            )
        block = block.get("params") or {}
        if not isinstance(block, dict):
            raise ConfigError(f"{path}: policy.params must be a mapping")
    try:
        return LLMParams.model_validate(block)
    except ValidationError as error:
        problems = validation_problems(error, where)
        raise ConfigError(f"invalid {where} in {path}:\n  " + "\n  ".join(problems)) from None


def check_policy_endpoint(params: LLMParams) -> str:
    """Ask the endpoint for its model list, once; say whether the configured model answers.

    Returns the line to print when it does. Raises :class:`SetupError` when the endpoint does
    not answer or refuses the key (the fix is on the server's side or in the environment),
    :class:`ConfigError` when the configured model is not among those it lists. No message
    holds the key: only the name of the variable it is read from.
    """
    import os

    from worldtrace.collectors.base import ModelUnavailable
    from worldtrace.collectors.llm.client import ModelClient

    url = params.base_url
    key_env = params.api_key_env
    key = os.environ.get(key_env) if key_env else None
    # One request: a check that retried with backoff would take minutes to say "down".
    client = ModelClient(params.model_copy(update={"max_retries": 0}))
    try:
        listed = client.models()
    except ModelUnavailable as error:
        if error.status_code in (401, 403):
            sent = f"the key in ${key_env}" if key else f"no key (${key_env} is not set)"
            if not key_env:
                sent = "no key (policy.params.api_key_env is null)"
            raise SetupError(
                f"{url} refused {sent}: HTTP {error.status_code}; set the variable to a key "
                "this endpoint accepts"
            ) from None
        detail = _redacted(str(error).removeprefix(f"{url}: "), key)
        if error.status_code is not None:
            raise SetupError(
                f"{url} answered the model list with an error ({detail}); is base_url the "
                "endpoint's OpenAI-compatible root (up to /v1)?"
            ) from None
        raise SetupError(
            f"{url} does not answer ({detail}); start the model server, or fix "
            "policy.params.base_url"
        ) from None
    if not listed:
        raise SetupError(f"{url} lists no model; load one into the server")
    shown = ", ".join(listed[:10]) + (f", … ({len(listed)} in all)" if len(listed) > 10 else "")
    if params.model is None:
        return f"ok: {listed[0]} answers at {url} (the first model it lists: {shown})"
    if params.model not in listed:
        raise ConfigError(
            f"{url} does not list the model {params.model!r} (it lists: {shown}); set "
            "policy.params.model to one of them, or leave it out for the first"
        )
    return f"ok: {params.model} answers at {url}"


def _redacted(text: str, key: str | None) -> str:
    """``text`` without the key in it (a server may quote what it was sent)."""
    return text.replace(key, "***") if key else text


if __name__ == "__main__":
    from rich.console import Console

    results = run_checks()
    Console().print(render(results))
    sys.exit(0 if all(check.ok for check in results) else 1)
