"""Serve the documentation site (``http://docs.localhost/``) on loopback inside the sandbox.

Started by search_driver.py as the unprivileged ``user``: ``site_server.py --root DIR``
binds 127.0.0.1 on a free port (``--port 0``, the default) and prints ``{"port": N}`` as its
one stdout line once it listens. GET and HEAD only. A path names a file under the root (the
root's collections are links to the folders their packages install; symbolic links are
followed, ``..`` never leaves the root); a path ending in ``/`` serves that folder's
``index.html``. Anything else is 404 Not Found: no directory listings, no redirects. The
content type comes from the file name; no charset is claimed (the pages declare their own).
Requests are not logged.
"""

from __future__ import annotations

import argparse
import http.server
import json
import mimetypes
import posixpath
import shutil
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit


class SiteHandler(http.server.BaseHTTPRequestHandler):
    """Files of the site root, 404 for everything that is not one."""

    root: Path = Path("/srv/search/site")
    server_version = "worldtrace-docs/1"

    def resolve(self) -> Path | None:
        """The file the request path names, or None."""
        path = unquote(urlsplit(self.path).path)
        if not path.startswith("/") or "\0" in path:
            return None
        if path.endswith("/"):
            path += "index.html"
        normalized = posixpath.normpath(path).lstrip("/")
        if normalized.startswith("..") or normalized in ("", "."):
            return None
        candidate = self.root / normalized
        return candidate if candidate.is_file() else None

    def send_file(self, with_body: bool) -> None:
        """Answer with the file, or 404."""
        path = self.resolve()
        if path is None:
            self.send_error(404, "Not Found")
            return
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        with open(path, "rb") as handle:
            size = path.stat().st_size
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if with_body:
                shutil.copyfileobj(handle, self.wfile)

    def do_GET(self) -> None:
        """Serve a GET."""
        self.send_file(with_body=True)

    def do_HEAD(self) -> None:
        """Serve a HEAD."""
        self.send_file(with_body=False)

    def log_message(self, format: str, *args: object) -> None:
        """No request log: nothing reads it."""


def main() -> None:
    """Listen on loopback and serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=Path("/srv/search/site"))
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args()
    SiteHandler.root = args.root
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), SiteHandler)
    server.daemon_threads = True
    sys.stdout.write(json.dumps({"port": server.server_address[1]}) + "\n")
    sys.stdout.flush()
    server.serve_forever()


if __name__ == "__main__":
    main()
