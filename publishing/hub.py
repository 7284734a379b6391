"""Upload a published folder to a Hugging Face Hub dataset repository.

:func:`push_to_hub` creates the repository (and branch) if needed, refuses to mix schemas,
and skips the upload entirely when the remote already holds exactly these files — so
republishing the same corpus is a no-op. The upload itself is ``HfApi.upload_folder``, which
splits large folders into several commits and, re-run after an interruption, only sends what
is missing. Stale shards from an earlier publish (``data/`` and ``meta/`` files that are no
longer in the folder) are deleted in the same upload so the ``all`` config never mixes two
versions of a corpus.

The token comes from the ``token`` argument or, when ``None``, from where ``huggingface_hub``
looks (``HF_TOKEN``, then the stored login). It is never printed or logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from worldtrace.publishing.folder import MANIFEST, SCHEMA_FILE, file_sha256
from worldtrace.schemas.errors import InputError

REPO_TYPE = "dataset"
MANAGED_PREFIXES = ("data/", "meta/")

logger = logging.getLogger(__name__)


class SchemaMismatchError(InputError, RuntimeError):
    """The repository already holds a corpus with another schema (use ``force`` to overwrite)."""


@dataclass
class PushReport:
    """What :func:`push_to_hub` did."""

    repo_id: str
    revision: str
    noop: bool
    uploaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    commit: str | None = None


def git_blob_sha1(path: Path) -> str:
    """Return the git blob id of a file (what the Hub reports as a regular file's oid)."""
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _same_file(remote: RepoFile, local: Path) -> bool:
    if remote.size != local.stat().st_size:
        return False
    if remote.lfs is not None:
        return remote.lfs.sha256 == file_sha256(local)
    return remote.blob_id == git_blob_sha1(local)


def _local_files(folder: Path) -> dict[str, Path]:
    return {
        path.relative_to(folder).as_posix(): path
        for path in sorted(folder.rglob("*"))
        if path.is_file()
        and not any(part.startswith(".") for part in path.relative_to(folder).parts)
    }


def _remote_json(api: HfApi, repo_id: str, revision: str, path: str) -> dict[str, Any]:
    url = f"{api.endpoint}/{REPO_TYPE}s/{repo_id}/resolve/{revision}/{path}"
    response = get_session().get(
        url, headers=build_hf_headers(token=api.token), follow_redirects=True
    )
    hf_raise_for_status(response)
    return json.loads(response.content)


def _check_schema(
    api: HfApi,
    repo_id: str,
    revision: str,
    remote: dict[str, RepoFile],
    local_schema: dict[str, Any],
) -> None:
    """Raise :class:`SchemaMismatchError` if the remote corpus has another schema."""
    if SCHEMA_FILE not in remote:
        foreign = sorted(p for p in remote if p.startswith("data/"))
        if foreign:
            raise SchemaMismatchError(
                f"{repo_id}@{revision} already holds data files ({foreign[0]} …) without a "
                f"{SCHEMA_FILE}: not a worldtrace corpus. Pass force=True to overwrite them."
            )
        return
    theirs = _remote_json(api, repo_id, revision, SCHEMA_FILE)
    ours = (local_schema.get("schema_version"), local_schema.get("arrow_schema_sha256"))
    their_arrow = str(theirs.get("arrow_schema_sha256"))[:12]
    if (theirs.get("schema_version"), theirs.get("arrow_schema_sha256")) != ours:
        raise SchemaMismatchError(
            f"{repo_id}@{revision} holds a corpus with schema version "
            f"{theirs.get('schema_version')!r} (arrow schema {their_arrow}), "
            f"this folder has schema version {ours[0]!r} (arrow schema {str(ours[1])[:12]}). "
            "Publish to another repository or revision, or pass force=True to replace it."
        )


def push_to_hub(
    folder: Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    force: bool = False,
    endpoint: str | None = None,
) -> PushReport:
    """Upload a folder written by ``publish_folder`` to the Hub dataset repo ``repo_id``.

    Creates the dataset repository (``private`` applies only on creation) and the branch
    ``revision`` if missing. Refuses with :class:`SchemaMismatchError` when the repository
    already holds a corpus of another schema, unless ``force``. Does nothing when every
    file is already there, byte for byte. ``endpoint`` overrides the Hub URL.
    """
    folder = Path(folder)
    schema_path, manifest_path = folder / SCHEMA_FILE, folder / MANIFEST
    if not schema_path.exists() or not manifest_path.exists():
        raise FileNotFoundError(
            f"{folder}: no {SCHEMA_FILE} or {MANIFEST}; write the folder with publish_folder first"
        )
    local_schema = json.loads(schema_path.read_text())
    api = HfApi(endpoint=endpoint, token=token)
    branch = revision or "main"

    api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True)
    if revision is not None and revision != "main":
        api.create_branch(repo_id, branch=revision, repo_type=REPO_TYPE, exist_ok=True)

    remote = {
        entry.path: entry
        for entry in api.list_repo_tree(
            repo_id, recursive=True, revision=branch, repo_type=REPO_TYPE
        )
        if isinstance(entry, RepoFile)
    }
    if not force:
        _check_schema(api, repo_id, branch, remote, local_schema)

    local = _local_files(folder)
    changed = [
        path
        for path, file in local.items()
        if path not in remote or not _same_file(remote[path], file)
    ]
    stale = sorted(
        path for path in remote if path.startswith(MANAGED_PREFIXES) and path not in local
    )
    if not changed and not stale:
        logger.info("%s@%s already holds this corpus: nothing to upload", repo_id, branch)
        return PushReport(repo_id=repo_id, revision=branch, noop=True)

    commit = api.upload_folder(
        repo_id=repo_id,
        folder_path=folder,
        repo_type=REPO_TYPE,
        revision=branch,
        commit_message="Publish worldtrace corpus",
        ignore_patterns=[".*", "*/.*"],
        delete_patterns=[f"{prefix}*" for prefix in MANAGED_PREFIXES],
    )
    return PushReport(
        repo_id=repo_id,
        revision=branch,
        noop=False,
        uploaded=changed,
        deleted=stale,
        commit=getattr(commit, "oid", None),
    )
