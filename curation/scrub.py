"""Replacement of secrets and personal data by typed placeholders in every text field.

Fields scrubbed: ``task``, the observation and next observation ``text`` and ``meta``, the
action ``text`` and ``arguments`` (JSON columns are scrubbed string by string). Each
replacement is counted per kind (``scrubbed:<kind>``) in the stats.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from datatrove.data import DocumentsPipeline

from curation.config import ScrubSettings
from curation.documents import render_transition
from curation.tally import TallyStep

Replacement = str | Callable[[re.Match[str]], str]

SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str], Replacement], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?-----END [A-Z0-9 ]*PRIVATE KEY"
            r"( BLOCK)?-----",
            re.S,
        ),
        "<SECRET:private_key>",
    ),
    (
        "url_password",
        re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)@"),
        lambda m: f"{m.group(1)}<PASSWORD>@",
    ),
    (
        "password",
        re.compile(r"(?i)\b((?:password|passwd|pwd)\s*[=:]\s*)(?!<PASSWORD>)([^\s\"',;]+)"),
        lambda m: f"{m.group(1)}<PASSWORD>",
    ),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "<SECRET:aws_access_key>"),
    (
        "github_token",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
        "<SECRET:github_token>",
    ),
    ("anthropic_key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}"), "<SECRET:anthropic_key>"),
    ("openai_key", re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"), "<SECRET:openai_key>"),
    ("slack_token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}"), "<SECRET:slack_token>"),
    ("hf_token", re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), "<SECRET:hf_token>"),
    (
        "google_api_key",
        re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
        "<SECRET:google_api_key>",
    ),
)
EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b")
IPV4 = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?![\w.])"
)
IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")
KEPT_IPS = {"127.0.0.1", "0.0.0.0", "::1", "::"}

# A pattern can only match where one of its literal markers occurs. Looking for the markers
# first skips most of the regex work on ordinary screens (the full patterns were about 60% of
# curation time in benchmarks/curate.py).
MARKERS: dict[str, tuple[str, ...]] = {
    "private_key": ("PRIVATE KEY",),
    "url_password": ("://",),
    "aws_access_key": ("AKIA", "ASIA"),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "slack_token": ("xox",),
    "hf_token": ("hf_",),
    "google_api_key": ("AIza",),
}
LOWERCASE_MARKERS: dict[str, tuple[str, ...]] = {"password": ("pass", "pwd")}

# Hints: patterns that match inside every match of the e-mail and IP patterns, on its line.
# Each starts with a literal character, which the regex engine finds with a fast scan, whereas
# the full patterns start with a look-behind or `\b` and are tried at every position (the IP
# patterns alone were about 0.5 ms per row). Screens are full of `user@host:` prompts and
# `12:34:56` clocks, so the hints also ask for what those lack: a dot in the domain, and for
# IPv6 either `::` or the run of full groups that `ipaddress` requires without it (the IPv6
# pattern itself also finds clocks, which the address check then rejects).
EMAIL_HINT = re.compile(r"@[A-Za-z0-9-]+\.")
IPV4_HINT = re.compile(r"\.\d{1,3}\.\d")
IPV6_HINT = re.compile(r"::|:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:[0-9A-Fa-f]{1,4}:")

# Secret kinds whose matches can span lines (`re.S`, or `\s*` around the `=`): searched in
# the whole text. Every other kind is searched only on the lines holding one of its markers.
MULTILINE_KINDS = frozenset({"private_key", "password"})

# (kind, pattern, replacement, markers, lower-case markers?, marker pattern for line-local kinds)
_SECRET_CHECKS: tuple[
    tuple[str, re.Pattern[str], Replacement, tuple[str, ...], bool, re.Pattern[str] | None], ...
] = tuple(
    (
        kind,
        pattern,
        repl,
        LOWERCASE_MARKERS.get(kind) or MARKERS[kind],
        kind in LOWERCASE_MARKERS,
        None
        if kind in MULTILINE_KINDS
        else re.compile("|".join(re.escape(marker) for marker in MARKERS[kind])),
    )
    for kind, pattern, repl in SECRET_PATTERNS
)
_ANY_MARKER: tuple[str, ...] = tuple(m for markers in MARKERS.values() for m in markers)
_ANY_LOWERCASE_MARKER: tuple[str, ...] = tuple(
    m for markers in LOWERCASE_MARKERS.values() for m in markers
)


def may_need_scrubbing(text: str) -> bool:
    """Return False only when no pattern can match anywhere in ``text`` (a cheap pre-check).

    Every pattern's match contains one of its markers or hints, so a text with none of them
    is left unchanged by :meth:`Scrubber.text`; so is any substring of it.
    """
    for marker in _ANY_MARKER:
        if marker in text:
            return True
    if EMAIL_HINT.search(text) or IPV4_HINT.search(text) or IPV6_HINT.search(text):
        return True
    lowered = text.lower()
    return any(marker in lowered for marker in _ANY_LOWERCASE_MARKER)


def _sub_hinted_lines(text: str, hint: re.Pattern[str], sub: Callable[[str], str]) -> str:
    """Return ``text`` with ``sub`` applied to each line where ``hint`` matches.

    Equivalent to ``sub(text)`` for a pattern whose matches never span a newline, treat a
    newline like the start or end of the text in their look-arounds and always contain a
    ``hint`` match; only the hinted lines are searched.
    """
    match = hint.search(text)
    if match is None:
        return text
    parts: list[str] = []
    done = 0
    while match is not None:
        start = text.rfind("\n", 0, match.start()) + 1
        end = text.find("\n", match.end())
        if end < 0:
            end = len(text)
        parts += (text[done:start], sub(text[start:end]))
        done = end
        match = hint.search(text, end)
    parts.append(text[done:])
    return "".join(parts)


class Scrubber:
    """Scrubs strings and counts what it replaced, per kind.

    With ``remember`` > 0 the results for up to that many distinct recent texts are kept with
    the counts they produced, and a repeated text is answered from them (counted again).
    """

    def __init__(self, settings: ScrubSettings, remember: int = 0) -> None:
        self.settings = settings
        self.counts: Counter[str] = Counter()
        self.remember = remember
        self._memo: dict[str, tuple[str, Counter[str]]] = {}

    def _sub(self, kind: str, pattern: re.Pattern[str], repl: Replacement, text: str) -> str:
        text, n = pattern.subn(repl, text)
        if n:
            self.counts[kind] += n
        return text

    def _ip(self, kind: str, match: re.Match[str]) -> str:
        value = match.group(0)
        if value in KEPT_IPS:
            return value
        if kind == "ipv6":
            try:
                ipaddress.IPv6Address(value)
            except ValueError:
                return value
        self.counts[kind] += 1
        return "<IP>"

    def text(self, text: str) -> str:
        """Return ``text`` with every secret and personal datum replaced."""
        if not self.remember:
            return self._scrub(text)
        known = self._memo.get(text)
        if known is None:
            outer, self.counts = self.counts, Counter()
            try:
                known = (self._scrub(text), self.counts)
            finally:
                self.counts = outer
            if len(self._memo) >= self.remember:
                self._memo.clear()  # a stream's repeats are close together: start afresh
            self._memo[text] = known
        scrubbed, counts = known
        if counts:
            self.counts.update(counts)
        return scrubbed

    def _scrub(self, text: str) -> str:
        lowered: str | None = None
        for kind, pattern, repl, markers, lowercase, marker_pattern in _SECRET_CHECKS:
            if marker_pattern is not None:
                text = _sub_hinted_lines(
                    text, marker_pattern, partial(self._sub, kind, pattern, repl)
                )
                continue
            if lowercase:
                # lower-cased once, when the first case-insensitive kind is checked
                lowered = text.lower() if lowered is None else lowered
                haystack = lowered
            else:
                haystack = text
            if any(marker in haystack for marker in markers):
                text = self._sub(kind, pattern, repl, text)
        if self.settings.emails:
            text = _sub_hinted_lines(
                text, EMAIL_HINT, partial(self._sub, "email", EMAIL, "<EMAIL>")
            )
        if self.settings.ips:
            text = _sub_hinted_lines(text, IPV4_HINT, self._ipv4)
            text = _sub_hinted_lines(text, IPV6_HINT, self._ipv6)
        return text

    def _ipv4(self, line: str) -> str:
        return IPV4.sub(lambda m: self._ip("ipv4", m), line)

    def _ipv6(self, line: str) -> str:
        return IPV6.sub(lambda m: self._ip("ipv6", m), line)

    def value(self, value: Any) -> Any:
        """Scrub every string inside a JSON value (dict keys included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        return value

    def json_column(self, raw: str | None) -> str | None:
        """Scrub a JSON string column, re-encoding it only when something changed."""
        if not raw:
            return raw
        # Without escapes every decoded string is a substring of the raw JSON, so a raw
        # string with no marker or hint has nothing to scrub and need not be decoded.
        if "\\" not in raw and not may_need_scrubbing(raw):
            return raw
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError:
            return self.text(raw)
        scrubbed = self.value(parsed)
        if scrubbed == parsed:
            return raw
        return json.dumps(scrubbed, sort_keys=True, ensure_ascii=False)

    def row(self, row: dict[str, Any]) -> None:
        """Scrub the text fields of a transition row in place."""
        if row.get("task"):
            row["task"] = self.text(row["task"])
        for name in ("observation", "next_observation"):
            part = dict(row[name])
            part["text"] = self.text(part.get("text") or "")
            part["meta"] = self.json_column(part.get("meta"))
            row[name] = part
        action = dict(row["action"])
        action["text"] = self.text(action.get("text") or "")
        action["arguments"] = self.json_column(action.get("arguments"))
        row["action"] = action


SCRUB_MEMORY = 64
"""Distinct recent texts whose scrubbed form :class:`ScrubStep` keeps for reuse."""


class ScrubStep(TallyStep):
    """Scrubs every document's row and re-renders its text."""

    name = "🕵 scrub"
    tally_name = "scrub"

    def __init__(self, settings: ScrubSettings, tally_folder: Path | None = None) -> None:
        super().__init__(tally_folder)
        self.settings = settings

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Scrub and forward every document."""
        # Consecutive steps repeat texts (one step's next screen is the following step's
        # screen, the task and most metadata stay the same), so recent results are reused.
        scrubber = Scrubber(self.settings, remember=SCRUB_MEMORY)
        for doc in data:
            scrubber.counts = Counter()  # counted per document
            scrubber.row(doc.metadata)
            doc.text = render_transition(doc.metadata)
            for kind, count in scrubber.counts.items():
                self.tally(doc, f"scrubbed:{kind}", count)
            if scrubber.counts:
                self.tally(doc, "scrubbed_rows")
            yield doc
        self.flush_tallies(rank)
