r"""The terminal action space: keystrokes with tmux key names, and waiting.

``keys`` sends its items in order: an item that is a tmux key name (``Enter``, ``C-c``,
``Escape``, ``Up``, ``F1``, ``M-x`` …) is pressed as that key, any other item is typed as
literal text. ``wait`` sends nothing and waits up to ``seconds`` for the prompt to return.

The canonical action text types literal text as-is and writes keys in angle brackets:
``echo hello<Enter>``, ``<C-c>``, ``<wait 5s>``. Typed text that would read as a key is
escaped (``echo '\<Enter>'<Enter>``), and two typed texts in a row are separated by ``<+>``,
so that every key sequence reads back as exactly itself (:func:`render_keys`).
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


SEPARATOR = "<+>"
"""Written between two typed texts in a row (``["Ente", "r"]`` types ``Enter``, a key name)."""
# A key token's name is a key name without "<" or ">", or modifiers and one of them (M-<).
_KEY_TOKEN = re.compile(r"<((?:[CMS]-)+[<>]|[^<>\s]+)>")
_WAIT_TOKEN = re.compile(r"<wait \d+(?:\.\d+)?s>")


def _token_at(text: str, index: int) -> int:
    """Return the length of the token that starts at ``text[index]``, or 0 if none does.

    A token is what a reader takes a ``<`` to begin: a key (``<Enter>``, ``<M-<>``), the
    separator ``<+>``, or a wait (``<wait 5s>``: a wait only as the whole text, escaped
    wherever typed text holds one). No token contains a ``<`` except as a modified key's
    last character, so a token never begins in one item and ends in the next.
    """
    if not text.startswith("<", index):
        return 0
    if text.startswith(SEPARATOR, index):
        return len(SEPARATOR)
    waited = _WAIT_TOKEN.match(text, index)
    if waited:
        return waited.end() - index
    key = _KEY_TOKEN.match(text, index)
    return key.end() - index if key and is_key_name(key.group(1)) else 0


def _backslashes(text: str, index: int) -> int:
    """Return how many backslashes run from ``text[index]`` on."""
    end = index
    while end < len(text) and text[end] == "\\":
        end += 1
    return end - index


def _escape_literal(text: str, last: bool) -> str:
    r"""Write typed text so that nothing in it reads as a token.

    A token in typed text is written with a backslash before it, and a run of backslashes
    right before a token (or at the end of a text that is not ``last``: the next item's
    token follows) is doubled, as Windows quotes a command line. Everything else is written
    as it is: ``echo a < b``, ``cat <<EOF`` and ``a <> b`` read as typed; ``echo '<Enter>'``
    is written ``echo '\<Enter>'``.
    """
    out: list[str] = []
    index = 0
    while index < len(text):
        if text[index] == "\\":
            run = _backslashes(text, index)
            after = index + run
            doubled = (after == len(text) and not last) or _token_at(text, after) > 0
            out.append("\\" * (2 * run if doubled else run))
            index = after
            continue
        size = _token_at(text, index)
        if size:
            out.append("\\" + text[index : index + size])
            index += size
            continue
        out.append(text[index])
        index += 1
    return "".join(out)


def render_keys(items: list[str]) -> str:
    """Render keystrokes as canonical action text, which :func:`parse_action_text` reads back.

    A key is ``<Name>``. Typed text is written as it is, except that a token in it (a key, a
    wait or the separator, as text) is escaped with a backslash, the backslashes right
    before a token doubled; two typed texts in a row are separated by
    ``<+>``. So every list of keys reads back as exactly that list.
    """
    parts: list[str] = []
    previous_literal = False
    for position, item in enumerate(items):
        if is_key_name(item):
            parts.append(f"<{item}>")
            previous_literal = False
        else:
            if previous_literal:
                parts.append(SEPARATOR)
            parts.append(_escape_literal(item, last=position == len(items) - 1))
            previous_literal = True
    return "".join(parts)


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


def parse_action_text(text: str) -> Action:
    """Read a canonical action text back into its action (the inverse of :func:`render_keys`).

    ``<wait 5s>`` as the whole text is a wait. Otherwise, left to right: ``<Key>`` where Key
    is a key name is that key; ``<+>`` ends one typed text and starts the next; a run of
    backslashes right before a token stands for half as many, and an odd run types the token
    itself. Everything else is typed as it is (a ``<``
    that begins no token, other backslashes, a wait inside a longer text).
    """
    waited = _WAIT_TEXT.match(text)
    if waited:
        return wait(float(waited.group(1)))
    items: list[str] = []
    literal: list[str] = []
    index = 0

    def end_literal() -> None:
        if literal:
            items.append("".join(literal))
            literal.clear()

    while index < len(text):
        if text[index] == "\\":
            run = _backslashes(text, index)
            after = index + run
            size = _token_at(text, after)
            if size:
                literal.append("\\" * (run // 2))
                if run % 2:
                    # An escaped token: typed as it stands.
                    literal.append(text[after : after + size])
                    after += size
            else:
                literal.append("\\" * run)
            index = after
            continue
        size = _token_at(text, index)
        if size and not _WAIT_TOKEN.match(text, index):
            end_literal()
            name = text[index + 1 : index + size - 1]
            if text.startswith(SEPARATOR, index):
                pass  # the next typed text starts here
            else:
                items.append(name)
            index += size
            continue
        literal.append(text[index])
        index += 1
    end_literal()
    if not items:
        raise ValueError("an empty action text types nothing")
    return keys(*items)
