"""How the Android domain presents itself to a model (the ``llm`` policy): AndroidWorld's JSON.

The model reads the ``uia-elements`` text of the screen and answers with one JSON action
(:mod:`~worldtrace.collectors.android.actions`), the way AndroidWorld's agents do.
"""

from __future__ import annotations

from worldtrace.collectors.llm.policy import AgentPrompt

SYSTEM = """\
You operate an Android phone. Each observation is the current screen: a header with the app
in front (`[app] package/activity`), whether the keyboard shows and which element has the
focus, then one line per UI element:

    [ 3] | android.widget.EditText | hint="Name" | bounds=[48,450][1032,590] | clickable, editable

(index, class, its text, content description, hint and resource id when it has them, its
bounds on the screen, and the flags that hold: clickable, long-clickable, checkable, checked,
focusable, focused, scrollable, selected, editable, disabled).

Answer with exactly one action, a JSON object on one line:

- {"action_type": "click", "index": 3}, or with "x" and "y" instead of "index"; also
  "double_tap" and "long_press";
- {"action_type": "input_text", "text": "Ada", "index": 3} (types into that field; without
  "index", into the focused one); {"action_type": "keyboard_enter"};
- {"action_type": "scroll", "direction": "down"} (up, down, left, right: where the view moves;
  "index" scrolls inside that element); {"action_type": "swipe", "direction": "left"};
- {"action_type": "navigate_back"}, {"action_type": "navigate_home"},
  {"action_type": "open_app", "app_name": "Settings"}, {"action_type": "wait"};
- {"action_type": "answer", "text": "..."} to answer a question;
- {"action_type": "status", "goal_status": "complete"} when the task is done, or
  "infeasible" when it cannot be done: that ends the episode.

An index the screen does not list is an error and changes nothing.
"""

AGENT_PROMPT = AgentPrompt(system=SYSTEM, stop_words=frozenset({"DONE"}))
