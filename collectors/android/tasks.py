"""Scripted Android tasks for the stock apps, each checked on the device's real state.

Settings, Contacts, Clock and Files: the apps of an emulator image.

A task names the apps it uses (``apps``: cleared with ``pm clear`` at an ``apps`` reset, and
recorded with their version codes), the shell commands that seed its starting state after
that (``setup``), the app opened at the start (``start_app``), its steps, and its check: a
shell command whose output must match ``check_pattern`` once the work is done (``settings get
global wifi_on`` answering 0, ``content query`` listing the new contact, ``dumpsys alarm``
naming the next alarm clock, ``ls`` listing a new folder). The device is read,
not the screen, so an agent cannot earn the reward by making something look done.

A step is an AndroidWorld action whose target may be written as a ``target`` instead of an
``index``: ``{"action_type": "click", "target": {"text": "Wi-Fi"}}`` (keys ``text``, ``desc``,
``res``, ``hint``, ``class``). The script policy resolves it against the screen the step is
played on, so the recorded action has the element's index, as an agent's would, and the same
script plays on devices whose screens number their elements differently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worldtrace.collectors.android.actions import make_action, parse_action
from worldtrace.collectors.android.elements import Element
from worldtrace.collectors.base import ScriptedTask
from worldtrace.schemas import Action

SETTINGS = "com.android.settings"
CONTACTS = "com.android.contacts"
CONTACTS_PROVIDER = "com.android.providers.contacts"
CLOCK = "com.android.deskclock"
FILES = "com.android.documentsui"

PHONES_QUERY = (
    "content query --uri content://com.android.contacts/data/phones --projection display_name:data1"
)
"""Every contact's name and phone number, as the provider holds them."""


def seed_contact(raw_contact_id: int, name: str, phone: str) -> tuple[str, ...]:
    """Shell commands that store a contact through the provider (``content insert``).

    ``raw_contact_id`` is the id the provider gives the new raw contact: after ``pm clear`` of
    the provider, the first is 1.
    """
    data = "content insert --uri content://com.android.contacts/data"
    person = f"--bind raw_contact_id:i:{raw_contact_id}"
    return (
        "content insert --uri content://com.android.contacts/raw_contacts "
        "--bind account_type:n: --bind account_name:n:",
        f"{data} {person} --bind mimetype:s:vnd.android.cursor.item/name --bind 'data1:s:{name}'",
        f"{data} {person} --bind mimetype:s:vnd.android.cursor.item/phone_v2 "
        f"--bind 'data1:s:{phone}'",
    )


TARGET_KEYS = {
    "text": "text",
    "desc": "content_description",
    "res": "resource_name",
    "hint": "hint_text",
    "class": "class_name",
}


@dataclass(frozen=True)
class AndroidTask(ScriptedTask):
    """An Android task: its apps, its starting state, its steps and its check."""

    apps: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    """Shell commands run after the apps are cleared (each must exit 0)."""
    start_app: str | None = None
    check_command: str = ""
    check_pattern: str = ""
    """A regular expression the check command's output must contain a match of."""


def step(kind: str, **fields: Any) -> Action:
    """A script step; ``target=`` names its element by what it shows."""
    return make_action(kind, **fields) if "target" not in fields else _target_step(kind, fields)


def _target_step(kind: str, fields: Mapping[str, Any]) -> Action:
    target = dict(fields["target"])
    unknown = sorted(set(target) - set(TARGET_KEYS))
    if unknown:
        raise ValueError(f"a step's target names {', '.join(TARGET_KEYS)}, not {unknown}")
    rest = {name: value for name, value in fields.items() if name != "target"}
    parse_action({"action_type": kind, "index": 0, **rest})  # the rest must be valid
    return Action(name=kind, arguments={**rest, "target": target}, text="")


def resolve(action: Action, elements: Sequence[Element]) -> Action:
    """A step with a ``target`` as the action on the element it names (the first match).

    A step without one is returned as it is; ``LookupError`` if no element matches.
    """
    target = action.arguments.get("target")
    if not isinstance(target, Mapping):
        return action
    for element in elements:
        if all(getattr(element, TARGET_KEYS[key]) == value for key, value in target.items()):
            rest = {k: v for k, v in action.arguments.items() if k != "target"}
            return make_action(action.name, index=element.index, **rest)
    raise LookupError(f"no element on the screen matches {dict(target)}")


TASKS: tuple[AndroidTask, ...] = (
    AndroidTask(
        name="settings-wifi-off",
        instruction="Turn Wi-Fi off in Settings.",
        category="settings",
        apps=(SETTINGS,),
        setup=("settings put global wifi_on 1",),
        start_app=SETTINGS,
        steps=(step("click", target={"text": "Wi-Fi"}), step("status", goal_status="complete")),
        check_command="settings get global wifi_on",
        check_pattern=r"^0\s*$",
    ),
    AndroidTask(
        name="settings-bluetooth-on",
        instruction="Turn Bluetooth on in Settings.",
        category="settings",
        apps=(SETTINGS,),
        setup=("settings put global bluetooth_on 0",),
        start_app=SETTINGS,
        steps=(step("click", target={"text": "Bluetooth"}), step("status", goal_status="complete")),
        check_command="settings get global bluetooth_on",
        check_pattern=r"^1\s*$",
    ),
    AndroidTask(
        name="contacts-add",
        instruction="Add a contact named Ada Lovelace with the phone number 555-0100.",
        category="contacts",
        apps=(CONTACTS, CONTACTS_PROVIDER),
        start_app=CONTACTS,
        steps=(
            step("click", target={"desc": "Create contact"}),
            step("input_text", text="Ada Lovelace", target={"hint": "Name"}),
            step("input_text", text="555-0100", target={"hint": "Phone"}),
            step("click", target={"text": "Save"}),
            step("status", goal_status="complete"),
        ),
        check_command=PHONES_QUERY,
        check_pattern=r"display_name=Ada Lovelace, data1=555-0100",
    ),
    AndroidTask(
        name="contacts-delete",
        instruction="Delete the contact Grace Hopper; keep the others.",
        category="contacts",
        apps=(CONTACTS, CONTACTS_PROVIDER),
        setup=(
            *seed_contact(1, "Alan Turing", "555-0142"),
            *seed_contact(2, "Grace Hopper", "555-0199"),
        ),
        start_app=CONTACTS,
        steps=(
            step("click", target={"text": "Grace Hopper"}),
            step("click", target={"desc": "Delete"}),
            step("status", goal_status="complete"),
        ),
        check_command=PHONES_QUERY,
        check_pattern=r"\A(?![\s\S]*Grace Hopper)[\s\S]*display_name=Alan Turing, data1=555-0142",
    ),
    AndroidTask(
        name="clock-alarm-0730",
        instruction="Set an alarm for 07:30 in the Clock app.",
        category="clock",
        apps=(CLOCK,),
        start_app=CLOCK,
        steps=(
            step("click", target={"desc": "Add alarm"}),
            step("input_text", text="7", target={"res": "android:id/input_hour"}),
            step("input_text", text="30", target={"res": "android:id/input_minute"}),
            step("click", target={"text": "OK"}),
            step("status", goal_status="complete"),
        ),
        # the Clock hands its next alarm to the system (setAlarmClock), which dumpsys shows
        check_command="dumpsys alarm",
        check_pattern=r"pendingSend:\w+ time:\d+ = \d{4}-\d\d-\d\d 07:30:00",
    ),
    AndroidTask(
        name="files-new-folder",
        instruction="In Files, create a folder named Reports in Downloads.",
        category="files",
        apps=(FILES,),
        setup=("rm -rf /sdcard/Download/Reports", "mkdir -p /sdcard/Download"),
        start_app=FILES,
        steps=(
            step("click", target={"desc": "More options"}),
            step("click", target={"text": "New folder"}),
            step("input_text", text="Reports", target={"class": "android.widget.EditText"}),
            step("click", target={"text": "OK"}),
            step("status", goal_status="complete"),
        ),
        check_command="ls /sdcard/Download",
        check_pattern=r"^Reports$",
    ),
)
"""The library, in order."""


def load_tasks() -> list[AndroidTask]:
    """Every scripted Android task."""
    return list(TASKS)
