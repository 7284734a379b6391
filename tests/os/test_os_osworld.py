"""The os domain's rows are OSWorld's: checked against OSWorld's own code on the real desktop.

For each application of the image, in real states (just started, a menu open, text typed or
selected), one desktop state is read twice: by our driver (rendered by the domain's renderer)
and by OSWorld's server-side walk run inside the same desktop (``osworld/server_tree.py``),
whose XML OSWorld's own ``linearize_accessibility_tree`` from the ``desktop-env`` 1.0.2 package
turns into its table (``osworld/linearize.py``, run by the venv ``scripts/osworld_venv.sh``
makes). The two tables must be equal, application by application, row for row. The share of
OSWorld's lines that the legacy five-column rows (those of runs recorded before) also had is
printed beside it (``pytest -s``), as the before figure.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from worldtrace.collectors.os.image_definition import DRIVER, IMAGE
from worldtrace.collectors.os.render import (
    HEADER,
    LEGACY,
    LEGACY_HEADER,
    TABLE,
    kept_nodes,
    legacy_node_row,
    node_row,
    walk,
)
from worldtrace.sandboxes.channel import DriverChannel
from worldtrace.sandboxes.docker import DockerSandbox
from worldtrace.sandboxes.images import ensure_image
from worldtrace.sandboxes.limits import Limits

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
HELPERS = Path(__file__).parent / "osworld"
OSWORLD_PYTHON = ROOT / ".venv-osworld" / "bin" / "python"
SERVER_SCRIPT = "/tmp/osworld_server_tree.py"
HOME = "/home/user"

Call = dict[str, Any]


def call(function: str, *args: Any) -> Call:
    """One pyautogui call as the driver takes it."""
    return {"function": function, "args": list(args), "kwargs": {}}


def open_menu(name: str) -> str:
    """A step that clicks the application's menu called ``name`` (found in the tree)."""
    return f"menu:{name}"


# (application name in AT-SPI, argv, steps; a state is read after the start and each step)
APPLICATIONS: list[tuple[str, list[str], list[Call | str]]] = [
    (
        "mousepad",
        ["mousepad", f"{HOME}/Documents/notes.txt"],
        [
            call("hotkey", "ctrl", "end"),
            call("write", '\tTabbed "quoted" line\n'),
            call("hotkey", "shift", "up"),
            open_menu("File"),
        ],
    ),
    ("gnumeric", ["gnumeric", f"{HOME}/Documents/budget.csv"], [open_menu("Edit")]),
    ("pcmanfm", ["pcmanfm", HOME], [open_menu("Go")]),
    ("galculator", ["galculator"], [call("write", "12+7"), open_menu("Edit")]),
    ("lxterminal", ["lxterminal", "--no-remote"], [call("write", "ls -a\n"), open_menu("File")]),
]


class Desktop:
    """One desktop sandbox with our driver, and OSWorld's walk run in the same session."""

    def __init__(self, argv: list[str]) -> None:
        image = ensure_image(IMAGE)
        self.sandbox = DockerSandbox(
            image, limits=Limits(disk_mb=128, cpus=2, memory_mb=1536), network="none"
        ).start()
        self.channel = DriverChannel(self.sandbox.open_stream(list(DRIVER)), "desktop driver")
        self.state = self.request({"op": "start", "launch": [argv]})
        self.sandbox.put_file(SERVER_SCRIPT, (HELPERS / "server_tree.py").read_bytes())
        # The driver's files are on the container's /dev/shm (a tmpfs: read it with cat).
        found = self.sandbox.exec(["cat", "/dev/shm/desktop-session/session.json"], timeout=30)
        session = json.loads(found.stdout)
        self.env = {"DISPLAY": ":0", "DBUS_SESSION_BUS_ADDRESS": session["bus_address"]}

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """One driver request that must be served."""
        reply = self.channel.request(request, 90)
        assert "driver_error" not in reply, reply["driver_error"]
        assert reply.get("error") is None, reply["error"]
        return reply

    def step(self, app: str, step: Call | str) -> None:
        """Run one step of the state list."""
        if isinstance(step, str):
            name = step.split(":", 1)[1]
            menu = next(
                node
                for node in walk(self.state["tree"])
                if node.get("app") == app and node.get("role") == "menu" and node["name"] == name
            )
            x, y = menu["x"] + menu["width"] // 2, menu["y"] + menu["height"] // 2
            step = call("click", x, y)
        self.state = self.request({"op": "act", "call": step, "quiet_s": 0.5, "settle_cap_s": 5})

    def osworld_xml(self) -> dict[str, str]:
        """OSWorld's server-side tree of each application, now."""
        result = self.sandbox.exec(
            ["/opt/worldtrace/venv/bin/python", SERVER_SCRIPT],
            env=self.env,
            user="user",
            timeout=60,
        )
        assert result.exit_code == 0, result.stderr.decode(errors="replace")
        return dict(json.loads(result.stdout)["apps"])

    def close(self) -> None:
        """Stop the session and the sandbox."""
        try:
            self.channel.request({"op": "stop"}, 30)
            self.channel.close()
        finally:
            self.sandbox.close()


def osworld_tables(xml: Mapping[str, str]) -> dict[str, str]:
    """OSWorld's ``linearize_accessibility_tree`` of each application's tree."""
    if not OSWORLD_PYTHON.exists():
        pytest.fail("OSWorld's reference venv is missing: run bash scripts/osworld_venv.sh")
    done = subprocess.run(
        [str(OSWORLD_PYTHON), str(HELPERS / "linearize.py")],
        input=json.dumps({"apps": list(xml.items())}),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return dict(json.loads(done.stdout)["apps"])


def app_tree(tree: Mapping[str, Any], app: str) -> Mapping[str, Any]:
    """The desktop root with only ``app``'s subtree under it."""
    children = [child for child in tree["children"] if child.get("app") == app]
    return {**tree, "children": children}


def our_table(tree: Mapping[str, Any], app: str, table: str) -> str:
    """Our rows of one application, under the header, as the renderer writes them."""
    if table == LEGACY:
        rows = [legacy_node_row(node) for node in kept_nodes(app_tree(tree, app), LEGACY)]
        return "\n".join([LEGACY_HEADER, *rows])
    return "\n".join([HEADER, *(node_row(node) for node in kept_nodes(app_tree(tree, app)))])


def five_columns(table: str) -> list[str]:
    """OSWorld's lines without the class and description columns (the legacy table's shape)."""
    lines = []
    for line in table.split("\n"):
        cells = line.split("\t")
        if len(cells) == 7:
            cells = [*cells[:3], *cells[5:]]
        lines.append("\t".join(cells))
    return lines


def shared(ours: list[str], theirs: list[str]) -> int:
    """How many lines the two lists have in common (as multisets)."""
    return sum((Counter(ours) & Counter(theirs)).values())


@pytest.fixture(scope="module")
def tally() -> Iterator[dict[str, list[int]]]:
    """Per application: [OSWorld lines, shared before, shared after, ours before, ours after]."""
    counts: dict[str, list[int]] = {}
    yield counts
    print("\nrows shared with OSWorld (desktop-env 1.0.2), lines of its table:")
    for app, (total, before, after, ours_before, ours) in counts.items():
        print(
            f"  {app}: OSWorld's lines in ours: before {before}/{total} ({before / total:.1%}),"
            f" after {after}/{total} ({after / total:.1%}); our lines in OSWorld's: before"
            f" {before}/{ours_before} ({before / ours_before:.1%}), after {after}/{ours}"
            f" ({after / ours:.1%})"
        )


@pytest.mark.parametrize(("app", "argv", "steps"), APPLICATIONS, ids=[a[0] for a in APPLICATIONS])
def test_rows_are_osworlds_in_every_state(
    app: str, argv: list[str], steps: list[Call | str], tally: dict[str, list[int]]
) -> None:
    desktop = Desktop(argv)
    try:
        states = 0
        for step in [None, *steps]:
            if step is not None:
                desktop.step(app, step)
            tree = desktop.state["tree"]
            theirs = osworld_tables(desktop.osworld_xml())
            # The launcher dock is in every desktop: its rows must agree too.
            for name in (app, "launcher"):
                assert name in theirs, sorted(theirs)
                ours = our_table(tree, name, TABLE)
                assert ours == theirs[name], (name, step)
                before = our_table(tree, name, LEGACY).split("\n")
                expected = five_columns(theirs[name])
                total, was, now, mine_before, mine = tally.setdefault(name, [0, 0, 0, 0, 0])
                tally[name] = [
                    total + len(expected) - 1,
                    was + shared(before[1:], expected[1:]),
                    now + shared(ours.split("\n")[1:], theirs[name].split("\n")[1:]),
                    mine_before + len(before) - 1,
                    mine + len(ours.split("\n")) - 1,
                ]
            states += 1
        assert states == len(steps) + 1
    finally:
        desktop.close()
