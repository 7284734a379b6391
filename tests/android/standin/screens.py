"""The stand-in device's screens: a launcher, Settings, Contacts, Clock, Files, a keyboard and
the status bar.

Each screen is built from the device's state (:class:`~tests.android.standin.device.DeviceState`)
every time it is looked at, so what the hierarchy and the screenshot show is what the state
holds. A node carries what ``uiautomator`` reports of a view (class, text, content
description, hint, resource id, bounds, flags) and what a tap on it does (``on_tap``: a word
the device interprets). The hierarchy XML and the screenshot are rendered from the same tree,
the way ``AccessibilityNodeInfo`` dumps and ``screencap`` show one screen.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from xml.sax.saxutils import quoteattr

from PIL import Image, ImageDraw

if TYPE_CHECKING:
    from tests.android.standin.device import DeviceState

WIDTH, HEIGHT, DENSITY = 1080, 2400, 420
"""The screen: a Pixel 6-sized phone."""
STATUS_BAR = 118
KEYBOARD_TOP = 1560
ROW = 200
LIST_TOP = 420

LAUNCHER = "com.android.launcher3"
SETTINGS = "com.android.settings"
CONTACTS = "com.android.contacts"
CLOCK = "com.android.deskclock"
FILES = "com.android.documentsui"
KEYBOARD = "com.android.inputmethod.latin"
SYSTEMUI = "com.android.systemui"

ACTIVITIES = {
    LAUNCHER: ".uioverride.QuickstepLauncher",
    SETTINGS: ".Settings",
    CONTACTS: ".activities.PeopleActivity",
    CLOCK: ".DeskClock",
    FILES: ".files.FilesActivity",
}
"""Each app's launcher activity."""

TOGGLES = (
    ("Wi-Fi", "wifi_on"),
    ("Bluetooth", "bluetooth_on"),
    ("Airplane mode", "airplane_mode_on"),
)
"""Settings' switches: their label and the ``settings global`` key each one sets."""

KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")

FORMS = (("name", "phone"), ("hour", "minute"), ("folder",))
"""The text fields of each form, in the order Enter moves through them."""
DOWNLOADS = "/sdcard/Download"


@dataclass
class Node:
    """One view of a screen, as ``uiautomator`` sees it."""

    cls: str
    bounds: tuple[int, int, int, int]
    package: str
    text: str = ""
    desc: str = ""
    resource_id: str = ""
    hint: str = ""
    clickable: bool = False
    checkable: bool = False
    checked: bool = False
    enabled: bool = True
    focusable: bool = False
    focused: bool = False
    scrollable: bool = False
    long_clickable: bool = False
    password: bool = False
    selected: bool = False
    on_tap: str | None = None
    """What a tap does, in the device's words (``toggle:wifi_on``, ``key:a``, ``open:editor``)."""
    children: list[Node] = field(default_factory=list)

    def walk(self) -> list[Node]:
        """This node and every node under it, in drawing order."""
        nodes = [self]
        for child in self.children:
            nodes.extend(child.walk())
        return nodes

    def contains(self, x: int, y: int) -> bool:
        """Whether the point is inside this node's bounds."""
        left, top, right, bottom = self.bounds
        return left <= x < right and top <= y < bottom


def screen_windows(state: DeviceState) -> list[Node]:
    """The windows on screen, bottom first: the foreground app's, the keyboard's if shown, and
    the status bar's."""
    windows = [_app_window(state)]
    if state.dialog is not None:
        windows.append(_dialog(state))
    if state.keyboard_shown:
        windows.append(_keyboard())
    windows.append(_status_bar(state))
    return windows


def _status_bar(state: DeviceState) -> Node:
    """SystemUI's status bar: the clock (the device's time, or demo mode's) and the battery."""
    clock, battery = state.status_bar()
    return Node(
        "android.widget.FrameLayout",
        (0, 0, WIDTH, STATUS_BAR),
        SYSTEMUI,
        resource_id=f"{SYSTEMUI}:id/status_bar",
        children=[
            Node(
                "android.widget.TextView",
                (48, 30, 200, 90),
                SYSTEMUI,
                text=clock,
                desc=clock,
                resource_id=f"{SYSTEMUI}:id/clock",
            ),
            Node(
                "android.widget.LinearLayout",
                (940, 30, 1032, 90),
                SYSTEMUI,
                desc=f"Battery {battery} percent.",
                resource_id=f"{SYSTEMUI}:id/battery",
            ),
        ],
    )


def target_at(windows: list[Node], x: int, y: int) -> Node | None:
    """The clickable node a tap at (x, y) reaches: the last drawn one, in the top window."""
    for window in reversed(windows):
        if not window.contains(x, y):
            continue
        hits = [node for node in window.walk() if node.clickable and node.contains(x, y)]
        return hits[-1] if hits else None
    return None


def _app_window(state: DeviceState) -> Node:
    package, activity = state.foreground
    root = Node("android.widget.FrameLayout", (0, 0, WIDTH, HEIGHT), package)
    content = Node("android.widget.LinearLayout", (0, STATUS_BAR, WIDTH, HEIGHT), package)
    root.children.append(content)
    if package == SETTINGS:
        content.children.extend(_settings(state))
    elif package == CONTACTS and activity.endswith("ContactEditorActivity"):
        content.children.extend(_contact_editor(state))
    elif package == CONTACTS and activity.endswith("QuickContactActivity"):
        content.children.extend(_contact_details(state))
    elif package == CONTACTS:
        content.children.extend(_contact_list(state))
    elif package == CLOCK:
        content.children.extend(_alarms(state))
    elif package == FILES:
        content.children.extend(_downloads(state))
    else:
        content.children.extend(_launcher())
    return root


def _title(package: str, text: str) -> Node:
    return Node(
        "android.widget.TextView",
        (48, STATUS_BAR + 60, WIDTH - 48, STATUS_BAR + 200),
        package,
        text=text,
        resource_id=f"{package}:id/title",
    )


def _launcher() -> list[Node]:
    icons = []
    apps = (("Settings", SETTINGS), ("Contacts", CONTACTS), ("Clock", CLOCK), ("Files", FILES))
    for column, (label, package) in enumerate(apps):
        left = 30 + column * 260
        icons.append(
            Node(
                "android.widget.TextView",
                (left, 1900, left + 240, 2160),
                LAUNCHER,
                text=label,
                desc=label,
                clickable=True,
                long_clickable=True,
                focusable=True,
                on_tap=f"launch:{package}",
            )
        )
    return [
        Node(
            "android.view.View",
            (0, STATUS_BAR, WIDTH, HEIGHT),
            LAUNCHER,
            resource_id=f"{LAUNCHER}:id/workspace",
            scrollable=True,
            children=icons,
        )
    ]


def _settings(state: DeviceState) -> list[Node]:
    rows = []
    for row, (label, key) in enumerate(TOGGLES):
        top = LIST_TOP + row * ROW
        on = state.setting("global", key) == "1"
        rows.append(
            Node(
                "android.widget.LinearLayout",
                (0, top, WIDTH, top + ROW),
                SETTINGS,
                clickable=True,
                focusable=True,
                on_tap=f"toggle:{key}",
                children=[
                    Node(
                        "android.widget.TextView",
                        (48, top + 60, 800, top + 140),
                        SETTINGS,
                        text=label,
                        resource_id="android:id/title",
                    ),
                    Node(
                        "android.widget.Switch",
                        (880, top + 50, 1032, top + 150),
                        SETTINGS,
                        text="ON" if on else "OFF",
                        resource_id="android:id/switch_widget",
                        checkable=True,
                        checked=on,
                        focusable=True,
                    ),
                ],
            )
        )
    return [
        _title(SETTINGS, "Settings"),
        Node(
            "androidx.recyclerview.widget.RecyclerView",
            (0, LIST_TOP, WIDTH, HEIGHT),
            SETTINGS,
            resource_id=f"{SETTINGS}:id/recycler_view",
            children=rows,
        ),
    ]


VISIBLE_CONTACTS = 7
"""Rows the contact list shows at once; more scroll."""


def _contact_list(state: DeviceState) -> list[Node]:
    contacts = state.contacts()
    first = min(state.list_offset, max(0, len(contacts) - VISIBLE_CONTACTS))
    rows = []
    for row, contact in enumerate(contacts[first : first + VISIBLE_CONTACTS]):
        top = LIST_TOP + row * ROW
        rows.append(
            Node(
                "android.widget.TextView",
                (0, top, WIDTH, top + ROW),
                CONTACTS,
                text=contact["name"],
                resource_id=f"{CONTACTS}:id/cliv_name_textview",
                clickable=True,
                long_clickable=True,
                focusable=True,
                on_tap=f"details:{first + row}",
            )
        )
    views: list[Node] = [_title(CONTACTS, "Contacts")]
    if rows:
        views.append(
            Node(
                "androidx.recyclerview.widget.RecyclerView",
                (0, LIST_TOP, WIDTH, LIST_TOP + VISIBLE_CONTACTS * ROW),
                CONTACTS,
                resource_id=f"{CONTACTS}:id/list",
                scrollable=len(contacts) > VISIBLE_CONTACTS,
                children=rows,
            )
        )
    else:
        views.append(_empty(CONTACTS, "No contacts", "empty_list_message"))
    views.append(_fab(CONTACTS, "Create contact", "floating_action_button", 860, "open:editor"))
    return views


def _empty(package: str, text: str, resource: str) -> Node:
    """The message an app shows where its list has nothing."""
    return Node(
        "android.widget.TextView",
        (0, 1000, WIDTH, 1100),
        package,
        text=text,
        resource_id=f"{package}:id/{resource}",
    )


def _fab(package: str, desc: str, resource: str, left: int, on_tap: str) -> Node:
    """An app's floating action button, at the bottom of the screen from ``left``."""
    return Node(
        "android.widget.ImageButton",
        (left, 2120, left + 160, 2280),
        package,
        desc=desc,
        resource_id=f"{package}:id/{resource}",
        clickable=True,
        focusable=True,
        on_tap=on_tap,
    )


EDITOR_FIELDS = (("name", "Name"), ("phone", "Phone"))


def _field(
    package: str,
    key: str,
    hint: str,
    bounds: tuple[int, int, int, int],
    state: DeviceState,
    resource_id: str,
) -> Node:
    """A text field: a tap gives it the focus (and shows the keyboard)."""
    return Node(
        "android.widget.EditText",
        bounds,
        package,
        text=state.fields.get(key, ""),
        hint=hint,
        resource_id=resource_id,
        clickable=True,
        focusable=True,
        focused=state.focused_field == key,
        long_clickable=True,
        on_tap=f"focus:{key}",
    )


def _button(
    package: str,
    text: str,
    bounds: tuple[int, int, int, int],
    on_tap: str,
    resource_id: str = "",
    enabled: bool = True,
    desc: str = "",
) -> Node:
    """A push button that does ``on_tap``."""
    return Node(
        "android.widget.Button",
        bounds,
        package,
        text=text,
        desc=desc,
        resource_id=resource_id,
        clickable=True,
        focusable=True,
        enabled=enabled,
        on_tap=on_tap,
    )


def _alarms(state: DeviceState) -> list[Node]:
    """The Clock's alarm list: each alarm's time and its switch; the button that adds one."""
    views: list[Node] = [_title(CLOCK, "Alarm")]
    for row, alarm in enumerate(state.alarms()):
        top = LIST_TOP + row * ROW
        views.append(
            Node(
                "android.widget.TextView",
                (48, top + 40, 700, top + 160),
                CLOCK,
                text=f"{alarm['hour']}:{alarm['minute']:02d}",
                resource_id=f"{CLOCK}:id/digital_clock",
            )
        )
        views.append(
            Node(
                "android.widget.Switch",
                (880, top + 50, 1032, top + 150),
                CLOCK,
                text="ON" if alarm["enabled"] else "OFF",
                resource_id=f"{CLOCK}:id/onoff",
                clickable=True,
                checkable=True,
                checked=alarm["enabled"],
                focusable=True,
                on_tap=f"alarm_toggle:{row}",
            )
        )
    if not state.alarms():
        views.append(_empty(CLOCK, "No alarms", "alarms_empty_view"))
    views.append(_fab(CLOCK, "Add alarm", "fab", 460, "dialog:time_picker"))
    return views


def _downloads(state: DeviceState) -> list[Node]:
    """Files at the Downloads folder: its entries, and the menu button."""
    views: list[Node] = [
        _title(FILES, "Downloads"),
        Node(
            "android.widget.ImageButton",
            (900, STATUS_BAR + 60, 1032, STATUS_BAR + 190),
            FILES,
            desc="More options",
            clickable=True,
            focusable=True,
            on_tap="dialog:files_menu",
        ),
    ]
    entries = state.entries(DOWNLOADS)
    for row, name in enumerate(entries[:VISIBLE_CONTACTS]):
        top = LIST_TOP + row * ROW
        views.append(
            Node(
                "android.widget.TextView",
                (48, top + 40, WIDTH - 48, top + 160),
                FILES,
                text=name,
                resource_id="android:id/title",
            )
        )
    if not entries:
        views.append(_empty(FILES, "No items", "message"))
    return views


def _dialog(state: DeviceState) -> Node:
    """The foreground app's dialog or menu, in a window of its own above the app's."""
    package = state.foreground[0]
    if state.dialog == "files_menu":
        bounds = (560, STATUS_BAR + 60, 1032, STATUS_BAR + 260)
        item = Node(
            "android.widget.TextView",
            (560, STATUS_BAR + 80, 1032, STATUS_BAR + 240),
            package,
            text="New folder",
            resource_id="android:id/title",
            clickable=True,
            focusable=True,
            on_tap="dialog:new_folder",
        )
        return Node("android.widget.ListView", bounds, package, children=[item])
    if state.dialog == "time_picker":
        hour, minute = state.fields.get("hour", ""), state.fields.get("minute", "")
        valid = hour.isdigit() and minute.isdigit() and int(hour) < 24 and int(minute) < 60
        fields = [
            _field(package, "hour", "hour", (100, 1000, 500, 1140), state, "android:id/input_hour"),
            _field(
                package,
                "minute",
                "minute",
                (580, 1000, 980, 1140),
                state,
                "android:id/input_minute",
            ),
        ]
        return _alert(package, "Set time", fields, "set_alarm", valid)
    name = state.fields.get("folder", "").strip()  # the new_folder dialog
    field = _field(
        package, "folder", "Folder name", (100, 1000, 980, 1140), state, "android:id/text1"
    )
    return _alert(package, "New folder", [field], "make_folder", bool(name) and "/" not in name)


def _alert(package: str, title: str, fields: list[Node], confirm: str, valid: bool) -> Node:
    """An alert dialog: its title, its fields, Cancel, and OK (enabled when ``valid``)."""
    top, bottom = 800, 1500
    heading = Node(
        "android.widget.TextView",
        (100, top + 40, 980, top + 140),
        package,
        text=title,
        resource_id="android:id/alertTitle",
    )
    cancel = (420, bottom - 180, 680, bottom - 40)
    ok = (720, bottom - 180, 980, bottom - 40)
    return Node(
        "android.widget.FrameLayout",
        (60, top, WIDTH - 60, bottom),
        package,
        resource_id="android:id/parentPanel",
        children=[
            heading,
            *fields,
            _button(package, "Cancel", cancel, "cancel", "android:id/button2"),
            _button(package, "OK", ok, confirm, "android:id/button1", enabled=valid),
        ],
    )


def _contact_editor(state: DeviceState) -> list[Node]:
    views = [_title(CONTACTS, "Create contact")]
    for row, (key, hint) in enumerate(EDITOR_FIELDS):
        top = LIST_TOP + row * ROW
        views.append(
            Node(
                "android.widget.EditText",
                (48, top + 30, WIDTH - 48, top + 170),
                CONTACTS,
                text=state.fields.get(key, ""),
                hint=hint,
                resource_id=f"{CONTACTS}:id/{key}",
                clickable=True,
                focusable=True,
                focused=state.focused_field == key,
                long_clickable=True,
                on_tap=f"focus:{key}",
            )
        )
    views.append(
        Node(
            "android.widget.Button",
            (780, STATUS_BAR + 40, 1032, STATUS_BAR + 200),
            CONTACTS,
            text="Save",
            resource_id=f"{CONTACTS}:id/editor_menu_save_button",
            clickable=True,
            focusable=True,
            enabled=bool(state.fields.get("name", "").strip()),
            on_tap="save",
        )
    )
    return views


def _contact_details(state: DeviceState) -> list[Node]:
    contact = state.details
    return [
        _title(CONTACTS, contact["name"]),
        Node(
            "android.widget.TextView",
            (48, LIST_TOP, WIDTH - 48, LIST_TOP + 120),
            CONTACTS,
            text=contact.get("phone", ""),
            resource_id=f"{CONTACTS}:id/header",
        ),
        Node(
            "android.widget.Button",
            (48, LIST_TOP + 200, 500, LIST_TOP + 340),
            CONTACTS,
            text="Delete",
            desc="Delete",
            resource_id=f"{CONTACTS}:id/menu_delete",
            clickable=True,
            focusable=True,
            on_tap="delete",
        ),
    ]


def _keyboard() -> Node:
    keys = []
    key_width = WIDTH // 10
    for row, letters in enumerate(KEY_ROWS):
        top = KEYBOARD_TOP + 40 + row * 190
        indent = (WIDTH - len(letters) * key_width) // 2
        for column, letter in enumerate(letters):
            left = indent + column * key_width
            keys.append(_key(letter, (left, top, left + key_width, top + 170), f"key:{letter}"))
    bottom = KEYBOARD_TOP + 40 + 3 * 190
    keys.append(_key("Delete", (900, bottom - 190, WIDTH, bottom - 20), "key:DEL"))
    keys.append(_key("Space", (270, bottom, 810, bottom + 170), "key: "))
    keys.append(_key("Enter", (860, bottom, WIDTH, bottom + 170), "key:ENTER"))
    return Node(
        "android.widget.FrameLayout",
        (0, KEYBOARD_TOP, WIDTH, HEIGHT),
        KEYBOARD,
        resource_id=f"{KEYBOARD}:id/keyboard_view",
        children=keys,
    )


def _key(label: str, bounds: tuple[int, int, int, int], on_tap: str) -> Node:
    return Node(
        "android.widget.Button" if len(label) > 1 else "android.view.View",
        bounds,
        KEYBOARD,
        desc=label,
        clickable=True,
        on_tap=on_tap,
    )


def hierarchy_xml(windows: list[Node], rotation: int = 0) -> str:
    """The screen as ``dumpWindowHierarchy`` returns it: one ``node`` element per view."""
    lines = [
        "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>",
        f'<hierarchy rotation="{rotation}">',
    ]
    for window in windows:
        _node_xml(window, 0, 1, lines)
    lines.append("</hierarchy>")
    return "\r\n".join(lines)


def _node_xml(node: Node, index: int, depth: int, lines: list[str]) -> None:
    left, top, right, bottom = node.bounds
    attributes = {
        "index": str(index),
        "text": node.text,
        "resource-id": node.resource_id,
        "class": node.cls,
        "package": node.package,
        "content-desc": node.desc,
        "checkable": _flag(node.checkable),
        "checked": _flag(node.checked),
        "clickable": _flag(node.clickable),
        "enabled": _flag(node.enabled),
        "focusable": _flag(node.focusable),
        "focused": _flag(node.focused),
        "scrollable": _flag(node.scrollable),
        "long-clickable": _flag(node.long_clickable),
        "password": _flag(node.password),
        "selected": _flag(node.selected),
        "visible-to-user": "true",
        "bounds": f"[{left},{top}][{right},{bottom}]",
        "hint": node.hint,
    }
    text = " ".join(f"{name}={quoteattr(value)}" for name, value in attributes.items())
    pad = "  " * depth
    if not node.children:
        lines.append(f"{pad}<node {text} />")
        return
    lines.append(f"{pad}<node {text}>")
    for position, child in enumerate(node.children):
        _node_xml(child, position, depth + 1, lines)
    lines.append(f"{pad}</node>")


def _flag(value: bool) -> str:
    return "true" if value else "false"


def screenshot(windows: list[Node], image_format: str = "PNG", quality: int = 80) -> bytes:
    """The screen as pixels: every view's box, its text or description, switches by state."""
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    for window in windows:
        if window.package == KEYBOARD:
            draw.rectangle(window.bounds, fill=(232, 234, 237))
        if window.package == SYSTEMUI:
            draw.rectangle(window.bounds, fill=(32, 33, 36))
        for node in window.walk()[1:]:
            _draw_node(draw, node)
    out = io.BytesIO()
    image.save(out, format=image_format, **({"quality": quality} if image_format == "JPEG" else {}))
    return out.getvalue()


def _draw_node(draw: ImageDraw.ImageDraw, node: Node) -> None:
    left, top, right, bottom = node.bounds
    if node.checkable:
        fill = (26, 115, 232) if node.checked else (154, 160, 166)
        draw.rounded_rectangle(node.bounds, radius=(bottom - top) // 2, fill=fill)
        knob = right - (bottom - top) if node.checked else left
        draw.ellipse((knob, top, knob + bottom - top, bottom), fill="white", outline=fill)
        return
    if node.clickable and node.cls.endswith(("Button", "EditText", "View")):
        outline = (26, 115, 232) if node.focused else (95, 99, 104)
        draw.rectangle(node.bounds, outline=outline, width=6 if node.focused else 2)
    label = node.text or node.desc or (node.hint if node.cls.endswith("EditText") else "")
    if label:
        colour = (95, 99, 104) if not node.text and node.hint else (32, 33, 36)
        if node.package == SYSTEMUI:
            colour = (255, 255, 255)
        draw.text((left + 16, top + 16), label, fill=colour, font_size=44)
