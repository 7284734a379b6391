"""Terminal raw records → canonical observations: the visible screen as text, facts in meta."""

from __future__ import annotations

from worldtrace.collectors.base import Renderer
from worldtrace.collectors.terminal.actions import render_keys
from worldtrace.collectors.terminal.screen import plain_screen
from worldtrace.collectors.volatile import PROGRAM_OUTPUT
from worldtrace.schemas import Action, Observation
from worldtrace.schemas.raw import RawObservation

FORMAT = "terminal-screen"


class TerminalRenderer(Renderer):
    """Screens without escape sequences or trailing blanks; cwd, exit code, program in meta.

    Raw records from before a field existed get its neutral value: no skipped replies, a
    sandbox that answered, and the pane size unknown (``None``).
    """

    # What programs print of their own timing: test runners' durations, `time`, addresses.
    volatile_patterns = PROGRAM_OUTPUT

    def observation(self, raw: RawObservation) -> Observation:
        """Return the visible screen (prompt included) and the shell's state as meta."""
        meta = {
            "cwd": raw.get("cwd"),
            "exit_code": raw.get("exit_code"),
            "prompt": raw.get("prompt"),
            "completed": raw.get("completed", raw.get("prompt")),
            "foreground": raw.get("foreground"),
            "cursor": raw.get("cursor"),
            # The pane size in cells (the scrubber unwraps screen lines at `columns`).
            "columns": raw.get("columns"),
            "rows": raw.get("rows"),
            "timed_out": raw.get("timed_out", False),
            "exited": raw.get("exited", False),
            "new_scrollback": plain_screen(raw.get("scrollback") or ""),
            # Lines on the driver's channel that were not the reply to this step's request.
            "skipped_replies": raw.get("skipped_replies", 0),
            # The sandbox died or stopped answering during the step (the episode ended there);
            # screen_stale: no fresh look was possible, the screen is the one from before.
            "sandbox_lost": raw.get("sandbox_lost", False),
            "screen_stale": raw.get("screen_stale", False),
        }
        return Observation(format=FORMAT, text=plain_screen(raw["screen"]), meta=meta)

    def action(self, action: Action) -> Action:
        """Re-render the canonical text from the arguments, so old runs get today's rendering."""
        if action.name == "keys":
            return action.model_copy(update={"text": render_keys(action.arguments["keys"])})
        return action
