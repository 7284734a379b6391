"""Terminal raw records → transitions: the visible screen as plain text, facts in meta."""

from __future__ import annotations

from typing import Any

from collectors.terminal.actions import render_keys
from collectors.terminal.screen import plain_screen
from normalizers.base import DomainNormalizer
from schemas import Action, Observation

FORMAT = "terminal-screen"


class TerminalNormalizer(DomainNormalizer):
    """Screens without escape sequences or trailing blanks; cwd, exit code, program in meta."""

    domain = "terminal"

    def observation(self, raw: dict[str, Any]) -> Observation:
        """Return the visible screen (prompt included) and the shell's state as meta."""
        meta = {
            "cwd": raw.get("cwd"),
            "exit_code": raw.get("exit_code"),
            "prompt": raw.get("prompt"),
            "completed": raw.get("completed", raw.get("prompt")),
            "foreground": raw.get("foreground"),
            "cursor": raw.get("cursor"),
            "timed_out": raw.get("timed_out", False),
            "exited": raw.get("exited", False),
            "new_scrollback": plain_screen(raw.get("scrollback") or ""),
        }
        return Observation(format=FORMAT, text=plain_screen(raw["screen"]), meta=meta)

    def action(self, raw: dict[str, Any]) -> Action:
        """Re-render the canonical text from the arguments, so old runs get today's rendering."""
        action = Action.parse(raw)
        if action.name == "keys":
            return action.model_copy(update={"text": render_keys(action.arguments["keys"])})
        return action  # type: ignore[return-value]
