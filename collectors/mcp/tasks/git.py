"""Scripted tasks on ``mcp-server-git`` over the seeded repository ``/srv/repo``.

The repository is "wordfreq-lite": nine commits with fixed authors and dates on ``main``,
``feature/cli`` (a command-line interface) and ``fix/unicode`` (a tokenizer fix branched from
the annotated tag ``v0.1.0``); the work tree is clean on ``main``. Revisions are named by
branch, tag or ``HEAD`` rather than by commit id, as an engineer would.

The server has no tool that writes a file, so a task that commits starts from a working copy
with uncommitted edits: its ``setup`` writes them (as ``user``, the server's user) before the
server starts, as a developer's editor would have. Branch tasks need no setup. Each check
reads the repository with ``git`` in the container (branches, HEAD, the new commit's parent,
message and files, the status) or, for questions, compares the answer the server gave with
what ``git`` itself says.
"""

from __future__ import annotations

from collections.abc import Callable

from worldtrace.collectors.mcp.tasks import (
    CheckContext,
    McpTask,
    all_of,
    last_answer,
    result_text,
)
from worldtrace.collectors.tool_calls import tool_call
from worldtrace.schemas import Action

REPO = "/srv/repo"
SEEDED_MAIN = ":/^Add a changelog"
"""``main``'s seeded head, named by its message: the parent of a commit made on ``main``."""


def git(context: CheckContext, *args: str) -> str:
    """Run ``git`` on the repository in the container; its stdout without the last newline."""
    # The checks run as root and the repository belongs to `user`.
    command = ["git", "-c", "safe.directory=*", "-C", REPO, *args]
    return context.run(command).rstrip("\n")


def rev(context: CheckContext, revision: str) -> str:
    """The commit id ``revision`` names, a tag peeled (a missing one fails through ``run``)."""
    return git(context, "log", "-1", "--format=%H", revision, "--")


def as_user(script: str) -> tuple[str, ...]:
    """A setup command: ``script`` run by ``sh`` as ``user`` in the repository."""
    return ("runuser", "-u", "user", "--", "sh", "-c", f"cd {REPO} && {script}")


def _call(name: str, **arguments: object) -> Action:
    return tool_call(name, {"repo_path": REPO, **arguments})


def on_branch(branch: str) -> Callable[[CheckContext], bool]:
    """HEAD is the branch ``branch``."""
    return lambda context: git(context, "symbolic-ref", "-q", "HEAD") == f"refs/heads/{branch}"


def same_commit(first: str, second: str) -> Callable[[CheckContext], bool]:
    """Both revisions name the same commit."""
    return lambda context: rev(context, first) == rev(context, second)


def clean_tree(context: CheckContext) -> bool:
    """Nothing staged, modified or untracked."""
    return git(context, "status", "--porcelain") == ""


def status_is(*lines: str) -> Callable[[CheckContext], bool]:
    """``git status --porcelain`` prints exactly ``lines`` (in any order)."""
    return lambda context: (
        sorted(git(context, "status", "--porcelain").splitlines()) == sorted(lines)
    )


def new_commit(
    branch: str, parent: str, message: str, files: dict[str, str]
) -> Callable[[CheckContext], bool]:
    """``branch`` is one new commit on ``parent`` with ``message`` changing exactly ``files``.

    ``files`` maps each changed path to a text its committed version must contain.
    """

    def check(context: CheckContext) -> bool:
        head = rev(context, branch)
        if rev(context, f"{head}^") != rev(context, parent):
            return False
        if git(context, "log", "-1", "--format=%s", head) != message:
            return False
        changed = git(context, "diff-tree", "--no-commit-id", "--name-only", "-r", head)
        if sorted(changed.splitlines()) != sorted(files):
            return False
        return all(text in git(context, "show", f"{head}:{path}") for path, text in files.items())

    return check


def answer_contains(
    tool: str, *expected: Callable[[CheckContext], str]
) -> Callable[[CheckContext], bool]:
    """The last answer of ``tool`` holds every text the ``expected`` functions compute."""

    def check(context: CheckContext) -> bool:
        answer = last_answer(context, tool)
        if answer is None:
            return False
        text = result_text(answer)
        return all(part(context) in text for part in expected)

    return check


def branches_answer_is(command: tuple[str, ...]) -> Callable[[CheckContext], bool]:
    """The last ``git_branch`` answer lists exactly the branches ``git branch <command>`` does."""

    def check(context: CheckContext) -> bool:
        answer = last_answer(context, "git_branch")
        if answer is None:
            return False
        listed = sorted(line.strip(" *") for line in result_text(answer).splitlines() if line)
        truth = git(context, "branch", *command, "--format=%(refname:short)").splitlines()
        return listed == sorted(truth)

    return check


def log_answer_is(since: str, until: str) -> Callable[[CheckContext], bool]:
    """The last ``git_log`` answer lists exactly HEAD's commits between the two timestamps."""

    def check(context: CheckContext) -> bool:
        answer = last_answer(context, "git_log")
        if answer is None:
            return False
        listed = [
            line.removeprefix("Commit: ").strip()
            for line in result_text(answer).splitlines()
            if line.startswith("Commit: ")
        ]
        truth = git(context, "log", f"--since={since}", f"--until={until}", "--format=%H")
        return bool(listed) and listed == truth.splitlines()

    return check


def diff_answer_is(target: str) -> Callable[[CheckContext], bool]:
    """The last ``git_diff`` answer holds the work tree's diff against ``target`` as git has it."""

    def check(context: CheckContext) -> bool:
        answer = last_answer(context, "git_diff")
        if answer is None:
            return False
        truth = git(context, "diff", "--unified=3", target)
        return bool(truth) and truth.strip() in result_text(answer)

    return check


STOPWORDS = '''"""English stop words, left out of the counts on request."""

STOP_WORDS = frozenset({"a", "an", "and", "in", "of", "the", "to"})
'''

TASKS: tuple[McpTask, ...] = (
    McpTask(
        name="git-hotfix-branch-from-tag",
        instruction=(
            "Start a hotfix for release 0.1.0: list the branches, create hotfix/0.1.1 from the "
            "tag v0.1.0, switch to it and check the status."
        ),
        category="branch",
        server="git",
        steps=(
            _call("git_branch", branch_type="local"),
            _call("git_create_branch", branch_name="hotfix/0.1.1", base_branch="v0.1.0"),
            _call("git_checkout", branch_name="hotfix/0.1.1"),
            _call("git_status"),
        ),
        check=all_of(on_branch("hotfix/0.1.1"), same_commit("hotfix/0.1.1", "v0.1.0")),
    ),
    McpTask(
        name="git-release-branch-from-feature",
        instruction=(
            "Cut a release/0.2 branch from feature/cli without leaving main, then confirm which "
            "branches contain the tip of feature/cli."
        ),
        category="branch",
        server="git",
        steps=(
            _call("git_log", max_count=3),
            _call("git_create_branch", branch_name="release/0.2", base_branch="feature/cli"),
            _call("git_branch", branch_type="local", contains="feature/cli"),
        ),
        check=all_of(
            on_branch("main"),
            same_commit("release/0.2", "feature/cli"),
            branches_answer_is(("--contains", "feature/cli")),
        ),
    ),
    McpTask(
        name="git-review-cli-feature",
        instruction=(
            "Review the CLI feature: check out feature/cli, read its last commits, and diff it "
            "against main."
        ),
        category="review",
        server="git",
        steps=(
            _call("git_checkout", branch_name="feature/cli"),
            _call("git_log", max_count=3),
            _call("git_show", revision="HEAD"),
            _call("git_diff", target="main"),
        ),
        check=all_of(on_branch("feature/cli"), diff_answer_is("main")),
    ),
    McpTask(
        name="git-who-wrote-the-tokenizer",
        instruction=(
            "Find out who added the regex tokenizer released as v0.1.0 and which file it "
            "touched: read the log, then show the tagged commit."
        ),
        category="question",
        server="git",
        steps=(
            _call("git_log", max_count=10),
            _call("git_show", revision="v0.1.0"),
        ),
        check=answer_contains(
            "git_show",
            lambda context: f"commit {rev(context, 'v0.1.0')}",
            lambda context: "Author: " + git(context, "log", "-1", "--format=%an <%ae>", "v0.1.0"),
            lambda context: (
                "+++ b/"
                + git(context, "diff-tree", "--no-commit-id", "--name-only", "-r", "v0.1.0")
            ),
        ),
    ),
    McpTask(
        name="git-branches-with-the-unicode-fix",
        instruction=(
            "Show the tokenizer fix at the tip of fix/unicode and list the local branches that "
            "already contain it."
        ),
        category="question",
        server="git",
        steps=(
            _call("git_show", revision="fix/unicode"),
            _call("git_branch", branch_type="local", contains="fix/unicode"),
        ),
        check=all_of(
            branches_answer_is(("--contains", "fix/unicode")),
            answer_contains("git_show", lambda context: f"commit {rev(context, 'fix/unicode')}"),
        ),
    ),
    McpTask(
        name="git-cli-commits-in-mid-january",
        instruction=(
            "On feature/cli, list the commits made from 15 to 17 January 2024 (UTC) to write "
            "the sprint summary."
        ),
        category="question",
        server="git",
        steps=(
            _call("git_checkout", branch_name="feature/cli"),
            _call(
                "git_log",
                max_count=10,
                start_timestamp="2024-01-15T00:00:00Z",
                end_timestamp="2024-01-17T23:59:59Z",
            ),
        ),
        check=all_of(
            on_branch("feature/cli"),
            log_answer_is("2024-01-15T00:00:00Z", "2024-01-17T23:59:59Z"),
        ),
    ),
    McpTask(
        name="git-maintenance-branch-from-detached-tag",
        instruction=(
            "Inspect the v0.1.0 release by checking out the tag, then create a maintenance/0.1 "
            "branch there and switch to it so later fixes are not made on a detached HEAD."
        ),
        category="branch",
        server="git",
        steps=(
            _call("git_checkout", branch_name="v0.1.0"),
            _call("git_status"),
            _call("git_create_branch", branch_name="maintenance/0.1", base_branch="v0.1.0"),
            _call("git_checkout", branch_name="maintenance/0.1"),
        ),
        check=all_of(on_branch("maintenance/0.1"), same_commit("maintenance/0.1", "v0.1.0")),
    ),
    McpTask(
        name="git-commit-stopwords-on-feature-branch",
        instruction=(
            "A new module wordfreq/stopwords.py is in the working copy. Create the branch "
            "feature/stopwords from main, switch to it, and commit the module there with the "
            "message 'Add an English stop-word list'."
        ),
        category="commit",
        server="git",
        setup=(as_user(f"cat > wordfreq/stopwords.py <<'EOF'\n{STOPWORDS}EOF"),),
        steps=(
            _call("git_status"),
            _call("git_create_branch", branch_name="feature/stopwords", base_branch="main"),
            _call("git_checkout", branch_name="feature/stopwords"),
            _call("git_add", files=["wordfreq/stopwords.py"]),
            _call("git_diff_staged"),
            _call("git_commit", message="Add an English stop-word list"),
            _call("git_log", max_count=2),
        ),
        check=all_of(
            on_branch("feature/stopwords"),
            new_commit(
                "feature/stopwords",
                "main",
                "Add an English stop-word list",
                {"wordfreq/stopwords.py": "STOP_WORDS = frozenset("},
            ),
            clean_tree,
        ),
    ),
    McpTask(
        name="git-commit-changelog-entry",
        instruction=(
            "CHANGELOG.md has an uncommitted 'Unreleased' entry on main. "
            "Review the change, stage it and commit it as 'Changelog: note the CLI', then show "
            "the new commit."
        ),
        category="commit",
        server="git",
        setup=(
            as_user(
                "printf '%s\\n' '# Changelog' '' '## Unreleased' '- A command-line interface.' "
                "'' '## 0.1.0' '- Word and line counts, a regex tokenizer.' > CHANGELOG.md"
            ),
        ),
        steps=(
            _call("git_status"),
            _call("git_diff_unstaged"),
            _call("git_add", files=["CHANGELOG.md"]),
            _call("git_commit", message="Changelog: note the CLI"),
            _call("git_show", revision="HEAD"),
        ),
        check=all_of(
            on_branch("main"),
            new_commit(
                "main",
                SEEDED_MAIN,
                "Changelog: note the CLI",
                {"CHANGELOG.md": "## Unreleased\n- A command-line interface."},
            ),
            clean_tree,
        ),
    ),
    McpTask(
        name="git-commit-only-the-readme-fix",
        instruction=(
            "The working copy has a README fix and a scratch file notes.txt. Commit only the "
            "README change ('README: say what counts as a word') and leave the scratch file "
            "untracked."
        ),
        category="commit",
        server="git",
        setup=(
            as_user(
                "printf '%s\\n' '' 'Words are runs of letters; case is ignored.' >> README.md"
                " && printf '%s\\n' 'try a bigger sample text' > notes.txt"
            ),
        ),
        steps=(
            _call("git_status"),
            _call("git_add", files=["README.md"]),
            _call("git_diff_staged"),
            _call("git_commit", message="README: say what counts as a word"),
            _call("git_status"),
        ),
        check=all_of(
            new_commit(
                "main",
                SEEDED_MAIN,
                "README: say what counts as a word",
                {"README.md": "Words are runs of letters; case is ignored."},
            ),
            status_is("?? notes.txt"),
        ),
    ),
    McpTask(
        name="git-unstage-a-log-file-before-committing",
        instruction=(
            "Everything was staged by mistake, including debug.log. Unstage all, stage only "
            "wordfreq/counts.py and commit it as 'counts: strip punctuation around words'."
        ),
        category="commit",
        server="git",
        setup=(
            as_user(
                "sed -i 's/word.lower() for word in text.split()/"
                'word.strip(".,;:!?").lower() for word in text.split()/\' wordfreq/counts.py'
                " && printf '%s\\n' 'DEBUG counted 12 words' > debug.log"
            ),
        ),
        steps=(
            _call("git_add", files=["."]),
            _call("git_status"),
            _call("git_reset"),
            _call("git_add", files=["wordfreq/counts.py"]),
            _call("git_diff_staged"),
            _call("git_commit", message="counts: strip punctuation around words"),
        ),
        check=all_of(
            new_commit(
                "main",
                SEEDED_MAIN,
                "counts: strip punctuation around words",
                {"wordfreq/counts.py": 'word.strip(".,;:!?").lower()'},
            ),
            status_is("?? debug.log"),
        ),
    ),
)
"""The git server's tasks."""
