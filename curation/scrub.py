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
# with `in` first skips most of the regex work on ordinary screens (the full patterns were
# about 60% of curation time in benchmarks/curate.py).
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
MAYBE_IPV4 = re.compile(r"\d\.\d{1,3}\.\d")
MAYBE_IPV6 = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f]*:")


def _may_match(kind: str, text: str, lowered: str) -> bool:
    if kind in LOWERCASE_MARKERS:
        return any(marker in lowered for marker in LOWERCASE_MARKERS[kind])
    return any(marker in text for marker in MARKERS.get(kind, ("",)))


class Scrubber:
    """Scrubs strings and counts what it replaced, per kind."""

    def __init__(self, settings: ScrubSettings) -> None:
        self.settings = settings
        self.counts: Counter[str] = Counter()

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
        lowered = text.lower()
        for kind, pattern, repl in SECRET_PATTERNS:
            if _may_match(kind, text, lowered):
                text = self._sub(kind, pattern, repl, text)
        if self.settings.emails and "@" in text:
            text = self._sub("email", EMAIL, "<EMAIL>", text)
        if self.settings.ips:
            if MAYBE_IPV4.search(text):
                text = IPV4.sub(lambda m: self._ip("ipv4", m), text)
            if MAYBE_IPV6.search(text) or "::" in text:
                text = IPV6.sub(lambda m: self._ip("ipv6", m), text)
        return text

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


class ScrubStep(TallyStep):
    """Scrubs every document's row and re-renders its text."""

    name = "🕵 scrub"
    tally_name = "scrub"

    def __init__(self, settings: ScrubSettings, tally_folder: Path | None = None) -> None:
        super().__init__(tally_folder)
        self.settings = settings

    def run(self, data: DocumentsPipeline, rank: int = 0, world_size: int = 1) -> Iterator:
        """Scrub and forward every document."""
        for doc in data:
            scrubber = Scrubber(self.settings)
            scrubber.row(doc.metadata)
            doc.text = render_transition(doc.metadata)
            for kind, count in scrubber.counts.items():
                self.tally(doc, f"scrubbed:{kind}", count)
            if scrubber.counts:
                self.tally(doc, "scrubbed_rows")
            yield doc
        self.flush_tallies(rank)
