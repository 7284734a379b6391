#!/bin/sh
# Make the git repository the git server works on: a small Python library ("wordfreq-lite")
# with nine commits over three branches and an annotated tag. Authors, committers and dates
# are fixed, so every commit id is the same in every build. Usage: make_repo.sh FOLDER
set -eu
repo="$1"
mkdir -p "$repo"
cd "$repo"
git init -q -b main .

# commit DAY "AUTHOR <EMAIL>" "MESSAGE": commit what is staged on 2024-01-DAY 09:30 UTC.
commit() {
    date="2024-01-$1T09:30:00+00:00"
    name="${2% <*}"
    email="${2#*<}"; email="${email%>}"
    GIT_AUTHOR_NAME="$name" GIT_AUTHOR_EMAIL="$email" GIT_AUTHOR_DATE="$date" \
    GIT_COMMITTER_NAME="$name" GIT_COMMITTER_EMAIL="$email" GIT_COMMITTER_DATE="$date" \
        git commit -q -m "$3"
}
MAYA="Maya Chen <maya@example.org>"
TOM="Tom Okafor <tom@example.org>"

cat > README.md <<'TXT'
# wordfreq-lite

Count words in plain text files.
TXT
cat > LICENSE <<'TXT'
MIT License. Copyright (c) 2024 Maya Chen and Tom Okafor.
TXT
git add README.md LICENSE
commit 08 "$MAYA" "Initial commit: README and license"

mkdir -p wordfreq
cat > wordfreq/__init__.py <<'TXT'
"""Count words in plain text."""

__version__ = "0.1.0"
TXT
cat > wordfreq/counts.py <<'TXT'
"""Word and line counts."""

from collections import Counter


def count_lines(text: str) -> int:
    return len(text.splitlines())


def count_words(text: str) -> Counter:
    return Counter(word.lower() for word in text.split())
TXT
git add wordfreq
commit 09 "$MAYA" "Add word and line counting"

mkdir -p tests
cat > tests/test_counts.py <<'TXT'
from wordfreq.counts import count_lines, count_words


def test_count_lines():
    assert count_lines("a\nb\n") == 2


def test_count_words_ignores_case():
    assert count_words("The cat the")["the"] == 2
TXT
git add tests
commit 10 "$TOM" "Add tests for counts"

cat > wordfreq/tokenize.py <<'TXT'
"""Split text into words."""

import re

WORD = re.compile(r"[A-Za-z']+")


def tokenize(text: str) -> list[str]:
    return [match.group(0).lower() for match in WORD.finditer(text)]
TXT
git add wordfreq/tokenize.py
commit 11 "$TOM" "Add a regex tokenizer"
GIT_COMMITTER_NAME="Maya Chen" GIT_COMMITTER_EMAIL="maya@example.org" \
GIT_COMMITTER_DATE="2024-01-11T17:00:00+00:00" \
    git tag -a v0.1.0 -m "wordfreq-lite 0.1.0"

# fix/unicode branches from the tag: the tokenizer drops accented letters.
git checkout -q -b fix/unicode
cat > wordfreq/tokenize.py <<'TXT'
"""Split text into words."""

import re

WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")


def tokenize(text: str) -> list[str]:
    return [match.group(0).casefold() for match in WORD.finditer(text)]
TXT
git add wordfreq/tokenize.py
commit 12 "$MAYA" "Tokenizer: keep accented letters (café, naïve)"

git checkout -q main
cat >> README.md <<'TXT'

## Usage

```python
from wordfreq.counts import count_words
count_words(open("book.txt").read()).most_common(10)
```
TXT
git add README.md
commit 15 "$TOM" "Document usage in the README"

# feature/cli branches from main after the README change.
git checkout -q -b feature/cli
cat > wordfreq/cli.py <<'TXT'
"""Command line: wordfreq FILE [--top N]."""

import argparse

from wordfreq.counts import count_words


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="wordfreq")
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    with open(args.file, encoding="utf-8") as handle:
        counts = count_words(handle.read())
    for word, count in counts.most_common(args.top):
        print(f"{count:6d} {word}")
    return 0
TXT
git add wordfreq/cli.py
commit 16 "$TOM" "Add a command-line interface"
cat > wordfreq/cli.py <<'TXT'
"""Command line: wordfreq FILE [--top N] [--json]."""

import argparse
import json

from wordfreq.counts import count_words


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="wordfreq")
    parser.add_argument("file")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print a JSON object")
    args = parser.parse_args(argv)
    with open(args.file, encoding="utf-8") as handle:
        counts = count_words(handle.read())
    top = counts.most_common(args.top)
    if args.json:
        print(json.dumps(dict(top), indent=2))
    else:
        for word, count in top:
            print(f"{count:6d} {word}")
    return 0
TXT
git add wordfreq/cli.py
commit 17 "$TOM" "CLI: add --json output"

git checkout -q main
cat > CHANGELOG.md <<'TXT'
# Changelog

## 0.1.0
- Word and line counts, a regex tokenizer.
TXT
git add CHANGELOG.md
commit 18 "$MAYA" "Add a changelog"
