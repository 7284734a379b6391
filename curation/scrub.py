"""Replacement of secrets and personal data by typed placeholders in every text field.

Fields scrubbed: ``task``, the observation and next observation ``text`` and ``meta``, the
action ``text`` and ``arguments`` (JSON columns string by string, keys included). Each
replacement is counted per kind (``scrubbed:<kind>``) in the stats. What is a secret is
decided by :class:`worldtrace.curation.secrets.SecretFinder`; this module decides where to look and
what to replace.

* **Logical text, not screen lines.** A screen observation (a format a domain declares in
  :attr:`Collector.screen_formats`, such as the terminal's ``terminal-screen``) is
  its ``meta["new_scrollback"]`` (the lines that scrolled off during the step, which come
  before the screen's first line) followed by its screen, with every line exactly as wide as
  the pane (``meta["columns"]``, else :attr:`ScrubSettings.terminal_columns`) joined to the
  next: tmux wraps long lines there, and trailing blanks are trimmed, so only a wrapped line
  is that long. Secrets are found in that text; a replacement that crosses from the
  scrollback into the screen is made in both, and the joined lines of a replaced secret
  become one.
* **Every place a secret appears.** A secret value found anywhere in a row (typed in the
  action, echoed on the screen, printed by ``cat .env``) is replaced in all its fields, and
  remembered for the episode's later rows, where it is replaced too, also as the part that
  is left of it when its start or end has scrolled away (a suffix at the start of a
  screen, a prefix at the end of a full-width last line, whole lines of a multi-line key).
  Rows of one episode arrive in step order within a file, as curation reads them.
* **What the action gives away.** The row's action may be a command that prints a secret
  because it was asked for one (``gh auth token``, ``kubectl get secret … -o jsonpath=…``)
  or that reads a credential file (``cat ~/.pgpass``, swe's ``read_file`` and the mcp
  filesystem's ``read_text_file`` of ``~/.git-credentials`` or ``~/.ssh/id_ed25519``): its
  output in the next observation is read for what that command prints (see
  :func:`action_output`, :func:`worldtrace.curation.secrets.context_findings`). A terminal
  screen that shows the command line is read by the finder itself; a screen the command
  cleared is its output up to the prompt that came back.
* **Typed secrets.** Text typed at a password prompt (the screen's last line asks for a
  password or passphrase) and a web ``fill`` of a field named like a password are secrets
  without any pattern.
"""

from __future__ import annotations

import functools
import json
import re
from bisect import bisect_left, bisect_right
from collections import Counter, OrderedDict
from collections.abc import Iterator
from typing import Any

from datatrove.data import DocumentsPipeline

from worldtrace.collectors.base import Collector
from worldtrace.collectors.registry import (
    UnknownDomainError,
    get_collector,
    registered_collectors,
)
from worldtrace.curation.config import ScrubSettings
from worldtrace.curation.documents import render_transition
from worldtrace.curation.secrets import (
    PII_KINDS,
    Finding,
    SecretFinder,
    command_output_kind,
    context_findings,
    file_output_kind,
    merge,
    output_end,
    placeholder,
)
from worldtrace.curation.storage import Location
from worldtrace.curation.tally import TallyStep

MIN_REMEMBERED = 6
"""Shorter secret values are replaced where they are found, but not searched for elsewhere."""
MIN_FRAGMENT = 8
"""The shortest part of a remembered secret replaced at the edge of a screen."""
SHORT_VALUE = 12
"""Remembered values shorter than this are only replaced as whole words."""

_PASSWORD_PROMPT = re.compile(
    r"(?i)(?:password|passphrase|pass phrase|passcode|\bpin\b|secret|token)[^\n]{0,60}:[ \t]*$"
)
_WEB_FILL = re.compile(r"""^fill\(\s*['"]([^'"]+)['"]\s*,\s*(['"])((?:(?!\2)[^\\]|\\.)*)\2""")
_SECRET_FIELD = re.compile(r"(?i)password|passphrase|passcode|secret|token|api[ _-]?key|\bpin\b")


class LogicalText:
    """A text with its wrapped lines joined, and the way back to the text's own offsets.

    With ``width``, a line exactly ``width`` characters long (not the last) is joined to the
    next one; ``logical`` is the joined text. Without it the text is its own logical text.
    """

    __slots__ = ("full_last_line", "logical", "physical", "soft", "wrapped")

    def __init__(self, physical: str, width: int | None = None) -> None:
        self.physical = physical
        self.wrapped = width is not None  # a screen: parts of a secret may be at its edges
        self.soft: list[int] = []  # logical offsets where a wrapping newline was removed
        self.full_last_line = False
        if width is None or len(physical) < width:
            self.logical = physical
            return
        lines = physical.split("\n")
        lengths = list(map(len, lines))
        self.full_last_line = lengths[-1] == width
        if width not in lengths[:-1]:
            self.logical = physical
            return
        parts: list[str] = []
        length = 0
        for index, line in enumerate(lines):
            parts.append(line)
            length += len(line)
            if index == len(lines) - 1:
                break
            if len(line) == width:
                self.soft.append(length)
            else:
                parts.append("\n")
                length += 1
        self.logical = "".join(parts)

    def physical_span(self, start: int, end: int) -> tuple[int, int]:
        """Map a logical span to the physical text (the wrapping newlines inside it included)."""
        if not self.soft:
            return start, end
        return start + bisect_right(self.soft, start), end + bisect_left(self.soft, end)


@functools.cache
def screen_formats() -> frozenset[str]:
    """The observation formats registered domains declare as wrapped screens."""
    return frozenset(f for collector in registered_collectors() for f in collector.screen_formats)


@functools.cache
def _collector(domain: str) -> Collector[Any, Any] | None:
    try:
        return get_collector(domain)
    except UnknownDomainError:  # a row of a domain not installed here: nothing typed is known
        return None


def typed_text(domain: str | None, name: str, arguments: Any) -> list[str]:
    """The text an action typed, as its domain says (:meth:`Collector.typed_text`)."""
    collector = _collector(domain) if domain else None
    if collector is None or not isinstance(arguments, dict):
        return []
    return collector.typed_text(name, arguments)


_COMMAND_ARGUMENTS = ("command", "cmd", "script")
_PATH_ARGUMENTS = ("path", "paths", "file", "file_path", "filename")
_READING_TOOL = re.compile(r"(?i)read|view|cat|show|open")


def action_output(
    action: dict[str, Any], arguments: Any, typed: list[str]
) -> tuple[str | None, str | None]:
    """The command an action ran and how its output is read for secrets.

    Both are None when the action gives nothing away.
    A typed command line (``typed``: the text the action typed, as its domain says, such as
    a terminal's), a tool's ``command`` argument (swe's ``run_shell_command``) read by
    :func:`command_output_kind`; the ``path`` (or ``paths``) of a tool that reads files
    (swe's ``read_file``, the mcp filesystem's ``read_text_file``) by
    :func:`file_output_kind`.
    """
    for item in typed:
        kind = command_output_kind(item)
        if kind is not None:
            return item, kind
    if not isinstance(arguments, dict):
        return None, None
    name = str(action.get("name") or "")
    for key in _COMMAND_ARGUMENTS:
        value = arguments.get(key)
        if isinstance(value, str):
            kind = command_output_kind(value)
            if kind is not None:
                return value, kind
    if _READING_TOOL.search(name):
        for key in _PATH_ARGUMENTS:
            value = arguments.get(key)
            for path in value if isinstance(value, list) else [value]:
                if isinstance(path, str):
                    kind = file_output_kind(path)
                    if kind is not None:
                        return None, kind
    return None, None


def replace_spans(text: str, spans: list[Finding]) -> str:
    """Return ``text`` with each (sorted, disjoint) span replaced by its kind's placeholder."""
    parts: list[str] = []
    done = 0
    for kind, start, end in spans:
        parts += (text[done:start], placeholder(kind))
        done = end
    parts.append(text[done:])
    return "".join(parts)


class KnownSecrets:
    """Secret values with their kinds, and how to find each again in other text."""

    def __init__(self) -> None:
        self.kinds: dict[str, str] = {}
        self._word_patterns: dict[str, re.Pattern[str]] = {}

    def add(self, value: str, kind: str) -> None:
        """Remember ``value`` (the first kind given for it is kept)."""
        self.kinds.setdefault(value, kind)

    def spans(self, text: LogicalText) -> list[Finding]:
        """Return where the known values, or parts of them left at the text's edges, are."""
        found: list[Finding] = []
        logical = text.logical
        for value, kind in self.kinds.items():
            if len(value) < SHORT_VALUE:
                if value in logical:
                    pattern = self._word_patterns.get(value)
                    if pattern is None:
                        pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])")
                        self._word_patterns[value] = pattern
                    found += [Finding(kind, *m.span()) for m in pattern.finditer(logical)]
                continue
            if value in logical:
                found += [Finding(kind, start, end) for start, end in _occurrences(logical, value)]
            if "\n" in value:
                for line in value.split("\n"):
                    if len(line.strip()) >= 16:
                        found += [Finding(kind, *s) for s in _occurrences(logical, line.strip())]
            if text.wrapped:
                found += _edge_fragments(text, value, kind)
        return found


def _occurrences(text: str, value: str) -> Iterator[tuple[int, int]]:
    position = text.find(value)
    while position >= 0:
        yield position, position + len(value)
        position = text.find(value, position + len(value))


def _edge_fragments(text: LogicalText, value: str, kind: str) -> list[Finding]:
    """The longest suffix of ``value`` starting ``text`` and prefix of it ending ``text``.

    A suffix is what is left when the start of a wrapped secret scrolled away; a prefix is
    what a full-width last line (or a line of a multi-line secret) holds before the rest.
    """
    found: list[Finding] = []
    logical = text.logical
    if len(logical) >= MIN_FRAGMENT and not logical.startswith(value):
        head = logical[:MIN_FRAGMENT]
        at = value.find(head, 1)
        while at > 0:
            suffix = value[at:]
            if logical.startswith(suffix):
                found.append(Finding(kind, 0, len(suffix)))
                break
            at = value.find(head, at + 1)
    if len(logical) >= MIN_FRAGMENT and not logical.endswith(value):
        tail = logical[-MIN_FRAGMENT:]
        at = value.rfind(tail, 0, len(value) - 1)
        while at >= 0:
            prefix_end = at + MIN_FRAGMENT
            if logical.endswith(value[:prefix_end]) and (
                text.full_last_line or value[prefix_end] == "\n"
            ):
                found.append(Finding(kind, len(logical) - prefix_end, len(logical)))
                break
            at = value.rfind(tail, 0, at)
    return found


def _json_strings(value: Any) -> Iterator[str]:
    """Yield every string inside a JSON value (dict keys included)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _json_strings(item)


def _json_replace(value: Any, scrubbed: dict[str, str]) -> Any:
    """Return ``value`` with every string replaced by its scrubbed form."""
    if isinstance(value, str):
        return scrubbed.get(value, value)
    if isinstance(value, list):
        return [_json_replace(item, scrubbed) for item in value]
    if isinstance(value, dict):
        return {scrubbed.get(str(k), str(k)): _json_replace(v, scrubbed) for k, v in value.items()}
    return value


class Scrubber:
    """Scrubs rows (or single strings) and counts what it replaced, per kind.

    With ``remember`` > 0 the findings of up to that many distinct recent texts are kept and
    a repeated text is not searched again (consecutive steps repeat screens and metadata).
    """

    def __init__(self, settings: ScrubSettings, remember: int = 0) -> None:
        self.settings = settings
        self.finder = SecretFinder(emails=settings.emails, ips=settings.ips)
        self.counts: Counter[str] = Counter()
        self.remember = remember
        self._memo: dict[str, list[Finding]] = {}
        self._decoded: dict[str, Any] = {}

    def find(self, text: str) -> list[Finding]:
        """Return the findings in a logical text (remembered for repeated texts)."""
        if not self.remember:
            return self.finder.find(text)
        found = self._memo.get(text)
        if found is None:
            found = self.finder.find(text)
            if len(self._memo) >= self.remember:
                self._memo.clear()  # a stream's repeats are close together: start afresh
            self._memo[text] = found
        return found

    def decode(self, raw: str) -> Any:
        """Decode a JSON column (the text itself if it is not JSON); not to be modified.

        Remembered like findings: an observation's meta is the step before's next one.
        """
        if self.remember and raw in self._decoded:
            return self._decoded[raw]
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw  # not JSON: scrubbed as one string
        if self.remember:
            if len(self._decoded) >= self.remember:
                self._decoded.clear()
            self._decoded[raw] = value
        return value

    def text(self, text: str, known: KnownSecrets | None = None, width: int | None = None) -> str:
        """Return one string with every secret and personal datum replaced.

        With ``width`` the text is a terminal screen wrapped at that many columns: its wrapped
        lines are joined before searching (see :class:`LogicalText`).
        """
        logical = LogicalText(text, width)
        spans = list(self.find(logical.logical))
        if known is not None and known.kinds:
            spans = merge(spans + known.spans(logical))
        if not spans:
            return text
        self.counts.update(f.kind for f in spans)
        return replace_spans(text, [Finding(f.kind, *logical.physical_span(*f[1:])) for f in spans])

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON value (dict keys included)."""
        scrubbed = {s: self.text(s) for s in set(_json_strings(value))}
        return _json_replace(value, scrubbed)

    def json_column(self, raw: str | None) -> str | None:
        """Scrub a JSON string column, re-encoding it only when something changed."""
        if not raw:
            return raw
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return self.text(raw)
        scrubbed = self.value(parsed)
        if scrubbed == parsed:
            return raw
        return json.dumps(scrubbed, sort_keys=True, ensure_ascii=False)

    def observation(
        self,
        text: str,
        fmt: str = "",
        width: int | None = None,
        action: dict[str, Any] | None = None,
        domain: str | None = None,
    ) -> str:
        """Return an observation text scrubbed as the next observation of a row of ``domain``.

        The row's action is ``action`` (``name`` and ``arguments``): what it gives away is
        replaced too (see :func:`action_output`), as the row scrubber does.
        """
        meta = json.dumps({"columns": width}) if width else None
        action = action or {}
        row: dict[str, Any] = {
            "domain": domain,
            "task": None,
            "observation": {"format": fmt, "text": "", "meta": None},
            "action": {
                "name": action.get("name") or "",
                "arguments": json.dumps(action.get("arguments") or {}),
                "text": "",
            },
            "next_observation": {"format": fmt, "text": text, "meta": meta},
        }
        self.row(row)
        return row["next_observation"]["text"]

    def row(self, row: dict[str, Any], known: KnownSecrets | None = None) -> None:
        """Scrub the text fields of a transition row in place.

        ``known`` holds the secret values of the episode's earlier rows; this row's are added
        to it.
        """
        _RowScrub(self, row, known if known is not None else KnownSecrets()).run()


class _Text:
    """One logical text of a row and its findings.

    A terminal observation is its scrollback and screen as one text; ``separator`` is the
    offset of the newline between them in ``view.physical`` (-1 when there is no scrollback).
    """

    __slots__ = ("findings", "separator", "view")

    def __init__(self, view: LogicalText, findings: list[Finding], separator: int = -1) -> None:
        self.view = view
        self.findings = findings
        self.separator = separator


class _RowScrub:
    """Scrubbing one row: find in every text, then replace everything found everywhere."""

    def __init__(self, scrubber: Scrubber, row: dict[str, Any], known: KnownSecrets) -> None:
        self.scrubber = scrubber
        self.row = row
        self.known = known
        self.secrets = KnownSecrets()  # every secret value of this row and the episode's
        self.texts: dict[str, _Text] = {}  # the row's plain strings, by value
        self.screens: dict[str, _Text] = {}  # terminal observations, by field name
        self.parsed: dict[tuple[str, str], Any] = {}  # JSON columns as scrubbed string by string
        self.decoded: dict[tuple[str, str], Any] = {}  # JSON columns as stored, decoded
        self.column_strings: dict[tuple[str, str], set[str]] = {}  # the strings of each

    def run(self) -> None:
        """Find, gather the secret values, replace, write back."""
        row = self.row
        for part in ("observation", "next_observation"):
            self._add_observation(part)
        self._add_plain(row.get("task") or "")
        self._add_plain((row.get("action") or {}).get("text") or "")
        for part, column in (
            ("observation", "meta"),
            ("next_observation", "meta"),
            ("action", "arguments"),
        ):
            self._add_json(part, column)
        self._add_context()

        for text in [*self.screens.values(), *self.texts.values()]:
            for kind, start, end in text.findings:
                value = text.view.logical[start:end]
                if kind not in PII_KINDS and len(value) >= MIN_REMEMBERED:
                    self.secrets.add(value, kind)
        for value in self._typed_secrets():
            self.secrets.add(value, "password")
        for value, kind in self.known.kinds.items():
            self.secrets.add(value, kind)
        for value, kind in self.secrets.kinds.items():
            if len(value) >= MIN_REMEMBERED:
                self.known.add(value, kind)
        if not self.secrets.kinds and not any(
            text.findings for text in [*self.screens.values(), *self.texts.values()]
        ):
            return  # nothing found, nothing known: the row stays as it is
        self._write({value: self._scrub(text) for value, text in self.texts.items()})

    # ----------------------------------------------------------------- gathering

    def _add_plain(self, text: str) -> None:
        if text and text not in self.texts:
            view = LogicalText(text)
            self.texts[text] = _Text(view, self.scrubber.find(view.logical))

    def _add_json(self, part: str, column: str) -> None:
        raw = (self.row.get(part) or {}).get(column)
        if not raw:
            return
        parsed = self.decoded.get((part, column))
        if parsed is None:
            parsed = self.scrubber.decode(raw)
            self.decoded[(part, column)] = parsed
        if part in self.screens and isinstance(parsed, dict):
            # the scrollback is scrubbed with the screen
            parsed = {k: v for k, v in parsed.items() if k != "new_scrollback"}
        self.parsed[(part, column)] = parsed
        strings = set(_json_strings(parsed))
        self.column_strings[(part, column)] = strings
        for text in strings:
            self._add_plain(text)

    def _add_observation(self, part: str) -> None:
        observation = self.row.get(part) or {}
        if observation.get("format") not in screen_formats():
            self._add_plain(observation.get("text") or "")
            return
        meta: Any = {}
        if observation.get("meta"):
            meta = self.decoded[(part, "meta")] = self.scrubber.decode(observation["meta"])
        meta = meta if isinstance(meta, dict) else {}
        scrollback = meta.get("new_scrollback")
        scrollback = scrollback if isinstance(scrollback, str) else ""
        columns = meta.get("columns")
        width = columns if isinstance(columns, int) and columns > 0 else None
        width = width or self.scrubber.settings.terminal_columns
        screen = observation.get("text") or ""
        view = LogicalText(f"{scrollback}\n{screen}" if scrollback else screen, width)
        separator = len(scrollback) if scrollback else -1
        self.screens[part] = _Text(view, self.scrubber.find(view.logical), separator)

    def _add_context(self) -> None:
        """Add the secrets the action gives away in the next observation to its findings.

        That is what a command that asked for a token printed, the passwords of a credential
        file it read (see :func:`action_output`). On a screen that shows the command line the
        finder has read the output already; a screen the command cleared is its output up to
        the prompt that came back.
        """
        command, kind = action_output(
            self.row.get("action") or {}, self.parsed.get(("action", "arguments")), self._typed()
        )
        if kind is None:
            return
        observation = self.row.get("next_observation") or {}
        screen = self.screens.get("next_observation")
        if screen is not None:
            logical = screen.view.logical
            if command and command.strip() in logical:
                return  # the command line is on the screen: the finder read its output
            before = (self.row.get("observation") or {}).get("text") or ""
            prompt = before.rstrip().rsplit("\n", 1)[-1] or None
            extra = context_findings(kind, logical, 0, output_end(logical, 0, prompt))
            if extra:
                screen.findings = merge([*screen.findings, *extra])
            return
        text = self.texts.get(observation.get("text") or "")
        if text is not None:
            extra = context_findings(kind, text.view.logical)
            if extra:
                text.findings = merge([*text.findings, *extra])

    def _typed(self) -> list[str]:
        """The text the row's action typed, as its domain says."""
        action = self.row.get("action") or {}
        arguments = self.parsed.get(("action", "arguments"))
        return typed_text(self.row.get("domain"), str(action.get("name") or ""), arguments)

    def _typed_secrets(self) -> list[str]:
        """Text typed at a password prompt, or filled into a password field of a web page."""
        action = self.row.get("action") or {}
        observation = self.row.get("observation") or {}
        screen = (observation.get("text") or "").rstrip()
        typed: list[str] = []
        if observation.get("format") in screen_formats() and _PASSWORD_PROMPT.search(
            screen[screen.rfind("\n") + 1 :]
        ):
            typed += [item for item in self._typed() if item.strip()]
        fill = _WEB_FILL.match(action.get("text") or "")
        if fill is not None and fill.group(3):
            field = re.search(rf"^\s*\[{re.escape(fill.group(1))}\][^\n]*", screen, re.M)
            if field is not None and _SECRET_FIELD.search(field.group()):
                typed.append(fill.group(3))
        return typed

    # ----------------------------------------------------------------- replacing

    def _spans(self, text: _Text) -> list[Finding]:
        """The text's own findings and the row's secret values in it, in physical offsets."""
        spans = text.findings
        if self.secrets.kinds:
            spans = merge([*spans, *self.secrets.spans(text.view)])
        return [Finding(f.kind, *text.view.physical_span(f.start, f.end)) for f in spans]

    def _scrub(self, text: _Text) -> str:
        spans = self._spans(text)
        self.scrubber.counts.update(f.kind for f in spans)
        return replace_spans(text.view.physical, spans) if spans else text.view.physical

    def _scrub_screen(self, text: _Text) -> tuple[str, str]:
        """Return the scrubbed scrollback and screen; a span across both is replaced in each."""
        physical = text.view.physical
        spans = self._spans(text)
        self.scrubber.counts.update(f.kind for f in spans)
        cut = text.separator
        if cut < 0:
            return "", replace_spans(physical, spans) if spans else physical
        before = [Finding(k, s, min(e, cut)) for k, s, e in spans if s < cut]
        after = [
            Finding(k, max(s, cut + 1) - cut - 1, e - cut - 1) for k, s, e in spans if e > cut + 1
        ]
        return replace_spans(physical[:cut], before), replace_spans(physical[cut + 1 :], after)

    def _write(self, scrubbed: dict[str, str]) -> None:
        row = self.row
        if row.get("task"):
            row["task"] = scrubbed.get(row["task"], row["task"])
        for part in ("observation", "next_observation"):
            observation = dict(row[part])
            screen = self.screens.get(part)
            scrollback: str | None = None
            if screen is not None:
                scrollback, observation["text"] = self._scrub_screen(screen)
            else:
                text = observation.get("text") or ""
                observation["text"] = scrubbed.get(text, text)
            observation["meta"] = self._encode(part, "meta", scrubbed, scrollback)
            row[part] = observation
        action = dict(row["action"])
        text = action.get("text") or ""
        action["text"] = scrubbed.get(text, text)
        action["arguments"] = self._encode("action", "arguments", scrubbed, None)
        row["action"] = action

    def _encode(
        self, part: str, column: str, scrubbed: dict[str, str], scrollback: str | None
    ) -> str | None:
        """The JSON column with its strings scrubbed (the original when nothing changed)."""
        raw = (self.row.get(part) or {}).get(column)
        if not raw or (part, column) not in self.parsed:
            return raw
        parsed = self.parsed[(part, column)]
        if isinstance(parsed, str):
            return scrubbed.get(parsed, parsed)
        original = self.decoded[(part, column)]
        scrollback_changed = (
            scrollback is not None
            and isinstance(original, dict)
            and isinstance(original.get("new_scrollback"), str)
            and scrollback != original["new_scrollback"]
        )
        if not scrollback_changed and all(
            scrubbed.get(text, text) == text for text in self.column_strings[(part, column)]
        ):
            return raw
        changed = _json_replace(parsed, scrubbed)
        if isinstance(original, dict) and "new_scrollback" in original and part in self.screens:
            changed["new_scrollback"] = (
                scrollback if scrollback_changed else original["new_scrollback"]
            )
        return json.dumps(changed, sort_keys=True, ensure_ascii=False)


class EpisodeSecrets:
    """The secret values seen in the most recent episodes, by episode id."""

    def __init__(self, episodes: int = 16) -> None:
        self.episodes = episodes
        self._known: OrderedDict[str, KnownSecrets] = OrderedDict()

    def of(self, episode_id: str | None) -> KnownSecrets:
        """The values seen so far in ``episode_id`` (a fresh set for a new episode)."""
        key = episode_id or ""
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = KnownSecrets()
            if len(self._known) > self.episodes:
                self._known.popitem(last=False)
        else:
            self._known.move_to_end(key)
        return known


SCRUB_MEMORY = 64
"""Distinct recent texts whose findings :class:`ScrubStep` keeps for reuse."""


class ScrubStep(TallyStep):
    """Scrubs every document's row and re-renders its text."""

    name = "🕵 scrub"
    tally_name = "scrub"

    def __init__(self, settings: ScrubSettings, tally_folder: Location | None = None) -> None:
        super().__init__(tally_folder)
        self.settings = settings

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Scrub and forward every document."""
        scrubber = Scrubber(self.settings, remember=SCRUB_MEMORY)
        episodes = EpisodeSecrets()
        for doc in data:
            scrubber.counts = Counter()  # counted per document
            scrubber.row(doc.metadata, episodes.of(doc.metadata.get("episode_id")))
            doc.text = render_transition(doc.metadata)
            for kind, count in scrubber.counts.items():
                self.tally(doc, f"scrubbed:{kind}", count)
            if scrubber.counts:
                self.tally(doc, "scrubbed_rows")
            yield doc
        self.flush_tallies(rank)
