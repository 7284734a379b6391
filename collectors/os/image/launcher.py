"""The desktop's launcher: a dock on the left edge with one button per application.

Runs as ``user`` with Debian's Python and GTK 3 (so its buttons are in the AT-SPI tree, under
the application ``launcher``, in the frame ``Applications``). A click starts the application
in the user's home; openbox keeps the dock's strip free (``_NET_WM_STRUT_PARTIAL``), so
maximized windows never cover it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("Gdk", "3.0")
gi.require_version("GdkX11", "3.0")
from gi.repository import Gdk, GdkX11, GLib, Gtk  # noqa: E402
from Xlib import Xatom  # noqa: E402
from Xlib.display import Display  # noqa: E402

DOCK_WIDTH = 140
APPLICATIONS = (
    ("Text Editor", ["mousepad"]),
    ("Spreadsheet", ["gnumeric"]),
    ("File Manager", ["pcmanfm", os.path.expanduser("~")]),
    ("Calculator", ["galculator"]),
    ("Terminal", ["lxterminal", "--no-remote"]),
)
"""(button label, argv) in the order the dock shows them."""


def launch(_button: Gtk.Button, argv: list[str]) -> None:
    """Start one application, detached, its output where the dock's own goes.

    (The driver keeps that log outside the agent's view; no variable of ours names it.)
    """
    subprocess.Popen(
        argv, cwd=os.path.expanduser("~"), stdin=subprocess.DEVNULL, start_new_session=True
    )


def reserve_strip(window: Gtk.Window, height: int) -> None:
    """Tell the window manager to keep the left strip of the screen for the dock."""
    gdk_window = window.get_window()
    assert isinstance(gdk_window, GdkX11.X11Window)
    display = Display()
    x_window = display.create_resource_object("window", gdk_window.get_xid())
    # left, right, top, bottom, then start/end pairs for each edge
    strut = [DOCK_WIDTH, 0, 0, 0, 0, height - 1, 0, 0, 0, 0, 0, 0]
    x_window.change_property(
        display.intern_atom("_NET_WM_STRUT_PARTIAL"), Xatom.CARDINAL, 32, strut
    )
    x_window.change_property(display.intern_atom("_NET_WM_STRUT"), Xatom.CARDINAL, 32, strut[:4])
    display.flush()
    display.close()


def main() -> None:
    """Show the dock until the session ends."""
    GLib.set_prgname("launcher")
    GLib.set_application_name("launcher")
    # The launched applications are never waited for: let the kernel reap them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    screen = Gdk.Screen.get_default()
    if screen is None:
        sys.exit("launcher: no display")
    height = screen.get_height()
    window = Gtk.Window(title="Applications")
    window.set_type_hint(Gdk.WindowTypeHint.DOCK)
    window.set_decorated(False)
    window.set_resizable(False)
    window.set_size_request(DOCK_WIDTH, height)
    window.move(0, 0)
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
    box.set_border_width(6)
    for label, argv in APPLICATIONS:
        button = Gtk.Button(label=label)
        # No tooltip: one shows half a second after the pointer rests on a button, and after
        # a click it came and went with the starting application's window, so whether it was
        # in an observation depended on the run's timing.
        button.connect("clicked", launch, argv)
        box.pack_start(button, False, False, 0)
    window.add(box)
    window.show_all()
    reserve_strip(window, height)
    window.connect("destroy", Gtk.main_quit)
    Gtk.main()


if __name__ == "__main__":
    main()
