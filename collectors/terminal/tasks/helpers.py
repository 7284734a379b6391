"""What every category module builds its tasks from.

The task type, the user's folders, setup commands that write files and make git history with
fixed dates, and checks that compare a file's content.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
from dataclasses import dataclass

from worldtrace.collectors.base import ScriptedTask

HOME = "/home/user"
"""The shell user's home, where setup and checks run and the shell starts."""
WORK = f"{HOME}/work"
"""The folder the tasks work in (``~/work``)."""

# A delimiter no task file contains, quoted so the shell expands nothing inside.
_EOF = "__WT_EOF__"
_GIT_EPOCH = 1709280000  # 2024-03-01T08:00:00Z: fixed dates give stable commit hashes.


@dataclass(frozen=True)
class TerminalTask(ScriptedTask):
    """A shell task: setup commands, scripted actions and a success check."""

    setup: tuple[str, ...] = ()
    check: str | None = None


def write_file(path: str, text: str, mode: str | None = None) -> str:
    """Return a setup command that writes ``text`` to ``path`` (parents created, no expansion)."""
    if not text.endswith("\n"):
        text += "\n"
    if f"\n{_EOF}\n" in f"\n{text}":
        raise ValueError(f"content of {path} contains the here-document delimiter")
    quoted = shlex.quote(path)
    chmod = f" && chmod {mode} {quoted}" if mode else ""
    return (
        f"mkdir -p {shlex.quote(posixpath.dirname(path))} && "
        f"cat > {quoted} <<'{_EOF}'{chmod}\n{text}{_EOF}"
    )


def git_commit(repo: str, message: str, minute: int) -> str:
    """Return a setup command committing everything in ``repo`` at a fixed time."""
    stamp = f"@{_GIT_EPOCH + 60 * minute} +0000"
    return (
        f"cd {shlex.quote(repo)} && git add -A && "
        f"GIT_AUTHOR_DATE='{stamp}' GIT_COMMITTER_DATE='{stamp}' "
        f"git commit -q -m {shlex.quote(message)}"
    )


def git_init(repo: str) -> str:
    """Return a setup command creating an empty repository on branch main."""
    return f"mkdir -p {shlex.quote(repo)} && git -C {shlex.quote(repo)} init -q"


def same_content(path: str, text: str) -> str:
    """Return a check that ``path`` holds exactly ``text`` (compared by SHA-256)."""
    if not text.endswith("\n"):
        text += "\n"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return f"echo '{digest}  {path}' | sha256sum -c --quiet - >/dev/null 2>&1"


def all_of(*checks: str) -> str:
    """Join shell checks so that all must pass."""
    return " && ".join(f"{{ {check}; }}" for check in checks)


def join_lines(*rows: str) -> str:
    """Return ``rows`` as file content: each row a line, ending with a newline."""
    return "\n".join(rows) + "\n"
