"""Plain text from what tmux captured: escape sequences removed, blank tails trimmed."""

from __future__ import annotations

import re

# CSI sequences (colours, cursor moves), OSC strings (titles, hyperlinks), and the
# two-character escapes (charset selection, keypad modes).
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[@-Z\\-_=>])"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences and stray control characters (keeps tabs, newlines)."""
    return _CONTROL.sub("", _ANSI.sub("", text))


def plain_screen(raw: str) -> str:
    """Return a captured screen as plain text: no escapes, no trailing blanks or blank lines."""
    lines = [line.rstrip() for line in strip_ansi(raw).split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)
