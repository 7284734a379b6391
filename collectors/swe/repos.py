"""The repositories of the swe domain: one image each, built from one definition folder.

Every repository is a folder ``image/repos/<name>/`` holding ``repo.json`` (what the sdist is
and how its tests run, read here as :class:`Repo`) and ``requirements.txt`` (its test
dependencies, hash-pinned). The image ``worldtrace/swe-<name>:latest`` is the one Dockerfile in
``image/`` built with the build args ``REPO`` and ``VERSION``: the sdist from the package
registry at ``/home/user/repo`` as a git repository with one commit, a venv at
``/opt/swe-venv``, and the baseline (the tests that pass) at :data:`BASELINE_PATH`, recorded at
build time. A repository whose tests do not all pass offline fails its build (see
``image/baseline.py``).
"""

from __future__ import annotations

import io
import json
import tarfile
import threading
from pathlib import Path

import docker
import docker.errors
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worldtrace.sandboxes.docker import LABEL, DockerSandbox
from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.errors import SandboxError
from worldtrace.sandboxes.images import DRIVER_RUNTIME, ImageDefinition
from worldtrace.schemas.errors import ConfigError

IMAGE_FOLDER = Path(__file__).parent / "image"
REPOS_FOLDER = IMAGE_FOLDER / "repos"
REPOSITORY_PATH = "/home/user/repo"
"""Where the repository is in every swe image (owned by ``user``, uid 1000)."""
BASELINE_PATH = "/opt/worldtrace/baseline.json"
RUN_TESTS = ["python3", "/opt/worldtrace/run_tests.py"]
"""The command that runs tests in a swe sandbox (add ``--json`` and selectors)."""
REPO_LABEL = "worldtrace.swe.repo"
VERSION_LABEL = "worldtrace.swe.version"
BASELINE_LABEL = "worldtrace.swe.baseline"
COMMIT_IDENTITY = {
    "name": "worldtrace",
    "email": "worldtrace@sandbox.invalid",
    "date": "2000-01-01T00:00:00+00:00",
}
"""Author and committer of every commit in a swe sandbox (git config and environment of the
image), so that commit ids and ``git log`` are the same in every sandbox."""


class Deselection(BaseModel):
    """A test left out of every run of the repository's suite, and why."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(
        description="pytest node id, or a prefix of ids (pytest's --deselect leaves out every "
        "test whose id starts with it: all parameters of a test, say)"
    )
    reason: str = Field(min_length=1)


class Repo(BaseModel):
    """One repository of the domain, as its ``repo.json`` describes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", description="the PyPI project name")
    version: str
    shape: str = Field(description="what kind of project it is, for people choosing one")
    sdist: str = Field(description="file name of the source distribution on PyPI")
    sdist_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    commit: str = Field(
        pattern=r"^[0-9a-f]{40}$", description="id of the repository's one commit (checked)"
    )
    source_root: str = Field(description="folder of the importable packages: '.' or 'src'")
    test_paths: tuple[str, ...] = Field(min_length=1, description="what pytest runs by default")
    pytest_args: tuple[str, ...] = ()
    deselect: tuple[Deselection, ...] = ()

    @property
    def image_name(self) -> str:
        """Name of the repository's image definition (tag ``worldtrace/<image_name>:latest``)."""
        return f"swe-{self.name}"

    @property
    def image(self) -> str:
        """Tag of the repository's image."""
        return f"worldtrace/{self.image_name}:latest"


def load_repo(folder: Path) -> Repo:
    """Read the ``repo.json`` in ``folder``; the folder must be named after the repository."""
    path = Path(folder) / "repo.json"
    try:
        repo = Repo.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as error:
        raise ConfigError(f"{path}: not a valid repository description: {error}") from None
    if repo.name != path.parent.name:
        raise ConfigError(f"{path}: name {repo.name!r} differs from its folder's name")
    if not (path.parent / "requirements.txt").is_file():
        raise ConfigError(f"{path.parent} holds no requirements.txt")
    return repo


def load_repos(folder: Path = REPOS_FOLDER) -> dict[str, Repo]:
    """Read every repository folder under ``folder``, by name."""
    repos = [load_repo(path) for path in sorted(folder.iterdir()) if path.is_dir()]
    return {repo.name: repo for repo in repos}


REPOS: dict[str, Repo] = load_repos()
"""Every repository of the domain, by name."""


def get_repo(name: str) -> Repo:
    """Return the repository called ``name``, or raise a ConfigError listing the known ones."""
    try:
        return REPOS[name]
    except KeyError:
        raise ConfigError(f"unknown swe repository {name!r}; known: {', '.join(REPOS)}") from None


def image_definition(repo: Repo | str, folder: Path = IMAGE_FOLDER) -> ImageDefinition:
    """The image definition of ``repo``: the shared folder built with its name and version."""
    if isinstance(repo, str):
        repo = get_repo(repo)
    return ImageDefinition(
        repo.image_name,
        folder,
        build_args=(("REPO", repo.name), ("VERSION", repo.version)),
        shared_files=(DRIVER_RUNTIME,),
    )


IMAGES: tuple[ImageDefinition, ...] = tuple(image_definition(repo) for repo in REPOS.values())
"""The image of every repository, for the domain's requirements."""


class Baseline(BaseModel):
    """The tests of a repository that pass (and are skipped) in its image, recorded at build."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    repo: str
    version: str
    passed: tuple[str, ...]
    skipped: tuple[str, ...]
    duration_s: float


_baselines: dict[str, Baseline] = {}
_baselines_lock = threading.Lock()


def read_baseline(
    source: DockerSandbox | str, client: docker.DockerClient | None = None
) -> Baseline:
    """Return the baseline of a running sandbox or of an image (a tag or id), kept per image.

    An image's baseline never changes, so it is read once per image id; from an image, through
    a created (never started) container, which runs nothing.
    """
    if isinstance(source, DockerSandbox):
        image_id = source.image_id
        with _baselines_lock:
            if image_id in _baselines:
                return _baselines[image_id]
        data = source.get_file(BASELINE_PATH)
    else:
        client = client or docker_client()
        try:
            image_id = client.images.get(source).id
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"image {source!r} does not exist; build it with `worldtrace sandboxes build`"
            ) from None
        with _baselines_lock:
            if image_id in _baselines:
                return _baselines[image_id]
        data = _read_from_image(client, image_id, BASELINE_PATH)
    try:
        baseline = Baseline.model_validate(json.loads(data))
    except (ValueError, ValidationError) as error:
        raise SandboxError(
            f"{BASELINE_PATH} of image {image_id[:19]} is invalid: {error}"
        ) from None
    with _baselines_lock:
        _baselines[image_id] = baseline
    return baseline


def _read_from_image(client: docker.DockerClient, image_id: str, path: str) -> bytes:
    holder = client.containers.create(image_id, ["true"], network_mode="none", labels={LABEL: "1"})
    try:
        chunks, _ = holder.get_archive(path)
    except docker.errors.NotFound:
        raise SandboxError(f"image {image_id[:19]} holds no {path}: not a swe image") from None
    finally:
        holder.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as archive:
        member = archive.extractfile(archive.getmembers()[0])
        if member is None:
            raise SandboxError(f"{path} in image {image_id[:19]} is not a file")
        return member.read()
