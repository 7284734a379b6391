"""`worldtrace doctor` checks, against the real machine and Docker engine."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from worldtrace.collectors.registry import UnknownDomainError, registered_collectors
from worldtrace.flows import doctor
from worldtrace.flows.cli import app
from worldtrace.sandboxes import images


def by_name(checks: list[doctor.Check]) -> dict[str, doctor.Check]:
    return {check.name: check for check in checks}


@pytest.mark.docker
def test_run_checks_covers_every_item() -> None:
    checks = by_name(doctor.run_checks())
    expected = [
        "python",
        "worldtrace",
        *(f"python package {p}" for p in doctor.KEY_PACKAGES),
        *(f"debian package {p}" for p in doctor.debian_packages()),
        "web browser",
        "web browser confinement",
        "docker engine",
        "base image",
        *(f"image {d.name}" for d in doctor._images()),
        "leaked sandboxes",
        "sandbox disks",
        "disk space",
    ]
    assert set(expected) <= set(checks), set(expected) - set(checks)
    for check in checks.values():
        assert check.detail.strip(), check
        assert check.ok or check.fix, check  # every failure says what to do
    # On the machine the tests run on, these are set up by `make setup`.
    assert checks["python"].ok
    assert checks["docker engine"].ok
    assert checks["base image"].ok
    assert checks["web browser"].ok and checks["web browser"].detail.startswith("Chromium")
    assert checks["sandbox disks"].ok, checks["sandbox disks"]
    assert checks["web browser confinement"].ok, checks["web browser confinement"]


@pytest.mark.docker
def test_missing_image_fails_with_a_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    absent = f"absent-{uuid.uuid4().hex[:8]}"
    renamed = [replace(d, name=f"{absent}-{d.name}") for d in doctor._images()]
    monkeypatch.setattr(doctor, "_images", lambda: renamed)
    monkeypatch.setattr(images, "BASE_IMAGE", f"worldtrace/{absent}-base:bookworm")
    checks = by_name(doctor.run_checks())
    assert not checks["base image"].ok, checks["base image"]
    assert "missing" in checks["base image"].detail
    assert checks["base image"].fix and "worldtrace sandboxes build" in checks["base image"].fix
    # A domain's image is built the first time a collection uses it: missing is no fault.
    for name in [f"image {d.name}" for d in renamed]:
        assert checks[name].ok, checks[name]
        assert "missing" in checks[name].detail and "first uses" in checks[name].detail


def test_pin_mismatch_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "_pins", lambda: {"prefect": "0.0.1"})
    checks = by_name(doctor._python_packages())
    assert not checks["python package prefect"].ok
    assert "0.0.1" in checks["python package prefect"].detail
    assert "prefect==0.0.1" in (checks["python package prefect"].fix or "")
    assert checks["python package polars"].ok  # not pinned: any version passes


def test_pins_come_from_pyproject() -> None:
    pins = doctor._pins()
    assert set(doctor.PINNED_PACKAGES) <= set(pins)


def test_a_crashing_check_becomes_a_failed_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> list[doctor.Check]:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(doctor, "_disk", boom)
    checks = by_name(doctor.run_checks())
    assert not checks["disk space"].ok
    assert "disk on fire" in checks["disk space"].detail


def test_debian_packages_are_the_core_ones_and_every_domain_s() -> None:
    from worldtrace.collectors.registry import registered_collectors

    wanted = doctor.debian_packages()
    assert set(doctor.CORE_DEBIAN_PACKAGES) <= set(wanted)
    for collector in registered_collectors():
        assert set(collector.requirements.debian_packages) <= set(wanted)
    assert "chromium" in wanted  # the web domain's
    assert len(wanted) == len(set(wanted))


def test_setup_installs_the_core_packages_and_only_the_named_domains() -> None:
    core = list(doctor.CORE_DEBIAN_PACKAGES)
    assert doctor.debian_packages("") == doctor.debian_packages("none") == core
    # The demo's domain needs no package of its own; the browser comes with web only.
    assert doctor.debian_packages("terminal") == core
    assert doctor.debian_packages("terminal, web") == [*core, "chromium"]
    assert doctor.debian_packages("all") == doctor.debian_packages()
    with pytest.raises(UnknownDomainError, match="no collector for domain 'fax'"):
        doctor.debian_packages("terminal fax")


def test_the_packages_command_names_the_domains_setup_asks_for() -> None:
    core = " ".join(doctor.CORE_DEBIAN_PACKAGES)
    none = CliRunner().invoke(app, ["doctor", "--debian-packages", "--domains", "none"])
    assert (none.exit_code, none.stdout.strip()) == (0, core)
    web = CliRunner().invoke(app, ["doctor", "--debian-packages", "--domains", "web"])
    assert (web.exit_code, web.stdout.strip()) == (0, f"{core} chromium")
    unknown = CliRunner().invoke(app, ["doctor", "--debian-packages", "--domains", "fax"])
    assert unknown.exit_code == 2 and "no collector for domain 'fax'" in unknown.output


def test_a_domain_whose_packages_are_missing_is_named_with_its_setup_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a machine set up for the demo, web is not set up: said, not failed, and its browser
    checks (which would fail on the missing browser) are not run."""
    ran: list[str] = []
    monkeypatch.setattr(
        doctor, "registered_collectors", lambda: [_Spy(c, ran) for c in registered_collectors()]
    )
    doctor._domain_checks()
    assert [name for name in ran if name.startswith("web")]  # set up here: its checks run
    ran.clear()
    real = doctor._installed_version
    monkeypatch.setattr(
        doctor, "_installed_version", lambda p: None if p == "chromium" else real(p)
    )
    packages = by_name(doctor._debian_packages())
    chromium = packages["debian package chromium"]
    assert chromium.ok and "`make setup WORLDTRACE_DOMAINS=web` as root" in chromium.detail
    assert all(packages[f"debian package {p}"].ok for p in doctor.CORE_DEBIAN_PACKAGES)
    domains = by_name(doctor._domain_checks())
    assert domains["web: set up"].ok
    assert "not set up on this machine" in domains["web: set up"].detail
    assert not [name for name in ran if name.startswith("web")]


class _Spy:
    """A registered collector whose checks note that they ran."""

    def __init__(self, collector: Any, ran: list[str]) -> None:
        self.domain = collector.domain
        checks = tuple(
            _noting(check, f"{collector.domain}: {check.__name__}", ran)
            for check in collector.requirements.checks
        )
        self.requirements = replace(collector.requirements, checks=checks)


def _noting(check: Any, name: str, ran: list[str]) -> Any:
    def run() -> doctor.Check:
        ran.append(name)
        return doctor.Check(name, True, "spied", None)

    run.__name__ = check.__name__
    return run


def test_missing_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "debian_packages", lambda: ["worldtrace-no-such-package"])
    (check,) = doctor._debian_packages()
    assert not check.ok
    assert check.fix and "apt-get install worldtrace-no-such-package" in check.fix


def test_render_escapes_markup() -> None:
    checks = [
        doctor.Check("a", True, "fine", None),
        doctor.Check("b", False, "error [bold]not markup[/bold]", "make setup"),
    ]
    console = Console(width=200, record=True)
    console.print(doctor.render(checks))
    text = console.export_text()
    assert "[bold]not markup[/bold]" in text
    assert "make setup" in text
