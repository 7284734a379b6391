"""The Android script policy: a task's steps, each target resolved on the screen it is played on."""

from __future__ import annotations

from collections.abc import Sequence

from worldtrace.collectors.android.elements import HierarchyError, parse_hierarchy
from worldtrace.collectors.android.tasks import resolve
from worldtrace.collectors.base import HistoryItem, PolicyGaveUp, ScriptPolicy
from worldtrace.schemas import Action
from worldtrace.schemas.raw import RawObservation


class AndroidScriptPolicy(ScriptPolicy):
    """Plays a task's steps; a step's ``target`` becomes the index of the element it names."""

    name = "android-script"

    def act(self, observation: RawObservation, history: Sequence[HistoryItem]) -> Action | None:
        """The next step, on the elements of ``observation``.

        PolicyGaveUp if its target is not on the screen.
        """
        step = super().act(observation, history)
        if step is None:
            return None
        try:
            elements = parse_hierarchy(str(observation.get("hierarchy") or ""))
            return resolve(step, elements)
        except (HierarchyError, LookupError) as error:
            raise PolicyGaveUp(
                f"the script's step {step.name} cannot be played here: {error}"
            ) from None
