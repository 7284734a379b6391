"""Create and seed the Trac environment of "Skylark", a self-hosted photo gallery project.

Run once at image build time: ``seed_trac.py <env dir>``. Everything is deterministic (fixed
texts, owners and timestamps), so every image built from this file serves the same site.
Anonymous visitors may create and modify tickets and create and edit wiki pages, because the
browser collector does not log in.
"""

import sys
from datetime import UTC, datetime, timedelta

from trac.env import Environment
from trac.perm import PermissionSystem
from trac.ticket.model import Component, Milestone, Ticket, Version
from trac.wiki.model import WikiPage

T0 = datetime(2024, 1, 8, 9, 30, tzinfo=UTC)


def at(days: float) -> datetime:
    """A fixed point in time ``days`` after the project's first day."""
    return T0 + timedelta(days=days)


COMPONENTS = [
    ("Albums", "alice"),
    ("Uploads", "bob"),
    ("Search", "carol"),
    ("User accounts", "dmitri"),
    ("REST API", "bob"),
    ("Thumbnails", "eve"),
    ("Documentation", "carol"),
    ("Installer", "dmitri"),
]
MILESTONES = [
    ("1.0", 20, 60, "First public release: albums, uploads, thumbnails."),
    ("1.1", 120, None, "Search improvements and the REST API."),
    ("2.0", 260, None, "Multi-user sharing, S3 storage backend."),
    ("Backlog", None, None, "Ideas without a release yet."),
]
VERSIONS = [("0.9", 10), ("1.0", 60)]

# (summary, type, component, priority, milestone, reporter, owner, final status, resolution,
#  keywords, description)
TICKETS = [
    (
        "Album cover picks a random photo after reordering",
        "defect",
        "Albums",
        "major",
        "1.0",
        "frank",
        "alice",
        "closed",
        "fixed",
        "ui",
        "After dragging photos into a new order, the album cover changes to a random photo "
        "instead of keeping the one chosen in //Album settings//.\n\n"
        "Steps:\n 1. Open an album with 10+ photos\n 2. Set a cover\n 3. Reorder\n",
    ),
    (
        "Uploads larger than 20 MB fail with HTTP 413",
        "defect",
        "Uploads",
        "critical",
        "1.0",
        "grace",
        "bob",
        "closed",
        "fixed",
        "upload nginx",
        "RAW files from a Nikon Z6 are ~25 MB and the upload stops with `413 Request Entity Too "
        "Large`. The limit should be configurable in `skylark.toml`.",
    ),
    (
        "Generate WebP thumbnails",
        "enhancement",
        "Thumbnails",
        "major",
        "1.0",
        "alice",
        "eve",
        "closed",
        "fixed",
        "performance",
        "WebP thumbnails are about 30% smaller than JPEG at the same quality. Serve them when the "
        "browser sends `Accept: image/webp`.",
    ),
    (
        "Installer does not create the media directory",
        "defect",
        "Installer",
        "blocker",
        "1.0",
        "henry",
        "dmitri",
        "closed",
        "fixed",
        "",
        "`skylark init` writes the config but not `media/`; the first upload then fails with a "
        "permission error.",
    ),
    (
        "Document the backup procedure",
        "task",
        "Documentation",
        "minor",
        "1.0",
        "carol",
        "carol",
        "closed",
        "fixed",
        "docs",
        "Explain how to back up the database and the media folder; link it from the wiki page "
        "BackupAndRestore.",
    ),
    (
        "EXIF orientation ignored for portrait photos",
        "defect",
        "Thumbnails",
        "major",
        "1.0",
        "ivy",
        "eve",
        "closed",
        "fixed",
        "exif",
        "Portrait photos from phones are shown sideways in the grid. The thumbnailer must "
        "apply the EXIF Orientation tag.",
    ),
    (
        "Search does not find photos by camera model",
        "defect",
        "Search",
        "major",
        "1.1",
        "frank",
        "carol",
        "assigned",
        "",
        "exif search",
        "Searching for `X-T4` returns nothing although 40 photos have that camera model in their "
        "EXIF data. Index the camera make and model.",
    ),
    (
        "Full-text search over captions and comments",
        "enhancement",
        "Search",
        "critical",
        "1.1",
        "alice",
        "carol",
        "accepted",
        "",
        "search",
        "Use SQLite FTS5 for captions, album titles and comments. Results should highlight the "
        "matched words.",
    ),
    (
        "REST API: list photos of an album",
        "enhancement",
        "REST API",
        "major",
        "1.1",
        "judy",
        "bob",
        "assigned",
        "",
        "api",
        "`GET /api/v1/albums/{id}/photos` with pagination (`?page=`, `?per_page=`), returning id, "
        "title, taken_at and thumbnail URLs.",
    ),
    (
        "REST API: token authentication",
        "enhancement",
        "REST API",
        "critical",
        "1.1",
        "bob",
        "bob",
        "new",
        "",
        "api security",
        "Personal access tokens created in the account page, sent as `Authorization: Bearer`.",
    ),
    (
        "Password reset e-mail has a broken link",
        "defect",
        "User accounts",
        "critical",
        "1.1",
        "kevin",
        "dmitri",
        "new",
        "",
        "email",
        "The link in the reset e-mail points to `http://localhost:8000/...` instead of the public "
        "base URL configured in `skylark.toml`.",
    ),
    (
        "Slow album page with 2,000 photos",
        "defect",
        "Albums",
        "major",
        "1.1",
        "grace",
        "alice",
        "new",
        "",
        "performance",
        "The album page takes 9 s to render. Paginate the grid or lazy-load thumbnails.",
    ),
    (
        "Search results ignore album permissions",
        "defect",
        "Search",
        "blocker",
        "1.1",
        "ivy",
        "carol",
        "new",
        "",
        "security search",
        "Photos in private albums appear in search results for anonymous users.",
    ),
    (
        "Add a dark theme",
        "enhancement",
        "Albums",
        "minor",
        "1.1",
        "leo",
        "",
        "new",
        "",
        "ui",
        "Follow `prefers-color-scheme` and add a toggle in the footer.",
    ),
    (
        "Drag and drop upload of whole folders",
        "enhancement",
        "Uploads",
        "major",
        "1.1",
        "grace",
        "bob",
        "new",
        "",
        "upload ui",
        "Chrome and Firefox support dropping directories; create one album per folder.",
    ),
    (
        "Resume interrupted uploads",
        "enhancement",
        "Uploads",
        "minor",
        "2.0",
        "henry",
        "bob",
        "new",
        "",
        "upload",
        "Use the tus protocol so that large uploads survive a dropped connection.",
    ),
    (
        "Share an album with a link that expires",
        "enhancement",
        "User accounts",
        "major",
        "2.0",
        "judy",
        "dmitri",
        "new",
        "",
        "sharing",
        "Owners create a link valid for 1, 7 or 30 days; visitors need no account.",
    ),
    (
        "S3-compatible storage backend",
        "enhancement",
        "Uploads",
        "major",
        "2.0",
        "alice",
        "",
        "new",
        "",
        "storage",
        "Store originals in any S3-compatible bucket (MinIO, Garage). Thumbnails stay local.",
    ),
    (
        "Installer: support PostgreSQL",
        "enhancement",
        "Installer",
        "minor",
        "2.0",
        "kevin",
        "dmitri",
        "new",
        "",
        "database",
        "`skylark init --database postgresql://...`",
    ),
    (
        "Translate the interface into German",
        "task",
        "Documentation",
        "minor",
        "2.0",
        "mia",
        "",
        "new",
        "",
        "i18n",
        "Extract messages with Babel; the German translation is offered by Mia.",
    ),
    (
        "Map view of geotagged photos",
        "enhancement",
        "Albums",
        "minor",
        "Backlog",
        "leo",
        "",
        "new",
        "",
        "gps ui",
        "Show photos with GPS coordinates on an OpenStreetMap layer.",
    ),
    (
        "Face detection for people albums",
        "enhancement",
        "Thumbnails",
        "trivial",
        "Backlog",
        "frank",
        "",
        "new",
        "",
        "",
        "Optional, off by default, runs locally.",
    ),
    (
        "Duplicate photo detection",
        "enhancement",
        "Uploads",
        "minor",
        "Backlog",
        "ivy",
        "",
        "new",
        "",
        "",
        "Compare perceptual hashes on upload and warn about duplicates.",
    ),
    (
        "Crash when a photo has no EXIF date",
        "defect",
        "Thumbnails",
        "critical",
        "1.0",
        "mia",
        "eve",
        "closed",
        "fixed",
        "exif",
        "`KeyError: 'DateTimeOriginal'` in the thumbnail worker; fall back to the file time.",
    ),
    (
        "Upload progress bar stuck at 99%",
        "defect",
        "Uploads",
        "minor",
        "1.0",
        "leo",
        "bob",
        "closed",
        "duplicate",
        "upload ui",
        "Same cause as the 413 error for large files.",
    ),
    (
        "Support HEIC photos from iPhones",
        "enhancement",
        "Thumbnails",
        "major",
        "1.1",
        "judy",
        "eve",
        "accepted",
        "",
        "heic",
        "Convert HEIC to JPEG for thumbnails with libheif; keep the original.",
    ),
    (
        "Keyboard shortcuts in the photo viewer",
        "enhancement",
        "Albums",
        "trivial",
        "1.1",
        "grace",
        "alice",
        "new",
        "",
        "ui accessibility",
        "Left/right arrows for previous/next, `f` for fullscreen, Escape to close.",
    ),
    (
        "Two-factor authentication",
        "enhancement",
        "User accounts",
        "major",
        "2.0",
        "kevin",
        "dmitri",
        "new",
        "",
        "security",
        "TOTP with recovery codes.",
    ),
    (
        "Sort albums by date of the newest photo",
        "enhancement",
        "Albums",
        "minor",
        "1.1",
        "mia",
        "alice",
        "closed",
        "wontfix",
        "ui",
        "Sorting by creation date is enough; the sort menu already has too many entries.",
    ),
    (
        "Write an API reference page",
        "task",
        "Documentation",
        "major",
        "1.1",
        "bob",
        "carol",
        "new",
        "",
        "docs api",
        "Generate the reference from the OpenAPI schema and publish it as the wiki page "
        "ApiReference.",
    ),
    (
        "Login form accepts empty password for LDAP users",
        "defect",
        "User accounts",
        "blocker",
        "1.0",
        "henry",
        "dmitri",
        "closed",
        "fixed",
        "security ldap",
        "An LDAP bind with an empty password is an anonymous bind and succeeds. Reject empty "
        "passwords before binding.",
    ),
    (
        "Thumbnail cache grows without bound",
        "defect",
        "Thumbnails",
        "major",
        "1.1",
        "frank",
        "eve",
        "reopened",
        "",
        "disk",
        "Old sizes are never deleted after changing `thumbnail_sizes`. "
        "Add `skylark gc-thumbnails`.",
    ),
    (
        "Installer fails on Debian 12 with Python 3.11",
        "defect",
        "Installer",
        "critical",
        "1.0",
        "ivy",
        "dmitri",
        "closed",
        "invalid",
        "",
        "Could not reproduce; the reporter had an old pip. Works with the documented setup.",
    ),
    (
        "Bulk edit captions",
        "enhancement",
        "Albums",
        "minor",
        "2.0",
        "leo",
        "",
        "new",
        "",
        "ui",
        "Select several photos and set or append a caption.",
    ),
    (
        "Rate limit the login endpoint",
        "task",
        "User accounts",
        "major",
        "1.1",
        "carol",
        "dmitri",
        "assigned",
        "",
        "security",
        "At most 10 attempts per minute per IP address.",
    ),
    (
        "Search suggestions while typing",
        "enhancement",
        "Search",
        "minor",
        "2.0",
        "mia",
        "carol",
        "new",
        "",
        "search ui",
        "Suggest album titles and tags after three characters.",
    ),
]

COMMENTS = {
    2: [("bob", 3, "The limit now comes from `upload.max_size` (default 200 MB).")],
    7: [
        ("carol", 2, "Camera make and model are now stored; the index is next."),
        ("frank", 4, "Thanks! Lens model would be nice too."),
    ],
    8: [("carol", 5, "Prototype on the `fts5` branch; highlighting uses `snippet()`.")],
    12: [("alice", 1, "Lazy loading alone brings it to 2.5 s on my machine.")],
    13: [("carol", 1, "Confirmed. Raising to blocker.")],
    25: [("bob", 1, "Duplicate of #2.")],
    32: [("eve", 6, "Reopened: the command deletes only the JPEG sizes, not WebP.")],
}

WIKI = {
    "WikiStart": (
        "= Welcome to Skylark =\n\n"
        "Skylark is a self-hosted photo gallery: albums, fast thumbnails, search and sharing.\n\n"
        "== Start here ==\n"
        " * [wiki:GettingStarted Getting started] - install and first album\n"
        " * [wiki:Roadmap Roadmap notes] and the [/roadmap milestone roadmap]\n"
        " * [wiki:ReleaseProcess Release process]\n"
        " * [wiki:BackupAndRestore Backup and restore]\n"
        " * [wiki:CodingStyle Coding style]\n"
        " * [wiki:Contributors Contributors]\n\n"
        "== Reporting bugs ==\n"
        "Search the [/report/1 active tickets] first, then [/newticket create a new ticket]. "
        "Say which version you run and attach the server log.\n"
    ),
    "GettingStarted": (
        "= Getting started =\n\n"
        "== Requirements ==\n * Python 3.10 or newer\n * libvips 8.12+\n * 1 GB of RAM\n\n"
        "== Install ==\n{{{#!sh\npip install skylark-gallery\nskylark init /srv/skylark\n"
        "skylark serve --port 8000\n}}}\n\n"
        "== First album ==\n 1. Log in as the admin user printed by `skylark init`.\n"
        " 2. Click **New album**, give it a title.\n 3. Drop photos onto the page.\n\n"
        "Problems? See [wiki:BackupAndRestore] before upgrading, and the FAQ on the mailing list.\n"
    ),
    "Roadmap": (
        "= Roadmap notes =\n\n"
        "|| Release || Theme || Target ||\n"
        "|| 1.0 || albums, uploads, thumbnails || released ||\n"
        "|| 1.1 || search, REST API || spring 2024 ||\n"
        "|| 2.0 || sharing, S3 storage || autumn 2024 ||\n\n"
        "Priorities for 1.1 are #8 (full-text search) and #10 (API tokens).\n"
    ),
    "ReleaseProcess": (
        "= Release process =\n\n"
        " 1. All tickets of the milestone are closed or moved.\n"
        " 2. Update `CHANGES.rst` and bump the version in `pyproject.toml`.\n"
        " 3. Tag `vX.Y.Z`, push; CI builds the wheel and uploads it.\n"
        " 4. Announce on the mailing list and close the milestone in Trac.\n\n"
        "Release manager for 1.1: dmitri.\n"
    ),
    "BackupAndRestore": (
        "= Backup and restore =\n\n"
        "Skylark keeps its state in two places: the SQLite database `skylark.db` and the "
        "`media/` folder.\n\n"
        '{{{#!sh\nsqlite3 skylark.db ".backup backup.db"\nrsync -a media/ /backup/media/\n}}}\n\n'
        "To restore, stop the server, copy both back and run `skylark migrate`.\n"
    ),
    "CodingStyle": (
        "= Coding style =\n\n"
        " * Format with `ruff format`, lint with `ruff check`.\n"
        " * Type hints on public functions.\n"
        " * Every bug fix comes with a test that failed before.\n"
        " * Commit messages: imperative mood, reference the ticket (`refs #12`).\n"
    ),
    "Contributors": (
        "= Contributors =\n\n"
        "|| Name || Area ||\n"
        "|| alice || albums, UI ||\n|| bob || uploads, REST API ||\n"
        "|| carol || search, documentation ||\n|| dmitri || accounts, installer ||\n"
        "|| eve || thumbnails ||\n"
    ),
    "MeetingNotes/2024-02-05": (
        "= Meeting 2024-02-05 =\n\n"
        "Present: alice, bob, carol, dmitri, eve.\n\n"
        " * 1.0 is out; thanks everyone.\n"
        " * #13 (private photos in search) must be fixed before 1.1.\n"
        " * bob drafts the API token design (#10).\n"
    ),
}


def main(path: str) -> None:
    """Create the environment at ``path`` and fill it with the project's data."""
    env = Environment(
        path,
        create=True,
        options=[
            ("project", "name", "Skylark"),
            ("project", "descr", "Self-hosted photo gallery"),
            ("trac", "database", "sqlite:db/trac.db"),
            # No source repository: hide the repository UI instead of showing errors.
            ("components", "trac.versioncontrol.*", "disabled"),
            ("logging", "log_type", "stderr"),
            ("logging", "log_level", "WARNING"),
        ],
    )
    perms = PermissionSystem(env)
    for action in ("TICKET_CREATE", "TICKET_MODIFY", "WIKI_CREATE", "WIKI_MODIFY"):
        perms.grant_permission("anonymous", action)

    # Replace Trac's sample components, milestones and versions with the project's own.
    for component in Component.select(env):
        component.delete()
    for milestone in Milestone.select(env, include_completed=True):
        milestone.delete()
    for version in Version.select(env):
        version.delete()
    for name, owner in COMPONENTS:
        component = Component(env)
        component.name, component.owner = name, owner
        component.insert()
    for name, due, done, description in MILESTONES:
        milestone = Milestone(env)
        milestone.name, milestone.description = name, description
        milestone.due = at(due) if due is not None else None
        milestone.completed = at(done) if done is not None else None
        milestone.insert()
    for name, day in VERSIONS:
        version = Version(env)
        version.name, version.time = name, at(day)
        version.insert()

    for number, row in enumerate(TICKETS, start=1):
        (
            summary,
            type_,
            component,
            priority,
            milestone,
            reporter,
            owner,
            status,
            resolution,
            keywords,
            description,
        ) = row
        created = at(number * 1.7)
        ticket = Ticket(env)
        ticket.populate(
            {
                "summary": summary,
                "type": type_,
                "component": component,
                "priority": priority,
                "milestone": milestone,
                "reporter": reporter,
                "owner": owner,
                "keywords": keywords,
                "description": description,
                "status": "new",
                "version": "1.0" if milestone != "1.0" and type_ == "defect" else "",
            }
        )
        assert ticket.insert(when=created) == number
        for author, days, text in COMMENTS.get(number, []):
            ticket.save_changes(author, text, when=created + timedelta(days=days))
        if status != "new":
            ticket["status"] = status
            if resolution:
                ticket["resolution"] = resolution
            comment = {"fixed": "Fixed.", "": ""}.get(resolution, f"Closing as {resolution}.")
            ticket.save_changes(owner or reporter, comment, when=created + timedelta(days=8))

    for index, (name, text) in enumerate(WIKI.items()):
        page = WikiPage(env, name)
        page.text = text
        page.save("carol" if index % 2 else "alice", "Project page", at(3 + index))

    # Trac's own help pages carry the build time: pin them so every build is identical.
    with env.db_transaction as db:
        db("UPDATE wiki SET time=%s WHERE author='trac'", (int(T0.timestamp() * 1_000_000),))
    env.shutdown()
    print(f"seeded {len(TICKETS)} tickets and {len(WIKI)} wiki pages in {path}")


if __name__ == "__main__":
    main(sys.argv[1])
