r"""Run the desktop of the os domain inside the sandbox and observe it: X11, AT-SPI, pyautogui.

Started as root with ``/opt/worldtrace/venv/bin/python`` (Python 3.11 with Debian's
python3-pyatspi, python3-xlib, python3-pil, python3-gi and pyautogui from PyPI) for the
lifetime of an episode, it drops to ``user`` (uid 1000, home /home/user) at once and runs the
whole desktop session as that user: the applications' accessibility connections (AT-SPI's
peer-to-peer sockets) accept their own user only. In a sandbox with the agent's private view
(sandboxes/view.py: the image's label ``worldtrace.view=private``) every process of the
session (Xvfb, the buses, openbox, the dock, the launched applications and whatever they
start) runs inside that view, entered with nsenter and become ``user`` with setpriv, while the
driver stays outside it: from the desktop's terminal, ``ps`` shows the session and the
agent's own processes under the view's ``/sbin/init``, never the driver. To enter the view
later the driver keeps root as its saved user id only (the way back, used by nothing but the
child that execs nsenter); it reads the session's processes through the view's own /proc, so
the pids it compares (AT-SPI's, _NET_WM_PID, the "exited" list) are the ones the session
itself knows. One JSON request per stdin line, exactly
one JSON reply per stdout line; a reply echoes its request's ``id``. Nothing else is ever
written to stdout: the reply channel is a private copy of the original stdout and fd 1 is
pointed at stderr.

An *observation* (the reply to start, act and observe) is:
  {"tree": <root node> | null, "nodes": int, "truncated": bool, "tree_error": str | null,
   "screenshot_png": base64 str | null, "screen": {"width", "height"},
   "focused": {"app": str | null, "window": str | null},
   "windows": [{"app", "title", "x", "y", "width", "height", "active": bool, "stack": int,
                "shown": float}], "popups": [{"app", "x", "y", "width", "height"}],
   "exited": [{"app", "pid"}], "tree_digest": sha256 hex, "timing": {"tree_s", "screenshot_s",
   "rereads", ...}}
A node is {"role", "name", "text", "description", "states", "attributes", "x", "y", "width",
"height", "app", "children"}: "role" the AT-SPI role name ("push button", "text", "table
cell", ...), "name" and "description" strings, "text" the Text interface's content (its first
TEXT_LIMIT = 100000 characters; null for a node without the interface; "text_length" is the
whole content's length, so a reader can tell and mark a cut), "caret" (the caret's character
offset) and "selections" ([[start, end], ...], character offsets) for a node with the Text
interface that is focused or editable (absent otherwise), "states" the AT-SPI
state names in the order of the state enumeration ("enabled", "showing", ...), "attributes"
the object attributes {name: value}, "x"/"y"/"width"/"height" its extents in screen
coordinates (null without the Component interface), "app" the name of its application,
"children" its children in index order. A property the application fails to give is null
(a list or {} for states and attributes). The root is the desktop (role "desktop frame", the
screen's extents, app null); its children are the applications ordered by name, then by pid
(the registry's order depends on which application registered first: not the same every run).
Nodes are visited depth first; past ``max_nodes`` nodes (the root included) no node is
visited and "truncated" is true; "nodes" counts the nodes in "tree". An application whose
walk takes longer than APP_TIME_LIMIT_S = 20 s keeps the nodes visited so far; one that does
not answer a call within CALL_TIMEOUT_MS = 1000 ms, twice (its walk is tried again once: a
loading application on a busy machine misses it once), keeps the nodes visited before it; both are
named in "tree_error" ("<app> (pid N): <why>", joined by "; "), which is null otherwise. The
tree is null, with "tree_error" starting "the accessibility tree is unavailable", when the
registry cannot be read or holds no application at all (the launcher dock always registers, so
an empty registry means the AT-SPI bus was lost: the applications stay on the dead one).
"exited" names the applications of this driver's previous observation whose process has ended
since (crashed, killed or closed), in pid order; [] in the first observation.
"tree_digest" is the sha256 of ``json.dumps(tree, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` encoded as UTF-8 (the tree null: of "null"). The tree, the windows and the
screenshot are of one moment: when the screen changed while they were read, the desktop is let
settle (the defaults below) and they are read again, at most OBSERVE_REREADS = 2 times
("timing"'s "rereads"). The screenshot is the whole
virtual screen as PNG. "windows" are the window manager's managed windows
(_NET_CLIENT_LIST, in mapping order; the launcher dock among them): "app" is the AT-SPI
application of the window's process (_NET_WM_PID), else the window's WM_CLASS instance;
"title" its _NET_WM_NAME (else WM_NAME); x/y/width/height its client area in screen
coordinates; "active" whether it is _NET_ACTIVE_WINDOW; "stack" its place in the window
manager's stacking order, 0 the topmost (_NET_CLIENT_LIST_STACKING); "shown" the share of its
client area on the screen that no window above it covers and that is mapped and not minimized
(0.0: hidden, behind others or minimized; 1.0: wholly in view), to two decimals. "focused"
is the active window's app and title (null when no window is active). "popups" are the mapped
override-redirect windows at least POPUP_MIN_SIZE = 4 pixels wide and high (open menus,
drop-down lists, tooltips: the window manager does not manage them), topmost first: "app" from
_NET_WM_PID when the window has one (else null), x/y/width/height on the screen.

Requests and replies:
  {"id", "op": "start", "width" (default 1280), "height" (default 800), "launch": [[argv]...],
   "max_nodes" (default 5000, for the first observation)}
      -> observation + "start_s" + "versions" (/opt/worldtrace/versions.json).
      Starts, as ``user`` (inside the agent's view when there is one): Xvfb :0 (width x
      height x 24), a D-Bus session bus, the AT-SPI bus (at-spi-bus-launcher), openbox
      (config/openbox-rc.xml, installed as its system-wide /etc/xdg/openbox/rc.xml: normal
      windows open maximized; nothing is launched before it answers a
      _NET_REQUEST_FRAME_EXTENTS) and the launcher dock (launcher.py, installed as
      /usr/local/bin/launcher: buttons Text Editor, Spreadsheet, File Manager, Calculator,
      Terminal: lxterminal), then each ``launch`` argv in /home/user with GTK accessibility on
      (GTK_MODULES=gail:atk-bridge). Waits until each launched process (or a child of it) has
      a window openbox manages and, unless it has no AT-SPI (e.g. xterm), a showing frame in the
      AT-SPI tree, and until its window is the active one (the first keys of a task go to it:
      a frame shows before openbox maps and focuses it) and above the other launched programs'
      windows in the stacking order (openbox raises what it focuses, but a read between the two
      listed a maximized, active window as hidden); the programs start one after another, each
      once the one before is shown (started together, whichever mapped last was on top); at
      most LAUNCH_TIMEOUT_S = 45 s in all, then lets the desktop settle (the defaults below)
      and observes. A launch that fails or shows no window in time is a driver_error (and the
      session is stopped); a second start without a stop too.
  {"id", "op": "act", "call": {"function", "args": [...], "kwargs": {...}}, "quiet_s" (default
   0.3), "settle_cap_s" (default 3), "max_nodes" (default 5000)}
      -> observation + "error" (null, or why the call was refused or failed) and "timing"
      {"action_s", "settle_s", "tree_s", "screenshot_s"}.
      "function" is one of click, doubleClick, rightClick, moveTo, dragTo, write, typewrite,
      press, hotkey, scroll, keyDown, keyUp, mouseDown, mouseUp (run by pyautogui against
      the display, with FAILSAFE off and no pause), or WAIT, DONE, FAIL (no input). A call
      that presses at a point (click, doubleClick, rightClick, mouseDown with x and y) first
      moves the pointer there and lets it rest APPROACH_S = 0.15 s, unless it is there
      already, as a hand does: the application sees the pointer arrive before the press.
      Before any input the call is checked and refused with "error" (nothing done, no
      settling) when: the function is unknown; the arguments do not fit pyautogui's
      signature or reach a parameter outside the allowed ones (x, y, clicks, interval,
      button, duration, message, keys, presses, key, mouseDownUp: no tween, logScreenshot,
      _pause); a coordinate is not a number or is off the screen; a key name is not one
      pyautogui can press here, or a character of ``write`` has no key; button is not left,
      middle or right; duration > 5 s, interval > 1 s, clicks or presses outside 1..100,
      scroll clicks outside -100..100, or a message longer than 10000 characters. An
      exception raised by pyautogui is the "error" too (after settling, since input may have
      happened). Settling: after the input, wait until neither an AT-SPI event (object:*,
      window:*) nor a screen change (XDamage on the root window) happened for ``quiet_s``
      and no program the input started (a dock button, a command typed in a terminal) that
      uses X (libX11 or libxcb mapped) is still without a managed window or (given
      NO_ACCESSIBILITY_GRACE_S without AT-SPI) without a showing, non-empty frame in the AT-SPI
      tree, and no application shows a top-level window (an AT-SPI child of the application
      other than a menu's or tooltip's) that openbox does not manage yet, and no normal or
      dialog window managed since the input (a dialog it opened) is still neither active nor
      marked _NET_WM_STATE_DEMANDS_ATTENTION (openbox does one of the two with every such
      window), and, after pointer input, at least HOVER_S = 0.8 s (a tooltip's delay), and
      while nothing at all happened since the input at least REACTION_S = 1 s, at most
      ``settle_cap_s``: a starting application is quiet while it loads. WAIT settles for
      exactly ``settle_cap_s`` (a pause); DONE and FAIL do not settle.
      With "budget_s" (the seconds the host gives the whole call: the step's time left), the
      input and its settling end by ``budget_s`` less a reserve for the observation (twice the
      last act's observation time plus OBSERVE_RESERVE_S, at most half the budget): a call
      whose own waits (its intervals and duration) outlast that is refused before any input;
      one that runs over anyway is stopped at its next wait once the deadline has come, every
      key and button still down is released, and its "error" says it was stopped; the settle
      cap shrinks to what is left.
      Characters are typed on the key that holds them at the shift level pyautogui presses
      (the default X map has ``<`` unshifted on a key where shift gives ``>``).
  {"id", "op": "observe", "max_nodes", "identify" (default false)} -> observation; with
      "identify", also "applications": one {"name", "pid", "executable", "launched"} per
      application of the tree, in order: the pid is the AT-SPI bus's (its connection's
      credentials), the executable the kernel's (/proc/<pid>/exe), "launched" the argv[0] of
      the start's ``launch`` program the process belongs to when it runs that program's
      executable, else null. A task's check reads only those (the name is the application's
      own choice: GLib's prgname).
  {"id", "op": "stop"} -> {"stopped": true}: every other process of ``user`` is killed and the X
      lock files removed (the home folder stays). Stdin EOF does the same.
A request the driver could not serve gets {"id", "driver_error": "..."} (an unknown op, an act
before start, a bad request field, ...).
``desktop_driver.py --observe [--max-nodes N]`` prints one observation line of the running
session (found through /dev/shm/desktop-session/session.json, written at start before any
input) and exits: the host's last look when the driver is lost. With no session: tree null and
tree_error "no desktop session". It reads only the session's own servers: the accessibility
bus at the address recorded at start (not the root window's AT_SPI_BUS, which any X client
sets), and only while the processes recorded at start (by their sockets' peer credentials)
answer its X and bus connections, before and after it reads; otherwise tree null and
tree_error "the accessibility tree is unavailable: the <x|a11y> socket is served by ...".
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import errno
import hashlib
import inspect
import io
import json
import os
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

import driver_runtime as runtime

SESSION_USER = "user"
HOME = "/home/user"
DISPLAY = ":0"
RUNTIME_DIR = Path("/tmp/runtime-user")
# The driver's own files live on the container's /dev/shm, which the agent's view (its own
# /dev/shm) never shows: nothing of ours in the agent's /tmp.
LOG_DIR = Path("/dev/shm/desktop-session")
SESSION_FILE = LOG_DIR / "session.json"
HERE = Path(__file__).resolve().parent
VERSIONS_JSON = HERE / "versions.json"
# Outside /opt/worldtrace: the session runs in the agent's view, which does not show that folder.
LAUNCHER = Path("/usr/local/bin/launcher")
OPENBOX_RC = Path("/etc/xdg/openbox/rc.xml")
AT_SPI_BUS_LAUNCHER = "/usr/libexec/at-spi-bus-launcher"

DEFAULT_WIDTH, DEFAULT_HEIGHT = 1280, 800
DEFAULT_MAX_NODES = 5000
DEFAULT_QUIET_S = 0.3
DEFAULT_SETTLE_CAP_S = 3.0
MAX_SETTLE_CAP_S = 60.0
TEXT_LIMIT = 100_000
# 20 s, not 5: on a busy machine gnumeric's walk alone took 5-8 s, so its tree was cut in
# some runs and whole in others (a hung application is caught by CALL_TIMEOUT_MS anyway).
APP_TIME_LIMIT_S = 20.0
CALL_TIMEOUT_MS = 1000
STARTUP_TIMEOUT_MS = 3000
# 45 s, not 20: with both cores busy (load 25-35 during a full test run) gnumeric took longer
# than 20 s to show its window; the host's start_timeout_s (90 s) covers it.
LAUNCH_TIMEOUT_S = 45.0
SESSION_START_TIMEOUT_S = 15.0
POLL_S = 0.02
POPUP_MIN_SIZE = 4
"""Smaller override-redirect windows are helpers (GTK's 1x1 ones), not something shown."""
POPUP_ROLES = frozenset({"window", "tool tip"})
"""The AT-SPI roles of an application's top-levels that the window manager never manages
(menus and tooltips)."""
OBSERVE_REREADS = 2
"""Times an observation is read again when the screen changed while it was read."""
SHOWN_CELL = 8
"""Grid cell (pixels) on which a window's uncovered share is counted."""
NO_ACCESSIBILITY_GRACE_S = 0.5
"""How long a launched program with a window but no AT-SPI application is given to register."""
APPROACH_S = 0.15
"""How long the pointer rests where a press lands before the press: a hand moves, then presses.
Without it the press follows the motion within a millisecond, and whether the application has
seen the pointer arrive first (a tooltip under it hidden, a button under it lit) is a race
between X clients: the same click then reached a tooltip in one run and the window below it
in another."""
PRESSES = frozenset({"click", "doubleClick", "rightClick", "mouseDown"})
"""Calls that press a button where they are pointed (dragTo presses where the pointer is)."""
HOVER_S = 0.8
"""Least settling after pointer input: GTK shows a tooltip 0.5 s after the pointer rests."""
REACTION_S = 1.0
OBSERVE_RESERVE_S = 1.0
"""Least time of a call's budget kept for its observation (plus twice the last one's time)."""
"""Least settling while the input has had no visible effect yet (an event or a screen change)."""
POINTER_FUNCTIONS = frozenset(
    {"click", "doubleClick", "rightClick", "moveTo", "dragTo", "scroll", "mouseDown", "mouseUp"}
)

FUNCTIONS = (
    "click",
    "doubleClick",
    "rightClick",
    "moveTo",
    "dragTo",
    "write",
    "typewrite",
    "press",
    "hotkey",
    "scroll",
    "keyDown",
    "keyUp",
    "mouseDown",
    "mouseUp",
)
NO_INPUT = ("WAIT", "DONE", "FAIL")
ALLOWED_KEYWORDS = {
    "x",
    "y",
    "clicks",
    "interval",
    "button",
    "duration",
    "message",
    "keys",
    "presses",
    "key",
    "mouseDownUp",
}
BUTTONS = ("left", "middle", "right")
MAX_DURATION_S = 5.0
MAX_INTERVAL_S = 1.0
MAX_REPEAT = 100
MAX_MESSAGE = 10000


class DriverError(Exception):
    """A request the driver cannot serve (reported as driver_error)."""


class ActionRefused(Exception):
    """A call that is refused before any input (reported as the act's error)."""


# --- the session ----------------------------------------------------------------------------------


def user_environment(bus_address: str | None) -> dict[str, str]:
    """The environment of every process of the session."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": HOME,
        "USER": SESSION_USER,
        "LOGNAME": SESSION_USER,
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "DISPLAY": DISPLAY,
        "XDG_RUNTIME_DIR": str(RUNTIME_DIR),
        # GTK 2 (pcmanfm) loads its accessibility modules from here; GTK 3 has its bridge
        # built in and only needs NO_AT_BRIDGE unset.
        "GTK_MODULES": "gail:atk-bridge",
        # Settings live in memory: no dconf service to start, nothing left between episodes.
        "GSETTINGS_BACKEND": "memory",
    }
    if bus_address:
        env["DBUS_SESSION_BUS_ADDRESS"] = bus_address
    return env


VIEW_PID: int | None = None
"""Our pid of the agent's view's init (sandboxes/view.py), or None: no view, no nsenter."""
PROC = "/proc"
"""The /proc the session's pids mean something in: the view's own when there is a view."""
VIEW_TIME = False
"""Whether the view has a time namespace of its own (its boot clock, ``uptime``) to enter."""


def view_pid() -> int | None:
    """Return the pid of the agent's view's init, or None when the sandbox has no view.

    It is the process called ``init`` that is PID 1 of a PID namespace below ours.
    """
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", encoding="utf-8") as handle:
                fields = dict(line.split(":", 1) for line in handle.read().splitlines())
        except (OSError, ValueError):
            continue
        ids = fields.get("NSpid", "").split()
        if fields.get("Name", "").strip() == "init" and len(ids) == 2 and ids[1] == "1":
            return int(entry)
    return None


def enter_view() -> None:
    """Find the agent's view (as root, before dropping to the user) and open its /proc.

    The view's /proc is reached through its init's root and kept open as a descriptor, so the
    driver, once the user, still reads the session's processes by the pids they know.
    """
    global VIEW_PID, PROC, VIEW_TIME
    VIEW_PID = view_pid()
    if VIEW_PID is not None:
        fd = os.open(f"/proc/{VIEW_PID}/root/proc", os.O_RDONLY | os.O_DIRECTORY)
        PROC = f"/proc/self/fd/{fd}"
        with contextlib.suppress(OSError):
            VIEW_TIME = os.readlink(f"/proc/{VIEW_PID}/ns/time") != os.readlink(
                "/proc/self/ns/time"
            )


def in_view(argv: list[str], uid: int, gid: int) -> list[str]:
    """``argv`` run as the user inside the agent's view (unchanged when there is none).

    nsenter (root: :func:`become_root` runs in the child first) enters the view's PID, mount
    and cgroup namespaces (and its time namespace when it has one), and setpriv becomes the
    user for good before ``argv`` runs.
    """
    if VIEW_PID is None:
        return argv
    spaces = ["-p", "-m", "-C", *(["-T"] if VIEW_TIME else [])]
    enter = ["nsenter", "-t", str(VIEW_PID), *spaces, "--"]
    become = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--"]
    # The home folder as the view's mounts reach it: nsenter's --wd would keep our mount of
    # it, which the view cannot name (getcwd fails and the terminal's shell starts in /).
    return [*enter, *become, "env", f"--chdir={HOME}", "--", *argv]


def become_root() -> None:
    """In the child that execs nsenter: root again, from the saved ids drop_to_user kept."""
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def view_pids(pids: set[int]) -> set[int]:
    """The pids the view knows of our processes ``pids`` (those inside it; all without one)."""
    if VIEW_PID is None:
        return set(pids)
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8") as handle:
                ids = next((line.split()[1:] for line in handle if line.startswith("NSpid:")), [])
        except OSError:
            continue
        if len(ids) == 2:  # a process of the view: its second pid is the view's
            found.add(int(ids[1]))
    return found


def user_processes(uid: int, proc: str | None = None) -> list[int]:
    """The pids of every process owned by ``uid`` (but this one), in ``proc`` (default PROC).

    The session's processes by default, by the pids they know; ``proc="/proc"``: every
    process of the container by ours (to stop them).
    """
    proc = proc or PROC
    pids = []
    for entry in os.listdir(proc):
        if not entry.isdigit() or (proc == "/proc" and int(entry) == os.getpid()):
            continue
        try:
            if os.stat(f"{proc}/{entry}").st_uid == uid:
                pids.append(int(entry))
        except FileNotFoundError:
            continue
    return pids


def uses_x(pid: int) -> bool:
    """Whether the process has an X client library mapped (a program that will show windows)."""
    try:
        with open(f"{PROC}/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            return any("/libX11.so" in line or "/libxcb.so" in line for line in maps)
    except OSError:
        return False


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (our pids: the container's /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        # OSError: a process that ended after the listing has no file (ENOENT), or one that
        # cannot be read any more (ESRCH on the read: a `start` failed so while a short-lived
        # pgrep came and went).
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children.get(current, []))
    return found


class Session:
    """The desktop's processes, all run as ``user``."""

    def __init__(self, width: int, height: int) -> None:
        self.width = width
        self.height = height
        account = pwd.getpwnam(SESSION_USER)
        self.uid, self.gid = account.pw_uid, account.pw_gid
        self.processes: list[subprocess.Popen[bytes]] = []
        # The driver normally runs as the user already (see drop_to_user).
        self.as_user: dict[str, Any] = (
            {"user": self.uid, "group": self.gid, "extra_groups": []} if os.geteuid() == 0 else {}
        )
        self.bus_address: str | None = None

    def spawn(self, argv: list[str], name: str, **options: Any) -> subprocess.Popen[bytes]:
        """Start one process of the session as ``user``, its output in the log folder."""
        env = user_environment(self.bus_address)
        if VIEW_PID is not None and shutil.which(argv[0], path=env["PATH"]) is None:
            # nsenter would start and its child fail (exit 127): say so as Popen does.
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
        with open(LOG_DIR / f"{name}.log", "ab") as log:
            options.setdefault("stdout", log)
            if VIEW_PID is not None:
                options["preexec_fn"] = become_root
            process = subprocess.Popen(
                in_view(argv, self.uid, self.gid),
                stdin=subprocess.DEVNULL,
                stderr=log,
                cwd=HOME,
                env=env,
                start_new_session=True,
                **self.as_user,
                **options,
            )
        self.processes.append(process)
        return process

    def start(self) -> None:
        """Xvfb, the session bus, the AT-SPI bus and openbox, each ready before the next."""
        clean_display()
        LOG_DIR.mkdir(mode=0o755, exist_ok=True)
        RUNTIME_DIR.mkdir(mode=0o700, exist_ok=True)
        os.chown(RUNTIME_DIR, self.uid, self.gid)
        # Xvfb as a user cannot make the socket folder with the mode clients expect.
        sockets = Path("/tmp/.X11-unix")
        sockets.mkdir(exist_ok=True)
        sockets.chmod(0o1777)
        deadline = time.monotonic() + SESSION_START_TIMEOUT_S
        ready_read, ready_write = os.pipe()
        xvfb = self.spawn(
            [
                "Xvfb",
                DISPLAY,
                "-screen",
                "0",
                f"{self.width}x{self.height}x24",
                "-nolisten",
                "tcp",
                "-dpi",
                "96",
                "-noreset",
                "-displayfd",
                str(ready_write),
            ],
            "Xvfb",
            pass_fds=(ready_write,),
        )
        os.close(ready_write)
        # Xvfb writes the display number, then a newline: it is ready after both (and dies if
        # the pipe is closed between the two writes).
        announced = b""
        try:
            while not announced.endswith(b"\n"):
                chunk = os.read(ready_read, 64) if wait_readable(ready_read, deadline) else b""
                if not chunk:
                    raise DriverError(f"Xvfb did not start (exit code {xvfb.poll()}); see Xvfb.log")
                announced += chunk
        finally:
            os.close(ready_read)
        bus = self.spawn(
            [
                "dbus-daemon",
                "--session",
                "--nofork",
                "--nopidfile",
                "--print-address=1",
                f"--address=unix:path={RUNTIME_DIR}/bus",
            ],
            "dbus-session",
            stdout=subprocess.PIPE,
        )
        assert bus.stdout is not None
        if not wait_readable(bus.stdout.fileno(), deadline):
            raise DriverError("the D-Bus session bus did not start; see dbus-session.log")
        self.bus_address = bus.stdout.readline().decode().strip()
        if not self.bus_address:
            raise DriverError(f"the D-Bus session bus exited with code {bus.wait()}")
        self.spawn([AT_SPI_BUS_LAUNCHER, "--launch-immediately"], "at-spi-bus-launcher")
        # openbox reads OPENBOX_RC, its system-wide configuration, without being told.
        self.spawn(["openbox"], "openbox")

    def record(self, desktop: Desktop) -> None:
        """Write SESSION_FILE for the last look: where the session is and who serves it.

        Written before any input, from the driver's own connections: the accessibility bus's
        address as the bus launcher published it, and the X server and that bus by the
        process at the other end of each socket (pid and start time). The session's sockets
        and the root window's AT_SPI_BUS belong to the session's user, who is the agent's user
        too: the last look trusts them only where these same processes answer.
        """
        SESSION_FILE.write_text(
            json.dumps(
                {
                    "display": DISPLAY,
                    "bus_address": self.bus_address,
                    "a11y_address": desktop.a11y_address,
                    "peers": desktop.peers(),
                    "width": self.width,
                    "height": self.height,
                }
            ),
            encoding="utf-8",
        )

    def stop(self) -> None:
        """Kill every process of the user, reap ours, remove the display's lock files."""
        SESSION_FILE.unlink(missing_ok=True)
        deadline = time.monotonic() + 5.0
        while (pids := user_processes(self.uid, "/proc")) and time.monotonic() < deadline:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            for process in self.processes:
                if process.poll() is None:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        process.wait(timeout=0.05)
            time.sleep(POLL_S)
        for process in self.processes:
            if process.stdout is not None:
                process.stdout.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=1)
        self.processes.clear()
        clean_display()


def clean_display() -> None:
    """Remove what a killed Xvfb leaves behind (it refuses to start over its lock)."""
    number = DISPLAY.lstrip(":")
    Path(f"/tmp/.X{number}-lock").unlink(missing_ok=True)
    Path(f"/tmp/.X11-unix/X{number}").unlink(missing_ok=True)


def wait_readable(fd: int, deadline: float) -> bool:
    """Whether ``fd`` becomes readable before ``deadline``."""
    remaining = max(0.0, deadline - time.monotonic())
    return bool(select.select([fd], [], [], remaining)[0])


# --- observing ------------------------------------------------------------------------------------


class BridgeItem(NamedTuple):
    """A node as its application's bridge describes it now (GetItems)."""

    name: str
    description: str
    states: list[str]
    child_count: int
    holds_children: bool  # whether the bridge holds every child too
    children: tuple[str, ...]  # the object paths of the children it holds, in index order


class TreeUnavailable(Exception):
    """The AT-SPI registry answers but the tree cannot be had (why is the message)."""


class AppStopped(Exception):
    """The application being walked did not answer, or used up its time."""


class Desktop:
    """The observer: the AT-SPI tree through pyatspi, windows and pixels through X11."""

    def __init__(self, bus_address: str) -> None:
        # pyatspi and pyautogui connect at import to the display and buses named here.
        os.environ["DISPLAY"] = DISPLAY
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = bus_address
        import pyatspi  # noqa: F401 (initializes libatspi)
        from gi.repository import Atspi, Gio, GLib
        from Xlib import X, Xatom, display
        from Xlib.ext import damage

        self.Atspi, self.Gio, self.GLib, self.X, self.Xatom = Atspi, Gio, GLib, X, Xatom
        Atspi.set_timeout(CALL_TIMEOUT_MS, STARTUP_TIMEOUT_MS)
        self.context = GLib.MainContext.default()
        self.xdisplay = display.Display(DISPLAY)
        self.root = self.xdisplay.screen().root
        geometry = self.root.get_geometry()
        self.width, self.height = geometry.width, geometry.height
        self.atoms = {
            name: self.xdisplay.intern_atom(name)
            for name in (
                "_NET_CLIENT_LIST",
                "_NET_ACTIVE_WINDOW",
                "_NET_WM_NAME",
                "_NET_WM_PID",
                "_NET_REQUEST_FRAME_EXTENTS",
                "_NET_FRAME_EXTENTS",
                "_NET_CLIENT_LIST_STACKING",
                "_NET_WM_STATE",
                "_NET_WM_STATE_HIDDEN",
                "_NET_WM_STATE_DEMANDS_ATTENTION",
                "_NET_WM_WINDOW_TYPE",
                "_NET_WM_WINDOW_TYPE_NORMAL",
                "_NET_WM_WINDOW_TYPE_DIALOG",
                "UTF8_STRING",
                "AT_SPI_BUS",
            )
        }
        self.damage_module = damage
        self.damage = None
        self.events = 0
        self.listener: Any = None
        self.items_bus: Any = None  # our own connection to the AT-SPI bus, once listening
        self.a11y_address = ""  # that bus's address, as the root window gave it then
        self.state_names = [
            Atspi.StateType(value).value_nick for value in range(int(Atspi.StateType.LAST_DEFINED))
        ]
        self.states_of_bits: dict[int, list[str]] = {}
        self.seen_apps: dict[int, str] = {}  # pid -> name, of the last observation's tree
        # pid -> (argv[0], executable) of each program the start launched (a task's checks
        # trust these, never a name an application chose for itself), and the identity of each
        # application of the last tree (Driver.observe's "identify").
        self.launched: dict[int, tuple[str, str]] = {}
        self.identities: list[dict[str, Any]] = []
        self.wm_probe: Any = None  # an unmapped window of ours that asks the window manager
        self.wm_answered = False

    # events and settling

    def listen(self) -> None:
        """Count AT-SPI events and screen changes from now on (for settling)."""
        self.listener = self.Atspi.EventListener.new(self._on_event)
        for event_type in ("object:", "window:"):
            self.listener.register(event_type)
        # libatspi trusts its cache (names, roles, descriptions, children, interfaces and
        # states) only when told to, because only events keep it current; the listener above
        # receives them, and observe applies the pending ones before walking: most of the
        # walk's D-Bus round trips go. Events do not tell everything, though: GTK does not
        # announce every state change (a text view stops being "focused", without an event,
        # when a menu opens), and an application's bridge drops the events of its first
        # moments, before it has learnt that anyone listens (pcmanfm fills its folder view
        # and names its free-space label then). So the walk takes each application's nodes as
        # they are now from one GetItems call of its own (bridge_items) and reads afresh
        # what the cache may have missed; a cache mask without states instead made libatspi
        # ask for them at every cached lookup. A process that does not listen (the host's
        # last look) asks for everything.
        self.Atspi.get_desktop(0).set_cache_mask(self.Atspi.Cache.DEFAULT)
        prop = self.root.get_full_property(self.atoms["AT_SPI_BUS"], self.X.AnyPropertyType)
        self.a11y_address = bytes(prop.value).decode()
        self.items_bus = self.connect_bus(self.a11y_address)
        self.damage = self.root.damage_create(self.damage_module.DamageReportNonEmpty)
        self.xdisplay.flush()

    def connect_bus(self, address: str) -> Any:
        """A connection of our own to the message bus at ``address``."""
        return self.Gio.DBusConnection.new_for_address_sync(
            address,
            self.Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
            | self.Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
            None,
            None,
        )

    def peers(self, bus: Any = None) -> dict[str, dict[str, int] | None]:
        """The processes serving our X connection and our accessibility bus connection.

        Each {"pid", "start"} (our pid namespace; its start time in clock ticks since boot,
        so a pid used again is told apart), from the socket's peer credentials: what the
        kernel says, not what a socket's path or a root window's property says.
        """
        bus = bus or self.items_bus
        a11y = None if bus is None else bus.get_stream().get_socket().get_fd()
        return {
            "x": socket_peer(self.xdisplay.fileno()),
            "a11y": None if a11y is None else socket_peer(a11y),
        }

    def _on_event(self, event: Any) -> None:
        self.events += 1

    def activity(self) -> int:
        """How many AT-SPI events and screen changes arrived since the last call."""
        while self.context.pending():
            self.context.iteration(False)
        changes = self.screen_changes()
        count, self.events = self.events + changes, 0
        return count

    def screen_changes(self) -> int:
        """How many screen changes (XDamage reports) arrived since the last look."""
        changes = 0
        for _ in range(self.xdisplay.pending_events()):
            self.xdisplay.next_event()
            changes += 1
        if changes and self.damage is not None:
            self.xdisplay.damage_subtract(self.damage)
            self.xdisplay.flush()
        return changes

    def settle(
        self,
        quiet_s: float,
        cap_s: float,
        before: set[int] | None = None,
        least_s: float = 0.0,
        windows_before: set[int] | None = None,
    ) -> float:
        """Wait until nothing happened for ``quiet_s`` (at most ``cap_s``); the time waited.

        With ``before`` (the user's processes before the input), a program started since then
        that is still on its way to a window keeps the desktop unsettled too
        (:meth:`starting_programs`); with ``windows_before`` (the managed windows' ids before
        the input), so does a window managed since then that the window manager has not yet
        focused or marked (:meth:`new_window_pending`), or one an application shows that it
        has not managed yet (:meth:`unmanaged_window_shown`). Nothing is settled before
        ``least_s`` (a tooltip's delay after pointer input), nor, while nothing at all has
        happened since the input, before REACTION_S: an application that takes longer than
        ``quiet_s`` to answer (a dialog opening on a busy machine) was otherwise read before it
        answered, in some runs only.
        """
        started = time.monotonic()
        last = started
        # What arrived while the input was sent is the input's effect already.
        reacted = self.activity() > 0
        shown: dict[int, float] = {}  # the programs seen ready, and when their window showed
        while True:
            now = time.monotonic()
            if self.activity():
                last, reacted = now, True
            if now - started >= cap_s:
                return now - started
            if (
                now - last >= quiet_s
                and now - started >= max(least_s, 0.0 if reacted else REACTION_S)
                and not (before and self.starting_programs(before, shown))
                and not (
                    windows_before is not None
                    and (self.new_window_pending(windows_before) or self.unmanaged_window_shown())
                )
            ):
                return now - started
            time.sleep(POLL_S)

    def starting_programs(self, before: set[int], shown: dict[int, float]) -> set[int]:
        """Processes started since ``before`` that use X and are not shown yet.

        A program is shown once it has a managed window and its AT-SPI application has a
        showing frame with something in it (a program without AT-SPI: NO_ACCESSIBILITY_GRACE_S
        after its window). A window alone is not enough: a starting application fills its
        tree after mapping it, and its bridge drops the events of its first moments, so the
        desktop would look quiet while the tree is still empty (an observation read then
        differed from run to run). ``shown`` keeps what was found between calls.
        """
        new = set(user_processes(os.getuid())) - before
        if not new:
            return set()
        windowed = {self.window_pid(window) for window in self.client_windows()}
        starting = {pid for pid in new - windowed if uses_x(pid)}
        waiting = {pid for pid in new & windowed if shown.get(pid, 0.0) >= 0.0}
        if waiting:
            now = time.monotonic()
            apps = [(app, pid) for app, _, pid in self.applications() if pid in waiting]
            accessible = {pid for _, pid in apps}
            framed = {pid for app, pid in apps if self.shows_frame(app, filled=True)}
            for pid in waiting:
                first = shown.setdefault(pid, now)
                if pid in framed or (
                    pid not in accessible and now - first >= NO_ACCESSIBILITY_GRACE_S
                ):
                    shown[pid] = -1.0  # ready: never asked again in this settle
                else:
                    starting.add(pid)
        return starting

    def unmanaged_window_shown(self) -> bool:
        """Whether an application shows a top-level window that openbox does not manage yet.

        GTK marks a window showing in AT-SPI when it asks for it to be mapped; openbox maps
        and lists it (_NET_CLIENT_LIST) when it has managed it. An application's showing
        top-levels other than popups ("window": menus; tooltips) are its managed windows, so
        more of them than its managed windows means openbox is still to map one (a dialog the
        input opened, while openbox was slow on a busy machine).
        """
        from Xlib import error as xerror

        managed: dict[int | None, int] = {}
        for window in self.client_windows():
            try:
                pid = self.window_pid(window)
            except xerror.XError:
                continue  # gone while we looked
            managed[pid] = managed.get(pid, 0) + 1
        for app, _, pid in self.applications():
            shown = 0
            try:
                for index in range(app.get_child_count()):
                    child = app.get_child_at_index(index)
                    if (
                        child is not None
                        and child.get_role_name() not in POPUP_ROLES
                        and child.get_state_set().contains(self.Atspi.StateType.SHOWING)
                    ):
                        shown += 1
            except self.GLib.Error:
                continue  # a hung application: the tree read names it
            if shown > managed.get(pid, 0):
                return True
        return False

    def new_window_pending(self, before: set[int]) -> bool:
        """Whether a normal or dialog window managed since ``before`` awaits openbox's focus.

        With focusNew, openbox either focuses such a window or, when it prevents focus stealing,
        marks it _NET_WM_STATE_DEMANDS_ATTENTION; until it has done one, the window is listed
        but not active. Read in that moment, a dialog an action opened (gnumeric's font
        picker) was active in one run's observation and not in the other's, and the walks
        parted there. Settled once a new window is the active one, or each is marked.
        """
        from Xlib import error as xerror

        new = [window for window in self.client_windows() if window.id not in before]
        if not new:
            return False
        active = self.active_window()
        if any(window.id == active for window in new):
            return False
        for window in new:
            try:
                kinds = window.get_full_property(self.atoms["_NET_WM_WINDOW_TYPE"], self.Xatom.ATOM)
                state = window.get_full_property(self.atoms["_NET_WM_STATE"], self.Xatom.ATOM)
            except xerror.XError:
                continue  # gone while we looked
            # No type is a normal window (EWMH); other types (splash, utility) openbox
            # does not offer the focus, so nothing is awaited for them.
            focusable = kinds is None or any(
                self.atoms[name] in kinds.value
                for name in ("_NET_WM_WINDOW_TYPE_NORMAL", "_NET_WM_WINDOW_TYPE_DIALOG")
            )
            marked = state is not None and (
                self.atoms["_NET_WM_STATE_DEMANDS_ATTENTION"] in state.value
            )
            if focusable and not marked:
                return True
        return False

    # X11

    def wm_answers(self) -> bool:
        """Whether the window manager has answered a frame-extents request; if not, ask again.

        Announcing itself (_NET_SUPPORTING_WM_CHECK) is not enough to launch programs: openbox
        announces before it has started, and a window mapped in between may never be managed
        (openbox 3.6 can pull such a MapRequest off the connection during its start-up and then
        sleep until some later event, which no idle desktop sends; reproduced by holding it
        stopped right after it announced: 3 starts in 4 failed). An answer comes from its
        event loop, so it has started; asking again each call is the later event that would
        wake it.
        """
        from Xlib.protocol import event

        if self.wm_answered:
            return True
        if self.wm_probe is None:
            self.wm_probe = self.root.create_window(0, 0, 1, 1, 0, self.X.CopyFromParent)
        if self.wm_probe.get_full_property(self.atoms["_NET_FRAME_EXTENTS"], self.Xatom.CARDINAL):
            self.wm_probe.destroy()
            self.xdisplay.sync()
            self.wm_probe, self.wm_answered = None, True
            return True
        request = event.ClientMessage(
            window=self.wm_probe,
            client_type=self.atoms["_NET_REQUEST_FRAME_EXTENTS"],
            data=(32, [0, 0, 0, 0, 0]),
        )
        mask = self.X.SubstructureRedirectMask | self.X.SubstructureNotifyMask
        self.root.send_event(request, event_mask=mask)
        self.xdisplay.flush()
        return False

    def accessibility_bus_ready(self) -> bool:
        """Whether the AT-SPI bus launcher published the bus's address."""
        prop = self.root.get_full_property(self.atoms["AT_SPI_BUS"], self.X.AnyPropertyType)
        return prop is not None

    def client_windows(self) -> list[Any]:
        """The managed windows (_NET_CLIENT_LIST)."""
        prop = self.root.get_full_property(self.atoms["_NET_CLIENT_LIST"], self.Xatom.WINDOW)
        if prop is None:
            return []
        return [self.xdisplay.create_resource_object("window", wid) for wid in prop.value]

    def window_pid(self, window: Any) -> int | None:
        """The window's _NET_WM_PID."""
        prop = window.get_full_property(self.atoms["_NET_WM_PID"], self.Xatom.CARDINAL)
        return int(prop.value[0]) if prop is not None and len(prop.value) else None

    def window_title(self, window: Any) -> str | None:
        """The window's _NET_WM_NAME, else WM_NAME."""
        prop = window.get_full_property(self.atoms["_NET_WM_NAME"], self.atoms["UTF8_STRING"])
        if prop is not None:
            value = prop.value
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        name = window.get_wm_name()
        if isinstance(name, bytes):
            return name.decode("latin-1")
        return name

    def active_window(self) -> int:
        """The id of the active window (_NET_ACTIVE_WINDOW), 0 when none is."""
        prop = self.root.get_full_property(self.atoms["_NET_ACTIVE_WINDOW"], self.Xatom.WINDOW)
        return int(prop.value[0]) if prop is not None and len(prop.value) else 0

    def windows(self, app_of_pid: dict[int, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The window list and the focused window and application."""
        from Xlib import error as xerror

        active = self.active_window()
        stacking = self.stacking()
        listed = []
        focused: dict[str, Any] = {"app": None, "window": None}
        for window in self.client_windows():
            try:
                pid = self.window_pid(window)
                wm_class = window.get_wm_class()
                title = self.window_title(window)
                geometry = window.get_geometry()
                origin = self.root.translate_coords(window, 0, 0)
                viewable = window.get_attributes().map_state == self.X.IsViewable
                hidden = self.minimized(window)
            except (xerror.XError, AttributeError):
                continue  # the window went away while we looked
            app = app_of_pid.get(pid) if pid is not None else None
            if app is None and wm_class:
                app = wm_class[0]
            entry = {
                "app": app,
                "title": title,
                "x": origin.x,
                "y": origin.y,
                "width": geometry.width,
                "height": geometry.height,
                "active": window.id == active,
                "stack": stacking.index(window.id) if window.id in stacking else len(stacking),
                "shown": 0.0 if hidden or not viewable else None,
            }
            listed.append(entry)
            if entry["active"]:
                focused = {"app": app, "window": title}
        self.shown_shares(listed)
        return listed, focused

    def popups(self, app_of_pid: dict[int, str]) -> list[dict[str, Any]]:
        """Mapped override-redirect windows (open menus, drop-downs, tooltips), topmost first.

        The window manager does not manage them, so they are not in "windows"; a GTK 2 menu's
        items never say they are showing in AT-SPI, so this is how an open one is seen.
        """
        from Xlib import error as xerror

        found = []
        try:
            children = self.root.query_tree().children
        except xerror.XError:
            return []
        for window in reversed(children):  # query_tree lists bottom first
            try:
                attributes = window.get_attributes()
                if not attributes.override_redirect or attributes.map_state != self.X.IsViewable:
                    continue
                geometry = window.get_geometry()
                pid = self.window_pid(window)
            except (xerror.XError, AttributeError):
                continue
            if geometry.width < POPUP_MIN_SIZE or geometry.height < POPUP_MIN_SIZE:
                continue
            found.append(
                {
                    "app": app_of_pid.get(pid) if pid is not None else None,
                    "x": geometry.x,
                    "y": geometry.y,
                    "width": geometry.width,
                    "height": geometry.height,
                }
            )
        return found

    def stacking(self) -> list[int]:
        """The managed windows' ids, topmost first (_NET_CLIENT_LIST_STACKING is bottom first)."""
        prop = self.root.get_full_property(
            self.atoms["_NET_CLIENT_LIST_STACKING"], self.Xatom.WINDOW
        )
        return [int(wid) for wid in reversed(prop.value)] if prop is not None else []

    def is_above(self, window_id: int, others: list[int]) -> bool:
        """Whether ``window_id`` is listed in the stacking order above every one of ``others``."""
        stacking = self.stacking()
        if window_id not in stacking:
            return False
        place = stacking.index(window_id)
        return all(
            other == window_id or place < stacking.index(other)
            for other in others
            if other in stacking
        )

    def minimized(self, window: Any) -> bool:
        """Whether the window manager hides the window (_NET_WM_STATE_HIDDEN: minimized)."""
        prop = window.get_full_property(self.atoms["_NET_WM_STATE"], self.Xatom.ATOM)
        return prop is not None and self.atoms["_NET_WM_STATE_HIDDEN"] in prop.value

    def shown_shares(self, windows: list[dict[str, Any]]) -> None:
        """Fill each window's "shown": the share of its area no window above it covers.

        Counted on a grid of SHOWN_CELL-pixel cells (exact enough to tell a window in view, in
        part or hidden; a cell counts for the window on top at its centre).
        """
        cell = SHOWN_CELL
        columns, rows = -(-self.width // cell), -(-self.height // cell)
        covered = bytearray(columns * rows)  # 1 where a window above has been painted
        for entry in sorted(windows, key=lambda window: window["stack"]):
            if entry["shown"] is not None:  # unmapped or minimized: covers nothing
                continue
            left, top = max(entry["x"], 0), max(entry["y"], 0)
            right = min(entry["x"] + entry["width"], self.width)
            bottom = min(entry["y"] + entry["height"], self.height)
            area = entry["width"] * entry["height"]
            visible = 0
            if right > left and bottom > top and area > 0:
                for row in range(top // cell, -(-bottom // cell)):
                    centre_y = row * cell + cell // 2
                    if not top <= centre_y < bottom:
                        continue
                    for column in range(left // cell, -(-right // cell)):
                        centre_x = column * cell + cell // 2
                        if not left <= centre_x < right:
                            continue
                        index = row * columns + column
                        if not covered[index]:
                            covered[index] = 1
                            visible += 1
            # Every cell whose centre lies in the window, on the screen or off it.
            cells = centres(entry["x"], entry["width"], cell) * centres(
                entry["y"], entry["height"], cell
            )
            entry["shown"] = round(visible / cells, 2) if cells else 0.0

    def screenshot(self) -> str:
        """The whole screen as base64 PNG."""
        from PIL import ImageGrab

        image = ImageGrab.grab(xdisplay=DISPLAY)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=1)
        return base64.b64encode(buffer.getvalue()).decode("ascii")

    # AT-SPI

    def applications(self) -> list[tuple[Any, str, int | None]]:
        """(accessible, name, pid) of every registered application."""
        desktop = self.Atspi.get_desktop(0)
        found = []
        for index in range(desktop.get_child_count()):
            try:
                app = desktop.get_child_at_index(index)
                if app is None:
                    continue
                try:
                    pid = app.get_process_id()
                except self.GLib.Error:
                    pid = None
                try:
                    name = app.get_name() or ""
                except self.GLib.Error:
                    name = ""
                if not name and pid is not None:
                    name = process_name(pid)  # a hung application cannot tell its name
                found.append((app, name, pid))
            except self.GLib.Error:
                continue
        return found

    def bridge_items(self, app: Any) -> dict[str, BridgeItem]:
        """Every node the application's bridge holds, as it is now, by object path.

        One GetItems call (org.a11y.atspi.Cache); a node the bridge does not hold (a table's
        cells, a GTK 2 icon view's items: made on demand) is not in it.
        """
        reply = self.items_bus.call_sync(
            app.app.bus_name,
            "/org/a11y/atspi/cache",
            "org.a11y.atspi.Cache",
            "GetItems",
            None,
            None,
            self.Gio.DBusCallFlags.NONE,
            CALL_TIMEOUT_MS,
            None,
        )
        # a((so)(so)(so)iiassusau): node, application, parent, index in parent, child count,
        # interfaces, name, role, description, states. Taking the fields needed one by one is
        # four times faster than unpacking the whole reply (0.02 s for gnumeric's 576 nodes).
        held: dict[str, int] = {}  # parent path -> how many of its children the bridge holds
        # parent path -> {index in parent: child path}
        placed: dict[str, dict[int, str]] = {}
        # path -> name, description, states, child count
        fields: dict[str, tuple[str, str, list[str], int]] = {}
        described = reply.get_child_value(0)
        for index in range(described.n_children()):
            item = described.get_child_value(index)
            path = item.get_child_value(0).get_child_value(1).get_string()
            parent = item.get_child_value(2).get_child_value(1).get_string()
            if parent != path:  # an application is its own parent
                held[parent] = held.get(parent, 0) + 1
                placed.setdefault(parent, {})[item.get_child_value(3).get_int32()] = path
            low, high = item.get_child_value(9).unpack()
            fields[path] = (
                item.get_child_value(6).get_string(),
                item.get_child_value(8).get_string(),
                self.state_names_of(low | high << 32),
                item.get_child_value(4).get_int32(),
            )
        items: dict[str, BridgeItem] = {}
        for path, (name, description, states, count) in fields.items():
            # -1: the bridge did not count the children: those of a node that manages its
            # descendants (it holds none of them), or a GTK menu's (it holds those it made)
            if count < 0 and held.get(path, 0):
                count = held[path]
            kids = placed.get(path, {})
            items[path] = BridgeItem(
                name,
                description,
                states,
                count,
                held.get(path, 0) == count,
                tuple(kids[index] for index in sorted(kids)),
            )
        return items

    def state_names_of(self, bits: int) -> list[str]:
        """The names of the states set in an AT-SPI state bit set, in enumeration order."""
        names = self.states_of_bits.get(bits)
        if names is None:
            names = [name for value, name in enumerate(self.state_names) if bits >> value & 1]
            self.states_of_bits[bits] = names
        return names

    def shows_frame(self, app: Any, filled: bool = False) -> bool:
        """Whether the application has a showing top-level window (``filled``: not empty)."""
        try:
            for index in range(app.get_child_count()):
                child = app.get_child_at_index(index)
                if (
                    child is not None
                    and child.get_state_set().contains(self.Atspi.StateType.SHOWING)
                    and (not filled or child.get_child_count() > 0)
                ):
                    return True
        except self.GLib.Error:
            return False
        return False

    def tree(self, max_nodes: int) -> tuple[dict[str, Any], int, bool, str | None, dict[int, str]]:
        """The desktop's tree: (root, nodes, truncated, tree_error, {pid: application name})."""
        walk = TreeWalk(self, max_nodes)
        root: dict[str, Any] = {
            "role": "desktop frame",
            "name": "main",
            "text": None,
            "description": "",
            "states": [],
            "attributes": {},
            "x": 0,
            "y": 0,
            "width": self.width,
            "height": self.height,
            "app": None,
            "children": [],
        }
        walk.count = 1
        problems = []
        applications = self.applications()
        if not applications:
            raise TreeUnavailable("no application is registered on the AT-SPI bus")
        app_of_pid = {pid: name for _, name, pid in applications if pid is not None}
        # The same order on every run (see the module docstring).
        applications.sort(key=lambda found: (found[1], found[2] if found[2] is not None else -1))
        identities = []
        for app, name, pid in applications:
            if walk.count >= max_nodes:
                walk.truncated = True
                break
            node, problem = walk.application(app, name)
            if node is not None:
                root["children"].append(node)
                identities.append(self.identity(name, pid))
            if problem:
                problems.append(f"{name} (pid {pid}): {problem}")
        self.identities = identities
        return root, walk.count, walk.truncated, "; ".join(problems) or None, app_of_pid

    def identity(self, name: str, pid: int | None) -> dict[str, Any]:
        """Who an application of the tree is, from what no application can choose.

        Its name is whatever it told GLib (``g_set_prgname``: any program can call itself
        "galculator"); its pid is the AT-SPI bus's own word (the peer credentials of its
        connection); its executable is the kernel's (/proc/<pid>/exe); "launched" is the argv[0]
        of the program the start launched when the process is that program (one of its
        processes, running the executable the start resolved for it), else null.
        """
        executable = process_executable(pid) if pid is not None else None
        launched = self.launched.get(pid) if pid is not None else None
        return {
            "name": name,
            "pid": pid,
            "executable": executable,
            "launched": (
                launched[0]
                if launched is not None and executable is not None and executable == launched[1]
                else None
            ),
        }

    def observe(self, max_nodes: int) -> dict[str, Any]:
        """One observation of the desktop as it is now: tree, windows and pixels of one moment.

        The screen changing while they were read (a menu that opened late, an application
        still drawing) would pair a tree with a screenshot of another moment: then the desktop
        is let settle and everything read again, at most OBSERVE_REREADS times.
        """
        seen_apps = self.seen_apps
        rereads = 0
        while True:
            self.seen_apps = seen_apps
            observation = self.read(max_nodes)
            if rereads >= OBSERVE_REREADS or not self.screen_changes():
                break
            rereads += 1
            self.settle(DEFAULT_QUIET_S, DEFAULT_SETTLE_CAP_S)
        observation["timing"]["rereads"] = rereads
        return observation

    def read(self, max_nodes: int) -> dict[str, Any]:
        """Read the tree, the windows and the screenshot once."""
        self.activity()  # apply pending events to libatspi's cache first
        started = time.monotonic()
        self.identities = []
        tree: dict[str, Any] | None
        try:
            tree, nodes, truncated, tree_error, app_of_pid = self.tree(max_nodes)
        except (self.GLib.Error, TreeUnavailable) as error:
            tree, nodes, truncated, app_of_pid = None, 0, False, {}
            why = error.message if isinstance(error, self.GLib.Error) else str(error)
            tree_error = f"the accessibility tree is unavailable: {why}"
        tree_s = time.monotonic() - started
        exited = [
            {"app": name, "pid": pid}
            for pid, name in sorted(self.seen_apps.items())
            if pid not in app_of_pid and not process_running(pid)
        ]
        self.seen_apps = app_of_pid
        windows, focused = self.windows(app_of_pid)
        popups = self.popups(app_of_pid)
        started = time.monotonic()
        screenshot = self.screenshot()
        screenshot_s = time.monotonic() - started
        return {
            "tree": tree,
            "nodes": nodes,
            "truncated": truncated,
            "tree_error": tree_error,
            "screenshot_png": screenshot,
            "screen": {"width": self.width, "height": self.height},
            "focused": focused,
            "windows": windows,
            "popups": popups,
            "exited": exited,
            "tree_digest": tree_digest(tree),
            "timing": {"tree_s": round(tree_s, 6), "screenshot_s": round(screenshot_s, 6)},
        }


def centres(start: int, length: int, cell: int) -> int:
    """How many grid cells have their centre in [start, start + length)."""
    if length <= 0:
        return 0
    half = cell // 2
    return -(-(start + length - half) // cell) - -(-(start - half) // cell)


def process_name(pid: int) -> str:
    """The command name of a process ("" when it is gone)."""
    try:
        return Path(f"{PROC}/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def process_executable(pid: int) -> str | None:
    """The file the process runs, as the kernel names it (None when it cannot be read)."""
    try:
        return os.readlink(f"{PROC}/{pid}/exe")
    except OSError:
        return None


def socket_peer(fd: int) -> dict[str, int] | None:
    """{"pid", "start"} of the process at the other end of a Unix socket (None: unknown)."""
    with socket.fromfd(fd, socket.AF_UNIX, socket.SOCK_STREAM) as sock:  # a duplicate
        credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid = struct.unpack("3i", credentials)[0]
    if pid <= 0:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return {"pid": pid, "start": int(stat.rsplit(")", 1)[1].split()[19])}


def process_running(pid: int) -> bool:
    """Whether the process exists and has not ended (a zombie has ended)."""
    try:
        stat = Path(f"{PROC}/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"  # the state follows the command's ")"


def tree_digest(tree: dict[str, Any] | None) -> str:
    """The sha256 of the canonical JSON of the tree."""
    canonical = json.dumps(tree, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class TreeWalk:
    """One walk over the applications, sharing the node budget."""

    def __init__(self, desktop: Desktop, max_nodes: int) -> None:
        self.desktop = desktop
        self.Atspi = desktop.Atspi
        self.GLib = desktop.GLib
        self.max_nodes = max_nodes
        self.count = 0
        self.truncated = False
        self.deadline = 0.0
        self.items: dict[str, BridgeItem] = {}  # by object path: Desktop.bridge_items

    def application(
        self, app: Any, name: str, again: bool = True
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The application's subtree and what stopped its walk (None when complete).

        An application that did not answer one call in time is walked once more from the
        start: on a machine whose cores are all busy a loading application (gnumeric at the
        start) can miss CALL_TIMEOUT_MS once without being hung; a hung one misses it again.
        """
        self.deadline = time.monotonic() + APP_TIME_LIMIT_S
        self.app_name = name
        counted, truncated = self.count, self.truncated
        holder: list[dict[str, Any]] = []
        try:
            self.items = {}
            if self.desktop.items_bus is not None:  # libatspi's cache may be stale
                self.items = self.call(self.desktop.bridge_items, app) or {}
            self.visit(app, holder)
        except AppStopped as stopped:
            if again and str(stopped).startswith("no answer"):
                self.count, self.truncated = counted, truncated
                return self.application(app, name, again=False)
            return (holder[0] if holder else None), str(stopped)
        return (holder[0] if holder else None), None

    def call(self, method: Any, *args: Any) -> Any:
        """One AT-SPI call; a call that times out stops the application's walk."""
        if time.monotonic() > self.deadline:
            raise AppStopped(f"the walk took longer than {APP_TIME_LIMIT_S:g} s")
        started = time.monotonic()
        try:
            return method(*args)
        except self.GLib.Error as error:
            if time.monotonic() - started >= CALL_TIMEOUT_MS / 1000 * 0.9 or "Timeout" in str(
                error.message
            ):
                raise AppStopped(
                    f"no answer within {CALL_TIMEOUT_MS} ms ({error.message})"
                ) from None
            return None

    def visit(self, accessible: Any, siblings: list[dict[str, Any]]) -> None:
        """Add the node of ``accessible`` and its subtree to ``siblings`` (budget allowing)."""
        if self.count >= self.max_nodes:
            self.truncated = True
            return
        item = self.items.get(accessible.path)
        if item is None and self.desktop.items_bus is not None:
            # Not held by the bridge (a table's cells, made on demand): libatspi's cache of it
            # is only as current as the events processed so far, and on a busy machine the
            # application's events trail its state (the walk read an older node than a fresh
            # process did: issue 24). Read it afresh. (A process that does not listen, the
            # last look, keeps no such cache.)
            accessible.clear_cache()
        node = self.node(accessible, item)  # may stop the walk: then the node is not counted
        self.count += 1
        siblings.append(node)
        count = self.call(accessible.get_child_count) or 0
        if item is not None and (not item.holds_children or count != item.child_count):
            # children the bridge does not hold, or that libatspi missed: read them afresh
            accessible.clear_cache()
            count = self.call(accessible.get_child_count) or 0
        children = []
        for index in range(count):
            child = self.call(accessible.get_child_at_index, index)
            children.append(child)
        if (
            item is not None
            and item.holds_children
            and [getattr(child, "path", None) for child in children] != list(item.children)
        ):
            # As many children as the bridge holds, but not the same ones (one replaced by
            # another whose event has not arrived yet): the bridge's are the current ones.
            accessible.clear_cache()
            count = self.call(accessible.get_child_count) or 0
            children = [self.call(accessible.get_child_at_index, index) for index in range(count)]
        for child in children:
            if self.count >= self.max_nodes:
                self.truncated = True
                return
            if child is not None:
                self.visit(child, node["children"])

    def node(self, accessible: Any, item: BridgeItem | None) -> dict[str, Any]:
        """One node's own fields (children filled by visit), its bridge item's if it has one."""
        Atspi = self.Atspi
        if item is not None:
            name, description, states = item.name, item.description, item.states
        else:
            name = self.call(accessible.get_name)
            description = self.call(accessible.get_description)
            state_set = self.call(accessible.get_state_set)
            states = (
                [state.value_nick for state in state_set.get_states()]
                if state_set is not None
                else []
            )
        attributes = self.call(accessible.get_attributes) or {}
        text = None
        length = None
        caret: int | None = None
        selections: list[list[int]] | None = None
        text_iface = self.call(accessible.get_text_iface)
        if text_iface is not None:
            length = self.call(text_iface.get_character_count) or 0
            text = self.call(text_iface.get_text, 0, min(length, TEXT_LIMIT)) if length else ""
            if "focused" in states or "editable" in states:
                # What a person sees of an editor besides its text: where the caret is and
                # what is selected (typing replaces the selection).
                caret = self.call(text_iface.get_caret_offset)
                selections = []
                for index in range(self.call(text_iface.get_n_selections) or 0):
                    span = self.call(text_iface.get_selection, index)
                    if span is not None and span.end_offset > span.start_offset:
                        selections.append([span.start_offset, span.end_offset])
        x = y = width = height = None
        component = self.call(accessible.get_component_iface)
        if component is not None:
            extents = self.call(component.get_extents, Atspi.CoordType.SCREEN)
            if extents is not None:
                x, y, width, height = extents.x, extents.y, extents.width, extents.height
        node: dict[str, Any] = {
            "role": self.call(accessible.get_role_name),
            "name": name,
            "text": text,
            "description": description,
            "states": states,
            "attributes": {str(key): str(value) for key, value in sorted(attributes.items())},
            "x": x,
            "y": y,
            "width": width,
            "height": height,
            "app": self.app_name,
            "children": [],
        }
        if length is not None:
            node["text_length"] = length
        if selections is not None:
            node["caret"] = caret
            node["selections"] = selections
        return node


# --- acting ---------------------------------------------------------------------------------------


class Actor:
    """Checks and runs pyautogui calls against the display."""

    def __init__(self, width: int, height: int) -> None:
        import pyautogui
        from pyautogui import _pyautogui_x11

        pyautogui.FAILSAFE = False  # a click in a corner is a click, not an abort
        pyautogui.PAUSE = 0.0  # settling is ours
        self.pyautogui = pyautogui
        self.x11 = _pyautogui_x11
        self.key_codes = _pyautogui_x11.keyboardMapping
        self.width, self.height = width, height
        fix_character_keys(_pyautogui_x11._display, self.key_codes, pyautogui.isShiftCharacter)
        # Every wait inside a pyautogui call (interval, duration, the pause) goes through this
        # clock, which ends the call at its deadline (Actor.run).
        self.clock = DeadlineClock()
        pyautogui.time = self.clock
        self.planned_s = 0.0  # the last checked call's own waits (planned_wait)

    def run(self, call: Any, deadline: float | None) -> None:
        """Run a checked call; past ``deadline`` its next wait raises CallCut.

        A call cut half way may leave a key or a button down (a hotkey between its presses, a
        drag between press and release): whatever is still down is released then, so the next
        call starts from a keyboard and pointer at rest.
        """
        self.clock.deadline = deadline
        try:
            call()
        except CallCut:
            self.release_held()
            raise
        finally:
            self.clock.deadline = None

    def release_held(self) -> None:
        """Release every key and pointer button the X server holds down."""
        from Xlib import X
        from Xlib.ext.xtest import fake_input

        display = self.x11._display
        keymap = display.query_keymap()
        for byte, bits in enumerate(keymap):
            for bit in range(8):
                if bits >> bit & 1:
                    fake_input(display, X.KeyRelease, byte * 8 + bit)
        mask = display.screen().root.query_pointer().mask
        for button, button_mask in enumerate(
            (X.Button1Mask, X.Button2Mask, X.Button3Mask, X.Button4Mask, X.Button5Mask), 1
        ):
            if mask & button_mask:
                fake_input(display, X.ButtonRelease, button)
        display.sync()

    @staticmethod
    def planned_wait(function: str, values: dict[str, Any]) -> float:
        """The seconds a call spends waiting by its own arguments (intervals and durations)."""
        interval = float(values.get("interval") or 0.0)
        duration = float(values.get("duration") or 0.0)
        if function in ("click", "doubleClick", "rightClick"):
            clicks = {"doubleClick": 2, "rightClick": 1}.get(function, values.get("clicks", 1))
            return duration + interval * clicks
        if function in ("write", "typewrite"):
            return interval * len(values.get("message") or "")
        if function == "press":
            keys = values.get("keys")
            count = len(keys) if isinstance(keys, list) else 1
            return interval * count * int(values.get("presses") or 1)
        if function == "hotkey":
            return interval * 2 * len(values.get("args") or ())
        return duration

    def check(self, function: Any, args: Any, kwargs: Any) -> Any:
        """The bound pyautogui callable for the call, or ActionRefused saying why not."""
        if function not in FUNCTIONS:
            raise ActionRefused(
                f"unknown function {function!r} (one of {', '.join(FUNCTIONS + NO_INPUT)})"
            )
        if not isinstance(args, list):
            raise ActionRefused("args must be a list")
        if not isinstance(kwargs, dict) or not all(isinstance(key, str) for key in kwargs):
            raise ActionRefused("kwargs must be an object")
        unknown = sorted(set(kwargs) - ALLOWED_KEYWORDS)
        if unknown:
            raise ActionRefused(f"{function}() does not take the keyword(s) {', '.join(unknown)}")
        target = getattr(self.pyautogui, function)
        try:
            bound = inspect.signature(target).bind(*args, **kwargs)
        except TypeError as error:
            raise ActionRefused(f"{function}(): {error}") from None
        values = dict(bound.arguments)
        values.update(values.pop("kwargs", {}))  # hotkey(*args, **kwargs)
        # Positional arguments reach the same parameters (tween, logScreenshot, _pause).
        unknown = sorted(set(values) - ALLOWED_KEYWORDS - {"args"})
        if unknown:
            raise ActionRefused(f"{function}() does not take the argument(s) {', '.join(unknown)}")
        if "x" in values or "y" in values:
            self.check_point(values.get("x"), values.get("y"))
        if "button" in values and values["button"] not in BUTTONS:
            raise ActionRefused(f"button must be one of {', '.join(BUTTONS)}")
        for name, limit in (("duration", MAX_DURATION_S), ("interval", MAX_INTERVAL_S)):
            if name in values:
                value = values[name]
                if not is_number(value) or not 0 <= value <= limit:
                    raise ActionRefused(f"{name} must be a number from 0 to {limit:g}")
        for name in ("clicks", "presses"):
            if name in values and function != "scroll":
                value = values[name]
                if not isinstance(value, int) or isinstance(value, bool):
                    raise ActionRefused(f"{name} must be an integer")
                if not 1 <= value <= MAX_REPEAT:
                    raise ActionRefused(f"{name} must be from 1 to {MAX_REPEAT}")
        if function == "scroll":
            clicks = values.get("clicks")
            if not isinstance(clicks, int) or isinstance(clicks, bool):
                raise ActionRefused("scroll clicks must be an integer")
            if not -MAX_REPEAT <= clicks <= MAX_REPEAT:
                raise ActionRefused(f"scroll clicks must be from -{MAX_REPEAT} to {MAX_REPEAT}")
        if function in ("write", "typewrite"):
            self.check_message(values.get("message"))
        if function == "press":
            keys = values.get("keys")
            self.check_keys(keys if isinstance(keys, list) else [keys])
        if function == "hotkey":
            if not values.get("args"):
                raise ActionRefused("hotkey() needs at least one key")
            self.check_keys(list(values["args"]))
        if function in ("keyDown", "keyUp"):
            self.check_keys([values.get("key")])
        self.planned_s = self.planned_wait(function, values)
        point = self.pointed_at(values)
        if function in PRESSES and point is not None:
            return lambda: (self.approach(*point), target(*bound.args, **bound.kwargs))
        return lambda: target(*bound.args, **bound.kwargs)

    @staticmethod
    def pointed_at(values: dict[str, Any]) -> tuple[float, float] | None:
        """The point a checked call names, or None (the pointer's place)."""
        x, y = values.get("x"), values.get("y")
        if isinstance(x, list | tuple):
            x, y = x
        return None if x is None or y is None else (x, y)

    def approach(self, x: float, y: float) -> None:
        """Move the pointer to (x, y) and rest there APPROACH_S before a press.

        Nothing when it is there already.
        """
        if tuple(self.pyautogui.position()) == (round(x), round(y)):
            return
        self.pyautogui.moveTo(x, y)
        self.x11._display.sync()
        self.clock.sleep(APPROACH_S)

    def check_point(self, x: Any, y: Any) -> None:
        """Coordinates must be numbers on the screen (or both absent: the pointer's place)."""
        if isinstance(x, list | tuple) and y is None:
            if len(x) != 2:
                raise ActionRefused("a point must be two numbers")
            x, y = x
        if x is None and y is None:
            return
        if not is_number(x) or not is_number(y):
            raise ActionRefused(f"coordinates must be numbers, not {x!r}, {y!r}")
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise ActionRefused(f"({x:g}, {y:g}) is off the screen ({self.width}x{self.height})")

    def check_keys(self, keys: list[Any]) -> None:
        """Every key must be a name pyautogui can press on this display."""
        if not keys:
            raise ActionRefused("no key given")
        for key in keys:
            if not isinstance(key, str) or not key:
                raise ActionRefused(f"a key must be a non-empty string, not {key!r}")
            name = key.lower() if len(key) > 1 else key
            if not self.key_codes.get(name):
                raise ActionRefused(f"unknown key {key!r}")

    def check_message(self, message: Any) -> None:
        """A message is a string (or a list of key names) pyautogui can type whole."""
        if isinstance(message, list):
            self.check_keys(message)
            return
        if not isinstance(message, str):
            raise ActionRefused("message must be a string or a list of key names")
        if len(message) > MAX_MESSAGE:
            raise ActionRefused(f"message is longer than {MAX_MESSAGE} characters")
        missing = sorted({char for char in message if not self.key_codes.get(char)})
        if missing:
            raise ActionRefused(f"no key types {''.join(missing)!r}")


class CallCut(Exception):
    """A pyautogui call reached its deadline (the step's timeout) and was stopped there."""


class DeadlineClock:
    """What pyautogui sees as its ``time`` module: the real one, whose sleep knows a deadline.

    pyautogui waits with ``time.sleep`` only (between clicks, keys and the steps of a
    movement), so a call that would run past the step's timeout (``click(clicks=100,
    interval=1)``) is stopped at its next wait once the deadline has come, after sleeping up
    to it: no more input is sent.
    """

    def __init__(self) -> None:
        self.deadline: float | None = None

    def sleep(self, seconds: float) -> None:
        """Sleep, or sleep until the deadline and raise CallCut when it comes first."""
        if self.deadline is not None and time.monotonic() + seconds > self.deadline:
            time.sleep(max(0.0, self.deadline - time.monotonic()))
            raise CallCut()
        time.sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def fix_character_keys(display: Any, key_codes: dict[str, Any], shifted: Any) -> None:
    """Map each character to a key that types it at the shift level pyautogui will use.

    pyautogui presses shift for the characters it calls shift characters (``<``, ``?``,
    capitals) and takes the first key whose map holds the character's keysym at any level.
    On the X server's default (pc105) map ``less`` is first found unshifted on the extra key
    left of Z, where shift types ``>``: ``write("<")`` typed ``>``. Each character gets the
    key that holds its keysym at the level pyautogui's shift decision gives, when one does.
    """
    from Xlib import XK

    for char, code in list(key_codes.items()):
        if len(char) != 1 or not char.isprintable() or code is None:
            continue
        keysym = XK.string_to_keysym(XK_NAMES.get(char, char))
        if not keysym:
            continue
        level = 1 if shifted(char) else 0
        codes = sorted(code for code, index in display.keysym_to_keycodes(keysym) if index == level)
        if codes:
            key_codes[char] = codes[0]


XK_NAMES = {
    " ": "space",
    "!": "exclam",
    '"': "quotedbl",
    "#": "numbersign",
    "$": "dollar",
    "%": "percent",
    "&": "ampersand",
    "'": "apostrophe",
    "(": "parenleft",
    ")": "parenright",
    "*": "asterisk",
    "+": "plus",
    ",": "comma",
    "-": "minus",
    ".": "period",
    "/": "slash",
    ":": "colon",
    ";": "semicolon",
    "<": "less",
    "=": "equal",
    ">": "greater",
    "?": "question",
    "@": "at",
    "[": "bracketleft",
    "\\": "backslash",
    "]": "bracketright",
    "^": "asciicircum",
    "_": "underscore",
    "`": "grave",
    "{": "braceleft",
    "|": "bar",
    "}": "braceright",
    "~": "asciitilde",
}
"""X keysym names of the printable ASCII characters that are not letters or digits."""


def is_number(value: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- the driver -----------------------------------------------------------------------------------


def positive_int(request: dict[str, Any], name: str, default: int) -> int:
    """A request field that must be a positive integer."""
    value = request.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise DriverError(f"{name} must be a positive integer, not {value!r}")
    return value


def seconds(request: dict[str, Any], name: str, default: float) -> float:
    """A request field that must be a number of seconds from 0 to MAX_SETTLE_CAP_S."""
    value = request.get(name, default)
    if not is_number(value) or not 0 <= value <= MAX_SETTLE_CAP_S:
        raise DriverError(f"{name} must be a number from 0 to {MAX_SETTLE_CAP_S:g}")
    return float(value)


class Driver:
    """Serves requests; holds the session, the observer and the actor once started."""

    def __init__(self) -> None:
        self.session: Session | None = None
        self.desktop: Desktop | None = None
        self.actor: Actor | None = None
        self.last_observe_s = 0.0  # how long the last act's observation took

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Execute one request and return its reply."""
        op = request.get("op")
        if op == "start":
            return self.start(request)
        if op == "stop":
            self.stop()
            return {"stopped": True}
        if op not in ("act", "observe"):
            raise DriverError(f"unknown op {op!r} (start, act, observe, stop)")
        if self.desktop is None or self.actor is None:
            raise DriverError(f"op {op!r} before start")
        max_nodes = positive_int(request, "max_nodes", DEFAULT_MAX_NODES)
        if op == "observe":
            reply = self.desktop.observe(max_nodes)
            if request.get("identify"):
                # For a task's check (never recorded): who each application of the tree is.
                reply["applications"] = list(self.desktop.identities)
            return reply
        return self.act(request, max_nodes)

    def start(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start the session and the launched applications; the first observation."""
        if self.session is not None:
            raise DriverError("already started; stop first")
        started = time.monotonic()
        width = positive_int(request, "width", DEFAULT_WIDTH)
        max_nodes = positive_int(request, "max_nodes", DEFAULT_MAX_NODES)
        height = positive_int(request, "height", DEFAULT_HEIGHT)
        launch = request.get("launch", [])
        if not isinstance(launch, list) or not all(
            isinstance(argv, list) and argv and all(isinstance(part, str) for part in argv)
            for argv in launch
        ):
            raise DriverError("launch must be a list of argv lists of strings")
        versions = json.loads(VERSIONS_JSON.read_text(encoding="utf-8"))
        self.session = Session(width, height)
        try:
            self.session.start()
            assert self.session.bus_address is not None
            desktop = Desktop(self.session.bus_address)
            deadline = time.monotonic() + SESSION_START_TIMEOUT_S
            while not (desktop.wm_answers() and desktop.accessibility_bus_ready()):
                if time.monotonic() > deadline:
                    raise DriverError("openbox or the AT-SPI bus did not start; see their logs")
                time.sleep(POLL_S)
            desktop.listen()
            self.session.record(desktop)
            programs = [(["/usr/bin/python3", str(LAUNCHER)], "launcher")]
            programs += [(argv, Path(argv[0]).name) for argv in launch]
            waiting = []
            deadline = time.monotonic() + LAUNCH_TIMEOUT_S
            # One after another: started together, whichever mapped last took the focus and
            # the top of the stack, so the first observation differed from run to run.
            for argv, name in programs:
                try:
                    waiting.append((argv, self.session.spawn(argv, name)))
                except OSError as error:
                    raise DriverError(f"cannot launch {argv}: {error}") from None
                self.wait_for_windows(desktop, waiting, deadline)
            desktop.launched = launched_programs(waiting[1:])
            self.desktop = desktop
            self.actor = Actor(desktop.width, desktop.height)
            desktop.settle(DEFAULT_QUIET_S, DEFAULT_SETTLE_CAP_S)
            reply = desktop.observe(max_nodes)
        except BaseException:
            self.stop()
            raise
        reply["versions"] = versions
        reply["start_s"] = round(time.monotonic() - started, 6)
        return reply

    @staticmethod
    def wait_for_windows(
        desktop: Desktop, waiting: list[tuple[list[str], subprocess.Popen[bytes]]], deadline: float
    ) -> None:
        """Wait until every program shows a window and the last one has the focus on top.

        See the module docstring; the launcher dock, first in ``waiting``, never takes it.
        """
        window_seen: dict[int, float] = {}
        focus_wanted = len(waiting) > 1
        while True:
            desktop.activity()
            applications = desktop.applications()
            windows = desktop.client_windows()
            window_pid = {window.id: desktop.window_pid(window) for window in windows}
            window_pids = set(window_pid.values())
            still = []  # (argv, what it lacks)
            launched_pids: set[int] = set()
            for index, (argv, process) in enumerate(waiting):
                # Ours include nsenter's, outside the view; the view's are what windows and
                # AT-SPI name.
                ours = descendants(process.pid)
                pids = view_pids(ours)
                if index:
                    launched_pids |= pids
                newest_pids = pids
                accessible = [app for app, _, pid in applications if pid in pids]
                framed = any(desktop.shows_frame(app) for app in accessible)
                if accessible:
                    if pids & window_pids and framed:
                        continue
                elif pids & window_pids:
                    first = window_seen.setdefault(process.pid, time.monotonic())
                    if time.monotonic() - first >= NO_ACCESSIBILITY_GRACE_S:
                        continue
                if process.poll() is not None and len(ours) == 1:
                    raise DriverError(
                        f"{argv} exited with code {process.returncode} before showing a window"
                    )
                lacks = "window openbox manages" if framed else "window"
                still.append((argv, lacks))
            active = desktop.active_window()
            active_pid = window_pid.get(active)
            others = [w for w, pid in window_pid.items() if pid in launched_pids - {active_pid}]
            focused = not focus_wanted or (
                active_pid in newest_pids and desktop.is_above(active, others)
            )
            if not still and focused:
                return
            if time.monotonic() > deadline:
                names = "; ".join(f"{argv} has no {lacks}" for argv, lacks in still)
                raise DriverError(
                    f"after {LAUNCH_TIMEOUT_S:g} s, {names}"
                    if still
                    else f"{waiting[-1][0]} did not take the focus on top in {LAUNCH_TIMEOUT_S:g} s"
                )
            time.sleep(0.05)

    def act(self, request: dict[str, Any], max_nodes: int) -> dict[str, Any]:
        """Run one call, settle, observe."""
        assert self.desktop is not None and self.actor is not None
        quiet_s = seconds(request, "quiet_s", DEFAULT_QUIET_S)
        cap_s = seconds(request, "settle_cap_s", DEFAULT_SETTLE_CAP_S)
        call = request.get("call")
        if not isinstance(call, dict):
            raise DriverError("call must be an object {function, args, kwargs}")
        function = call.get("function")
        received = time.monotonic()
        budget_s = request.get("budget_s")
        if budget_s is not None and (not is_number(budget_s) or budget_s <= 0):
            raise DriverError(f"budget_s must be a positive number, not {budget_s!r}")
        # The input and its settling end by this instant, so that the observation after them
        # still fits in the step's time (budget_s: what the host gives the whole call).
        input_deadline = (
            None if budget_s is None else received + budget_s - self.observe_reserve(budget_s)
        )
        if input_deadline is not None:
            cap_s = min(cap_s, max(0.0, input_deadline - received))
        error = None
        action_s = settle_s = 0.0
        if function == "WAIT":
            time.sleep(cap_s)
            settle_s = cap_s
        elif function not in ("DONE", "FAIL"):
            try:
                run = self.actor.check(function, call.get("args", []), call.get("kwargs", {}))
                if input_deadline is not None and received + self.actor.planned_s > input_deadline:
                    # Its own waits alone outlast the step: refused whole, before any input.
                    raise ActionRefused(
                        f"{function}() waits {self.actor.planned_s:g} s by its arguments, "
                        f"longer than the {max(0.0, input_deadline - received):.1f} s left "
                        "in the step's time"
                    )
            except ActionRefused as refused:
                error = str(refused)
            else:
                self.desktop.activity()  # what happened before the action is not its effect
                before = set(user_processes(os.getuid()))
                windows_before = {window.id for window in self.desktop.client_windows()}
                started = time.monotonic()
                try:
                    self.actor.run(run, input_deadline)
                except CallCut:
                    error = (
                        f"{function}() was stopped after {time.monotonic() - started:.1f} s: "
                        "the step's time ran out"
                    )
                except Exception as failed:  # pyautogui's own complaint is the step's error
                    error = f"{type(failed).__name__}: {failed}"
                action_s = time.monotonic() - started
                # A pointer resting on a widget shows its tooltip after GTK's hover delay: wait
                # that long, so whether the tooltip is in the observation does not depend on
                # how fast the step was read.
                least_s = HOVER_S if function in POINTER_FUNCTIONS else 0.0
                if input_deadline is not None:
                    left = max(0.0, input_deadline - time.monotonic())
                    cap_s, least_s = min(cap_s, left), min(least_s, left)
                settle_s = self.desktop.settle(quiet_s, cap_s, before, least_s, windows_before)
        started = time.monotonic()
        reply = self.desktop.observe(max_nodes)
        self.last_observe_s = time.monotonic() - started
        reply["error"] = error
        reply["timing"] = {
            "action_s": round(action_s, 6),
            "settle_s": round(settle_s, 6),
            **reply["timing"],
        }
        return reply

    def observe_reserve(self, budget_s: float) -> float:
        """How much of a call's ``budget_s`` is kept for its observation.

        Twice the last observation's time and a second more (a tree read grows with what the
        call opened), but never more than half the budget: a short step still gets input.
        """
        return min(budget_s / 2, OBSERVE_RESERVE_S + 2 * self.last_observe_s)

    def stop(self) -> None:
        """End the session."""
        if self.session is not None:
            self.session.stop()
        self.session = self.desktop = self.actor = None


def launched_programs(
    waiting: list[tuple[list[str], subprocess.Popen[bytes]]],
) -> dict[int, tuple[str, str]]:
    """{view pid: (argv[0], executable)} of the processes of each launched program now.

    The executable is the one argv[0] names (found on the session's PATH, links resolved), so
    a process of the program that ran something else (a shell it started) is not the program.
    """
    path = user_environment(None)["PATH"]
    launched: dict[int, tuple[str, str]] = {}
    for argv, process in waiting:
        found = shutil.which(argv[0], path=path)
        if found is None:
            continue
        executable = os.path.realpath(found)
        for pid in view_pids(descendants(process.pid)):
            launched[pid] = (argv[0], executable)
    return launched


def serve(reply_fd: int) -> None:
    """Serve requests from stdin until it closes or the host goes."""
    driver = Driver()

    def idle() -> None:
        # Keep libatspi's event queue drained between requests.
        if driver.desktop is not None:
            driver.desktop.activity()

    try:
        runtime.serve(
            driver.handle, reply_fd, error_key="driver_error", idle=idle, ensure_ascii=False
        )
    finally:
        driver.stop()


class NotTheSession(Exception):
    """A socket of the session answered from a process that is not the session's own."""


def last_look(max_nodes: int) -> dict[str, Any]:
    """One observation of the running session, or an empty one when there is none.

    Only from the session's own X server and accessibility bus (SESSION_FILE, written before
    any input, names them by process): the bus is the recorded address, never the root
    window's AT_SPI_BUS (any X client sets it), and the processes answering our connections
    are checked before and after the look (the socket files lie in folders of the session's
    user, the agent's user too, who could put its own in their place).
    """
    try:
        session = json.loads(SESSION_FILE.read_text(encoding="utf-8"))
        # libatspi takes the accessibility bus from here before the root window's property.
        os.environ["AT_SPI_BUS_ADDRESS"] = session["a11y_address"]
        desktop = Desktop(session["bus_address"])
    except Exception as error:  # no file, no display: no session to look at
        return empty_look(f"no desktop session ({type(error).__name__}: {error})")
    try:
        check_peers(desktop, session)
        observation = desktop.observe(max_nodes)
        check_peers(desktop, session)
    except NotTheSession as error:
        return empty_look(f"the accessibility tree is unavailable: {error}")
    return observation


def check_peers(desktop: Desktop, session: dict[str, Any]) -> None:
    """Raise NotTheSession unless the session's own processes serve X and the bus now."""
    try:
        seen = desktop.peers(desktop.connect_bus(session["a11y_address"]))
    except Exception as error:  # the bus does not answer at its address any more
        raise NotTheSession(f"the accessibility bus cannot be reached ({error})") from None
    for kind, recorded in session["peers"].items():
        if seen.get(kind) != recorded:
            raise NotTheSession(
                f"the {kind} socket is served by {seen.get(kind)}, not by the session's {recorded}"
            )


def empty_look(why: str) -> dict[str, Any]:
    """An observation without a desktop: no tree, no screenshot, and why."""
    return {
        "tree": None,
        "nodes": 0,
        "truncated": False,
        "tree_error": why,
        "screenshot_png": None,
        "screen": None,
        "focused": {"app": None, "window": None},
        "windows": [],
        "exited": [],
        "tree_digest": tree_digest(None),
        "timing": {"tree_s": 0.0, "screenshot_s": 0.0},
    }


def drop_to_user() -> None:
    """Become ``user`` (when started as root), with the user's home and runtime folder."""
    account = pwd.getpwnam(SESSION_USER)
    if os.geteuid() == 0 and VIEW_PID is not None:
        # Real and effective ids the user's (AT-SPI and D-Bus check them), root kept as the
        # saved ids only: the one way back, for the child that enters the view.
        os.setgroups([])
        os.setresgid(account.pw_gid, account.pw_gid, 0)
        os.setresuid(account.pw_uid, account.pw_uid, 0)
    elif os.geteuid() == 0:
        os.setgroups([])
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)
    os.environ.update(
        {
            "HOME": HOME,
            "USER": SESSION_USER,
            "LOGNAME": SESSION_USER,
            "XDG_RUNTIME_DIR": str(RUNTIME_DIR),
        }
    )


def main() -> None:
    """Serve requests, or with ``--observe`` print one observation of the running session."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--observe", action="store_true", help="print one observation")
    parser.add_argument("--max-nodes", type=int, default=DEFAULT_MAX_NODES)
    args = parser.parse_args()
    if os.geteuid() == 0:
        enter_view()
    drop_to_user()
    reply_fd = runtime.private_reply_fd()
    if args.observe:
        runtime.write_reply(reply_fd, last_look(args.max_nodes), ensure_ascii=False)
        return
    serve(reply_fd)


if __name__ == "__main__":
    main()
