"""The scrubber's shortcuts (markers, hints, line-by-line search) never change its result.

The reference below applies every pattern to the whole text, in the scrubber's order, with
no pre-check: it is what :class:`curation.scrub.Scrubber` must be equivalent to.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import random
import re
from collections import Counter

import pytest

from curation.config import ScrubSettings
from curation.scrub import EMAIL, IPV4, IPV6, KEPT_IPS, SECRET_PATTERNS, Scrubber


def reference(text: str, settings: ScrubSettings) -> tuple[str, Counter[str]]:
    """Scrub ``text`` the slow, obvious way; return it with the counts per kind."""
    counts: Counter[str] = Counter()

    def ip(kind: str, match: re.Match[str]) -> str:
        value = match.group(0)
        if value in KEPT_IPS:
            return value
        if kind == "ipv6":
            try:
                ipaddress.IPv6Address(value)
            except ValueError:
                return value
        counts[kind] += 1
        return "<IP>"

    for kind, pattern, repl in SECRET_PATTERNS:
        text, n = pattern.subn(repl, text)
        counts[kind] += n
    if settings.emails:
        text, n = EMAIL.subn("<EMAIL>", text)
        counts["email"] += n
    if settings.ips:
        text = IPV4.sub(lambda m: ip("ipv4", m), text)
        text = IPV6.sub(lambda m: ip("ipv6", m), text)
    return text, +counts


CASES = [
    # a prompt has '@' but no e-mail; a clock has colons but no IPv6 address
    "root@wt:/etc# ls\n12:34:56 up 3 days\nroot@wt:/etc# ",
    "mail bob@example.com\nroot@wt:~# ping 8.8.4.4\n",
    "first line\nfe80::1 on eth0\n2001:db8:0:0:0:0:0:1\n1:2:3:4:5:6:7:8",
    "10:23:45:67:89 not an address\n::1 and :: are kept, 127.0.0.1 too",
    "a@b.co\nc@d.org",  # hinted lines at the very start and end of the text
    "\n\n8.8.8.8\n\nx@y.io\n",
    "version 1.2.3.4.5 and 256.1.1.1 and 1.2.3.4",
    "https://alice:hunter2@github.com/org\nAKIAIOSFODNN7EXAMPLE\nsk-proj-" + "k" * 24,
    "ghp_" + "a1B2c3D4e5" * 4 + "\nxoxb-1234567890-abcdefghij\nhf_" + "A" * 30,
    "AIza" + "S" * 35 + "\nsk-ant-" + "x" * 24,
    "password =\n  hunter2\nPWD: x\npasswd:<PASSWORD>",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY-----\nafter",
    "café@example.com é1.2.3.4 ab::cd",
    "line\r\nuser@host.example.com\r\n",
]


@pytest.mark.parametrize("text", CASES)
@pytest.mark.parametrize("settings", [ScrubSettings(), ScrubSettings(emails=False, ips=False)])
def test_scrubber_matches_reference(text: str, settings: ScrubSettings) -> None:
    scrubber = Scrubber(settings)
    expected, counts = reference(text, settings)
    assert scrubber.text(text) == expected
    assert +scrubber.counts == counts


def test_scrubber_matches_reference_on_random_screens() -> None:
    atoms = [
        "a", "F", "0", "9", "255", ".", ":", "::", "@", "\n", " ", "-", "_", "%", "é",
        "x.com", "mail.example.org", "bob", "fe80", "db8", "2001", "127.0.0.1", "8.8.4.4",
        "10:23:45", "0:0:0:0:0:0:0:1", "AKIAIOSFODNN7EXAMPLE", "sk-" + "a" * 22, "pass=",
        "https://u:p@h.io", "ghp_" + "a" * 36, "hf_" + "A" * 30, "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
    ]  # fmt: skip
    rng = random.Random(7)
    changed = 0
    for _ in range(3000):
        text = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 30)))
        scrubber = Scrubber(ScrubSettings())
        expected, counts = reference(text, ScrubSettings())
        assert scrubber.text(text) == expected, text
        assert +scrubber.counts == counts, text
        changed += expected != text
    assert changed > 500  # the random texts do exercise the replacements


def test_json_column_untouched_without_secrets_and_scrubbed_with_them() -> None:
    scrubber = Scrubber(ScrubSettings())
    raw = json.dumps({"cwd": "/root", "keys": ["ls -la", "Enter"]})
    assert scrubber.json_column(raw) is raw
    escaped = json.dumps({"to": "bob\u0040example.com"}, ensure_ascii=True).replace("@", "\\u0040")
    assert json.loads(scrubber.json_column(escaped) or "") == {"to": "<EMAIL>"}
    assert scrubber.counts == Counter({"email": 1})


def test_remembered_texts_are_counted_every_time() -> None:
    texts = [CASES[1], CASES[2], CASES[1], CASES[0], CASES[7], CASES[1], CASES[2]]
    scrubber = Scrubber(ScrubSettings(), remember=2)  # small enough to be cleared on the way
    total: Counter[str] = Counter()
    for text in texts:
        expected, counts = reference(text, ScrubSettings())
        assert scrubber.text(text) == expected
        total += counts
    assert +scrubber.counts == total
    assert total["email"] == 3 and total["ipv6"] == 6


def test_scrub_step_tallies_repeated_screens_per_document() -> None:
    from datatrove.data import Document

    from curation.scrub import ScrubStep
    from schemas import to_row
    from tests.records import make_transition

    row = to_row(make_transition(task="mail bob@example.com"))
    docs = [Document(text="", id=f"d{i}", metadata=copy.deepcopy(row)) for i in range(3)]
    step = ScrubStep(ScrubSettings())
    out = list(step.run(iter(docs)))
    assert [doc.metadata["task"] for doc in out] == ["mail <EMAIL>"] * 3
    assert step.tallies["terminal|sha256:abc|scrubbed:email"] == 3
    assert step.tallies["terminal|sha256:abc|scrubbed_rows"] == 3
