"""`worldtrace doctor` checks, against the real machine and Docker engine."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest
from rich.console import Console

from worldtrace.flows import doctor
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
