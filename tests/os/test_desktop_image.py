"""The ``worldtrace/os`` image itself: pinned versions, the seeded home, the lean layers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from worldtrace.collectors.os.image_definition import HOME, IMAGE, VERSIONS_JSON
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.images import ensure_image
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def sandbox() -> Iterator[DockerSandbox]:
    """One sandbox of the image; nothing here changes it."""
    box = DockerSandbox(ensure_image(IMAGE), limits=Limits(disk_mb=64), network="none").start()
    try:
        yield box
    finally:
        box.close()


def test_versions_json_names_every_part(sandbox: DockerSandbox) -> None:
    versions = json.loads(sandbox.get_file(VERSIONS_JSON))
    expected = {
        "mousepad", "gnumeric", "pcmanfm", "galculator", "lxterminal", "libvte-2.91-0", "xvfb",
        "openbox", "at-spi2-core", "python3-pyatspi", "pyautogui",
    }  # fmt: skip
    assert expected <= set(versions), sorted(versions)
    assert all(isinstance(value, str) and value for value in versions.values()), versions
    assert versions["pyautogui"] == "0.9.54"
    # The same versions the system reports, not a hand-written list.
    probe = sandbox.exec(["dpkg-query", "--showformat=${Version}", "--show", "gnumeric"])
    assert probe.text == versions["gnumeric"]


def test_home_is_seeded_for_the_user(sandbox: DockerSandbox) -> None:
    listing = sandbox.exec(
        ["find", HOME, "-path", f"{HOME}/.*", "-prune", "-o", "-printf", "%u %P\\n"]
    )
    assert listing.exit_code == 0
    entries = dict(reversed(line.split(" ", 1)) for line in listing.text.splitlines())
    for path in (
        "Documents/notes.txt",
        "Documents/todo.txt",
        "Documents/budget.csv",
        "Pictures/sunset.png",
        "Pictures/forest.png",
        "Desktop",
    ):
        assert entries.get(path) == "user", (path, entries)
    assert sandbox.exec(["ls", "-A", f"{HOME}/Desktop"]).text == ""
    budget = sandbox.get_file(f"{HOME}/Documents/budget.csv").decode()
    assert budget.splitlines()[0] == "Item,Category,Amount"
    assert sandbox.get_file(f"{HOME}/Pictures/sunset.png")[:8] == b"\x89PNG\r\n\x1a\n"


def test_writable_paths_and_lean_layers(sandbox: DockerSandbox) -> None:
    labels = sandbox.container.image.labels
    assert labels["worldtrace.writable"] == "/tmp /home/user"
    # The user writes their home; the rest of the file system is read-only.
    wrote = sandbox.exec(["sh", "-c", f"echo x > {HOME}/Desktop/x && cat {HOME}/Desktop/x"],
                         user="user")  # fmt: skip
    assert wrote.exit_code == 0 and wrote.text == "x\n"
    assert sandbox.exec(["touch", "/opt/x"]).exit_code != 0
    assert (
        sandbox.exec(["sh", "-c", "ls /var/lib/apt/lists | grep -v -e lock -e partial"]).text == ""
    )
    # The desktop's translations are left out by dpkg (about 120 MB); the base image's stay.
    translations = sandbox.exec(
        ["find", "/usr/share/locale", "-name", "gtk30.mo", "-o", "-name", "gnumeric*.mo"]
    )
    assert translations.exit_code == 0 and translations.text == ""
    # pyautogui imports in the driver's Python without a display's help beyond its own.
    modules = sandbox.exec(
        [
            "/opt/worldtrace/venv/bin/python",
            "-c",
            "import pyatspi, Xlib, PIL, pytweening, pyscreeze",
        ]
    )
    assert modules.exit_code == 0, modules.stderr.decode(errors="replace")
