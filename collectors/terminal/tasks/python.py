"""Python tasks: running and fixing small scripts, a REPL session, a failing unit test."""

from __future__ import annotations

from worldtrace.collectors.terminal.actions import command, keys
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    all_of,
    join_lines,
    same_content,
    write_file,
)

_GRADES = (
    ("amira", "math", 91),
    ("amira", "physics", 84),
    ("amira", "history", 77),
    ("ben", "math", 68),
    ("ben", "physics", 72),
    ("ben", "history", 90),
    ("chloe", "math", 99),
    ("chloe", "physics", 95),
    ("chloe", "history", 88),
    ("dmitri", "math", 55),
    ("dmitri", "physics", 61),
    ("dmitri", "history", 70),
)

_AVERAGE_PY = """\
import csv
from collections import defaultdict

scores = defaultdict(list)
with open("grades.csv", newline="") as handle:
    for row in csv.DictReader(handle):
        scores[row["name"]].append(int(row["score"]))

for name in sorted(scores):
    values = scores[name]
    print(f"{name}: {sum(values) / len(values):.1f}")
"""


def _grade_averages() -> str:
    names = sorted({name for name, _, _ in _GRADES})
    rows = []
    for name in names:
        values = [score for who, _, score in _GRADES if who == name]
        rows.append(f"{name}: {sum(values) / len(values):.1f}")
    return join_lines(*rows)


_STOCK_PY = """\
import json

with open("items.json") as handle:
    items = json.load(handle)

total = 0
for item in items:
    print(f"{item['sku']:<8} {item['name']:<14} {item['qty']:>4}")
    total += item['qty']
print(f"Total units: {total}")
"""

_ITEMS = (
    ("A-100", "bolts", 250),
    ("A-101", "nuts", 310),
    ("B-200", "washers", 75),
    ("C-300", "brackets", 12),
)
_ITEMS_JSON = (
    "[\n"
    + ",\n".join(f'  {{"sku": "{s}", "name": "{n}", "quantity": {q}}}' for s, n, q in _ITEMS)
    + "\n]\n"
)

_SERVICE_CONFIG = """\
{
  "name": "thumbnailer",
  "workers": 6,
  "queue": "redis://localhost:6379/2",
  "features": {"webp": true, "avif": false, "face_crop": true, "watermark": false,
               "progressive_jpeg": true}
}
"""

_TEXTUTILS_PY = """\
import re


def slugify(title):
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower())
    return slug


def word_count(text):
    return len(text.split())
"""

_TEST_TEXTUTILS_PY = """\
import unittest

from textutils import slugify, word_count


class TextUtilsTest(unittest.TestCase):
    def test_slugify_simple(self):
        self.assertEqual(slugify("Hello World"), "hello-world")

    def test_slugify_punctuation(self):
        self.assertEqual(slugify("Ship it! (v1.4)"), "ship-it-v1-4")

    def test_word_count(self):
        self.assertEqual(word_count("one two  three"), 3)


if __name__ == "__main__":
    unittest.main()
"""

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="python-grade-averages",
        instruction=(
            "Write a small Python script that prints each student's average score from "
            "~/work/grades/grades.csv, run it, and save its output to averages.txt."
        ),
        category="python",
        setup=(
            write_file(
                f"{WORK}/grades/grades.csv",
                join_lines("name,subject,score", *(f"{n},{s},{v}" for n, s, v in _GRADES)),
            ),
        ),
        steps=(
            command("cd ~/work/grades"),
            command("head -4 grades.csv"),
            command(f"cat > average.py <<'EOF'\n{_AVERAGE_PY}EOF"),
            command("python3 average.py"),
            command("python3 average.py > averages.txt"),
            command("cat averages.txt"),
        ),
        check=all_of(
            same_content(f"{WORK}/grades/averages.txt", _grade_averages()),
            f"test -f {WORK}/grades/average.py",
        ),
    ),
    TerminalTask(
        name="python-fix-keyerror",
        instruction=(
            "~/work/inventory/stock.py crashes. Figure out why, fix it, and save its report "
            "to report.txt."
        ),
        category="python",
        setup=(
            write_file(f"{WORK}/inventory/stock.py", _STOCK_PY),
            write_file(f"{WORK}/inventory/items.json", _ITEMS_JSON),
        ),
        steps=(
            command("cd ~/work/inventory"),
            command("python3 stock.py"),
            command("echo $?"),
            command("python3 -m json.tool items.json | head -8"),
            command("grep -n qty stock.py"),
            command("sed -i \"s/item\\['qty'\\]/item['quantity']/g\" stock.py"),
            command("python3 stock.py"),
            command("python3 stock.py > report.txt"),
        ),
        check=(
            f"cd {WORK}/inventory && python3 stock.py >/dev/null && "
            f"[ \"$(tail -1 report.txt)\" = 'Total units: {sum(q for _, _, q in _ITEMS)}' ]"
        ),
    ),
    TerminalTask(
        name="python-repl-inspect-config",
        instruction=(
            "Use the Python REPL to look at ~/work/thumbnailer/config.json: how many workers "
            "are configured and which features are on? Write the enabled features to "
            "enabled.txt, one per line."
        ),
        category="python",
        setup=(write_file(f"{WORK}/thumbnailer/config.json", _SERVICE_CONFIG),),
        steps=(
            command("cd ~/work/thumbnailer"),
            command("python3"),
            keys("import json", "Enter"),
            keys("cfg = json.load(open('config.json'))", "Enter"),
            keys("cfg['workers']", "Enter"),
            keys("enabled = [name for name, on in cfg['features'].items() if on]", "Enter"),
            keys("enabled", "Enter"),
            keys("open('enabled.txt', 'w').write('\\n'.join(enabled) + '\\n')", "Enter"),
            keys("exit()", "Enter"),
            command("cat enabled.txt"),
        ),
        check=same_content(
            f"{WORK}/thumbnailer/enabled.txt", join_lines("webp", "face_crop", "progressive_jpeg")
        ),
    ),
    TerminalTask(
        name="python-unittest-fix",
        instruction=(
            "The tests in ~/work/textutils fail. Run them, fix slugify in textutils.py (not the "
            "tests), and run them again."
        ),
        category="python",
        setup=(
            write_file(f"{WORK}/textutils/textutils.py", _TEXTUTILS_PY),
            write_file(f"{WORK}/textutils/test_textutils.py", _TEST_TEXTUTILS_PY),
        ),
        steps=(
            command("cd ~/work/textutils"),
            command("python3 -m unittest -v"),
            command("cat textutils.py"),
            command("sed -i 's/    return slug$/    return slug.strip(\"-\")/' textutils.py"),
            command("python3 -m unittest -v"),
        ),
        check=all_of(
            f"cd {WORK}/textutils && python3 -m unittest -q 2>/dev/null",
            same_content(f"{WORK}/textutils/test_textutils.py", _TEST_TEXTUTILS_PY),
        ),
    ),
)
