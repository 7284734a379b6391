"""The local web applications, each an image defined in a folder here.

The web domain visits them; the mcp domain's ``fetch`` server reads them.

* ``trac``: Trac 1.6 (PyPI): the issue tracker and wiki of "Skylark", a photo gallery
  project; anonymous visitors may create and modify tickets and wiki pages.
* ``datasette``: Datasette 0.65 (PyPI): the "Riverside Public Library" SQLite database with
  full-text search over books and reviews, and writable canned queries (forms) that add a
  review or mark a loan returned.
* ``tiddlywiki``: TiddlyWiki 5.3 (npm) on Node.js: a household notebook (recipes, garden,
  tasks) editable in the browser and saved to ``.tid`` files by the server.

``site-<name>/`` holds each image's Dockerfile, its pinned packages and the script that
seeds its data at build time; :mod:`worldtrace.sandboxes.websites` serves them.
"""

from __future__ import annotations

from pathlib import Path

from worldtrace.sandboxes.images import ImageDefinition
from worldtrace.sandboxes.websites import SiteDefinition

_HERE = Path(__file__).parent


def _image(name: str) -> ImageDefinition:
    return ImageDefinition.in_folder(_HERE / f"site-{name}")


SITES: dict[str, SiteDefinition] = {
    "trac": SiteDefinition(
        name="trac",
        kind="issue tracker",
        image=_image("trac").tag,
        start_path="/",
        description=(
            "Trac 1.6 for 'Skylark', a self-hosted photo gallery project: 36 tickets over 8 "
            "components and 4 milestones, reports, a roadmap, a timeline and 8 wiki pages. "
            "Anonymous users may create and modify tickets and create and edit wiki pages."
        ),
        command=("/opt/trac/bin/tracd", "-b", "127.0.0.1", "-p", "{port}", "-s", "/srv/trac"),
        ready_text="Skylark",
        data_format="sqlite",
        data_path="/srv/trac/db/trac.db",
    ),
    "datasette": SiteDefinition(
        name="datasette",
        kind="data browser",
        image=_image("datasette").tag,
        start_path="/",
        description=(
            "Datasette 0.65 over the 'Riverside Public Library' database: branches, authors, "
            "books, members, 3,000 loans and reviews, with facets, full-text search over books "
            "and reviews, SQL queries, and forms that add a review or return a loan."
        ),
        command=(
            "/opt/datasette/bin/datasette",
            "serve",
            "/srv/data/library.db",
            "--host",
            "127.0.0.1",
            "--port",
            "{port}",
            "--metadata",
            "/srv/data/metadata.json",
            "--setting",
            "sql_time_limit_ms",
            "3000",
        ),
        ready_text="Riverside Public Library",
        data_format="sqlite",
        data_path="/srv/data/library.db",
    ),
    "tiddlywiki": SiteDefinition(
        name="tiddlywiki",
        kind="wiki",
        image=_image("tiddlywiki").tag,
        start_path="/",
        description=(
            "TiddlyWiki 5.3 single-page wiki 'Maple Street Notebook': recipes, garden plants, "
            "household tasks and contacts as about 25 tiddlers, editable in the browser and "
            "saved by the Node.js server."
        ),
        command=("tiddlywiki", "/srv/wiki", "--listen", "host=127.0.0.1", "port={port}"),
        ready_text="Maple Street Notebook",
        data_format="tiddlywiki",
        data_path="/srv/wiki",
    ),
}
"""Every site, by name."""

IMAGES: tuple[ImageDefinition, ...] = tuple(_image(name) for name in SITES)
"""The sites' image definitions."""


def site_definition(name: str) -> SiteDefinition:
    """Return the definition of site ``name``; a ValueError lists the known sites."""
    try:
        return SITES[name]
    except KeyError:
        raise ValueError(
            f"unknown site {name!r}; known sites: {', '.join(sorted(SITES))}"
        ) from None
