"""Git tasks: first commits, branches and merges, stashes, conflicts, reverts and tags.

Setup builds the repositories with fixed commit dates, so their hashes are the same in every
run.
"""

from __future__ import annotations

import shlex

from worldtrace.collectors.terminal.actions import command
from worldtrace.collectors.terminal.tasks.helpers import (
    WORK,
    TerminalTask,
    git_commit,
    git_init,
    write_file,
)

_TODO_PY = """\
import json
import sys

PATH = "todo.json"


def load():
    try:
        with open(PATH) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return []


def main(argv):
    items = load()
    if argv and argv[0] == "add":
        items.append(" ".join(argv[1:]))
        with open(PATH, "w") as handle:
            json.dump(items, handle)
    for number, item in enumerate(items, 1):
        print(f"{number}. {item}")


if __name__ == "__main__":
    main(sys.argv[1:])
"""

_GREET_V1 = """\
import sys


def greet(name):
    return f"Hello, {name}!"


if __name__ == "__main__":
    print(greet(sys.argv[1] if len(sys.argv) > 1 else "world"))
"""

_GREET_V2 = """\
import sys


def greet(name, shout=False):
    text = f"Hello, {name}!"
    return text.upper() if shout else text


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--shout"]
    print(greet(args[0] if args else "world", shout="--shout" in sys.argv))
"""

_CART_PY = """\
TAX_RATE = 0.25
CURRENCY = "EUR"


def subtotal(items):
    return sum(price * qty for price, qty in items)


def tax(amount):
    return round(amount * TAX_RATE, 2)


def total(items):
    amount = subtotal(items)
    return amount + tax(amount)
"""

_CART_WIP = """

def apply_discount(amount, percent):
    return round(amount * (1 - percent / 100), 2)
"""

_CALC_V1 = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
_CALC_TEST = """\
from calc import add, mul

assert add(2, 3) == 5, "add(2, 3) should be 5"
assert mul(4, 5) == 20, "mul(4, 5) should be 20"
print("all tests passed")
"""

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="git-init-first-commit",
        instruction=(
            "Put my todo CLI in ~/work/todo-cli under git: ignore Python bytecode, add "
            "everything else and make the first commit."
        ),
        category="git",
        setup=(
            write_file(f"{WORK}/todo-cli/todo.py", _TODO_PY),
            write_file(
                f"{WORK}/todo-cli/README.md", "# todo-cli\n\n    python3 todo.py add milk\n"
            ),
            f"mkdir -p {WORK}/todo-cli/__pycache__ && "
            f"printf 'pyc' > {WORK}/todo-cli/__pycache__/todo.cpython-311.pyc",
        ),
        steps=(
            command("cd ~/work/todo-cli"),
            command("git init"),
            command("git status --short"),
            command("printf '__pycache__/\\n*.pyc\\n' > .gitignore"),
            command("git add ."),
            command("git status --short"),
            command('git commit -m "Initial commit of todo CLI"'),
            command("git log --oneline"),
        ),
        check=(
            f'cd {WORK}/todo-cli && [ "$(git rev-list --count HEAD)" -eq 1 ] && '
            "[ \"$(git ls-files | paste -sd' ')\" = '.gitignore README.md todo.py' ] && "
            "[ \"$(git log -1 --format=%s)\" = 'Initial commit of todo CLI' ]"
        ),
    ),
    TerminalTask(
        name="git-feature-branch-merge",
        instruction=(
            "In ~/work/greeter, add a --shout option to greet.py on a feature branch, commit "
            "it, and merge it back into main."
        ),
        category="git",
        setup=(
            git_init(f"{WORK}/greeter"),
            write_file(f"{WORK}/greeter/README.md", "# greeter\nSays hello.\n"),
            git_commit(f"{WORK}/greeter", "Add README", 0),
            write_file(f"{WORK}/greeter/greet.py", _GREET_V1),
            git_commit(f"{WORK}/greeter", "Add greet.py", 5),
        ),
        steps=(
            command("cd ~/work/greeter"),
            command("git log --oneline"),
            command("git checkout -b feature/shout"),
            command(f"cat > greet.py <<'EOF'\n{_GREET_V2}EOF"),
            command("python3 greet.py --shout Ada"),
            command('git commit -am "Add --shout option"'),
            command("git checkout main"),
            command("git merge feature/shout"),
            command("git log --oneline --graph --all"),
        ),
        check=(
            f'cd {WORK}/greeter && [ "$(git branch --show-current)" = main ] && '
            "git rev-parse -q --verify feature/shout >/dev/null && "
            "[ \"$(git log -1 --format=%s main)\" = 'Add --shout option' ] && "
            "[ \"$(python3 greet.py --shout Ada)\" = 'HELLO, ADA!' ] && "
            '[ -z "$(git status --porcelain)" ]'
        ),
    ),
    TerminalTask(
        name="git-stash-hotfix",
        instruction=(
            "I'm halfway through adding discounts in ~/work/shop when a bug report comes in: "
            "TAX_RATE in cart.py must be 0.2, not 0.25. Stash my work, commit the fix, then "
            "bring my work back."
        ),
        category="git",
        setup=(
            git_init(f"{WORK}/shop"),
            write_file(f"{WORK}/shop/cart.py", _CART_PY),
            git_commit(f"{WORK}/shop", "Add cart totals", 0),
            f"printf '%s' {shlex.quote(_CART_WIP)} >> {WORK}/shop/cart.py",
        ),
        steps=(
            command("cd ~/work/shop"),
            command("git status --short"),
            command("git diff"),
            command("git stash"),
            command("sed -i 's/^TAX_RATE = 0.25/TAX_RATE = 0.2/' cart.py"),
            command('git commit -am "Fix tax rate: 20%, not 25%"'),
            command("git stash pop"),
            command("git diff --stat"),
            command("git log --oneline"),
        ),
        check=(
            f"cd {WORK}/shop && [ \"$(git log -1 --format=%s)\" = 'Fix tax rate: 20%, not 25%' ] "
            "&& git show HEAD:cart.py | grep -qx 'TAX_RATE = 0.2' "
            "&& ! git show HEAD:cart.py | grep -q apply_discount "
            "&& grep -qx 'TAX_RATE = 0.2' cart.py && grep -q 'def apply_discount' cart.py "
            '&& [ -z "$(git stash list)" ]'
        ),
    ),
    TerminalTask(
        name="git-resolve-merge-conflict",
        instruction=(
            "Merge the update-version branch into main in ~/work/docs-site. It conflicts on the "
            "version line; resolve it as 'Version: 2.0' and finish the merge."
        ),
        category="git",
        setup=(
            git_init(f"{WORK}/docs-site"),
            write_file(
                f"{WORK}/docs-site/README.md",
                "# Docs site\n\nVersion: 1.0\n\nBuild with `make html`.\n",
            ),
            git_commit(f"{WORK}/docs-site", "Initial docs site", 0),
            f"cd {WORK}/docs-site && git checkout -q -b update-version && "
            "sed -i 's/^Version: 1.0/Version: 1.1/' README.md && "
            "printf 'Changelog\\n=========\\n1.1: typo fixes\\n' > CHANGELOG",
            git_commit(f"{WORK}/docs-site", "Bump version to 1.1", 10),
            f"cd {WORK}/docs-site && git checkout -q main && "
            "sed -i 's/^Version: 1.0/Version: 2.0-beta/' README.md",
            git_commit(f"{WORK}/docs-site", "Start 2.0 beta", 20),
        ),
        steps=(
            command("cd ~/work/docs-site"),
            command("git branch"),
            command("git merge update-version"),
            command("git status --short"),
            command("cat README.md"),
            command("git checkout --ours README.md"),
            command("sed -i 's/^Version: 2.0-beta$/Version: 2.0/' README.md"),
            command("git add README.md"),
            command("git commit --no-edit"),
            command("git log --oneline --graph"),
        ),
        check=(
            f'cd {WORK}/docs-site && [ "$(git rev-list --parents -1 HEAD | wc -w)" -eq 3 ] && '
            "grep -qx 'Version: 2.0' README.md && ! grep -q '^[<=>]\\{7\\}' README.md && "
            'test -f CHANGELOG && [ -z "$(git status --porcelain)" ]'
        ),
    ),
    TerminalTask(
        name="git-revert-bad-commit",
        instruction=(
            "The last commit in ~/work/calc broke add(). Find it and undo it without rewriting "
            "history, then make sure the tests pass."
        ),
        category="git",
        setup=(
            git_init(f"{WORK}/calc"),
            write_file(f"{WORK}/calc/calc.py", _CALC_V1),
            write_file(f"{WORK}/calc/test_calc.py", _CALC_TEST),
            git_commit(f"{WORK}/calc", "Add calc with tests", 0),
            f"printf '\\n\\ndef sub(a, b):\\n    return a - b\\n' >> {WORK}/calc/calc.py",
            git_commit(f"{WORK}/calc", "Add sub()", 30),
            f"sed -i '2s/a + b/a - b  # faster/' {WORK}/calc/calc.py",
            git_commit(f"{WORK}/calc", "Speed up add()", 60),
        ),
        steps=(
            command("cd ~/work/calc"),
            command("python3 test_calc.py"),
            command("git log --oneline"),
            command("git show HEAD"),
            command("git revert --no-edit HEAD"),
            command("python3 test_calc.py"),
            command("git log --oneline"),
        ),
        check=(
            f'cd {WORK}/calc && [ "$(git rev-list --count HEAD)" -eq 4 ] && '
            "git log -1 --format=%s | grep -q '^Revert \"Speed up add()\"' && "
            "python3 test_calc.py >/dev/null && grep -q 'def sub' calc.py"
        ),
    ),
    TerminalTask(
        name="git-tag-from-history",
        instruction=(
            "In ~/work/fetcher, find the commit that introduced the retries setting, tag it "
            "v0.3, and show what changed in it."
        ),
        category="git",
        setup=(
            git_init(f"{WORK}/fetcher"),
            write_file(f"{WORK}/fetcher/settings.py", "TIMEOUT = 10\n"),
            git_commit(f"{WORK}/fetcher", "Add settings", 0),
            f"printf 'URL = \"http://localhost:8000\"\\n' >> {WORK}/fetcher/settings.py",
            git_commit(f"{WORK}/fetcher", "Configure the base URL", 15),
            f"printf 'RETRIES = 3\\n' >> {WORK}/fetcher/settings.py",
            git_commit(f"{WORK}/fetcher", "Retry failed requests", 30),
            f"sed -i 's/TIMEOUT = 10/TIMEOUT = 30/' {WORK}/fetcher/settings.py",
            git_commit(f"{WORK}/fetcher", "Raise the timeout", 45),
        ),
        steps=(
            command("cd ~/work/fetcher"),
            command("git log --oneline"),
            command("git log -S RETRIES --oneline"),
            command("git tag v0.3 $(git log -S RETRIES --format=%h)"),
            command("git show --stat v0.3"),
            command("git log --oneline --decorate"),
        ),
        check=(
            f'cd {WORK}/fetcher && [ "$(git log -1 --format=%s v0.3)" = '
            "'Retry failed requests' ] && [ \"$(git rev-list --count HEAD)\" -eq 4 ]"
        ),
    ),
)
