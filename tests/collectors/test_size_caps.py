"""Every recorded value has a size cap, and the record says what was cut (issue 24).

Before the caps, a 10 MB value stored through search's ``dict_memory`` made 144 MB of raw
records per 10 steps: the value came back in every later observation.
"""

from __future__ import annotations

from worldtrace.collectors.size_caps import (
    IMAGE_CAP_CHARS,
    TEXT_CAP_CHARS,
    cap_step,
    cap_text,
    cap_value,
)
from worldtrace.schemas import Action
from worldtrace.schemas.raw import Cut


def test_a_long_text_keeps_its_head_and_tail_around_a_marker() -> None:
    text = "H" * TEXT_CAP_CHARS + "T" * 1000
    capped = cap_text(text)
    assert capped.startswith("H" * (TEXT_CAP_CHARS // 2))
    assert capped.endswith("H" * (TEXT_CAP_CHARS // 2 - 1000) + "T" * 1000)
    assert "[... 1000 characters truncated ...]" in capped
    assert len(capped) < TEXT_CAP_CHARS + 100
    assert cap_text("short") == "short"


def test_values_are_capped_by_kind_and_each_cut_is_listed() -> None:
    cuts: list[Cut] = []
    huge_png = "i" * (IMAGE_CAP_CHARS + 1)
    value = {
        "screen": "x" * (TEXT_CAP_CHARS + 5),
        "screenshot_png": huge_png,
        "small_png": "iVBOR",
        "results": [{"snippet": "ok"}, {"snippet": "y" * (TEXT_CAP_CHARS * 2)}],
        "exit": 0,
    }
    capped = cap_value(value, "observation", cuts)
    assert capped["screenshot_png"] is None  # a cut image would not decode: dropped
    assert capped["small_png"] == "iVBOR" and capped["exit"] == 0
    assert capped["results"][0] == {"snippet": "ok"}
    assert cuts == [
        Cut(where="observation.screen", chars=TEXT_CAP_CHARS + 5, kept=TEXT_CAP_CHARS),
        Cut(where="observation.screenshot_png", chars=IMAGE_CAP_CHARS + 1, kept=0),
        Cut(where="observation.results[1].snippet", chars=TEXT_CAP_CHARS * 2, kept=TEXT_CAP_CHARS),
    ]


def test_a_steps_action_and_error_are_capped_too() -> None:
    big = "v" * (TEXT_CAP_CHARS * 3)
    action = Action(name="echo", arguments={"message": big}, text=big)
    capped, observation, error, cuts = cap_step(action, {"text": "fine"}, big)
    assert len(capped.text) < TEXT_CAP_CHARS + 100
    assert len(capped.arguments["message"]) < TEXT_CAP_CHARS + 100
    assert error is not None and len(error) < TEXT_CAP_CHARS + 100
    assert observation == {"text": "fine"}
    assert [cut.where for cut in cuts] == ["action.text", "action.arguments.message", "error"]
    untouched = Action(name="echo", arguments={"message": "hi"}, text="hi")
    assert cap_step(untouched, {}, None) == (untouched, {}, None, ())
