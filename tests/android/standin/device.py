"""The stand-in device: its state, its shell, its files, and what a touch or a key does.

A test double, named as such (no Android can run on these machines: no system image can be
downloaded and the kernel has no binder). It keeps what a phone keeps that the tests look at:
the foreground app and its back stack, ``settings`` (Settings' switches write there), files
(the contacts database, pushed files, the uiautomator server's jar), the keyboard, the
clipboard and a focused text field. Changes of screen take effect after a short window
transition, during which ``dumpsys window`` says one is running and the hierarchy still shows
the screen before, as on a real device.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.android.standin import screens
from tests.android.standin.adb import Stream
from tests.android.standin.screens import (
    CLOCK,
    CONTACTS,
    FILES,
    KEYBOARD,
    LAUNCHER,
    SETTINGS,
    SYSTEMUI,
    Node,
)

TRANSITION_S = 0.3
"""How long a change of screen takes to show."""

CONTACTS_PROVIDER = "com.android.providers.contacts"
CONTACTS_DB = f"/data/data/{CONTACTS_PROVIDER}/databases/contacts2.json"
"""Where the contacts live (clearing the provider's package clears them, as on a device)."""
ALARMS_DB = f"/data/data/{CLOCK}/databases/alarms.json"
"""The Clock's alarms (``pm clear com.android.deskclock`` clears them)."""
DOWNLOADS = "/sdcard/Download"
UIAUTOMATOR_JAR = "/data/local/tmp/u2.jar"
UIAUTOMATOR_MAIN = "com.wetest.uia2.Main"
FOLDER_MODE = 0o040755

PACKAGES = {
    LAUNCHER: 34,
    SETTINGS: 34,
    CONTACTS: 1_000_347,
    CONTACTS_PROVIDER: 34,
    CLOCK: 140_000,
    FILES: 340_000,
    KEYBOARD: 34,
    SYSTEMUI: 34,
}
"""The installed packages and their version codes."""

PROPERTIES = {
    "ro.product.manufacturer": "worldtrace",
    "ro.product.brand": "worldtrace",
    "ro.product.model": "Stand-in Phone",
    "ro.product.name": "standin",
    "ro.product.device": "standin",
    "ro.product.cpu.abi": "x86_64",
    "ro.build.version.release": "14",
    "ro.build.version.sdk": "34",
    "ro.build.fingerprint": "worldtrace/standin/standin:14/UP1A.231005.007/1:userdebug/test-keys",
    "ro.build.characteristics": "emulator",
    "sys.boot_completed": "1",
}
"""What ``getprop`` answers (the serial number is added per device)."""


@dataclass
class StoredFile:
    """One file of the device."""

    content: bytes
    mode: int = 0o100644
    mtime: int = 0


@dataclass
class DeviceState:
    """Everything the screens are built from."""

    foreground: tuple[str, str] = (LAUNCHER, screens.ACTIVITIES[LAUNCHER])
    back_stack: list[tuple[str, str]] = field(default_factory=list)
    settings: dict[str, dict[str, str]] = field(
        default_factory=lambda: {"global": {"wifi_on": "1", "bluetooth_on": "0"}}
    )
    files: dict[str, StoredFile] = field(default_factory=dict)
    folders: set[str] = field(default_factory=lambda: {"/sdcard", DOWNLOADS})
    """Folders that exist even when empty (a folder holding a file exists anyway)."""
    dialog: str | None = None
    """The foreground app's dialog or menu on screen (``time_picker``, ``files_menu``,
    ``new_folder``), or None."""
    keyboard_shown: bool = False
    focused_field: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    list_offset: int = 0
    details_index: int = 0
    details: dict[str, str] = field(default_factory=dict)
    """The contact the details screen shows (kept while a deletion's transition runs)."""
    clipboard: str | None = None
    demo: dict[str, str] | None = None
    """SystemUI's demo mode once entered: what its status bar shows (``clock``, ``battery``)."""
    battery: int = 87

    def status_bar(self) -> tuple[str, int]:
        """The status bar's clock and battery level: the device's own, or demo mode's."""
        demo = self.demo or {}
        hhmm = demo.get("clock") or time.strftime("%H%M")
        return f"{hhmm[:2]}:{hhmm[2:]}", int(demo.get("battery", self.battery))

    def setting(self, namespace: str, key: str) -> str | None:
        """A value of ``settings``; None if unset."""
        return self.settings.get(namespace, {}).get(key)

    def raw_contacts(self) -> list[dict[str, Any]]:
        """Every raw contact the provider holds (``id``, and ``name`` and ``phone`` if set)."""
        return self._table(CONTACTS_DB)

    def contacts(self) -> list[dict[str, Any]]:
        """The contacts with a name, sorted by it as the list shows them."""
        named = [contact for contact in self.raw_contacts() if contact.get("name")]
        return sorted(named, key=lambda contact: contact["name"].lower())

    def save_contacts(self, contacts: list[dict[str, Any]]) -> None:
        """Store ``contacts`` in the provider's database (each given an id if it has none)."""
        next_id = max((contact.get("id", 0) for contact in contacts), default=0) + 1
        for contact in contacts:
            if "id" not in contact:
                contact["id"], next_id = next_id, next_id + 1
        self._store(CONTACTS_DB, contacts)

    def alarms(self) -> list[dict[str, Any]]:
        """The Clock's alarms (``hour``, ``minute``, ``enabled``), in the order they were set."""
        return self._table(ALARMS_DB)

    def save_alarms(self, alarms: list[dict[str, Any]]) -> None:
        """Store the Clock's alarms."""
        self._store(ALARMS_DB, alarms)

    def entries(self, path: str) -> list[str]:
        """The names directly in the folder ``path``, sorted."""
        prefix = path.rstrip("/") + "/"
        names = {
            name[len(prefix) :].split("/", 1)[0]
            for name in [*self.files, *self.folders]
            if name.startswith(prefix)
        }
        return sorted(names)

    def _table(self, path: str) -> list[dict[str, Any]]:
        stored = self.files.get(path)
        rows: list[dict[str, Any]] = json.loads(stored.content) if stored else []
        return rows

    def _store(self, path: str, rows: list[dict[str, Any]]) -> None:
        self.files[path] = StoredFile(json.dumps(rows).encode(), mtime=int(time.time()))


class StandinDevice:
    """The device: state, behaviour, shell and files, safe to use from many streams at once."""

    def __init__(self, serial: str) -> None:
        self.serial = serial
        self.state = DeviceState()
        self._lock = threading.RLock()
        self._pending: list[tuple[float, Callable[[], None]]] = []
        self._touch_down: tuple[int, int] | None = None
        self.uiautomator: Callable[[int, Stream], None] | None = None
        """Starts the uiautomator server on a port for as long as the stream is open (set by
        the process that owns the server)."""

    # --- what the screen shows ---------------------------------------------------------------

    def windows(self) -> list[Node]:
        """The windows on screen now."""
        with self._lock:
            self._settle()
            return screens.screen_windows(self.state)

    def foreground(self) -> tuple[str, str]:
        """The package and activity in front now."""
        with self._lock:
            self._settle()
            return self.state.foreground

    def in_transition(self) -> bool:
        """Whether a change of screen is still running."""
        with self._lock:
            self._settle()
            return bool(self._pending)

    def _settle(self) -> None:
        now = time.monotonic()
        while self._pending and self._pending[0][0] <= now:
            _, change = self._pending.pop(0)
            change()

    def _later(self, change: Callable[[], None]) -> None:
        """Apply ``change`` once a window transition has run."""
        self._pending.append((time.monotonic() + TRANSITION_S, change))

    # --- input -----------------------------------------------------------------------------

    def tap(self, x: int, y: int) -> bool:
        """A tap at (x, y): whatever the view there does; False if outside the screen."""
        with self._lock:
            self._settle()
            if not (0 <= x < screens.WIDTH and 0 <= y < screens.HEIGHT):
                return False
            windows = screens.screen_windows(self.state)
            if self.state.dialog is not None and not any(
                window.contains(x, y) for window in windows[1:]
            ):
                self._close_dialog()  # a tap beside a dialog or a menu dismisses it
                return True
            target = screens.target_at(windows, x, y)
            if target is not None and target.enabled and target.on_tap:
                self._do(target.on_tap)
            return True

    def touch(self, action: int, x: int, y: int) -> bool:
        """A raw touch event (``MotionEvent`` action 0 down, 1 up, 2 move): down then up at
        the same place is a tap."""
        with self._lock:
            if action == 0:
                self._touch_down = (x, y)
            elif action == 1:
                down, self._touch_down = self._touch_down, None
                if down is not None and abs(down[0] - x) < 20 and abs(down[1] - y) < 20:
                    return self.tap(x, y)
            return True

    def swipe(self, x0: int, y0: int, x1: int, y1: int) -> bool:
        """A swipe: scrolls the contact list by a row per 200 px dragged upwards."""
        with self._lock:
            self._settle()
            package, activity = self.state.foreground
            if package == CONTACTS and activity.endswith("PeopleActivity"):
                rows = (y0 - y1) // screens.ROW
                limit = max(0, len(self.state.contacts()) - screens.VISIBLE_CONTACTS)
                self.state.list_offset = max(0, min(limit, self.state.list_offset + rows))
            return True

    def key(self, name: str) -> bool:
        """A key press by name (``back``, ``home``, ``enter``, ``delete``, a letter); False for
        a name the device does not know."""
        with self._lock:
            self._settle()
            name = name.lower()
            if name == "back":
                self._back()
            elif name == "home":
                self._go_home()
            elif name in {"enter", "del", "delete"} or len(name) == 1:
                self._type_key(
                    "DEL" if name.startswith("del") else name.upper() if name == "enter" else name
                )
            elif name in {"recent", "menu", "power", "volume_up", "volume_down"}:
                pass
            else:
                return False
            return True

    def type_text(self, text: str) -> None:
        """Text typed into the focused field (``input text``, a paste)."""
        with self._lock:
            self._settle()
            if self.state.focused_field is not None:
                key = self.state.focused_field
                self.state.fields[key] = self.state.fields.get(key, "") + text

    def clear_text(self) -> None:
        """Empty the focused field."""
        with self._lock:
            if self.state.focused_field is not None:
                self.state.fields[self.state.focused_field] = ""

    def _do(self, word: str) -> None:
        verb, _, argument = word.partition(":")
        state = self.state
        if verb == "launch":
            self._later(lambda: self._open(argument, screens.ACTIVITIES[argument]))
        elif verb == "toggle":
            state.settings.setdefault("global", {})[argument] = (
                "0" if state.setting("global", argument) == "1" else "1"
            )
        elif verb == "open":
            self._later(lambda: self._open(CONTACTS, ".activities.ContactEditorActivity"))
        elif verb == "details":
            index = int(argument)
            self._later(lambda: self._show_details(index))
        elif verb == "focus":
            state.focused_field, state.keyboard_shown = argument, True
        elif verb == "key":
            self._type_key(argument)
        elif verb == "save":
            name, phone = state.fields.get("name", "").strip(), state.fields.get("phone", "")
            state.save_contacts([*state.contacts(), {"name": name, "phone": phone.strip()}])
            self._later(self._back)
        elif verb == "delete":
            gone = state.contacts()[state.details_index]["id"]
            state.save_contacts([c for c in state.raw_contacts() if c["id"] != gone])
            self._later(self._back)
        elif verb == "dialog":
            state.dialog, state.fields = argument, {}
            state.focused_field, state.keyboard_shown = None, False
        elif verb == "cancel":
            self._close_dialog()
        elif verb == "set_alarm":
            hour, minute = (int(state.fields[key]) for key in ("hour", "minute"))
            state.save_alarms([*state.alarms(), {"hour": hour, "minute": minute, "enabled": True}])
            self._close_dialog()
        elif verb == "alarm_toggle":
            alarms = state.alarms()
            alarms[int(argument)]["enabled"] = not alarms[int(argument)]["enabled"]
            state.save_alarms(alarms)
        elif verb == "make_folder":
            state.folders.add(f"{DOWNLOADS}/{state.fields['folder'].strip()}")
            self._close_dialog()

    def _type_key(self, key: str) -> None:
        state = self.state
        if state.focused_field is None:
            return
        text = state.fields.get(state.focused_field, "")
        if key == "DEL":
            state.fields[state.focused_field] = text[:-1]
        elif key == "ENTER":
            order = next(form for form in screens.FORMS if state.focused_field in form)
            position = order.index(state.focused_field) + 1
            if position < len(order):
                state.focused_field = order[position]
            else:
                state.focused_field, state.keyboard_shown = None, False
        else:
            state.fields[state.focused_field] = text + key

    def _open(self, package: str, activity: str) -> None:
        state = self.state
        if state.foreground != (package, activity):
            state.back_stack.append(state.foreground)
        state.foreground = (package, activity)
        state.keyboard_shown, state.focused_field, state.fields = False, None, {}
        state.list_offset, state.dialog = 0, None

    def _close_dialog(self) -> None:
        state = self.state
        state.dialog, state.fields = None, {}
        state.keyboard_shown, state.focused_field = False, None

    def _show_details(self, index: int) -> None:
        self.state.details_index = index
        self.state.details = dict(self.state.contacts()[index])
        self._open(CONTACTS, ".activities.QuickContactActivity")

    def _back(self) -> None:
        state = self.state
        if state.keyboard_shown:
            state.keyboard_shown, state.focused_field = False, None
            return
        if state.dialog is not None:
            self._close_dialog()
            return
        if state.back_stack:
            previous = state.back_stack.pop()
            self._later(lambda: self._return_to(previous))

    def _return_to(self, previous: tuple[str, str]) -> None:
        state = self.state
        state.foreground, state.dialog = previous, None
        state.keyboard_shown, state.focused_field, state.fields = False, None, {}

    def _go_home(self) -> None:
        def home() -> None:
            self.state.back_stack.clear()
            self._return_to((LAUNCHER, screens.ACTIVITIES[LAUNCHER]))

        self._later(home)

    def saved_state(self) -> DeviceState:
        """A copy of everything the device keeps (an emulator snapshot's worth)."""
        with self._lock:
            self._settle()
            return copy.deepcopy(self.state)

    def restore_state(self, saved: DeviceState) -> None:
        """Put the device back in a saved state; a transition under way is dropped."""
        with self._lock:
            self._pending.clear()
            self.state = copy.deepcopy(saved)

    def demo_command(self, extras: dict[str, str]) -> None:
        """A ``com.android.systemui.demo`` broadcast: ignored unless the global setting
        ``sysui_demo_allowed`` is 1, as SystemUI does."""
        with self._lock:
            state = self.state
            if state.setting("global", "sysui_demo_allowed") != "1":
                return
            command = extras.get("command")
            if command == "enter":
                state.demo = state.demo or {}
            elif command == "exit":
                state.demo = None
            elif state.demo is not None and command == "clock" and "hhmm" in extras:
                state.demo["clock"] = extras["hhmm"]
            elif state.demo is not None and command == "battery" and "level" in extras:
                state.demo["battery"] = extras["level"]

    # --- packages ----------------------------------------------------------------------------

    def launch(self, package: str, activity: str | None = None) -> bool:
        """Start ``package`` (its launcher activity unless named); False if not installed."""
        with self._lock:
            if package not in screens.ACTIVITIES:
                return False
            name = activity or screens.ACTIVITIES[package]
            self._later(lambda: self._open(package, name))
            return True

    def force_stop(self, package: str) -> None:
        """Stop ``package``: the launcher comes back if it was in front."""
        with self._lock:
            self._settle()
            if self.state.foreground[0] == package:
                self.state.back_stack = [
                    entry for entry in self.state.back_stack if entry[0] != package
                ]
                self._return_to((LAUNCHER, screens.ACTIVITIES[LAUNCHER]))

    def clear_package(self, package: str) -> bool:
        """``pm clear``: the package's data is gone and it is stopped; False if unknown."""
        with self._lock:
            if package not in PACKAGES:
                return False
            prefix = f"/data/data/{package}/"
            for path in [path for path in self.state.files if path.startswith(prefix)]:
                del self.state.files[path]
            self.force_stop(package)
            return True

    # --- the file system ---------------------------------------------------------------------

    def stat(self, path: str) -> tuple[int, int, int] | None:
        """Mode, size and modification time of a file or folder; None if neither."""
        with self._lock:
            stored = self.state.files.get(path)
            if stored is not None:
                return stored.mode, len(stored.content), stored.mtime
            prefix = path.rstrip("/") + "/"
            if path == "/" or any(
                name.startswith(prefix) for name in [*self.state.files, *self.state.folders]
            ):
                return FOLDER_MODE, 0, 0
            if path.rstrip("/") in self.state.folders:
                return FOLDER_MODE, 0, 0
            return None

    def listdir(self, path: str) -> list[str]:
        """The names directly in the folder ``path``."""
        with self._lock:
            return self.state.entries(path)

    def make_folder(self, path: str) -> str | None:
        """``mkdir -p``: the folder and those above it; why it cannot be made, or None."""
        if not path.startswith(("/data/", "/sdcard/", "/storage/")):
            return f"mkdir: '{path}': Read-only file system"
        with self._lock:
            parts = path.rstrip("/").split("/")
            self.state.folders.update("/".join(parts[:end]) for end in range(2, len(parts) + 1))
        return None

    def read(self, path: str) -> bytes | None:
        """A file's content; None if there is none."""
        with self._lock:
            stored = self.state.files.get(path)
            return None if stored is None else stored.content

    def write(self, path: str, content: bytes, mode: int, mtime: int) -> str | None:
        """Store a pushed file; why it cannot be written, or None."""
        if not path.startswith(("/data/", "/sdcard/", "/storage/")):
            return f"couldn't create file: Read-only file system ({path})"
        with self._lock:
            self.state.files[path] = StoredFile(content, mode, mtime)
        return None

    def remove(self, path: str) -> None:
        """Remove a file or a folder with everything in it."""
        prefix = path.rstrip("/") + "/"
        with self._lock:
            for name in [
                name for name in self.state.files if name == path or name.startswith(prefix)
            ]:
                del self.state.files[name]
            self.state.folders = {
                name
                for name in self.state.folders
                if name != path.rstrip("/") and not name.startswith(prefix)
            }

    def md5(self, path: str) -> str | None:
        """The MD5 of a file, as ``md5sum`` prints it."""
        content = self.read(path)
        return None if content is None else hashlib.md5(content).hexdigest()


def dumpsys_window(device: StandinDevice) -> str:
    """``dumpsys window windows``: the focused window and whether a transition runs."""
    package, activity = device.foreground()
    state = "APP_STATE_RUNNING" if device.in_transition() else "APP_STATE_IDLE"
    return (
        "WINDOW MANAGER WINDOWS (dumpsys window windows)\n"
        f"  mCurrentFocus=Window{{1a2b3c4 u0 {package}/{package}{activity}}}\n"
        f"  mFocusedApp=ActivityRecord{{5d6e7f8 u0 {package}/{activity} t12}}\n"
        f"  mAppTransitionState={state}\n"
    )
