"""Sandbox images: a debootstrap base image and the Dockerfiles built on top of it.

Nothing is pulled from a container registry (there is none we can reach). The base image is a
``debootstrap --variant=minbase`` root filesystem imported as :data:`BASE_IMAGE`; every other
image is an :class:`ImageDefinition`: a folder (kept in the package of the domain that uses
it) holding a Dockerfile that starts with ``ARG BASE`` / ``FROM ${BASE}`` plus the files it
copies.

Builds are idempotent. Each image carries the label ``worldtrace.definition``: a hash of its
folder and of the base image id. An image whose label matches the current hash is left alone,
so ``make setup`` costs a fraction of a second once everything is built, and editing a file
in a definition (or rebuilding the base) is enough to get the image rebuilt.

``worldtrace sandboxes build`` builds whatever the registered domains need that is missing or
stale (``make setup`` builds only the base and clock images unless asked for more); otherwise a
domain's images are built the first time a collection uses them (:func:`building_on_first_use`),
one line per image on the screen and the build output in a log file.
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

import docker
import docker.errors
import docker.utils
from docker.models.images import Image

from worldtrace.sandboxes.engine import docker_client
from worldtrace.sandboxes.errors import SandboxError

BASE_IMAGE = "worldtrace/base:bookworm"
BASE_SUITE = "bookworm"
DEFINITION_LABEL = "worldtrace.definition"
IMAGE_LABEL = "worldtrace.image"
BASE_VERSION = "2"
"""What the base image holds; a base of another version is built again (and so is every
image on it). 2: the machine's certificate bundle, for pip behind an intercepting proxy."""
BASE_VERSION_LABEL = "worldtrace.base-version"
HOST_CA_PATH = "/usr/local/share/worldtrace/host-ca.crt"
"""Where the base image keeps the machine's certificate bundle (``PIP_CERT`` points at it)."""

# Files that never belong to a definition: byte-compiled leftovers of importing a helper
# would otherwise change the hash and trigger a pointless rebuild.
_IGNORED_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_IGNORED_SUFFIXES = {".pyc", ".pyo", ".swp"}

# A build step can be silent for a long time (apt-get, pip); the client's default timeout of
# 120 s would abort such a build in the middle.
_BUILD_TIMEOUT_S = 3600
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_STEP = re.compile(r"^Step \d+/\d+ : ")

Progress = Callable[[str], None]
Status = Literal["missing", "stale", "current"]


@dataclass(frozen=True)
class ImageDefinition:
    """A sandbox image: a folder holding its Dockerfile and the files the Dockerfile copies.

    Domains keep their definitions in their own package and declare them in their
    requirements; the image is tagged ``worldtrace/<name>:latest``. ``build_args`` are the
    Dockerfile's ``ARG`` values (``BASE`` is always ours): one folder built with other
    arguments is another image, with its own name and hash. ``shared_files`` are files kept
    outside the folder (in the sandboxes layer: :data:`DRIVER_RUNTIME`) that the build context
    holds beside the folder's own, under their own names, for the Dockerfile to ``COPY``.
    """

    name: str
    folder: Path
    build_args: tuple[tuple[str, str], ...] = ()
    shared_files: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        keys = [key for key, _ in self.build_args]
        if "BASE" in keys:
            raise SandboxError(f"image {self.name}: BASE is set by the builder, not a build arg")
        if len(set(keys)) != len(keys):
            raise SandboxError(f"image {self.name}: a build arg is given twice: {keys}")
        names = [Path(path).name for path in self.shared_files]
        if len(set(names)) != len(names):
            raise SandboxError(f"image {self.name}: two shared files have one name: {names}")

    @property
    def tag(self) -> str:
        """The tag of the image built from this definition."""
        return f"worldtrace/{self.name}:latest"

    @classmethod
    def in_folder(cls, folder: Path) -> ImageDefinition:
        """The definition in ``folder``, named after it; the folder must hold a Dockerfile."""
        folder = Path(folder)
        if not (folder / "Dockerfile").is_file():
            raise SandboxError(f"{folder} holds no Dockerfile: not an image definition")
        return cls(folder.name, folder)


CLOCK_DEFINITION = ImageDefinition("clock", Path(__file__).parent / "clock_image")
"""The per-episode clock's library, built for every sandbox on every engine (see clock.py)."""
DRIVER_RUNTIME = Path(__file__).parent / "driver_runtime.py"
"""The runtime every in-sandbox driver imports (driver_runtime.py): a definition whose driver
needs it lists it in ``shared_files`` and its Dockerfile copies ``driver_runtime.py``."""


def _definition_files(folder: Path) -> list[Path]:
    files = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        if any(part in _IGNORED_DIRS for part in relative.parts[:-1]):
            continue
        if path.is_file() and path.suffix not in _IGNORED_SUFFIXES:
            files.append(path)
    # Sort on the POSIX relative path so the hash does not depend on directory listing order.
    return sorted(files, key=lambda p: p.relative_to(folder).as_posix())


def _shared_files(definition: ImageDefinition) -> list[tuple[str, Path]]:
    """``(name in the build context, path)`` of the definition's shared files, checked.

    A shared file must exist and must not take the place of a file of the folder.
    """
    shared = []
    for path in definition.shared_files:
        path = Path(path)
        if not path.is_file():
            raise SandboxError(f"image {definition.name}: shared file {path} does not exist")
        if (definition.folder / path.name).exists():
            raise SandboxError(
                f"image {definition.name}: shared file {path.name} would replace "
                f"{definition.folder / path.name} in the build context"
            )
        shared.append((path.name, path))
    return sorted(shared)


def _hash_file(digest: hashlib._Hash, name: str, path: Path) -> None:
    data = path.read_bytes()
    executable = b"x" if os.access(path, os.X_OK) else b"-"
    # Length-prefixed fields: no way for one file's bytes to imitate the next path.
    relative = name.encode()
    digest.update(b"%d:%s\0%s%d:" % (len(relative), relative, executable, len(data)))
    digest.update(data)


def _base_image_id(client: docker.DockerClient) -> str | None:
    """The id of the base image of the current :data:`BASE_VERSION`, None if there is none."""
    try:
        image = client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        return None
    return image.id if (image.labels or {}).get(BASE_VERSION_LABEL) == BASE_VERSION else None


def host_ca_bundle() -> Path | None:
    """The certificate bundle this machine's pip trusts, if there is one to give the images.

    Where HTTPS goes through an intercepting proxy, only the machine's own bundle (named by
    ``PIP_CERT`` and friends, or the system's) verifies the registry; an image's pip, which
    trusts its own bundle, would refuse it.
    """
    named = [os.environ.get(name) for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")]
    for candidate in [*named, "/etc/ssl/certs/ca-certificates.crt"]:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def definition_hash(
    definition: ImageDefinition,
    client: docker.DockerClient | None = None,
    base_id: str | None = None,
) -> str:
    """Return the sha256 of a definition: its files (paths, contents), build args and base id.

    The files are the folder's and the shared ones. ``base_id`` defaults to the id of
    :data:`BASE_IMAGE` in the engine behind ``client`` (an empty string if the base image is
    missing, which makes any existing image stale). The executable bit is hashed too, because
    ``COPY`` keeps it and it changes the image.
    """
    folder = definition.folder
    if base_id is None:
        base_id = _base_image_id(client or docker_client()) or ""
    digest = hashlib.sha256()
    digest.update(b"worldtrace-definition-v1\0")
    for path in _definition_files(folder):
        _hash_file(digest, path.relative_to(folder).as_posix(), path)
    # Only definitions with shared files hash them (marked as such, so that a shared file never
    # hashes like a folder's file of its name), so every other image keeps its hash.
    for name, path in _shared_files(definition):
        digest.update(b"shared\0")
        _hash_file(digest, name, path)
    # Only definitions with build args hash them, so every other image keeps its hash. Sorted:
    # the order the arguments are given in does not change the image.
    for key, value in sorted(definition.build_args):
        digest.update(b"arg\0%d:%s%d:%s" % (len(key), key.encode(), len(value), value.encode()))
    digest.update(b"base\0" + base_id.encode())
    return digest.hexdigest()


def _get_image(client: docker.DockerClient, tag: str) -> Image | None:
    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def image_status(definition: ImageDefinition, client: docker.DockerClient | None = None) -> Status:
    """Say whether the image of definition ``name`` is ``missing``, ``stale`` or ``current``."""
    client = client or docker_client()
    image = _get_image(client, definition.tag)
    if image is None:
        return "missing"
    labels = image.labels or {}
    if labels.get(DEFINITION_LABEL) != definition_hash(definition, client):
        return "stale"
    return "current"


@contextlib.contextmanager
def _build_lock(name: str) -> Iterator[None]:
    """Serialize the builds of image ``name`` across processes (parallel workers, two `make`s).

    One lock per image (a dozen small files in /tmp), so that two images can build at once.
    Callers check for a current image before taking it, so reuse never waits on a build.
    """
    path = os.path.join(tempfile.gettempdir(), f"worldtrace-image-build-{name}.lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)
    except PermissionError:  # another user's file in sticky /tmp (fs.protected_regular)
        fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


# --- the base image -----------------------------------------------------------------------


def _deb822_stanzas(text: str) -> Iterator[dict[str, str]]:
    """Yield the fields of each stanza of a deb822 ``.sources`` file (continuations joined)."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        if not line.strip():
            if fields:
                yield fields
            fields, key = {}, None
        elif line[0] in " \t" and key is not None:
            fields[key] += " " + line.strip()
        elif ":" in line:
            key, value = line.split(":", 1)
            key = key.strip().lower()
            fields[key] = value.strip()
    if fields:
        yield fields


def _apt_sources(root: Path = Path("/etc/apt")) -> list[tuple[str, list[str]]]:
    """Return (URI, suites) for every enabled ``deb`` source the machine's apt uses."""
    sources: list[tuple[str, list[str]]] = []
    for path in sorted((root / "sources.list.d").glob("*.sources")):
        for stanza in _deb822_stanzas(path.read_text(errors="replace")):
            if stanza.get("enabled", "yes").lower() == "no":
                continue
            if "deb" not in stanza.get("types", "").split():
                continue
            suites = stanza.get("suites", "").split()
            sources.extend((uri, suites) for uri in stanza.get("uris", "").split())
    one_line = [root / "sources.list", *sorted((root / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            words = line.split("#", 1)[0].split()
            if not words or words[0] != "deb":
                continue
            words = words[1:]
            if words and words[0].startswith("["):  # options: [arch=amd64 signed-by=...]
                while words and not words[0].endswith("]"):
                    words = words[1:]
                words = words[1:]
            if len(words) >= 2:
                sources.append((words[0], [words[1]]))
    return sources


def debian_mirror(suite: str = BASE_SUITE) -> str:
    """Return the Debian mirror URL this machine's apt is configured with.

    The mirror is read at run time (never written into the project) so that the base image
    comes from whatever mirror or proxy the machine is allowed to reach. A source listing
    ``suite`` itself wins over ``-security``/``-updates`` sources, whose layout differs.
    """
    sources = _apt_sources()
    for uri, suites in sources:
        if suite in suites:
            return uri
    for uri, suites in sources:
        if not any(re.search(r"-(security|updates|backports)$", s) for s in suites):
            return uri
    raise SandboxError(
        "cannot find a Debian mirror in /etc/apt/sources.list.d/*.sources or "
        "/etc/apt/sources.list; add one (e.g. a `deb <mirror-url> bookworm main` line)"
    )


def _find_debootstrap() -> str | None:
    # Root's PATH has /usr/sbin, but `sudo -E` or a venv's PATH may not.
    return shutil.which("debootstrap") or shutil.which("debootstrap", path="/usr/sbin:/sbin")


def _unmount_below(root: Path) -> None:
    """Unmount anything a failed debootstrap left mounted (proc, sys) before deleting ``root``."""
    prefix = str(root.resolve()) + "/"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return
    points = [line.split()[1] for line in mounts if len(line.split()) > 1]
    # Deepest first, so nested mounts come off before their parents.
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


def _tar_chunks(root: Path) -> Iterator[bytes]:
    """Stream the root filesystem as a tar archive (chunked upload, nothing on disk)."""
    process = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(root), "-c", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    while chunk := process.stdout.read(1 << 20):
        yield chunk
    _, stderr = process.communicate()
    if process.returncode != 0:
        raise SandboxError(f"tar of {root} failed: {stderr.decode(errors='replace')[-2000:]}")


def _with_host_ca(root: Path) -> list[str]:
    """Put the machine's certificate bundle into the root file system for pip to use.

    Returns the image config lines that point pip at it (none when the machine has none).
    """
    bundle = host_ca_bundle()
    if bundle is None:
        return []
    target = root / HOST_CA_PATH.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundle, target)
    return [f"ENV PIP_CERT={HOST_CA_PATH}"]


def ensure_base_image(
    client: docker.DockerClient | None = None, progress: Progress | None = None
) -> str:
    """Return the id of :data:`BASE_IMAGE`, building it with debootstrap if it is absent.

    The build runs ``debootstrap --variant=minbase bookworm`` against the machine's own Debian
    mirror (about 30 s), imports the root filesystem with ``docker import`` semantics and
    deletes the temporary directory. Needs root and the ``debootstrap`` package.
    """
    client = client or docker_client()
    say = progress or (lambda line: None)
    existing = _base_image_id(client)
    if existing:
        return existing
    with _build_lock("base"):
        # Another process may have built it while we waited for the lock.
        existing = _base_image_id(client)
        if existing:
            return existing
        debootstrap = _find_debootstrap()
        if debootstrap is None:
            raise SandboxError(
                "debootstrap is not installed; install it with `apt-get install debootstrap` "
                "(as root) or run `make setup`"
            )
        if os.geteuid() != 0:
            raise SandboxError(
                f"building {BASE_IMAGE} with debootstrap needs root; run `make setup` as root"
            )
        mirror = debian_mirror()
        root = Path(tempfile.mkdtemp(prefix="worldtrace-base-"))
        try:
            say(f"debootstrap {BASE_SUITE} from {mirror} into {root}")
            started = time.monotonic()
            command = [debootstrap, "--variant=minbase", BASE_SUITE, str(root), mirror]
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode != 0:
                tail = "\n".join((result.stdout + result.stderr).splitlines()[-20:])
                log = root / "debootstrap" / "debootstrap.log"
                if log.is_file():
                    tail += "\n" + "\n".join(log.read_text(errors="replace").splitlines()[-20:])
                raise SandboxError(
                    f"debootstrap failed (exit {result.returncode}); check that the mirror "
                    f"{mirror} is reachable and that you are root, then rerun `make setup`:\n"
                    f"{tail}"
                )
            say(f"debootstrap done in {time.monotonic() - started:.0f}s; importing {BASE_IMAGE}")
            repository, tag = BASE_IMAGE.rsplit(":", 1)
            try:
                client.api.import_image(
                    src=_tar_chunks(root),
                    repository=repository,
                    tag=tag,
                    # An imported image has no config: give it what a Dockerfile expects.
                    changes=[
                        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        f"LABEL {IMAGE_LABEL}=base",
                        f"LABEL {BASE_VERSION_LABEL}={BASE_VERSION}",
                        'CMD ["bash"]',
                        *_with_host_ca(root),
                    ],
                    stream_src=True,
                )
            except docker.errors.APIError as error:
                raise SandboxError(f"docker import of {BASE_IMAGE} failed: {error}") from None
        finally:
            _unmount_below(root)
            shutil.rmtree(root, ignore_errors=True)
        image_id = _base_image_id(client)
        if image_id is None:
            raise SandboxError(f"docker import finished but {BASE_IMAGE} does not exist")
        say(f"{BASE_IMAGE} imported: {image_id}")
        return image_id


# --- images from definitions --------------------------------------------------------------


@contextlib.contextmanager
def build_context(definition: ImageDefinition) -> Iterator[IO[bytes]]:
    """The build context of ``definition``: an uncompressed tar in a temporary file, at 0.

    The folder as ``docker build`` would send it (its ``.dockerignore`` kept), then the shared
    files at the top, under their own names. The file is deleted on leaving.
    """
    folder = str(definition.folder)
    exclude = None
    ignore_file = os.path.join(folder, ".dockerignore")
    if os.path.exists(ignore_file):
        with open(ignore_file) as ignore:
            lines = [line.strip() for line in ignore.read().splitlines()]
        exclude = [line for line in lines if line and not line.startswith("#")]
    with tempfile.TemporaryFile() as context:
        docker.utils.tar(folder, exclude=exclude, fileobj=context)
        shared = _shared_files(definition)
        if shared:
            with tarfile.open(fileobj=context, mode="a") as archive:
                for name, path in shared:
                    # Mode (the executable bit) as the folder's files keep theirs.
                    info = archive.gettarinfo(str(path), arcname=name)
                    with path.open("rb") as data:
                        archive.addfile(info, data)
        context.seek(0)
        yield context


def _build(
    definition: ImageDefinition, client: docker.DockerClient, digest: str, progress: Progress | None
) -> str:
    """Build ``definition`` labelled with its ``digest``; return the new image id."""
    with build_context(definition) as context:
        return _build_from(context, definition, client, digest, progress)


def _build_from(
    context: IO[bytes],
    definition: ImageDefinition,
    client: docker.DockerClient,
    digest: str,
    progress: Progress | None,
) -> str:
    """Build ``definition`` from the tar ``context`` (:func:`build_context`)."""
    tail: deque[str] = deque(maxlen=30)
    # What the failing step wrote to stderr: the engine may deliver it before the step's
    # stdout, so the last lines of the log alone can miss the reason a build script gave.
    step_errors: deque[str] = deque(maxlen=20)
    in_stderr = False
    image_id = None
    # The low-level API streams the log as the build runs; images.build() only returns it
    # at the end, which would leave a long apt-get step silent. The context is ours (the
    # folder plus the shared files), not the folder alone.
    try:
        stream = client.api.build(
            fileobj=context,
            custom_context=True,
            tag=definition.tag,
            network_mode="host",  # --bridge=none: host networking is the only way to apt/pip
            labels={DEFINITION_LABEL: digest, IMAGE_LABEL: definition.name},
            buildargs={**dict(definition.build_args), "BASE": BASE_IMAGE},
            rm=True,
            forcerm=True,  # remove intermediate containers of failed steps too
            decode=True,
            timeout=_BUILD_TIMEOUT_S,
        )
        for chunk in stream:
            if "error" in chunk or "errorDetail" in chunk:
                message = chunk.get("error") or chunk["errorDetail"].get("message", "")
                said = "".join(f"{line}\n" for line in step_errors)
                raise SandboxError(
                    f"building {definition.tag} failed: {message.strip()}\n"
                    + (f"the step's error output:\n{said}" if said else "")
                    + "last build output:\n"
                    + "\n".join(tail)
                )
            if "stream" in chunk:
                for raw in chunk["stream"].splitlines():
                    # The engine colours a step's stderr (ESC[91m ... ESC[0m).
                    line = _COLOUR.sub("", raw)
                    in_stderr = in_stderr or "\x1b[91m" in raw
                    if line.strip() and _STEP.match(line):
                        step_errors.clear()
                    elif line.strip() and in_stderr:
                        step_errors.append(line)
                    if "\x1b[0m" in raw:
                        in_stderr = False
                    if not line.strip():
                        continue
                    tail.append(line)
                    if progress:
                        progress(line)
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
    except docker.errors.APIError as error:
        raise SandboxError(f"building {definition.tag} failed: {error}") from None
    if image_id is None:
        image = _get_image(client, definition.tag)
        if image is None:
            raise SandboxError(
                f"build of {definition.tag} produced no image; last output:\n" + "\n".join(tail)
            )
        image_id = image.id
    return image_id


def _remove_if_dangling(client: docker.DockerClient, image_id: str) -> None:
    """Delete a replaced image unless something still uses it (a container, a child image)."""
    try:
        image = client.images.get(image_id)
        if not image.tags:
            client.images.remove(image_id, noprune=False)
    except docker.errors.APIError:
        pass  # in use (409) or already gone: leaving it is harmless, `docker image prune` finds it


def ensure_image(
    definition: ImageDefinition,
    client: docker.DockerClient | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> str:
    """Return the id of ``definition``'s image, building it if missing or stale.

    An existing image whose ``worldtrace.definition`` label equals :func:`definition_hash` is
    reused as is; ``force`` rebuilds anyway. The base image is ensured first because the
    build would otherwise try to pull it from a registry. Build output goes to ``progress``;
    a failed build raises :class:`SandboxError` with the last lines of its log.
    """
    client = client or docker_client()
    base_id = ensure_base_image(client, progress)
    tag = definition.tag
    digest = definition_hash(definition, base_id=base_id)

    def reusable() -> Image | None:
        image = _get_image(client, tag)
        if image is None or force:
            return None
        return image if (image.labels or {}).get(DEFINITION_LABEL) == digest else None

    if (image := reusable()) is not None:
        return image.id
    with _build_lock(definition.name):
        # Checked again under the lock: another process may just have built it.
        if (image := reusable()) is not None:
            return image.id
        current = _get_image(client, tag)
        if progress:
            progress(f"building {tag} ({'rebuild' if current else 'new'})")
        image_id = _build(definition, client, digest, progress)
        if current is not None and current.id != image_id:
            _remove_if_dangling(client, current.id)
        return image_id


def build_images(
    definitions: list[ImageDefinition],
    client: docker.DockerClient | None = None,
    force: bool = False,
    say: Progress | None = None,
    log: Progress | None = None,
) -> dict[str, str]:
    """Ensure the base image, the clock image and every definition's image.

    Returns ``{name: image id}`` (the base image under ``"base"``). ``say`` gets one line per
    image (present, or built and how long it took); ``log`` gets the build output. ``force``
    rebuilds the definitions (not the base, which only changes when it is deleted: debootstrap
    takes its packages from the mirror, so a rebuild would not be reproducible anyway).
    """
    client = client or docker_client()
    tell = say or (lambda line: None)
    had_base = _base_image_id(client) is not None
    if not had_base:
        tell(f"base image {BASE_IMAGE}: missing or outdated, building (about a minute)")
    built = {"base": ensure_base_image(client, log)}
    tell(f"base image {BASE_IMAGE}: {'present' if had_base else 'built'} {built['base'][7:19]}")
    for definition in [CLOCK_DEFINITION, *(d for d in definitions if d != CLOCK_DEFINITION)]:
        status = image_status(definition, client)
        if status == "current" and not force:
            built[definition.name] = ensure_image(definition, client, progress=log)
            tell(f"image {definition.tag}: current {built[definition.name][7:19]}")
            continue
        tell(f"image {definition.tag}: {status}, building")
        started = time.monotonic()
        built[definition.name] = ensure_image(definition, client, force=force, progress=log)
        took = time.monotonic() - started
        tell(f"image {definition.tag}: built {built[definition.name][7:19]} in {took:.0f}s")
    return built


# --- built on first use -------------------------------------------------------------------

Write = Callable[[str], None]
"""Writes text as it is (no newline added): a progress line is finished when its build is."""


def _log_path(log_folder: Path, name: str) -> Path:
    """A new build log in ``log_folder``, named like the command logs so the newest sort last."""
    log_folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return log_folder / f"{stamp}-build-{name.replace('/', '-')}-{os.getpid()}.log"


def _build_logged(
    tag: str,
    reason: str,
    build: Callable[[Progress], str],
    log_folder: Path,
    write: Write,
    whole_line: bool = False,
) -> str:
    """Run ``build`` with its output in a log file, saying one line: what, and how long it took.

    The line is begun before the build and finished after it, or, with ``whole_line`` (builds
    running side by side), written whole once it is done. A failed build finishes the line
    with "failed" and re-raises with the log's path, so the error (which carries the tail of
    the build output) says where the whole output is.
    """
    path = _log_path(log_folder, tag.split(":")[0].removeprefix("worldtrace/"))
    begun = f"building image {tag} ({reason}) … "
    if whole_line:
        write = _prefixed(write, begun)
    else:
        write(begun)
    started = time.monotonic()
    with path.open("w", encoding="utf-8") as log:

        def to_log(line: str) -> None:
            log.write(line + "\n")
            log.flush()  # a long build can be followed with `tail -f`

        try:
            image_id = build(to_log)
        except BaseException as error:  # Ctrl-C too: the line is finished, never left open
            to_log(f"FAILED: {type(error).__name__}: {error}")
            write(f"failed after {time.monotonic() - started:.0f} s (log: {path})\n")
            if isinstance(error, SandboxError):
                raise SandboxError(f"{error}\nthe whole build log: {path}") from None
            raise
    write(f"done in {time.monotonic() - started:.0f} s\n")
    return image_id


def _prefixed(write: Write, prefix: str) -> Write:
    """``write`` with ``prefix`` before the text."""
    return lambda text: write(prefix + text)


SIDE_BY_SIDE_BUILDS = 2
"""How many images build at once: a build waits on the mirror as much as on the CPU (the clock
and terminal images of a first `make demo`: 58 s and 79 s one after the other)."""


def _build_side_by_side(builds: list[tuple[str, Callable[[], str]]]) -> dict[str, str]:
    """Run each ``(name, build)``, :data:`SIDE_BY_SIDE_BUILDS` at a time; ``{name: image id}``.

    Daemon threads: Ctrl-C ends the command at once instead of waiting for the builds (the
    engine finishes or drops them). The first failure is raised once every build has ended.
    """
    queue = deque(builds)
    results: dict[str, str] = {}
    errors: list[BaseException] = []

    def work() -> None:
        while True:
            try:
                name, build = queue.popleft()
            except IndexError:
                return
            try:
                results[name] = build()
            except BaseException as error:  # raised again in the caller, once all ended
                errors.append(error)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(SIDE_BY_SIDE_BUILDS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def ensure_images_logged(
    definitions: list[ImageDefinition],
    log_folder: Path,
    write: Write,
    client: docker.DockerClient | None = None,
    force: bool = False,
    report_current: bool = False,
) -> dict[str, str]:
    """Ensure the base image, the clock image and ``definitions``' images, quietly.

    Each image that is built gets one line ("building image worldtrace/x (missing) … done in
    12 s") and a log file in ``log_folder`` holding the whole build output; with
    ``report_current`` an image already current gets one line too. Returns ``{name: image id}``
    (the base image under ``"base"``). ``force`` rebuilds the definitions (not the base).
    """
    client = client or docker_client()
    built: dict[str, str] = {}
    base_id = _base_image_id(client)
    if base_id is None:
        built["base"] = _build_logged(
            BASE_IMAGE,
            "debootstrap, about a minute",
            lambda log: ensure_base_image(client, log),
            log_folder,
            write,
        )
    else:
        built["base"] = base_id
        if report_current:
            write(f"image {BASE_IMAGE}: current {base_id[7:19]}\n")
    # Once each: two domains may share an image (the mcp domain uses a web site's).
    to_build: list[tuple[ImageDefinition, str]] = []
    for definition in dict.fromkeys([CLOCK_DEFINITION, *definitions]):
        status = image_status(definition, client)
        if status == "current" and not force:
            built[definition.name] = ensure_image(definition, client)
            if report_current:
                write(f"image {definition.tag}: current {built[definition.name][7:19]}\n")
        else:
            to_build.append((definition, "rebuild" if status == "current" else status))
    side_by_side = len(to_build) > 1
    if side_by_side:
        write(f"building {len(to_build)} images, {SIDE_BY_SIDE_BUILDS} at a time …\n")

    def logged(definition: ImageDefinition, reason: str) -> Callable[[], str]:
        def build(log: Progress) -> str:
            return ensure_image(definition, client, force=force, progress=log)

        return lambda: _build_logged(
            definition.tag, reason, build, log_folder, write, whole_line=side_by_side
        )

    builds = [(definition.name, logged(definition, reason)) for definition, reason in to_build]
    if side_by_side:
        built |= _build_side_by_side(builds)
    else:
        built |= {name: build() for name, build in builds}
    return built


@dataclass(frozen=True)
class _FirstUse:
    definitions: dict[str, ImageDefinition]
    log_folder: Path
    write: Write


_first_use: contextvars.ContextVar[_FirstUse | None] = contextvars.ContextVar(
    "worldtrace_build_on_first_use", default=None
)


@contextlib.contextmanager
def building_on_first_use(
    definitions: list[ImageDefinition] | tuple[ImageDefinition, ...],
    log_folder: Path,
    write: Write,
) -> Iterator[None]:
    """While inside, asking for one of ``definitions``' images builds it if missing or stale.

    A domain's preflight asks (``sandboxes.docker.require_image``) for exactly the images its
    configuration uses, so wrapping the preflight of ``worldtrace collect`` in this builds
    what that collection needs and nothing else: a user's own image (no definition of ours)
    is only looked up, as before.
    """
    token = _first_use.set(_FirstUse({d.tag: d for d in definitions}, log_folder, write))
    try:
        yield
    finally:
        _first_use.reset(token)


def build_if_used_first(tag: str, client: docker.DockerClient) -> None:
    """Build ``tag`` (and the base and clock images) if a first-use build is on and it is ours.

    Does nothing outside :func:`building_on_first_use`, or for a tag no definition names.
    """
    active = _first_use.get()
    if active is None or tag not in active.definitions:
        return
    ensure_images_logged([active.definitions[tag]], active.log_folder, active.write, client)
