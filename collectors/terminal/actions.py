"""The terminal action space: keystrokes with tmux key names, and waiting.

``keys`` sends its items in order: an item that is a tmux key name (``Enter``, ``C-c``,
``Escape``, ``Up``, ``F1``, ``M-x`` …) is pressed as that key, any other item is typed as
literal text. ``wait`` sends nothing and waits up to ``seconds`` for the prompt to return.

The canonical action text types literal text as-is and writes keys in angle brackets:
``echo hello<Enter>``, ``<C-c>``, ``<wait 5s>``.
"""

from __future__ import annotations

import re

from worldtrace.schemas import Action

NAMED_KEYS = frozenset(
    {
        "Enter",
        "Escape",
        "Tab",
        "BTab",
        "BSpace",
        "Space",
        "Up",
        "Down",
        "Left",
        "Right",
        "Home",
        "End",
        "PageUp",
        "PageDown",
        "PPage",
        "NPage",
        "IC",
        "DC",
        "Insert",
        "Delete",
        *(f"F{n}" for n in range(1, 13)),
    }
)
_MODIFIED_KEY = re.compile(r"^(?:[CMS]-)+(?:[\x21-\x7e]|" + "|".join(sorted(NAMED_KEYS)) + r")$")


def is_key_name(item: str) -> bool:
    """Return True when ``item`` names a key rather than text to type (same rule as the driver)."""
    return item in NAMED_KEYS or bool(_MODIFIED_KEY.match(item))


def render_keys(items: list[str]) -> str:
    """Render keystrokes as canonical action text."""
    return "".join(f"<{item}>" if is_key_name(item) else item for item in items)


def keys(*items: str) -> Action:
    """Press keys and type text, in order."""
    if not items:
        raise ValueError("keys() needs at least one key or text")
    return Action(name="keys", arguments={"keys": list(items)}, text=render_keys(list(items)))


def command(line: str) -> Action:
    """Type a command line and press Enter."""
    return keys(line, "Enter")


def wait(seconds: float) -> Action:
    """Send nothing; wait up to ``seconds`` for the prompt to come back."""
    if seconds <= 0:
        raise ValueError("wait() needs a positive number of seconds")
    return Action(name="wait", arguments={"seconds": seconds}, text=f"<wait {seconds:g}s>")


_WAIT_TEXT = re.compile(r"^<wait (\d+(?:\.\d+)?)s>$")
_KEY_TEXT = re.compile(r"<([^<>\s]+)>")


def parse_action_text(text: str) -> Action:
    """Read a canonical action text back into its action (the inverse of :func:`render_keys`).

    ``<wait 5s>`` is a wait; otherwise ``<Key>`` where Key is a key name is that key, and
    everything else (a ``<`` that names no key included) is literal text.
    """
    waited = _WAIT_TEXT.match(text)
    if waited:
        return wait(float(waited.group(1)))
    items: list[str] = []
    literal = ""
    position = 0
    for match in _KEY_TEXT.finditer(text):
        if not is_key_name(match.group(1)):
            continue
        literal += text[position : match.start()]
        if literal:
            items.append(literal)
            literal = ""
        items.append(match.group(1))
        position = match.end()
    literal += text[position:]
    if literal:
        items.append(literal)
    if not items:
        raise ValueError("an empty action text types nothing")
    return keys(*items)
