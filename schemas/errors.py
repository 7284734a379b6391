"""The errors a user can act on: one base, two meanings, handled once by the command line.

Every error that reaches a user subclasses :class:`WorldtraceError`, and its message names the
problem and the fix. The ``worldtrace`` command prints the message (no traceback) and exits
with :attr:`WorldtraceError.exit_code`: 2 for bad input (:class:`InputError`: a config, a
folder, a name), 1 when the machine cannot run what was asked (:class:`SetupError`: no
engine, no image, no browser, no root). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import ValidationError


class WorldtraceError(Exception):
    """Base of every user-facing error; the message names the problem and the fix."""

    exit_code: ClassVar[int] = 2


class InputError(WorldtraceError):
    """Bad input: a config, path, name or file the user gave cannot be used (exit 2)."""

    exit_code = 2


class SetupError(WorldtraceError):
    """The machine cannot run what was asked: an engine, image, browser or privilege is missing.

    Exit status 1; the fix is usually ``make setup`` or a command the message names.
    """

    exit_code = 1


class ConfigError(InputError, ValueError):
    """An invalid config (a file, flags or fields); the message names each bad field."""


def validation_problems(error: ValidationError, whole: str) -> list[str]:
    """One ``field: message`` line per problem pydantic found; ``whole`` names the top level.

    A dotted field path is what a user can find in a YAML file or record, and pydantic's
    "Value error, " prefix says nothing to them.
    """
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or whole
        problems.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
    return problems
