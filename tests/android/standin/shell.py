"""The stand-in device's shell: the commands adb, uiautomator2 and the android collector run.

A small interpreter of what ``/system/bin/sh`` is given over ``shell:``: commands separated by
``;``, ``&&`` and ``||``, ``$?``, quoting, and output redirection to ``/dev/null``. The
commands answer in the formats Android 14's tools print (``getprop``, ``wm size``,
``dumpsys``, ``pm``, ``am``, ``monkey``, ``input``, ``settings``, ``content query``,
``md5sum``, ``screencap``, ``rm``), reading and changing the device's state; anything else is
"not found" with exit code 127, as on a device.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from datetime import datetime, timedelta

from tests.android.standin import screens
from tests.android.standin.adb import Stream
from tests.android.standin.device import (
    PACKAGES,
    PROPERTIES,
    UIAUTOMATOR_JAR,
    UIAUTOMATOR_MAIN,
    StandinDevice,
    dumpsys_window,
)

Result = tuple[bytes, int]
"""A command's output and exit code."""

SEPARATORS = {";", "&&", "||", "&"}
REDIRECTION = re.compile(r"([12]?)>>?(\S*)")
"""An output redirection (``>/dev/null``, ``2> /dev/null``): only /dev/null is ever used."""

KEY_CODES = {
    "3": "home", "4": "back", "66": "enter", "67": "delete", "82": "menu", "187": "recent",
}  # fmt: skip
"""``input keyevent`` codes by number (``KEYCODE_HOME`` = 3, ...)."""


def _without_redirections(words: list[str]) -> tuple[list[str], bool]:
    """The words without their output redirections, and whether the output was redirected."""
    kept: list[str] = []
    quiet = target_next = False
    for word in words:
        if target_next:
            target_next = False
            continue
        match = REDIRECTION.fullmatch(word)
        if match is None:
            kept.append(word)
            continue
        quiet = quiet or match.group(1) != "2"
        target_next = not match.group(2)
    return kept, quiet


class StandinShell:
    """The shell of one :class:`StandinDevice`."""

    def __init__(self, device: StandinDevice) -> None:
        self.device = device
        self._commands: dict[str, Callable[[list[str]], Result]] = {
            "getprop": self._getprop,
            "wm": self._wm,
            "dumpsys": self._dumpsys,
            "pm": self._pm,
            "am": self._am,
            "monkey": self._monkey,
            "input": self._input,
            "settings": self._settings,
            "content": self._content,
            "md5sum": self._md5sum,
            "screencap": self._screencap,
            "rm": self._rm,
            "ls": self._ls,
            "mkdir": self._mkdir,
            "echo": lambda args: ((" ".join(args) + "\n").encode(), 0),
            "true": lambda args: (b"", 0),
            "sleep": lambda args: (b"", 0),
        }

    def run(self, command: str, stream: Stream) -> None:
        """Run a command line, writing its output to ``stream``."""
        try:
            lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError as error:
            stream.write(f"/system/bin/sh: syntax error: {error}\n".encode())
            return
        status, skip = 0, False
        words: list[str] = []
        for token in [*tokens, ";"]:
            if token not in SEPARATORS:
                words.append(token)
                continue
            if words and not skip:
                status = self._simple([word.replace("$?", str(status)) for word in words], stream)
            words = []
            skip = (token == "&&" and status != 0) or (token == "||" and status == 0)

    def _simple(self, words: list[str], stream: Stream) -> int:
        """Run one simple command: assignments, the command, redirections."""
        env: dict[str, str] = {}
        while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
            name, value = words.pop(0).split("=", 1)
            env[name] = value
        words, quiet = _without_redirections(words)
        if not words:
            return 0
        if words[0] == "app_process" and UIAUTOMATOR_MAIN in words:
            return self._uiautomator(words, env, stream)
        name = words[0].rsplit("/", 1)[-1]
        if name == "toybox" and len(words) > 1:
            name, words = words[1], words[1:]
        run = self._commands.get(name)
        if run is None:
            stream.write(f"/system/bin/sh: {words[0]}: inaccessible or not found\n".encode())
            return 127
        output, status = run(words[1:])
        if not quiet:
            stream.write(output)
        return status

    def _uiautomator(self, words: list[str], env: dict[str, str], stream: Stream) -> int:
        """``CLASSPATH=/data/local/tmp/u2.jar app_process / com.wetest.uia2.Main -p PORT``: the
        uiautomator server, serving until the stream that started it closes."""
        if env.get("CLASSPATH") != UIAUTOMATOR_JAR or self.device.read(UIAUTOMATOR_JAR) is None:
            stream.write(f"Error: Could not find class '{UIAUTOMATOR_MAIN}'\n".encode())
            return 1
        port = int(words[words.index("-p") + 1]) if "-p" in words else 9008
        if self.device.uiautomator is None:
            stream.write(b"java.lang.IllegalStateException: no UiAutomation\n")
            return 1
        stream.write(b"[server] INFO: [UiAutomator2Server] Starting Server\n")
        self.device.uiautomator(port, stream)
        return 0

    def _getprop(self, args: list[str]) -> Result:
        properties = {**PROPERTIES, "ro.serialno": self.device.serial}
        if args:
            return (properties.get(args[0], "") + "\n").encode(), 0
        return "".join(
            f"[{key}]: [{value}]\n" for key, value in sorted(properties.items())
        ).encode(), 0

    def _wm(self, args: list[str]) -> Result:
        if args[:1] == ["size"]:
            return f"Physical size: {screens.WIDTH}x{screens.HEIGHT}\n".encode(), 0
        if args[:1] == ["density"]:
            return f"Physical density: {screens.DENSITY}\n".encode(), 0
        return b"Error: unknown command\n", 1

    def _dumpsys(self, args: list[str]) -> Result:
        device = self.device
        service = args[0] if args else ""
        if service == "window":
            return dumpsys_window(device).encode(), 0
        if service == "display":
            return b"  mOverrideDisplayInfo=DisplayInfo{rotation 0, orientation=0}\n", 0
        if service == "input_method":
            shown = "true" if device.state.keyboard_shown else "false"
            return f"  mInputShown={shown}\n  mServedView=focused\n".encode(), 0
        if service == "alarm":
            return next_alarm_clock(device).encode(), 0
        if service == "activity" and args[1:2] == ["activities"]:
            package, activity = device.foreground()
            record = f"ActivityRecord{{5d6e7f8 u0 {package}/{activity} t12}}"
            return f"  mResumedActivity: {record}\n".encode(), 0
        if service == "package" and len(args) > 1:
            code = PACKAGES.get(args[1])
            if code is None:
                return b"", 0
            return (
                f"Packages:\n  Package [{args[1]}] (1f2e3d4):\n    versionCode={code} "
                f"minSdk=34 targetSdk=34\n    versionName=14\n"
                "    firstInstallTime=2024-01-01 00:00:00\n    lastUpdateTime=2024-01-01 00:00:00\n"
            ).encode(), 0
        return b"", 0

    def _pm(self, args: list[str]) -> Result:
        if args[:2] == ["list", "packages"]:
            return "".join(f"package:{name}\n" for name in sorted(PACKAGES)).encode(), 0
        if args[:1] == ["path"] and len(args) > 1 and args[1] in PACKAGES:
            return f"package:/system/app/{args[1]}/base.apk\n".encode(), 0
        if args[:1] == ["clear"] and len(args) > 1:
            if self.device.clear_package(args[-1]):
                return b"Success\n", 0
            return b"Failed\n", 1
        return b"", 1

    def _am(self, args: list[str]) -> Result:
        if args[:1] == ["force-stop"] and len(args) > 1:
            self.device.force_stop(args[1])
            return b"", 0
        if args[:1] == ["start"] and "-n" in args:
            package, _, activity = args[args.index("-n") + 1].partition("/")
            if self.device.launch(package, activity or None):
                return f"Starting: Intent {{ cmp={package}/{activity} }}\n".encode(), 0
            return f"Error: Activity not started, unable to resolve Intent {package}\n".encode(), 1
        if args[:1] == ["broadcast"] and "-a" in args:
            return self._broadcast(args[args.index("-a") + 1], args)
        return b"", 1

    def _broadcast(self, action: str, args: list[str]) -> Result:
        """``am broadcast -a ACTION -e KEY VALUE …``: SystemUI's demo mode hears its own."""
        extras = {
            args[position + 1]: args[position + 2]
            for position in range(len(args) - 2)
            if args[position] in {"-e", "--es"}
        }
        if action == "com.android.systemui.demo":
            self.device.demo_command(extras)
        return (
            f"Broadcasting: Intent {{ act={action} flg=0x400000 (has extras) }}\n"
            "Broadcast completed: result=0\n"
        ).encode(), 0

    def _monkey(self, args: list[str]) -> Result:
        package = args[args.index("-p") + 1] if "-p" in args else ""
        if self.device.launch(package):
            return b"Events injected: 1\n", 0
        return b"** No activities found to run, monkey aborted.\n", 252

    def _input(self, args: list[str]) -> Result:
        device = self.device
        if args[:1] == ["keyevent"] and len(args) > 1:
            key = args[-1].removeprefix("KEYCODE_").lower()
            device.key(KEY_CODES.get(key, key))
        elif args[:1] == ["tap"] and len(args) == 3:
            device.tap(int(float(args[1])), int(float(args[2])))
        elif args[:1] == ["swipe"] and len(args) >= 5:
            device.swipe(*(int(float(value)) for value in args[1:5]))
        elif args[:1] == ["text"] and len(args) > 1:
            device.type_text(" ".join(args[1:]).replace("%s", " "))
        else:
            return b"Error: Unknown command\n", 1
        return b"", 0

    def _settings(self, args: list[str]) -> Result:
        state = self.device.state
        if args[:1] == ["get"] and len(args) == 3:
            value = state.setting(args[1], args[2])
            return f"{'null' if value is None else value}\n".encode(), 0
        if args[:1] == ["put"] and len(args) == 4:
            state.settings.setdefault(args[1], {})[args[2]] = args[3]
            return b"", 0
        return b"", 1

    def _content(self, args: list[str]) -> Result:
        """``content query --uri content://com.android.contacts/data/phones``: the contacts;
        ``content insert`` into ``raw_contacts`` and ``data`` (a name or a phone number)."""
        if args[:1] not in (["query"], ["insert"]) or "--uri" not in args:
            return b"", 1
        uri = args[args.index("--uri") + 1]
        if not uri.startswith("content://com.android.contacts/"):
            return f"Error while accessing provider:{uri}\n".encode(), 1
        if args[0] == "insert":
            return self._insert(uri.removeprefix("content://com.android.contacts/"), args)
        rows = self.device.state.contacts()
        if not rows:
            return b"No result found.\n", 0
        return "".join(
            f"Row: {index} display_name={row['name']}, data1={row.get('phone', '')}\n"
            for index, row in enumerate(rows)
        ).encode(), 0

    def _insert(self, table: str, args: list[str]) -> Result:
        binds = {}
        for position, word in enumerate(args[:-1]):
            if word == "--bind":
                name, kind, value = args[position + 1].split(":", 2)
                binds[name] = None if kind == "n" else int(value) if kind in "il" else value
        state = self.device.state
        contacts = state.raw_contacts()
        if table == "raw_contacts":
            state.save_contacts([*contacts, {}])
            return b"", 0
        field = {
            "vnd.android.cursor.item/name": "name",
            "vnd.android.cursor.item/phone_v2": "phone",
        }
        owner = next((c for c in contacts if c["id"] == binds.get("raw_contact_id")), None)
        if table != "data" or owner is None or binds.get("mimetype") not in field:
            return b"java.lang.IllegalArgumentException: cannot insert this row\n", 1
        owner[field[str(binds["mimetype"])]] = str(binds.get("data1") or "")
        state.save_contacts(contacts)
        return b"", 0

    def _ls(self, args: list[str]) -> Result:
        paths = [arg for arg in args if not arg.startswith("-")] or ["/"]
        out, status = [], 0
        for path in paths:
            if self.device.stat(path) is None:
                out.append(f"ls: {path}: No such file or directory\n")
                status = 1
            else:
                out.extend(f"{name}\n" for name in self.device.listdir(path))
        return "".join(out).encode(), status

    def _mkdir(self, args: list[str]) -> Result:
        for path in (arg for arg in args if not arg.startswith("-")):
            error = self.device.make_folder(path)
            if error:
                return f"{error}\n".encode(), 1
        return b"", 0

    def _md5sum(self, args: list[str]) -> Result:
        digests = [(path, self.device.md5(path)) for path in args]
        output = "".join(
            f"{digest}  {path}\n" if digest else f"md5sum: {path}: No such file or directory\n"
            for path, digest in digests
        )
        return output.encode(), 0 if all(digest for _, digest in digests) else 1

    def _screencap(self, args: list[str]) -> Result:
        return screens.screenshot(self.device.windows()), 0

    def _rm(self, args: list[str]) -> Result:
        for path in (arg for arg in args if not arg.startswith("-")):
            self.device.remove(path)
        return b"", 0


def next_alarm_clock(device: StandinDevice) -> str:
    """``dumpsys alarm``'s part the Clock's alarms show in: the next alarm clock, which the
    Clock sets with ``setAlarmClock`` for its earliest enabled alarm."""
    now = datetime.now()
    upcoming = []
    for alarm in device.state.alarms():
        if alarm["enabled"]:
            when = now.replace(hour=alarm["hour"], minute=alarm["minute"], second=0, microsecond=0)
            upcoming.append(when if when > now else when + timedelta(days=1))
    lines = [
        "Current Alarm Manager state:",
        f"  nowRTC={int(now.timestamp() * 1000)} = {now:%Y-%m-%d %H:%M:%S}.000",
        "",
        "  Next alarm clock information: ",
    ]
    if upcoming:
        when = min(upcoming)
        lines.append(
            f"    user:0 pendingSend:false time:{int(when.timestamp() * 1000)} = "
            f"{when:%Y-%m-%d %H:%M:%S}.000 = +{int((when - now).total_seconds())}s"
        )
    return "\n".join(lines) + "\n"
