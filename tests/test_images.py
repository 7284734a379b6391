"""Image definitions: hashing, and idempotent builds against the real Docker engine."""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import pytest

from worldtrace.sandboxes import images
from worldtrace.sandboxes.docker import docker_client

TINY_DOCKERFILE = "ARG BASE\nFROM ${BASE}\nRUN echo hi > /hi\n"


@pytest.fixture
def terminal_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary copy of the real terminal definition, with DEFINITIONS pointing at it."""
    root = tmp_path / "definitions"
    shutil.copytree(images.DEFINITIONS / "terminal", root / "terminal")
    monkeypatch.setattr(images, "DEFINITIONS", root)
    return root / "terminal"


def test_definition_hash_is_stable(terminal_copy: Path) -> None:
    first = images.definition_hash("terminal", base_id="sha256:base")
    assert first == images.definition_hash("terminal", base_id="sha256:base")
    assert len(first) == 64


def test_definition_hash_follows_files_and_base(terminal_copy: Path) -> None:
    original = images.definition_hash("terminal", base_id="sha256:base")
    dockerfile = terminal_copy / "Dockerfile"
    text = dockerfile.read_text()

    dockerfile.write_text(text + "RUN true\n")
    edited = images.definition_hash("terminal", base_id="sha256:base")
    assert edited != original

    dockerfile.write_text(text)
    assert images.definition_hash("terminal", base_id="sha256:base") == original

    (terminal_copy / "extra.txt").write_text("x")
    assert images.definition_hash("terminal", base_id="sha256:base") != original
    (terminal_copy / "extra.txt").unlink()

    # A renamed file with the same bytes is a different definition.
    (terminal_copy / "tmux.conf").rename(terminal_copy / "tmux2.conf")
    assert images.definition_hash("terminal", base_id="sha256:base") != original
    (terminal_copy / "tmux2.conf").rename(terminal_copy / "tmux.conf")
    assert images.definition_hash("terminal", base_id="sha256:base") == original

    # Byte-compiled leftovers are not part of the definition.
    (terminal_copy / "__pycache__").mkdir()
    (terminal_copy / "__pycache__" / "tmux_driver.cpython-311.pyc").write_bytes(b"\0")
    assert images.definition_hash("terminal", base_id="sha256:base") == original

    assert images.definition_hash("terminal", base_id="sha256:other") != original


def test_list_definitions(terminal_copy: Path) -> None:
    (terminal_copy.parent / "not-a-definition").mkdir()
    assert images.list_definitions() == ["terminal"]


def test_real_definitions_exist() -> None:
    assert "terminal" in images.list_definitions()
    assert images.image_tag("terminal") == "worldtrace/terminal:latest"


def test_debian_mirror_is_read_from_apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb\n# a comment\nURIs: http://mirror.invalid/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    (apt / "sources.list.d" / "off.sources.disabled").write_text(
        "Types: deb\nURIs: http://wrong.invalid/debian\nSuites: bookworm\n"
    )
    real = images._apt_sources
    monkeypatch.setattr(images, "_apt_sources", lambda: real(apt))
    assert images.debian_mirror() == "http://mirror.invalid/debian"

    (apt / "sources.list.d" / "debian.sources").unlink()
    (apt / "sources.list").write_text("deb [arch=amd64] http://one.invalid/debian bookworm main\n")
    assert images.debian_mirror() == "http://one.invalid/debian"


@pytest.fixture
def client() -> docker.DockerClient:
    return docker_client()


@pytest.fixture
def tiny(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: docker.DockerClient
) -> Iterator[str]:
    """A one-line definition in a temporary DEFINITIONS root; its images are removed after."""
    name = f"tiny-{uuid.uuid4().hex[:8]}"  # unique: parallel runs must not share a tag
    root = tmp_path / "definitions"
    (root / name).mkdir(parents=True)
    (root / name / "Dockerfile").write_text(TINY_DOCKERFILE)
    monkeypatch.setattr(images, "DEFINITIONS", root)
    yield name
    repository = images.image_tag(name).rsplit(":", 1)[0]
    for image in client.images.list(name=repository):
        client.images.remove(image.id, force=True)
    for image in client.images.list(filters={"label": f"{images.IMAGE_LABEL}={name}"}):
        with contextlib.suppress(docker.errors.NotFound):
            client.images.remove(image.id, force=True)


@pytest.mark.docker
def test_ensure_image_builds_once_then_rebuilds_on_change(
    tiny: str, client: docker.DockerClient
) -> None:
    assert images.image_status(tiny, client) == "missing"
    lines: list[str] = []
    first = images.ensure_image(tiny, client, progress=lines.append)
    assert images.image_status(tiny, client) == "current"
    assert any("echo hi" in line for line in lines)  # the build log reached the callback
    labels = client.images.get(images.image_tag(tiny)).labels
    assert labels[images.DEFINITION_LABEL] == images.definition_hash(tiny, client)
    assert labels[images.IMAGE_LABEL] == tiny

    started = time.monotonic()
    again = images.ensure_image(tiny, client, progress=lines.append)
    assert again == first
    assert time.monotonic() - started < 2.0

    dockerfile = images.DEFINITIONS / tiny / "Dockerfile"
    dockerfile.write_text(TINY_DOCKERFILE.replace("hi", "bye"))
    assert images.image_status(tiny, client) == "stale"
    rebuilt = images.ensure_image(tiny, client)
    assert rebuilt != first
    assert images.image_status(tiny, client) == "current"
    # The replaced image was untagged and nothing used it, so it is gone.
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(first)


@pytest.mark.docker
def test_build_failure_reports_the_log(tiny: str, client: docker.DockerClient) -> None:
    dockerfile = images.DEFINITIONS / tiny / "Dockerfile"
    dockerfile.write_text("ARG BASE\nFROM ${BASE}\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(images.SandboxError) as raised:
        images.ensure_image(tiny, client)
    assert "about-to-fail" in str(raised.value)
    assert images.image_status(tiny, client) == "missing"


@pytest.mark.docker
def test_base_image_present(client: docker.DockerClient) -> None:
    base_id = images.ensure_base_image(client)
    assert base_id == client.images.get(images.BASE_IMAGE).id


@pytest.mark.docker
def test_missing_debootstrap_says_how_to_fix(
    monkeypatch: pytest.MonkeyPatch, client: docker.DockerClient
) -> None:
    monkeypatch.setattr(images, "BASE_IMAGE", f"worldtrace/absent-{uuid.uuid4().hex[:8]}:bookworm")
    monkeypatch.setattr(images, "_find_debootstrap", lambda: None)
    with pytest.raises(images.SandboxError, match="apt-get install debootstrap"):
        images.ensure_base_image(client)
