"""The documentation site builds in strict mode, and strict mode catches what it should.

`make docs` runs the same build into ``site/``. The site is MkDocs with the Material theme
(`mkdocs.yml`); its `validation` settings make a link to a missing page or anchor, and a page
left out of the nav, a warning, which ``--strict`` turns into a failed build. The README is
not part of the site, so its links into ``docs/`` are checked here against the built pages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "mkdocs.yml"
DOCS = REPO / "docs"


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """Run ``mkdocs build --strict`` for ``config`` into ``site``; the result, not raising."""
    # The Material theme prints a banner about MkDocs 2 on every build; it says nothing here.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    command += ["--config-file", str(config), "--site-dir", str(site)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def _nav_pages(nav: list[object]) -> set[str]:
    """Every page path named in a MkDocs nav, however deep its sections."""
    pages: set[str] = set()
    for entry in nav:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            if isinstance(value, str):
                pages.add(value)
            elif isinstance(value, list):
                pages |= _nav_pages(value)
    return pages


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real site, built strict once for the tests that read it."""
    site = tmp_path_factory.mktemp("site")
    result = _build(CONFIG, site)
    assert result.returncode == 0, result.stdout + result.stderr
    return site


def test_the_site_builds_strict_with_every_page_in_the_nav(built_site: Path) -> None:
    config = yaml.safe_load(CONFIG.read_text())
    assert config["strict"] is True
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert _nav_pages(config["nav"]) == pages
    for page in pages:
        stem = page.removesuffix(".md")
        html = "index.html" if stem == "index" else f"{stem.removesuffix('/index')}/index.html"
        assert (built_site / html).is_file(), page


def test_the_readme_links_into_docs_resolve(built_site: Path) -> None:
    links = re.findall(r"\]\((docs/[^)#\s]*)(?:#([^)\s]+))?\)", (REPO / "README.md").read_text())
    assert len(links) > 20
    for target, anchor in links:
        path = REPO / target
        assert path.is_file(), f"README links to {target}, which does not exist"
        if anchor:
            stem = path.relative_to(DOCS).with_suffix("")
            folder = stem.parent if stem.name == "index" else stem
            html = built_site / folder / "index.html"
            assert f'id="{anchor}"' in html.read_text(), f"README links to {target}#{anchor}"


DEAD_PAGE = "See [the old page](no-such-page.md).\n"
DEAD_ANCHOR = "See [a heading](index.md#no-such-heading).\n"


@pytest.mark.parametrize(
    ("body", "in_nav", "named"),
    [
        (DEAD_PAGE, True, "no-such-page.md"),
        (DEAD_ANCHOR, True, "no-such-heading"),
        ("# Forgotten\n\nA page nobody listed.\n", False, "extra.md"),
    ],
    ids=["dead-page-link", "dead-anchor", "page-not-in-nav"],
)
def test_strict_build_fails_on_a_broken_page(
    tmp_path: Path, body: str, in_nav: bool, named: str
) -> None:
    # The real config (theme, extensions, validation) over two small pages, so the build is
    # quick and fails only for what the extra page holds.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n## A heading\n\nText.\n")
    (docs / "extra.md").write_text(f"# Extra\n\n{body}")
    config = yaml.safe_load(CONFIG.read_text())
    config["docs_dir"] = str(docs)
    config["nav"] = [{"Home": "index.md"}] + ([{"Extra": "extra.md"}] if in_nav else [])
    config_file = tmp_path / "mkdocs.yml"
    config_file.write_text(yaml.safe_dump(config))

    result = _build(config_file, tmp_path / "site")

    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "Aborted with" in output and named in output, output
