"""Build the search corpus at image build time: the site tree, documents.jsonl and the texts.

Runs once in the image build (``/opt/search-venv/bin/python``, which sees Debian's
``python3-apt``). Writes:

- ``<out>/site/``: the documentation site served as ``http://docs.localhost/``. Man pages are
  rendered to HTML with mandoc (``man/<section>/<name>.html``); the HTML collections are
  symbolic links to the folders their packages install (served as shipped, with their own CSS
  and links); ``packages/<name>.html`` is generated from the apt index, one page per binary
  package; ``index.html`` links the collections (not a document).
- ``<out>/documents.jsonl``: one line per document, in docid order (the index's document ids are
  the line numbers, from 1): ``url``, ``title``, ``date``, ``collection``, ``package``,
  ``bytes`` (of the page as served).
- ``--texts``: the same lines plus ``text`` (the page's visible text), for build_index.py; a
  temporary file of the build.
- ``--stats`` (default ``/tmp/corpus_stats.json``): counts per collection, what was skipped and
  why, and the versions of the packages the corpus came from.

Rules. A man page is a regular file ``/usr/share/man/man*/<name>.<section>[.gz]`` (English
pages only; symbolic links and ``.so`` pages are aliases of another page and are skipped,
counted). Where two files give the same section and name, the first in sorted (package, path)
order wins; the others are counted as clashes. An HTML collection's documents are its
``*.html`` files; a page without any visible text is skipped, counted. The date of an
installed package's document is the date of the top entry of the package's
``changelog.Debian.gz`` (YYYY-MM-DD as written there); package descriptions have none (null).
"""

from __future__ import annotations

import argparse
import email.utils
import gzip
import html
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import apt_pkg

BASE_URL = "http://docs.localhost/"
MAN_ROOT = Path("/usr/share/man")
APT_DIR = Path("/opt/worldtrace/apt")
HTML_COLLECTIONS: tuple[tuple[str, str, Path], ...] = (
    # (collection, package, the folder its HTML pages are in)
    ("python", "python3.11-doc", Path("/usr/share/doc/python3.11/html")),
    ("postgresql", "postgresql-doc-15", Path("/usr/share/doc/postgresql-doc-15/html")),
    ("git", "git-doc", Path("/usr/share/doc/git-doc")),
    ("sqlite", "sqlite3-doc", Path("/usr/share/doc/sqlite3")),
    ("debian-reference", "debian-reference-en", Path("/usr/share/debian-reference")),
)
COLLECTIONS = ("man", *(name for name, _, _ in HTML_COLLECTIONS), "packages")
MAN_FILE = re.compile(r"^(?P<name>.+)\.(?P<section>[0-9][a-z0-9]*)(?:\.gz)?$")
SKIPPED_TAGS = {"script", "style", "head", "noscript", "template"}
BLOCK_TAGS = {
    "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "dt", "dd",
    "table", "section", "article", "blockquote", "hr", "title", "ul", "ol", "dl", "td", "th",
}  # fmt: skip


class TextExtractor(HTMLParser):
    """The visible text of an HTML page: no head, scripts or styles; blocks on their own lines."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.preformatted = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Enter a skipped element, or break the line at a block."""
        if tag in SKIPPED_TAGS:
            self.skipping += 1
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")
        if tag == "pre":
            self.preformatted += 1

    def handle_endtag(self, tag: str) -> None:
        """Leave a skipped element, or break the line at a block."""
        if tag in SKIPPED_TAGS:
            self.skipping = max(self.skipping - 1, 0)
        elif tag in BLOCK_TAGS:
            self.parts.append("\n")
        if tag == "pre":
            self.preformatted = max(self.preformatted - 1, 0)

    def handle_data(self, data: str) -> None:
        """Keep text outside skipped elements; a source line break is a space outside <pre>."""
        if not self.skipping:
            self.parts.append(data if self.preformatted else data.replace("\n", " "))

    def text(self) -> str:
        """The text, each line's whitespace collapsed, empty lines dropped."""
        lines = (" ".join(line.split()) for line in "".join(self.parts).splitlines())
        return "\n".join(line for line in lines if line)


def page_text(markup: str) -> str:
    """The visible text of an HTML page."""
    extractor = TextExtractor()
    extractor.feed(markup)
    extractor.close()
    return extractor.text()


TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def page_title(markup: str) -> str | None:
    """The page's <title>, unescaped and with whitespace collapsed; None when it has none."""
    found = TITLE.search(markup)
    if not found:
        return None
    title = " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())
    return title or None


def changelog_date(package: str, siblings: list[str]) -> str | None:
    """YYYY-MM-DD of the top entry of the package's Debian changelog, None when it has none.

    ``changelog.Debian.gz``, or ``changelog.gz`` of a native package (apt, dpkg); a package
    that ships neither (debian-reference-en) takes the changelog of a package built from the
    same source (``siblings``, sorted).
    """
    for owner in [package, *siblings]:
        for name in ("changelog.Debian.gz", "changelog.gz"):
            path = Path("/usr/share/doc") / owner / name
            try:
                with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
                    for line in handle:
                        if line.startswith(" -- "):
                            written = line.rsplit(">", 1)[-1].strip()
                            return email.utils.parsedate_to_datetime(written).date().isoformat()
            except (OSError, ValueError, TypeError):
                continue
    return None


def installed_packages() -> dict[str, tuple[str, str]]:
    """Every installed package's (version, source package), by name without architecture."""
    output = subprocess.run(
        [
            "dpkg-query",
            "-W",
            "-f",
            "${Package}\t${Version}\t${source:Package}\t${db:Status-Status}\n",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    packages = {}
    for line in output.splitlines():
        name, version, source, status = line.split("\t")
        if status == "installed":
            packages[name] = (version, source)
    return packages


def file_owners() -> dict[str, str]:
    """Which installed package ships each path, from dpkg's file lists."""
    owners: dict[str, str] = {}
    for listing in sorted(Path("/var/lib/dpkg/info").glob("*.list")):
        package = listing.stem.split(":", 1)[0]
        for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
            owners.setdefault(line, package)
    return owners


def is_alias(path: Path) -> bool:
    """True for a man page that only includes another (``.so``)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:  # type: ignore[operator]
        for line in handle:
            if line.startswith(('.\\"', "'\\\"")) or not line.strip():
                continue
            return line.startswith(".so ")
    return True


def render_man(path: Path) -> tuple[bytes, str]:
    """The page as mandoc's HTML, and mandoc's complaints.

    Exit status 2 (errors) and 3 (unsupported requests, e.g. util-linux's ``.mso``) still give
    the page: mandoc skips what it cannot render, as ``man`` itself shows it. 4 and up (bad
    arguments, system errors) or no output is a failure.
    """
    result = subprocess.run(["mandoc", "-T", "html", str(path)], capture_output=True, check=False)
    if result.returncode > 3 or not result.stdout:
        raise RuntimeError(f"mandoc {path} exited {result.returncode}: {result.stderr[-500:]!r}")
    return result.stdout, result.stderr.decode("utf-8", "replace")


def man_title(name: str, section: str, text: str) -> str:
    """``name(section): what the NAME section says it is``."""
    lines = text.splitlines()
    for index, line in enumerate(lines[:-1]):
        if line.strip().upper() == "NAME":
            summary = lines[index + 1]
            for dash in (" \u2014 ", " \u2013 ", " - ", " -- "):
                if dash in summary:
                    summary = summary.split(dash, 1)[1]
                    break
            return f"{name}({section}): {summary.strip()}"
    return f"{name}({section})"


def man_documents(site: Path, stats: dict[str, Any]) -> list[dict[str, Any]]:
    """Render every English man page; one document each."""
    owners = file_owners()
    skipped: Counter[str] = Counter()
    chosen: dict[tuple[str, str], tuple[str, Path]] = {}
    candidates = []
    for folder in sorted(MAN_ROOT.glob("man*")):
        for path in sorted(folder.iterdir()):
            if path.is_symlink():
                skipped["alias (symbolic link)"] += 1
                continue
            matched = MAN_FILE.match(path.name)
            if not path.is_file() or not matched:
                skipped["not a man page file name"] += 1
                continue
            candidates.append((owners.get(str(path), ""), str(path), matched))
    for package, path_text, matched in sorted(candidates, key=lambda item: item[:2]):
        path = Path(path_text)
        if is_alias(path):
            skipped["alias (.so)"] += 1
            continue
        key = (matched["section"], matched["name"])
        if key in chosen:
            skipped["clash (same section and name)"] += 1
            continue
        chosen[key] = (package, path)

    def render(item: tuple[tuple[str, str], tuple[str, Path]]) -> dict[str, Any] | None:
        (section, name), (package, path) = item
        try:
            markup, _ = render_man(path)
        except RuntimeError as error:
            print(error, file=sys.stderr)
            return None
        target = site / "man" / section / f"{name}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(markup)
        text = page_text(markup.decode("utf-8", "replace"))
        return {
            "url": f"{BASE_URL}man/{section}/{name}.html",
            "title": man_title(name, section, text),
            "package": package or None,
            "bytes": len(markup),
            "text": text,
        }

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        rendered = list(pool.map(render, sorted(chosen.items())))
    documents = [document for document in rendered if document is not None]
    skipped["mandoc failed"] += len(rendered) - len(documents)
    stats["skipped"]["man"] = dict(skipped)
    return documents


def html_documents(
    site: Path, collection: str, package: str, folder: Path, stats: dict[str, Any]
) -> list[dict[str, Any]]:
    """One document per HTML page of a documentation package, the folder linked into the site."""
    (site / collection).symlink_to(folder, target_is_directory=True)
    skipped: Counter[str] = Counter()
    documents = []
    for path in sorted(folder.rglob("*.html")):
        if not path.is_file():
            skipped["broken link"] += 1
            continue
        relative = path.relative_to(folder).as_posix()
        data = path.read_bytes()
        markup = data.decode("utf-8", "replace")
        text = page_text(markup)
        if not text:
            skipped["no visible text"] += 1
            continue
        documents.append(
            {
                "url": f"{BASE_URL}{collection}/{relative}",
                "title": page_title(markup) or relative,
                "package": package,
                "bytes": len(data),
                "text": text,
            }
        )
    stats["skipped"][collection] = dict(skipped)
    return documents


def description_html(name: str, fields: dict[str, str], long_text: str) -> str:
    """The generated page of one binary package: its fields and its description."""
    summary, _, body = long_text.partition("\n")
    blocks: list[str] = []
    paragraph: list[str] = []
    verbatim: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(f"<p>{html.escape(' '.join(paragraph))}</p>")
            paragraph.clear()
        if verbatim:
            blocks.append(f"<pre>{html.escape(chr(10).join(verbatim))}</pre>")
            verbatim.clear()

    # Debian policy 5.6.13: " ." is an empty line, lines starting with two spaces are verbatim.
    for line in body.splitlines():
        if line.strip() == ".":
            flush()
        elif line.startswith("  "):
            if paragraph:
                flush()
            verbatim.append(line[1:])
        else:
            if verbatim:
                flush()
            paragraph.append(line.strip())
    flush()
    rows = "".join(
        f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>"
        for key, value in fields.items()
        if value
    )
    title = html.escape(f"{name}: {summary.strip()}")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{title}</title></head>\n<body>\n<h1>Package: {html.escape(name)}</h1>\n"
        f"<p><strong>{html.escape(summary.strip())}</strong></p>\n"
        f"<h2>Description</h2>\n{''.join(blocks)}\n<h2>Details</h2>\n<dl>{rows}</dl>\n"
        "</body></html>\n"
    )


def long_descriptions() -> dict[tuple[str, str], str]:
    """Translation-en's full descriptions by (package, Description-md5)."""
    found = {}
    path = Path("/tmp/Translation-en")
    path.write_bytes(gzip.decompress((APT_DIR / "Translation-en.gz").read_bytes()))
    try:
        with open(path, "rb") as handle:
            for section in apt_pkg.TagFile(handle):
                found[(section["Package"], section["Description-md5"])] = section["Description-en"]
    finally:
        path.unlink()
    return found


def package_documents(site: Path, stats: dict[str, Any]) -> list[dict[str, Any]]:
    """One generated page per binary package of the apt index (the highest version of a name)."""
    descriptions = long_descriptions()
    records: dict[str, dict[str, str]] = {}
    path = Path("/tmp/Packages")
    path.write_bytes(gzip.decompress((APT_DIR / "Packages.gz").read_bytes()))
    try:
        with open(path, "rb") as handle:
            for section in apt_pkg.TagFile(handle):
                record = {key: section[key] for key in section.keys()}  # noqa: SIM118 (no __iter__)
                name = record["Package"]
                held = records.get(name)
                if held is None or apt_pkg.version_compare(record["Version"], held["Version"]) > 0:
                    records[name] = record
    finally:
        path.unlink()
    folder = site / "packages"
    folder.mkdir(parents=True)
    missing_long = 0
    documents = []
    for name in sorted(records):
        record = records[name]
        long_text = descriptions.get((name, record.get("Description-md5", "")))
        if long_text is None:
            missing_long += 1
            long_text = record.get("Description", "")
        fields = {
            key: record.get(key, "")
            for key in ("Version", "Section", "Priority", "Source", "Maintainer", "Homepage")
        }
        fields["Depends"] = record.get("Depends", "")
        markup = description_html(name, fields, long_text).encode("utf-8")
        (folder / f"{name}.html").write_bytes(markup)
        documents.append(
            {
                "url": f"{BASE_URL}packages/{name}.html",
                "title": f"{name}: {long_text.partition(chr(10))[0].strip()}",
                "package": name,
                "bytes": len(markup),
                "text": page_text(markup.decode("utf-8")),
            }
        )
    stats["skipped"]["packages"] = {"no long description (short one used)": missing_long}
    stats["apt_index_records"] = len(records)
    return documents


def write_index_page(site: Path, counts: dict[str, int]) -> None:
    """The site's front page: a link to each collection (not a document)."""
    items = "".join(
        f'<li><a href="/{name}/">{html.escape(name)}</a> ({count} documents)</li>'
        for name, count in counts.items()
    )
    (site / "index.html").write_text(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>docs.localhost'
        f"</title></head><body><h1>Documentation</h1><ul>{items}</ul></body></html>\n",
        encoding="utf-8",
    )


def main() -> None:
    """Build the site, documents.jsonl and the texts for the index."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True, help="the corpus folder (/srv/search)")
    parser.add_argument("--texts", type=Path, required=True, help="documents with their text")
    parser.add_argument("--stats", type=Path, default=Path("/tmp/corpus_stats.json"))
    args = parser.parse_args()
    apt_pkg.init()
    started = time.monotonic()
    site = args.out / "site"
    site.mkdir(parents=True)
    installed = installed_packages()
    stats: dict[str, Any] = {"skipped": {}, "seconds": {}}
    by_collection: dict[str, list[dict[str, Any]]] = {}
    step = time.monotonic()
    by_collection["man"] = man_documents(site, stats)
    stats["seconds"]["man"] = round(time.monotonic() - step, 3)
    for collection, package, folder in HTML_COLLECTIONS:
        step = time.monotonic()
        by_collection[collection] = html_documents(site, collection, package, folder, stats)
        stats["seconds"][collection] = round(time.monotonic() - step, 3)
    step = time.monotonic()
    by_collection["packages"] = package_documents(site, stats)
    stats["seconds"]["packages"] = round(time.monotonic() - step, 3)
    dates: dict[str, str | None] = {}
    counts = {}
    with (
        open(args.out / "documents.jsonl", "w", encoding="utf-8") as listing,
        open(args.texts, "w", encoding="utf-8") as texts,
    ):
        for collection in COLLECTIONS:
            counts[collection] = len(by_collection[collection])
            for document in by_collection[collection]:
                package = document["package"]
                if collection == "packages":
                    date = None
                else:
                    if package not in dates:
                        source = installed.get(package, ("", ""))[1]
                        siblings = sorted(
                            name
                            for name, (_, other) in installed.items()
                            if other == source and name != package
                        )
                        dates[package] = changelog_date(package, siblings) if package else None
                    date = dates[package]
                line = {
                    "url": document["url"],
                    "title": document["title"],
                    "date": date,
                    "collection": collection,
                    "package": package,
                    "bytes": document["bytes"],
                }
                listing.write(json.dumps(line, ensure_ascii=False) + "\n")
                texts.write(json.dumps({**line, "text": document["text"]}, ensure_ascii=False))
                texts.write("\n")
    write_index_page(site, counts)
    sources = sorted({p for p in dates if p} | {p for _, p, _ in HTML_COLLECTIONS} | {"mandoc"})
    stats.update(
        counts=counts,
        total=sum(counts.values()),
        package_versions={name: installed.get(name, (None,))[0] for name in sources},
        package_dates=dict(sorted((k, v) for k, v in dates.items() if k)),
        corpus_seconds=round(time.monotonic() - started, 3),
    )
    args.stats.write_text(json.dumps(stats, indent=1, sort_keys=True), encoding="utf-8")
    print(json.dumps({"counts": counts, "seconds": stats["seconds"]}))


if __name__ == "__main__":
    main()
