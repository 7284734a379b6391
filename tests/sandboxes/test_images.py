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

from worldtrace.collectors.terminal import IMAGE
from worldtrace.sandboxes import images
from worldtrace.sandboxes.engine import docker_client

TINY_DOCKERFILE = "ARG BASE\nFROM ${BASE}\nRUN echo hi > /hi\n"


@pytest.fixture
def terminal_copy(tmp_path: Path) -> images.ImageDefinition:
    """A temporary copy of the real terminal definition."""
    shutil.copytree(IMAGE.folder, tmp_path / "terminal")
    return images.ImageDefinition("terminal", tmp_path / "terminal")


def test_definition_hash_is_stable(terminal_copy: images.ImageDefinition) -> None:
    first = images.definition_hash(terminal_copy, base_id="sha256:base")
    assert first == images.definition_hash(terminal_copy, base_id="sha256:base")
    assert len(first) == 64


def test_definition_hash_follows_files_and_base(terminal_copy: images.ImageDefinition) -> None:
    original = images.definition_hash(terminal_copy, base_id="sha256:base")
    folder = terminal_copy.folder
    dockerfile = folder / "Dockerfile"
    text = dockerfile.read_text()

    dockerfile.write_text(text + "RUN true\n")
    edited = images.definition_hash(terminal_copy, base_id="sha256:base")
    assert edited != original

    dockerfile.write_text(text)
    assert images.definition_hash(terminal_copy, base_id="sha256:base") == original

    (folder / "extra.txt").write_text("x")
    assert images.definition_hash(terminal_copy, base_id="sha256:base") != original
    (folder / "extra.txt").unlink()

    # A renamed file with the same bytes is a different definition.
    (folder / "tmux.conf").rename(folder / "tmux2.conf")
    assert images.definition_hash(terminal_copy, base_id="sha256:base") != original
    (folder / "tmux2.conf").rename(folder / "tmux.conf")
    assert images.definition_hash(terminal_copy, base_id="sha256:base") == original

    # Byte-compiled leftovers are not part of the definition.
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "tmux_driver.cpython-311.pyc").write_bytes(b"\0")
    assert images.definition_hash(terminal_copy, base_id="sha256:base") == original

    assert images.definition_hash(terminal_copy, base_id="sha256:other") != original


def test_definition_hash_follows_build_args(terminal_copy: images.ImageDefinition) -> None:
    folder = terminal_copy.folder
    plain = images.definition_hash(terminal_copy, base_id="sha256:base")
    one = images.ImageDefinition("x", folder, build_args=(("REPO", "toolz"),))
    other = images.ImageDefinition("x", folder, build_args=(("REPO", "click"),))
    hashes = {images.definition_hash(d, base_id="sha256:base") for d in (terminal_copy, one, other)}
    assert len(hashes) == 3  # the same folder with other args is another image
    assert plain == images.definition_hash(
        images.ImageDefinition("y", folder), base_id="sha256:base"
    )
    # The order the arguments come in does not change the image; the key does.
    two = images.ImageDefinition("x", folder, build_args=(("A", "1"), ("B", "2")))
    swapped = images.ImageDefinition("x", folder, build_args=(("B", "2"), ("A", "1")))
    renamed = images.ImageDefinition("x", folder, build_args=(("A", "1"), ("C", "2")))
    assert images.definition_hash(two, base_id="b") == images.definition_hash(swapped, base_id="b")
    assert images.definition_hash(two, base_id="b") != images.definition_hash(renamed, base_id="b")
    # Length-prefixed: one argument cannot imitate two.
    glued = images.ImageDefinition("x", folder, build_args=(("A", "1arg\x001:B1:2"),))
    assert images.definition_hash(glued, base_id="b") != images.definition_hash(two, base_id="b")


def test_build_args_may_not_set_base_or_repeat(tmp_path: Path) -> None:
    with pytest.raises(images.SandboxError, match="BASE is set by the builder"):
        images.ImageDefinition("x", tmp_path, build_args=(("BASE", "debian"),))
    with pytest.raises(images.SandboxError, match="given twice"):
        images.ImageDefinition("x", tmp_path, build_args=(("A", "1"), ("A", "2")))


def test_a_definition_is_a_folder_with_a_dockerfile(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(images.SandboxError, match="no Dockerfile"):
        images.ImageDefinition.in_folder(tmp_path / "empty")
    assert IMAGE.tag == "worldtrace/terminal:latest"
    assert images.ImageDefinition.in_folder(IMAGE.folder).name == "image"  # named after it


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
def tiny(tmp_path: Path, client: docker.DockerClient) -> Iterator[images.ImageDefinition]:
    """A one-line definition in a temporary folder; its images are removed after."""
    name = f"tiny-{uuid.uuid4().hex[:8]}"  # unique: parallel runs must not share a tag
    (tmp_path / name).mkdir(parents=True)
    (tmp_path / name / "Dockerfile").write_text(TINY_DOCKERFILE)
    definition = images.ImageDefinition.in_folder(tmp_path / name)
    yield definition
    repository = definition.tag.rsplit(":", 1)[0]
    for image in client.images.list(name=repository):
        client.images.remove(image.id, force=True)
    for image in client.images.list(filters={"label": f"{images.IMAGE_LABEL}={definition.name}"}):
        with contextlib.suppress(docker.errors.NotFound):
            client.images.remove(image.id, force=True)


@pytest.mark.docker
def test_ensure_image_builds_once_then_rebuilds_on_change(
    tiny: images.ImageDefinition, client: docker.DockerClient
) -> None:
    assert images.image_status(tiny, client) == "missing"
    lines: list[str] = []
    first = images.ensure_image(tiny, client, progress=lines.append)
    assert images.image_status(tiny, client) == "current"
    assert any("echo hi" in line for line in lines)  # the build log reached the callback
    labels = client.images.get(tiny.tag).labels
    assert labels[images.DEFINITION_LABEL] == images.definition_hash(tiny, client)
    assert labels[images.IMAGE_LABEL] == tiny.name

    started = time.monotonic()
    again = images.ensure_image(tiny, client, progress=lines.append)
    assert again == first
    assert time.monotonic() - started < 2.0

    dockerfile = tiny.folder / "Dockerfile"
    dockerfile.write_text(TINY_DOCKERFILE.replace("hi", "bye"))
    assert images.image_status(tiny, client) == "stale"
    rebuilt = images.ensure_image(tiny, client)
    assert rebuilt != first
    assert images.image_status(tiny, client) == "current"
    # The replaced image was untagged and nothing used it, so it is gone.
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(first)


@pytest.mark.docker
def test_build_failure_reports_the_log(
    tiny: images.ImageDefinition, client: docker.DockerClient
) -> None:
    dockerfile = tiny.folder / "Dockerfile"
    dockerfile.write_text("ARG BASE\nFROM ${BASE}\nRUN echo about-to-fail && exit 3\n")
    with pytest.raises(images.SandboxError) as raised:
        images.ensure_image(tiny, client)
    assert "about-to-fail" in str(raised.value)
    assert images.image_status(tiny, client) == "missing"


@pytest.mark.docker
def test_build_args_reach_the_dockerfile(
    tiny: images.ImageDefinition, client: docker.DockerClient
) -> None:
    (tiny.folder / "Dockerfile").write_text(
        'ARG BASE\nFROM ${BASE}\nARG GREETING\nRUN echo "$GREETING" > /greeting\n'
    )
    hello = images.ImageDefinition(tiny.name, tiny.folder, build_args=(("GREETING", "hello"),))
    images.ensure_image(hello, client)
    output = client.containers.run(
        hello.tag, ["cat", "/greeting"], remove=True, network_mode="none"
    )
    assert output == b"hello\n"
    # Other args: the image built with "hello" is stale for them.
    bye = images.ImageDefinition(tiny.name, tiny.folder, build_args=(("GREETING", "bye"),))
    assert images.image_status(bye, client) == "stale"


@pytest.mark.docker
def test_base_image_present(client: docker.DockerClient) -> None:
    base_id = images.ensure_base_image(client)
    assert base_id == client.images.get(images.BASE_IMAGE).id


@pytest.mark.docker
def test_the_base_image_gives_pip_the_machines_certificates(client: docker.DockerClient) -> None:
    # Behind an intercepting proxy an image's pip verifies the registry only with the machine's
    # own bundle; before, the Dockerfiles turned verification off for the registry's hosts.
    bundle = images.host_ca_bundle()
    if bundle is None:  # pragma: no cover - every machine here has a system bundle
        pytest.skip("this machine has no certificate bundle to give")
    base = client.images.get(images.BASE_IMAGE)
    assert base.labels[images.BASE_VERSION_LABEL] == images.BASE_VERSION
    assert f"PIP_CERT={images.HOST_CA_PATH}" in base.attrs["Config"]["Env"]
    copied = client.containers.run(
        base.id, ["cat", images.HOST_CA_PATH], remove=True, network_mode="none"
    )
    assert copied == bundle.read_bytes()


@pytest.mark.docker
def test_a_base_image_of_another_version_is_not_used(
    monkeypatch: pytest.MonkeyPatch, client: docker.DockerClient
) -> None:
    monkeypatch.setattr(images, "BASE_VERSION", "older")
    assert images._base_image_id(client) is None


@pytest.mark.docker
def test_missing_debootstrap_says_how_to_fix(
    monkeypatch: pytest.MonkeyPatch, client: docker.DockerClient
) -> None:
    monkeypatch.setattr(images, "BASE_IMAGE", f"worldtrace/absent-{uuid.uuid4().hex[:8]}:bookworm")
    monkeypatch.setattr(images, "_find_debootstrap", lambda: None)
    with pytest.raises(images.SandboxError, match="apt-get install debootstrap"):
        images.ensure_base_image(client)
