"""SWE raw records → canonical observations: the tool's output as the agent sees it.

The text is the tool's output (stdout and stderr interleaved) cut to ``OUTPUT_LIMIT_CHARS``
(the head and the tail kept, ``[... N characters truncated ...]`` between them), followed by
one line per fact an agent is told: ``[error: ...]`` for a tool's error, ``[timed out after
Ns]``, ``[exit code: N]`` for a shell command or a test run. The working tree's state after
the step (``git status --porcelain``, ``git diff --stat``), the exit code and the wall time go
to ``meta``. Raw records keep the output whole (up to the driver's capture limit), so a
different limit can be rendered again from them.
"""

from __future__ import annotations

from typing import Any

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.swe.tools import canonical_text, validated_arguments
from worldtrace.collectors.volatile import PROGRAM_OUTPUT
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.raw import RawObservation

FORMAT = "tool-result"
OUTPUT_LIMIT_CHARS = 16_000
"""Most characters of a tool's output an observation shows (about 4,000 tokens): the first and
the last half of them, so a long test run keeps its header and its summary. A raw observation's
``output_limit_chars`` (the environment's ``output_limit_chars``) overrides it."""


def truncate(text: str, limit: int) -> str:
    """Return ``text`` cut to about ``limit`` characters: head, a marker, tail."""
    if len(text) <= limit:
        return text
    head = limit // 2
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters truncated ...]\n{text[len(text) - tail :]}"


def status_lines(raw: RawObservation) -> list[str]:
    """The lines after the output: the tool's error, a timeout, the exit code."""
    lines = []
    if raw.get("error"):
        lines.append(f"[error: {raw['error']}]")
    if raw.get("timed_out"):
        lines.append(f"[timed out after {float(raw.get('timeout_s') or 0):g}s]")
    if raw.get("exit_code") is not None:
        lines.append(f"[exit code: {raw['exit_code']}]")
    return lines


class SweRenderer(Renderer):
    """Tool results as text with a truncation marker; the repository's state in meta."""

    # Test runs print their duration; tracebacks and reprs print object addresses.
    volatile_patterns = PROGRAM_OUTPUT

    def observation(self, raw: RawObservation) -> Observation:
        """Return the tool's (truncated) output with its status lines, and the state as meta."""
        output = raw.get("output") or ""
        limit = int(raw.get("output_limit_chars") or OUTPUT_LIMIT_CHARS)
        text = truncate(output, limit)
        lines = status_lines(raw)
        if lines:
            if text and not text.endswith("\n"):
                text += "\n"
            text += "\n".join(lines) + "\n"
        meta: dict[str, Any] = {
            "tool": raw.get("tool"),
            "exit_code": raw.get("exit_code"),
            "timed_out": bool(raw.get("timed_out", False)),
            "error": raw.get("error"),
            "git_status": raw.get("git_status", ""),
            "git_diff_stat": raw.get("git_diff_stat", ""),
            "wall_s": raw.get("wall_s"),
            # The output's full length, so a reader knows how much the text left out.
            "output_chars": len(output),
            "output_dropped_bytes": raw.get("output_dropped_bytes", 0),
            # Lines on the driver's channel that were not the reply to this step's request.
            "skipped_replies": raw.get("skipped_replies", 0),
            # The sandbox died or stopped answering during the step (the episode ended there);
            # state_stale: no fresh look was possible, the state is the one from before.
            "sandbox_lost": raw.get("sandbox_lost", False),
            "state_stale": raw.get("state_stale", False),
        }
        return Observation(format=FORMAT, text=text, meta=meta)

    def action(self, action: Action) -> Action:
        """Re-render a valid call (defaults filled, canonical text); an invalid one stays as is."""
        try:
            arguments = validated_arguments(action).model_dump()
        except ValueError:
            return action
        text = canonical_text(action.name, arguments)
        return action.model_copy(update={"arguments": arguments, "text": text})


__all__ = ["FORMAT", "OUTPUT_LIMIT_CHARS", "SweRenderer", "status_lines", "truncate"]
