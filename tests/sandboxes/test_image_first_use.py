"""A domain's images are built the first time a collection uses them, quietly.

Real builds against the real engine, of throwaway one-line definitions (unique tags, removed
at the end): the machine's own images are only looked at, never rebuilt or removed.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import docker.errors
import pytest
from typer.testing import CliRunner

from worldtrace.collectors.requirements import Requirements
from worldtrace.collectors.terminal import TerminalCollector
from worldtrace.flows import cli
from worldtrace.flows.config import validate_config
from worldtrace.flows.logs import LOG_DIR_ENV
from worldtrace.sandboxes import images
from worldtrace.sandboxes.docker import require_image
from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.errors import SandboxError

REPO = Path(__file__).resolve().parents[2]
TINY_DOCKERFILE = "ARG BASE\nFROM ${BASE}\nRUN echo first-use-marker > /marker\n"
ONE_LINE = re.compile(r"^building image (\S+) \((missing|stale)\) … done in \d+ s\n$")


@pytest.fixture
def client() -> docker.DockerClient:
    return docker_client()


@pytest.fixture
def machine_images_current(client: docker.DockerClient) -> None:
    """The base and clock images exist: a first use builds only the throwaway image."""
    assert images._base_image_id(client), "the base image is missing: run `make setup`"
    images.ensure_image(images.CLOCK_DEFINITION, client)


@pytest.fixture
def throwaway(
    tmp_path: Path, client: docker.DockerClient
) -> Iterator[list[images.ImageDefinition]]:
    """Two one-line definitions with unique tags; whatever was built of them is removed after."""
    made = []
    for role in ("used", "unused"):
        name = f"first-use-{role}-{uuid.uuid4().hex[:8]}"
        (tmp_path / "definitions" / name).mkdir(parents=True)
        (tmp_path / "definitions" / name / "Dockerfile").write_text(TINY_DOCKERFILE)
        made.append(images.ImageDefinition.in_folder(tmp_path / "definitions" / name))
    yield made
    for definition in made:
        filters = {"label": f"{images.IMAGE_LABEL}={definition.name}"}
        for image in client.images.list(filters=filters):
            with contextlib.suppress(docker.errors.NotFound):
                client.images.remove(image.id, force=True)


@pytest.mark.docker
@pytest.mark.usefixtures("machine_images_current")
def test_first_use_builds_with_one_line_and_a_log(
    throwaway: list[images.ImageDefinition], client: docker.DockerClient, tmp_path: Path
) -> None:
    used, unused = throwaway
    said: list[str] = []
    logs = tmp_path / "logs"
    with images.building_on_first_use(throwaway, logs, said.append):
        image_id = require_image(used.tag)
    text = "".join(said)
    assert ONE_LINE.match(text), text  # one finished line, no Dockerfile steps
    assert f"building image {used.tag} (missing)" in text
    assert client.images.get(used.tag).id == image_id
    assert images.image_status(used, client) == "current"
    # Only what was asked for: the other definition stays unbuilt.
    assert images.image_status(unused, client) == "missing"
    (log,) = logs.glob("*-build-*.log")
    assert "first-use-marker" in log.read_text()  # the build output went to the log file

    # Current: nothing to say, nothing built.
    said.clear()
    with images.building_on_first_use(throwaway, logs, said.append):
        assert require_image(used.tag) == image_id
    assert said == []

    # Stale (the definition changed): rebuilt, again one line.
    (used.folder / "Dockerfile").write_text(TINY_DOCKERFILE.replace("marker", "changed"))
    with images.building_on_first_use(throwaway, logs, said.append):
        rebuilt = require_image(used.tag)
    assert rebuilt != image_id
    assert ONE_LINE.match("".join(said)) and "(stale)" in "".join(said), said


@pytest.mark.docker
def test_without_first_use_a_missing_image_is_an_error_naming_the_build(
    throwaway: list[images.ImageDefinition], client: docker.DockerClient, tmp_path: Path
) -> None:
    used, _ = throwaway
    with pytest.raises(SandboxError, match="worldtrace sandboxes build"):
        require_image(used.tag)
    # Inside, a tag no definition names (a user's own image) is only looked up.
    said: list[str] = []
    with (
        images.building_on_first_use([], tmp_path, said.append),
        pytest.raises(SandboxError, match="worldtrace sandboxes build"),
    ):
        require_image(used.tag)
    assert said == []
    assert images.image_status(used, client) == "missing"


@pytest.mark.docker
@pytest.mark.usefixtures("machine_images_current")
def test_a_failed_first_use_build_finishes_its_line_and_names_the_log(
    throwaway: list[images.ImageDefinition], client: docker.DockerClient, tmp_path: Path
) -> None:
    used, _ = throwaway
    (used.folder / "Dockerfile").write_text(
        "ARG BASE\nFROM ${BASE}\nRUN echo the-reason-it-failed >&2 && exit 3\n"
    )
    said: list[str] = []
    logs = tmp_path / "logs"
    with (
        images.building_on_first_use(throwaway, logs, said.append),
        pytest.raises(SandboxError) as raised,
    ):
        require_image(used.tag)
    (log,) = logs.glob("*-build-*.log")
    text = "".join(said)
    assert re.match(rf"^building image {re.escape(used.tag)} \(missing\) … failed after", text)
    assert text.endswith(f"(log: {log})\n"), text
    message = str(raised.value)
    assert "the-reason-it-failed" in message  # the tail of the build output
    assert f"the whole build log: {log}" in message
    assert "the-reason-it-failed" in log.read_text()
    assert images.image_status(used, client) == "missing"


@pytest.mark.docker
@pytest.mark.usefixtures("machine_images_current")
def test_two_images_to_build_build_side_by_side_each_with_its_line(
    throwaway: list[images.ImageDefinition], client: docker.DockerClient, tmp_path: Path
) -> None:
    """`make setup` on a fresh machine: the clock image and a domain's build at once."""
    said: list[str] = []
    logs = tmp_path / "logs"
    built = images.ensure_images_logged(throwaway, logs, said.append, client)
    text = "".join(said)
    # Each line is written whole when its build ends, so two builds never split each other's.
    first, *done = text.splitlines(keepends=True)
    assert first == f"building {len(throwaway)} images, 2 at a time …\n", text
    matches = [ONE_LINE.match(line) for line in done]
    assert sorted(match[1] for match in matches if match) == sorted(d.tag for d in throwaway), text
    for definition in throwaway:
        assert images.image_status(definition, client) == "current"
        assert client.images.get(definition.tag).id == built[definition.name]
    assert len(list(logs.glob("*-build-*.log"))) == len(throwaway)


def test_side_by_side_builds_run_at_once_and_a_failure_waits_for_the_others() -> None:
    # Each build waits until the other has started: one after the other, both would time out.
    both_started = threading.Barrier(2, timeout=30)
    finished: list[str] = []

    def build(name: str, fails: bool) -> Callable[[], str]:
        def run() -> str:
            both_started.wait()
            if fails:
                raise SandboxError(f"{name} failed")
            finished.append(name)
            return f"sha256:{name}"

        return run

    built = images._build_side_by_side([("a", build("a", False)), ("b", build("b", False))])
    assert built == {"a": "sha256:a", "b": "sha256:b"}
    with pytest.raises(SandboxError, match="x failed"):
        images._build_side_by_side([("x", build("x", True)), ("y", build("y", False))])
    assert finished[-1] == "y"  # the other build ran to its end before the error was raised


@pytest.mark.docker
@pytest.mark.usefixtures("machine_images_current")
def test_collect_builds_only_the_images_its_config_uses(
    throwaway: list[images.ImageDefinition],
    client: docker.DockerClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """`worldtrace collect`'s first step: the domain's preflight asks, the builder builds."""
    used, unused = throwaway
    # The terminal domain declaring the throwaway images: its preflight asks for the image its
    # config names (here the used one) and nothing else.
    monkeypatch.setattr(TerminalCollector, "requirements", Requirements(images=(used, unused)))
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path / "logs"))
    config = validate_config(
        {"domain": "terminal", "episodes": 1, "environment": {"image": used.tag}}
    )
    cli._build_used_images(config)
    printed = capfd.readouterr()
    assert ONE_LINE.match(printed.err), printed
    assert used.tag in printed.err and printed.out == ""
    assert images.image_status(used, client) == "current"
    assert images.image_status(unused, client) == "missing"
    assert len(list((tmp_path / "logs").glob("*-build-*.log"))) == 1
    # Everything current: no line, and no second preflight.
    cli._build_used_images(config)
    assert capfd.readouterr().err == ""


@pytest.mark.docker
@pytest.mark.usefixtures("machine_images_current")
def test_sandboxes_build_base_only_says_one_line_per_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `make setup` runs by default: the base and clock images, and no domain's."""
    monkeypatch.setenv(LOG_DIR_ENV, str(tmp_path / "logs"))
    result = CliRunner().invoke(cli.app, ["sandboxes", "build", "--base-only"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines == [
        f"image {images.BASE_IMAGE}: current {lines[0].split()[-1]}",
        f"image {images.CLOCK_DEFINITION.tag}: current {lines[1].split()[-1]}",
    ], lines


def _make_dry_run(target: str) -> str:
    """The commands ``make target`` would run (nothing is run)."""
    return subprocess.run(
        ["make", "-n", "-C", str(REPO), target], capture_output=True, text=True, check=True
    ).stdout


def test_make_targets_ask_setup_for_the_images_they_use() -> None:
    assert "WORLDTRACE_DOMAINS='' bash scripts/setup.sh" in _make_dry_run("setup")
    assert "WORLDTRACE_DOMAINS='terminal' bash scripts/setup.sh" in _make_dry_run("demo")
    assert "WORLDTRACE_DOMAINS='all' bash scripts/setup.sh" in _make_dry_run("test")
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert "sandboxes build --base-only" in setup
