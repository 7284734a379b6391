"""Image build step of the swe images: the repository at /home/user/repo, one git commit.

Run as root during ``docker build`` with ``/opt/worldtrace/repo.json`` and the venv in place.
It downloads the sdist named in repo.json with pip (by name and version; pip checks the sha256
pinned there, and so do we), unpacks it into /home/user/repo owned by ``user``, makes it a git
repository with one commit whose author, committer and date are fixed (so its id depends on the
sdist alone, and must be the one repo.json pins), and installs it into the venv in editable
mode, so that an edit of the working tree takes effect without reinstalling. The working tree
must be clean afterwards.
Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_JSON = Path("/opt/worldtrace/repo.json")
REPOSITORY = Path("/home/user/repo")
VENV_PIP = "/opt/swe-venv/bin/pip"
USER = "user"
# What git must not show as untracked: byte code from running the code, pytest's cache.
IGNORED = "__pycache__/\n*.py[cod]\n.pytest_cache/\n"


def fail(message: str) -> None:
    """Stop the build with ``message``."""
    print(f"prepare_repo: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def as_user(command: list[str]) -> str:
    """Run ``command`` in the repository as ``user`` and return its stdout; fail on error."""
    result = subprocess.run(
        command,
        cwd=REPOSITORY,
        user=USER,
        group=USER,
        extra_groups=[],
        env={**os.environ, "HOME": f"/home/{USER}"},
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        fail(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout


def download_sdist(repo: dict, folder: Path) -> Path:
    """Download the repo's sdist into ``folder`` with pip, hash-checked; return its path."""
    requirement = folder / "sdist.txt"
    requirement.write_text(
        f"{repo['name']}=={repo['version']} --hash=sha256:{repo['sdist_sha256']}\n"
    )
    # --no-build-isolation: pip reads the sdist's metadata with the build backend pinned in
    # requirements.txt and already in the venv, instead of fetching an unpinned one.
    command = [VENV_PIP, "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation"]
    command += ["--disable-pip-version-check", "--no-cache-dir", "--require-hashes"]
    command += ["-d", str(folder), "-r", str(requirement)]
    subprocess.run(command, check=True)
    found = [path for path in folder.iterdir() if path.name == repo["sdist"]]
    if not found:
        fail(f"pip downloaded {sorted(p.name for p in folder.iterdir())}, not {repo['sdist']}")
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    if digest != repo["sdist_sha256"]:
        fail(f"{repo['sdist']} has sha256 {digest}, repo.json pins {repo['sdist_sha256']}")
    return found[0]


def unpack(sdist: Path) -> None:
    """Unpack the sdist's one top-level folder as the repository, owned by ``user``."""
    with tempfile.TemporaryDirectory() as scratch:
        # tar, not tarfile: bookworm's Python 3.11.2 predates tarfile's extraction filters.
        subprocess.run(["tar", "-xzf", str(sdist), "-C", scratch, "--no-same-owner"], check=True)
        tops = os.listdir(scratch)
        if len(tops) != 1:
            fail(f"{sdist.name} holds {tops}, not one top-level folder")
        os.rename(os.path.join(scratch, tops[0]), REPOSITORY)
    subprocess.run(["chown", "-R", f"{USER}:{USER}", str(REPOSITORY)], check=True)


def commit() -> None:
    """Make the working tree a git repository with one commit of everything in it."""
    as_user(["git", "init", "--quiet", "--initial-branch=main"])
    (REPOSITORY / ".git" / "info" / "exclude").write_text(IGNORED)
    # --force: an ignore file shipped in the sdist must not keep its own files out.
    as_user(["git", "add", "--all", "--force", "."])
    as_user(["git", "commit", "--quiet", "--no-verify", "-m", "Initial commit"])


def main() -> None:
    """Prepare the repository named in repo.json; exit non-zero with a message on any problem."""
    repo = json.loads(REPO_JSON.read_text(encoding="utf-8"))
    expected = os.environ.get("REPO_VERSION")
    if expected and expected != repo["version"]:
        fail(f"build arg VERSION={expected} but repo.json says {repo['version']}")
    if REPOSITORY.exists():
        fail(f"{REPOSITORY} exists already")
    with tempfile.TemporaryDirectory() as folder:
        sdist = download_sdist(repo, Path(folder))
        unpack(sdist)
    commit()
    # --use-pep517: an editable install through the build backend; the legacy `setup.py
    # develop` would write egg-info into the working tree, as root.
    install = [
        VENV_PIP,
        "install",
        "--no-deps",
        "--no-build-isolation",
        "--use-pep517",
        "--no-index",
    ]
    install += ["--disable-pip-version-check", "--no-cache-dir", "-e", str(REPOSITORY)]
    # No byte code: a root-owned __pycache__ in the working tree (setup.py imports its
    # neighbours) could not be removed by `user`.
    subprocess.run(install, check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    status = as_user(["git", "status", "--porcelain", "--untracked-files=all", "--ignored"])
    if status:
        fail(f"installing the repository changed its working tree:\n{status}")
    log = as_user(["git", "log", "--format=%H %an <%ae> %ad", "--date=iso-strict"])
    print(f"prepare_repo: {repo['name']} {repo['version']} at {REPOSITORY}: {log.strip()}")
    # The commit id depends on every file, mode, the identity and the date: the same id means
    # the same repository as when repo.json was written, so tasks made on it still apply.
    head = as_user(["git", "rev-parse", "HEAD"]).strip()
    if head != repo["commit"]:
        fail(f"the repository's commit is {head}, repo.json pins {repo['commit']}")


if __name__ == "__main__":
    main()
