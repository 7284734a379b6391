"""A LOCAL STAND-IN for the Hugging Face Hub HTTP API — not the Hub, for tests only.

The Hub cannot be reached from the test machines, so upload tests run ``huggingface_hub``
against this small HTTP server on 127.0.0.1. It implements just what ``HfApi.create_repo``,
``create_branch``, ``list_repo_tree``/``list_repo_files``, ``repo_info``, ``upload_folder``
(``validate-yaml`` of the card, ``preupload``, NDJSON ``commit``) and a raw ``resolve``
download call, keeps repositories in memory, and records every request so tests can assert
what the "Hub" received.

Like the Hub, ``preupload`` answers "lfs" for paths the branch's ``.gitattributes`` marks
``filter=lfs`` (every ``*.parquet``) and for files of ``lfs_threshold`` bytes or more; other
files are committed inline (base64). LFS files go through the git LFS batch API with the
``basic`` transfer: ``POST {repo}.git/info/lfs/objects/batch``, a ``PUT`` of the bytes to a
presigned URL (no Hub token, like S3), a ``verify`` call, then an ``lfsFile`` commit entry; the
tree lists them with their ``lfs`` pointer info. The multipart transfer is not offered, and
Xet storage is not implemented: ``huggingface_hub`` uses Xet whenever ``hf_xet`` is installed,
so tests that upload LFS files must set ``huggingface_hub.constants.HF_HUB_DISABLE_XET``.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import secrets
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

# The Hub stores files from this size on through LFS, whatever their name.
LFS_THRESHOLD = 10 * 1024 * 1024


def git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def lfs_pointer(content: bytes) -> bytes:
    """The git LFS pointer file that git stores in place of ``content``."""
    oid = hashlib.sha256(content).hexdigest()
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(content)}\n"
    ).encode()


def lfs_patterns(gitattributes: bytes) -> list[str]:
    """The patterns a ``.gitattributes`` file sends through LFS (``filter=lfs``)."""
    patterns = []
    for line in gitattributes.decode().splitlines():
        pattern, *attributes = line.split()
        if "filter=lfs" in attributes:
            patterns.append(pattern)
    return patterns


@dataclass
class Commit:
    oid: str
    revision: str
    summary: str
    added: list[str]
    deleted: list[str]


@dataclass
class StandInRepo:
    private: bool
    branches: dict[str, dict[str, bytes]] = field(default_factory=dict)
    heads: dict[str, str] = field(default_factory=dict)
    # per branch, the paths stored as LFS objects (git holds their pointer files)
    lfs: dict[str, set[str]] = field(default_factory=dict)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None


class LocalHubStandIn:
    """In-memory stand-in for the Hub API, served over real HTTP on 127.0.0.1."""

    def __init__(self, lfs_threshold: int = LFS_THRESHOLD) -> None:
        self.lfs_threshold = lfs_threshold
        self.lfs_objects: dict[str, bytes] = {}  # sha256 -> bytes received by LFS PUTs
        self._upload_signatures: dict[str, str] = {}  # sha256 -> its presigned URL's signature
        self.repos: dict[str, StandInRepo] = {}
        self.commits: list[Commit] = []
        self.requests: list[Request] = []
        self.log_lines: list[str] = []
        self.validated_cards: list[str] = []
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> LocalHubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        return dict(self.repos[repo_id].branches[revision])

    # ------------------------------------------------------------------ handlers

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                hub.log_lines.append(format % args)

            def _reply(self, status: int, body: Any = None, raw: bytes | None = None) -> None:
                data = (
                    raw
                    if raw is not None
                    else json.dumps(body if body is not None else {}).encode()
                )
                self.send_response(status)
                self.send_header(
                    "Content-Type",
                    "application/json" if raw is None else "application/octet-stream",
                )
                self.send_header("Content-Length", str(len(data)))
                if status >= 400 and body is not None:
                    self.send_header("X-Error-Message", str(body.get("error", "")))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0], 16)
                        chunk = self.rfile.read(size)
                        self.rfile.readline()  # the CRLF after every chunk
                        if not size:
                            return b"".join(chunks)
                        chunks.append(chunk)
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _dispatch(self, method: str) -> None:
                parts = urlsplit(self.path)
                hub.requests.append(
                    Request(
                        method,
                        unquote(parts.path),
                        parse_qs(parts.query),
                        self.headers.get("Authorization"),
                    )
                )
                try:
                    with hub.lock:
                        status, body, raw = hub._route(
                            method, parts.path, parse_qs(parts.query), self._body()
                        )
                except Exception as error:  # report server bugs to the client as 500s
                    status, body, raw = 500, {"error": repr(error)}, None
                self._reply(status, body, raw)

            def do_GET(self) -> None:
                self._dispatch("GET")

            def do_HEAD(self) -> None:
                self._dispatch("HEAD")

            def do_POST(self) -> None:
                self._dispatch("POST")

            def do_PUT(self) -> None:
                self._dispatch("PUT")

        return Handler

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, Any, bytes | None]:
        segments = [unquote(s) for s in path.strip("/").split("/")]
        if method == "POST" and segments == ["api", "repos", "create"]:
            return self._create_repo(json.loads(body))
        if method == "POST" and segments == ["api", "validate-yaml"]:
            return self._validate_yaml(json.loads(body))
        if segments[:1] == ["lfs-objects"] and method == "PUT" and len(segments) == 2:
            return self._lfs_put(segments[1], query, body)
        if segments[:1] == ["datasets"] and segments[3:6] == ["info", "lfs", "objects"]:
            repo_name = segments[2].removesuffix(".git")
            if f"{segments[1]}/{repo_name}" not in self.repos:
                return 404, {"error": "Repository not found"}, None
            if method == "POST" and segments[6:] == ["batch"]:
                return self._lfs_batch(f"{segments[1]}/{repo_name}", json.loads(body))
            if method == "POST" and segments[6:] == ["verify"]:
                return self._lfs_verify(json.loads(body))
        if segments[:2] == ["api", "datasets"] and len(segments) >= 5:
            repo_id, action, rest = f"{segments[2]}/{segments[3]}", segments[4], segments[5:]
            repo = self.repos.get(repo_id)
            if repo is None:
                return 404, {"error": "Repository not found"}, None
            if method == "POST" and action == "branch":
                return self._create_branch(repo, rest[0], json.loads(body or b"{}"))
            revision = rest[0] if rest else "main"
            if revision not in repo.branches:
                return 404, {"error": f"Revision Not Found: {revision}"}, None
            if method == "GET" and action == "tree":
                return self._tree(repo, revision, "/".join(rest[1:]))
            if method == "GET" and action == "revision":
                return self._info(repo_id, repo, revision)
            if method == "POST" and action == "preupload":
                return self._preupload(repo, revision, json.loads(body))
            if method == "POST" and action == "commit":
                return self._commit(repo_id, repo, revision, body)
            if action == "xet-write-token":
                return 501, {"error": "the stand-in does not implement Xet storage"}, None
        if segments[:1] == ["datasets"] and len(segments) >= 6 and segments[3] == "resolve":
            repo = self.repos.get(f"{segments[1]}/{segments[2]}")
            files = repo.branches.get(segments[4], {}) if repo else {}
            content = files.get("/".join(segments[5:]))
            if content is None:
                return 404, {"error": "Entry not found"}, None
            return 200, None, content
        return 404, {"error": f"stand-in does not implement {method} {path}"}, None

    def _new_commit(
        self, repo: StandInRepo, revision: str, summary: str, added: list[str], deleted: list[str]
    ) -> str:
        oid = uuid.uuid4().hex + uuid.uuid4().hex[:8]
        repo.heads[revision] = oid
        self.commits.append(Commit(oid, revision, summary, added, deleted))
        return oid

    def _create_repo(self, payload: dict[str, Any]) -> tuple[int, Any, None]:
        repo_id = (
            f"{payload['organization']}/{payload['name']}"
            if payload.get("organization")
            else payload["name"]
        )
        if payload.get("type") != "dataset":
            return 400, {"error": "stand-in serves dataset repos only"}, None
        if repo_id in self.repos:
            return (
                409,
                {"error": "You already created this dataset repo", "url": self._url(repo_id)},
                None,
            )
        repo = StandInRepo(private=payload.get("visibility") == "private")
        repo.branches["main"] = {
            ".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
        }
        repo.lfs["main"] = set()
        self.repos[repo_id] = repo
        self._new_commit(repo, "main", "initial commit", [".gitattributes"], [])
        return 200, {"url": self._url(repo_id)}, None

    def _validate_yaml(self, payload: dict[str, Any]) -> tuple[int, Any, None]:
        """Check the card's front matter parses and declares well-formed configs."""
        self.validated_cards.append(payload["content"])
        try:
            meta = yaml.safe_load(payload["content"].split("---")[1])
            for config in meta.get("configs", []):
                assert config["config_name"] and config["data_files"], config
        except Exception as error:
            return 400, {"errors": [{"message": repr(error)}]}, None
        return 200, {"warnings": []}, None

    def _url(self, repo_id: str) -> str:
        return f"{self.endpoint}/datasets/{repo_id}"

    def _create_branch(
        self, repo: StandInRepo, branch: str, payload: dict[str, Any]
    ) -> tuple[int, Any, None]:
        if branch in repo.branches:
            return 409, {"error": "Reference already exists"}, None
        start = payload.get("startingPoint") or "main"
        repo.branches[branch] = dict(repo.branches[start])
        repo.heads[branch] = repo.heads[start]
        repo.lfs[branch] = set(repo.lfs[start])
        return 200, {}, None

    def _tree(self, repo: StandInRepo, revision: str, under: str) -> tuple[int, Any, None]:
        prefix = f"{under}/" if under else ""
        entries = [
            self._tree_entry(path, content, path in repo.lfs[revision])
            for path, content in sorted(repo.branches[revision].items())
            if path.startswith(prefix)
        ]
        folders = sorted(
            {path.rsplit("/", 1)[0] for path in repo.branches[revision] if "/" in path}
        )
        entries += [
            {"type": "directory", "path": f, "oid": "0" * 40}
            for f in folders
            if f.startswith(prefix)
        ]
        return 200, entries, None

    @staticmethod
    def _tree_entry(path: str, content: bytes, lfs: bool) -> dict[str, Any]:
        if not lfs:
            return {
                "type": "file",
                "path": path,
                "size": len(content),
                "oid": git_blob_sha1(content),
            }
        pointer = lfs_pointer(content)
        return {
            "type": "file",
            "path": path,
            "size": len(content),
            "oid": git_blob_sha1(pointer),  # git stores the pointer, not the content
            "lfs": {
                "oid": hashlib.sha256(content).hexdigest(),
                "size": len(content),
                "pointerSize": len(pointer),
            },
        }

    def _info(self, repo_id: str, repo: StandInRepo, revision: str) -> tuple[int, Any, None]:
        return (
            200,
            {
                "id": repo_id,
                "sha": repo.heads[revision],
                "private": repo.private,
                "siblings": [{"rfilename": p} for p in sorted(repo.branches[revision])],
            },
            None,
        )

    def _is_lfs(self, repo: StandInRepo, revision: str, path: str, size: int) -> bool:
        if size >= self.lfs_threshold:
            return True
        patterns = lfs_patterns(repo.branches[revision].get(".gitattributes", b""))
        name = path.rsplit("/", 1)[-1]
        # A gitattributes pattern without a slash matches the file name in any folder.
        return any(fnmatch.fnmatch(path if "/" in p else name, p) for p in patterns)

    def _preupload(
        self, repo: StandInRepo, revision: str, payload: dict[str, Any]
    ) -> tuple[int, Any, None]:
        files = repo.branches[revision]
        answers = []
        for item in payload["files"]:
            path, content = item["path"], files.get(item["path"])
            if content is None:
                oid = None
            elif path in repo.lfs[revision]:  # the client compares its sha256 for LFS files
                oid = hashlib.sha256(content).hexdigest()
            else:
                oid = git_blob_sha1(content)
            lfs = self._is_lfs(repo, revision, path, item["size"])
            answers.append(
                {
                    "path": path,
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": oid,
                }
            )
        return 200, {"files": answers}, None

    def _lfs_batch(self, repo_id: str, payload: dict[str, Any]) -> tuple[int, Any, None]:
        """Answer a git LFS batch request: where to PUT each object not stored yet."""
        if payload.get("operation") != "upload" or "basic" not in payload.get("transfers", []):
            return 400, {"message": "the stand-in only takes basic LFS uploads"}, None
        objects = []
        for item in payload["objects"]:
            oid, size = item["oid"], item["size"]
            answer: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            stored = self.lfs_objects.get(oid)
            if stored is None or len(stored) != size:
                # A presigned URL: its signature authorises the PUT, not the Hub token.
                signature = self._upload_signatures.setdefault(oid, secrets.token_hex(16))
                answer["actions"] = {
                    "upload": {"href": f"{self.endpoint}/lfs-objects/{oid}?sig={signature}"},
                    "verify": {
                        "href": f"{self._url(repo_id)}.git/info/lfs/objects/verify",
                        "header": {},
                    },
                }
            objects.append(answer)
        return 200, {"transfer": "basic", "objects": objects}, None

    def _lfs_put(self, oid: str, query: dict[str, list[str]], body: bytes) -> tuple[int, Any, None]:
        if query.get("sig") != [self._upload_signatures.get(oid)]:
            return 403, {"error": "bad or missing upload signature"}, None
        if hashlib.sha256(body).hexdigest() != oid:
            return 400, {"error": f"content does not hash to {oid}"}, None
        self.lfs_objects[oid] = body
        return 200, {}, None

    def _lfs_verify(self, payload: dict[str, Any]) -> tuple[int, Any, None]:
        stored = self.lfs_objects.get(payload["oid"])
        if stored is None or len(stored) != payload["size"]:
            return 404, {"error": f"LFS object {payload['oid']} was not uploaded"}, None
        return 200, {}, None

    def _commit(
        self, repo_id: str, repo: StandInRepo, revision: str, body: bytes
    ) -> tuple[int, Any, None]:
        files, lfs = repo.branches[revision], repo.lfs[revision]
        summary, added, deleted = "", [], []
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            key, value = item["key"], item["value"]
            if key == "header":
                summary = value.get("summary", "")
            elif key == "file":
                assert value.get("encoding") == "base64", value
                files[value["path"]] = base64.b64decode(value["content"])
                lfs.discard(value["path"])
                added.append(value["path"])
            elif key == "lfsFile":
                content = self.lfs_objects.get(value["oid"])
                if value.get("algo") != "sha256" or content is None:
                    return 400, {"error": f"LFS object {value['oid']} was not uploaded"}, None
                if len(content) != value["size"]:
                    return 400, {"error": f"LFS object {value['oid']} has another size"}, None
                files[value["path"]] = content
                lfs.add(value["path"])
                added.append(value["path"])
            elif key == "deletedFile":
                files.pop(value["path"], None)
                lfs.discard(value["path"])
                deleted.append(value["path"])
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                for path in [p for p in files if p.startswith(folder)]:
                    files.pop(path)
                    lfs.discard(path)
                    deleted.append(path)
            else:
                return 400, {"error": f"stand-in does not accept {key} operations"}, None
        oid = self._new_commit(repo, revision, summary, added, deleted)
        return (
            200,
            {
                "commitUrl": f"{self._url(repo_id)}/commit/{oid}",
                "commitOid": oid,
                "pullRequestUrl": None,
            },
            None,
        )
