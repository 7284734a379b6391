"""Image definitions: hashing, and idempotent builds against the real Docker engine."""

from __future__ import annotations

import contextlib
import shutil
import tarfile
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


def test_definition_hash_follows_shared_files(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "Dockerfile").write_text(TINY_DOCKERFILE)
    (folder / "helper.py").write_text("x = 1\n")
    (folder / "helper.py").chmod(0o755)
    plain = images.ImageDefinition("tiny", folder)
    # Without shared files the hash is what it was before they existed (pinned: the images
    # built then stay current).
    assert images.definition_hash(plain, base_id="sha256:base") == (
        "35c6990302c300ebd97359c74f66c8dfc7a1d1a1b0dfe168969d18aa0657fd42"
    )
    runtime = tmp_path / "shared" / "driver_runtime.py"
    runtime.parent.mkdir()
    runtime.write_text("VERSION = 1\n")
    shared = images.ImageDefinition("tiny", folder, shared_files=(runtime,))
    with_runtime = images.definition_hash(shared, base_id="sha256:base")
    assert with_runtime != images.definition_hash(plain, base_id="sha256:base")
    assert with_runtime == images.definition_hash(shared, base_id="sha256:base")
    runtime.write_text("VERSION = 2\n")
    assert images.definition_hash(shared, base_id="sha256:base") != with_runtime
    runtime.write_text("VERSION = 1\n")
    assert images.definition_hash(shared, base_id="sha256:base") == with_runtime
    # A shared file hashes apart from a file of the folder with its name and bytes.
    (folder / "driver_runtime.py").write_text("VERSION = 1\n")
    assert images.definition_hash(plain, base_id="sha256:base") != with_runtime
    with pytest.raises(images.SandboxError, match="would replace"):
        images.definition_hash(shared, base_id="sha256:base")
    (folder / "driver_runtime.py").unlink()
    with pytest.raises(images.SandboxError, match="does not exist"):
        images.definition_hash(
            images.ImageDefinition("tiny", folder, shared_files=(tmp_path / "absent.py",)),
            base_id="sha256:base",
        )
    with pytest.raises(images.SandboxError, match="one name"):
        images.ImageDefinition("tiny", folder, shared_files=(runtime, folder / "driver_runtime.py"))


def test_the_build_context_holds_the_folder_and_the_shared_files(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    (folder / "sub").mkdir(parents=True)
    (folder / "Dockerfile").write_text(TINY_DOCKERFILE)
    (folder / "sub" / "data.txt").write_text("data\n")
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/bin/sh\necho tool\n")
    tool.chmod(0o755)
    definition = images.ImageDefinition("tiny", folder, shared_files=(images.DRIVER_RUNTIME, tool))
    with images.build_context(definition) as context, tarfile.open(fileobj=context) as archive:
        members = {member.name: member for member in archive.getmembers()}
        assert {"Dockerfile", "sub/data.txt", "driver_runtime.py", "tool.sh"} <= set(members)
        shared = archive.extractfile("driver_runtime.py")
        assert shared is not None and shared.read() == images.DRIVER_RUNTIME.read_bytes()
        assert members["tool.sh"].mode & 0o111  # the executable bit, as COPY keeps it
        dockerfile = archive.extractfile("Dockerfile")
        assert dockerfile is not None and dockerfile.read() == TINY_DOCKERFILE.encode()


def test_every_driver_image_gets_the_runtime() -> None:
    # Each domain's image definition puts the runtime in its context and its Dockerfile copies
    # it beside the driver, before the driver (so the layers above stay cached).
    from worldtrace.collectors.mcp.servers import IMAGE as MCP
    from worldtrace.collectors.os.image_definition import IMAGE as OS
    from worldtrace.collectors.search.image_definition import IMAGE as SEARCH
    from worldtrace.collectors.swe.repos import IMAGES as SWE

    drivers = {
        IMAGE: "tmux_driver.py",
        MCP: "mcp_driver.py",
        OS: "desktop_driver.py",
        SEARCH: "search_driver.py",
        **{definition: "swe_driver.py" for definition in SWE},
    }
    for definition, driver in drivers.items():
        assert images.DRIVER_RUNTIME in definition.shared_files, definition.name
        lines = (definition.folder / "Dockerfile").read_text().splitlines()
        copies = [i for i, line in enumerate(lines) if line.startswith("COPY ")]
        runtime = [i for i in copies if "driver_runtime.py /opt/worldtrace/" in lines[i]]
        assert len(runtime) == 1, definition.name
        assert driver in lines[runtime[0] + 1], definition.name
        source = (definition.folder / driver).read_text()
        assert "import driver_runtime as runtime" in source, driver


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
def test_a_shared_file_reaches_the_build(
    tiny: images.ImageDefinition, client: docker.DockerClient, tmp_path: Path
) -> None:
    shared_file = tmp_path / "shared.txt"
    shared_file.write_text("shared\n")
    (tiny.folder / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY shared.txt /shared\n")
    shared = images.ImageDefinition(tiny.name, tiny.folder, shared_files=(shared_file,))
    images.ensure_image(shared, client)
    output = client.containers.run(shared.tag, ["cat", "/shared"], remove=True, network_mode="none")
    assert output == b"shared\n"
    shared_file.write_text("changed\n")
    assert images.image_status(shared, client) == "stale"


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
