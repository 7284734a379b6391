"""The stand-in device's screens: a launcher, Settings, Contacts, a keyboard and the status bar.

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
KEYBOARD = "com.android.inputmethod.latin"
SYSTEMUI = "com.android.systemui"

ACTIVITIES = {
    LAUNCHER: ".uioverride.QuickstepLauncher",
    SETTINGS: ".Settings",
    CONTACTS: ".activities.PeopleActivity",
}
"""Each app's launcher activity."""

TOGGLES = (
    ("Wi-Fi", "wifi_on"),
    ("Bluetooth", "bluetooth_on"),
    ("Airplane mode", "airplane_mode_on"),
)
"""Settings' switches: their label and the ``settings global`` key each one sets."""

KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


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
    for column, (label, package) in enumerate((("Settings", SETTINGS), ("Contacts", CONTACTS))):
        left = 60 + column * 270
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
        views.append(
            Node(
                "android.widget.TextView",
                (0, 1000, WIDTH, 1100),
                CONTACTS,
                text="No contacts",
                resource_id=f"{CONTACTS}:id/empty_list_message",
            )
        )
    views.append(
        Node(
            "android.widget.ImageButton",
            (860, 2120, 1020, 2280),
            CONTACTS,
            desc="Create contact",
            resource_id=f"{CONTACTS}:id/floating_action_button",
            clickable=True,
            focusable=True,
            on_tap="open:editor",
        )
    )
    return views


EDITOR_FIELDS = (("name", "Name"), ("phone", "Phone"))


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
