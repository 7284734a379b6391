"""Gnumeric tasks: fill and format cells, write a formula, save the workbook, then check it.

The budget opens from ``budget.csv`` (a header and six rows: Item, Category, Amount). Saving
a workbook opened from CSV asks for a name (ctrl+s opens "Save the current workbook as"): the
script types a full path ending in ``.gnumeric``, which picks Gnumeric's own format (gzipped
XML). A check of values converts the saved workbook back to CSV with ``ssconvert`` inside the
container; a check of formatting reads the workbook's XML (its cell styles).
"""

from __future__ import annotations

from worldtrace.collectors.os.actions import hotkey, press, special, write
from worldtrace.collectors.os.tasks import DOCUMENTS, OsTask

BUDGET = f"{DOCUMENTS}/budget.csv"


def _has_row(row: str) -> str:
    """A check: the saved workbook (``{path}``), as CSV, has this line."""
    return f"ssconvert {{path}} /tmp/check.csv >/dev/null 2>&1 && grep -qxF '{row}' /tmp/check.csv"


def _has_style(attribute: str) -> str:
    """A check: a cell style of the saved workbook (``{path}``) sets this XML attribute."""
    return f"zcat {{path}} | grep -qF '{attribute}'"


def _task(name: str, instruction: str, steps: tuple, saved_as: str, check: str) -> OsTask:
    path = f"{DOCUMENTS}/{saved_as}"
    return OsTask(
        name=f"gnumeric-{name}",
        instruction=f"{instruction} Save the workbook as {path}.",
        category="gnumeric",
        application="gnumeric",
        launch=(("gnumeric", BUDGET),),
        steps=(
            hotkey("ctrl", "Home"),
            *steps,
            hotkey("ctrl", "s"),
            hotkey("ctrl", "a"),
            write(f"{path}\n"),
            special("WAIT"),
        ),
        check_command=check.format(path=path),
    )


TASKS = (
    _task(
        "total-row",
        "Add a row 'Total' under the budget whose amount is the sum of the amounts.",
        (press("down", presses=7), write("Total\t\t=SUM(C2:C7)\n")),
        "budget.gnumeric",
        _has_row("Total,,1750"),
    ),
    _task(
        "new-expense",
        "Add the expense 'Gym' in the category 'Health' with the amount 30 under the budget.",
        (press("down", presses=7), write("Gym\tHealth\t30\n")),
        "expenses.gnumeric",
        _has_row("Gym,Health,30"),
    ),
    _task(
        "change-rent",
        "Change the rent in the budget to 1250.",
        (press("down"), press("right", presses=2), write("1250\n")),
        "budget-2.gnumeric",
        _has_row("Rent,Housing,1250"),
    ),
    _task(
        "largest-row",
        "Add a row 'Largest' under the budget with the largest amount (a formula).",
        (press("down", presses=7), write("Largest\t\t=MAX(C2:C7)\n")),
        "largest.gnumeric",
        _has_row("Largest,,1200"),
    ),
    _task(
        "bold-header",
        "Make the header row (Item, Category, Amount) bold.",
        (hotkey("shift", "right"), hotkey("shift", "right"), hotkey("ctrl", "b")),
        "bold-header.gnumeric",
        _has_style('Bold="1"'),
    ),
)
