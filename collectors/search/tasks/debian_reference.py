"""Questions about Debian package management, answered by the Debian Reference.

The pages are debian-reference-en's chapters, ``debian-reference/<chapter>.en.html`` as the
package names its files.
"""

from __future__ import annotations

from worldtrace.collectors.search.actions import dict_memory, web_extractor, web_search
from worldtrace.collectors.search.tasks import ANSWER_KEY, SearchTask, search_task

REFERENCE = "http://docs.localhost/debian-reference/"

TASKS: tuple[SearchTask, ...] = (
    search_task(
        "which-package-owns-file",
        "debian-reference",
        "On Debian, which dpkg command tells me which installed package a given file belongs to?",
        answers=("dpkg -S", "dpkg --search"),
        documents=(REFERENCE + "ch02.en.html",),
        passage="list installed packages which have matching file name",
        query="debian which installed package has matching file name dpkg",
        goal="the command that finds the package owning a file",
        # `dpkg -s` shows a package's status: the case is the answer.
        case_sensitive=True,
    ),
    search_task(
        "search-archive-for-file",
        "debian-reference",
        "On Debian, how do I find which package in the archive (installed or not) contains a "
        "file with a given name?",
        answers=("apt-file search", "apt-file"),
        documents=(REFERENCE + "ch02.en.html",),
        passage="list packages in archive which have matching file name",
        query="debian find package in archive with matching file name",
        goal="the command that searches the archive for a file name",
    ),
    search_task(
        "reconfigure-package",
        "debian-reference",
        "On Debian, which command asks a package's configuration questions again to "
        "reconfigure an installed package?",
        answers=("dpkg-reconfigure",),
        documents=(REFERENCE + "ch02.en.html",),
        passage="reconfigure the exact package",
        # The first results are dpkg-reconfigure's own manual page and unrelated packages;
        # the name it gives, with the chapter's subject, finds the reference.
        steps=(
            web_search("debian reconfigure installed package"),
            web_search("Debian package management dpkg-reconfigure"),
            web_extractor(REFERENCE + "ch02.en.html", "the command that reconfigures a package"),
            dict_memory("add", ANSWER_KEY, "dpkg-reconfigure"),
        ),
    ),
    search_task(
        "automatic-security-upgrades",
        "debian-reference",
        "Which Debian package makes APT install security upgrades automatically?",
        answers=("unattended-upgrades",),
        documents=(REFERENCE + "ch02.en.html",),
        passage="enhancement package for APT to enable automatic installation of security",
        query="debian automatic installation of security upgrades apt",
        goal="the package that installs security upgrades automatically",
    ),
    search_task(
        "remove-unused-dependencies",
        "debian-reference",
        "Which apt subcommand removes automatically installed packages that are no longer "
        "required?",
        answers=("autoremove", "apt autoremove", "apt-get autoremove"),
        documents=(REFERENCE + "ch02.en.html",),
        passage="remove auto-installed packages which are no longer required",
        query="apt remove auto-installed packages no longer required",
        goal="the subcommand that removes unneeded automatically installed packages",
    ),
)
