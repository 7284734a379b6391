"""Scripted tasks on ``mcp-server-time``: current times and conversions between zones.

The server has two tools: ``get_current_time(timezone)`` and ``convert_time(source_timezone,
time, target_timezone)``, which places ``HH:MM`` on today's date in the source zone. It has no
state, so a check recomputes every answer in the container with ``zoneinfo`` (the date of a
conversion taken from the answer, which must be today or yesterday there: a call may run just
before midnight) and compares it with what the server returned: the datetimes, the day of the
week, daylight saving and the hour difference. A current time must also be within ten minutes
of the container's clock. Wall-clock times that a clock change skips (02:xx) are avoided.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from worldtrace.collectors.mcp.tasks import (
    CheckContext,
    McpTask,
    calls,
    container_json,
    json_text,
    structured,
)
from worldtrace.collectors.tool_calls import tool_call
from worldtrace.schemas import Action

NOW_TOLERANCE_S = 600.0
"""How far a reported current time may be from the container's clock at check time."""

RECOMPUTE = """
import json, sys
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

request = json.loads(sys.argv[1])
out = {"now": datetime.now(timezone.utc).timestamp(), "conversions": [], "instants": []}
for item in request["conversions"]:
    year, month, day = map(int, item["date"].split("-"))
    hour, minute = map(int, item["time"].split(":"))
    source_zone = ZoneInfo(item["source"])
    source = datetime(year, month, day, hour, minute, tzinfo=source_zone)
    target = source.astimezone(ZoneInfo(item["target"]))
    out["conversions"].append({
        "today": datetime.now(source_zone).date().isoformat(),
        "source": {"datetime": source.isoformat(timespec="seconds"),
                   "day_of_week": source.strftime("%A"), "is_dst": bool(source.dst())},
        "target": {"datetime": target.isoformat(timespec="seconds"),
                   "day_of_week": target.strftime("%A"), "is_dst": bool(target.dst())},
        "hours": (target.utcoffset() - source.utcoffset()).total_seconds() / 3600,
    })
for item in request["instants"]:
    instant = datetime.fromisoformat(item["datetime"])
    local = instant.astimezone(ZoneInfo(item["zone"]))
    out["instants"].append({
        "datetime": local.isoformat(timespec="seconds"), "day_of_week": local.strftime("%A"),
        "is_dst": bool(local.dst()), "timestamp": instant.timestamp(),
    })
print(json.dumps(out))
"""
"""Recomputes conversions and the local reading of reported instants with ``zoneinfo``."""

Conversion = tuple[str, str, str]
"""``(source_timezone, "HH:MM", target_timezone)``."""


def _answer(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A call's answer as a mapping: its structured content, else its text read as JSON."""
    result = raw.get("result")
    if not isinstance(result, Mapping) or result.get("isError"):
        return None
    value = structured(raw)
    if not isinstance(value, Mapping):
        value = json_text(raw)
    return value if isinstance(value, Mapping) else None


def _conversion_answer(context: CheckContext, wanted: Conversion) -> Mapping[str, Any] | None:
    source, time, target = wanted
    for raw in reversed(calls(context, "convert_time")):
        arguments = raw.get("arguments") or {}
        if (
            arguments.get("source_timezone") == source
            and arguments.get("time") == time
            and arguments.get("target_timezone") == target
        ):
            return _answer(raw)
    return None


def _current_answer(context: CheckContext, zone: str) -> Mapping[str, Any] | None:
    for raw in reversed(calls(context, "get_current_time")):
        if (raw.get("arguments") or {}).get("timezone") == zone:
            return _answer(raw)
    return None


def _all_found(answers: list[Mapping[str, Any] | None]) -> list[Mapping[str, Any]] | None:
    """``answers`` if none is missing, else None."""
    found = [answer for answer in answers if answer is not None]
    return found if len(found) == len(answers) else None


def _same_reading(answer: Any, zone: str, expected: Mapping[str, Any]) -> bool:
    return (
        isinstance(answer, Mapping)
        and answer.get("timezone") == zone
        and answer.get("datetime") == expected["datetime"]
        and answer.get("day_of_week") == expected["day_of_week"]
        and answer.get("is_dst") == expected["is_dst"]
    )


def _hours(text: Any) -> float | None:
    """``"+5.75h"`` → 5.75 (None when it is not of that form)."""
    if not isinstance(text, str) or not text.endswith("h"):
        return None
    try:
        return float(text[:-1])
    except ValueError:
        return None


def times_check(
    conversions: Sequence[Conversion] = (),
    current: Sequence[str] = (),
    failed_first: int = 0,
) -> Callable[[CheckContext], bool]:
    """A check that every conversion and current time asked for was answered correctly.

    ``failed_first``: that many of the episode's first calls must have been refused by the
    server (``isError``), for tasks that recover from a wrong first attempt.
    """

    def check(context: CheckContext) -> bool:
        episode = calls(context)
        if len(episode) < failed_first:
            return False
        for raw in episode[:failed_first]:
            result = raw.get("result")
            if not isinstance(result, Mapping) or not result.get("isError"):
                return False
        conversion_answers = _all_found([_conversion_answer(context, c) for c in conversions])
        current_answers = _all_found([_current_answer(context, zone) for zone in current])
        if conversion_answers is None or current_answers is None:
            return False
        if not all(isinstance(answer.get("source"), Mapping) for answer in conversion_answers):
            return False
        request = {
            "conversions": [
                {
                    "date": str(answer["source"].get("datetime"))[:10],
                    "time": time,
                    "source": source,
                    "target": target,
                }
                for (source, time, target), answer in zip(
                    conversions, conversion_answers, strict=True
                )
            ],
            "instants": [
                {"zone": zone, "datetime": str(answer.get("datetime"))}
                for zone, answer in zip(current, current_answers, strict=True)
            ],
        }
        truth = container_json(context, RECOMPUTE, json.dumps(request))
        for (source, _, target), answer, expected in zip(
            conversions, conversion_answers, truth["conversions"], strict=True
        ):
            today = date.fromisoformat(expected["today"])
            answered_on = date.fromisoformat(expected["source"]["datetime"][:10])
            if answered_on not in (today, today - timedelta(days=1)):
                return False
            if not (
                _same_reading(answer["source"], source, expected["source"])
                and _same_reading(answer["target"], target, expected["target"])
                and _hours(answer.get("time_difference")) == expected["hours"]
            ):
                return False
        for zone, answer, expected in zip(current, current_answers, truth["instants"], strict=True):
            if not _same_reading(answer, zone, expected):
                return False
            if abs(expected["timestamp"] - truth["now"]) > NOW_TOLERANCE_S:
                return False
        return True

    return check


def _convert(source: str, time: str, target: str) -> Action:
    return tool_call(
        "convert_time", {"source_timezone": source, "time": time, "target_timezone": target}
    )


def _now(zone: str) -> Action:
    return tool_call("get_current_time", {"timezone": zone})


TASKS: tuple[McpTask, ...] = (
    McpTask(
        name="time-client-call-new-york-to-europe",
        instruction=(
            "A client call is at 09:30 New York time today. Tell the attendees in London and "
            "Berlin what time that is for them."
        ),
        category="convert",
        server="time",
        steps=(
            _convert("America/New_York", "09:30", "Europe/London"),
            _convert("America/New_York", "09:30", "Europe/Berlin"),
        ),
        check=times_check(
            conversions=[
                ("America/New_York", "09:30", "Europe/London"),
                ("America/New_York", "09:30", "Europe/Berlin"),
            ]
        ),
    ),
    McpTask(
        name="time-standup-for-distributed-team",
        instruction=(
            "The daily standup is at 16:00 in Berlin. Work out the local time of the standup "
            "for the teammates in São Paulo, Kolkata and Los Angeles."
        ),
        category="convert",
        server="time",
        steps=(
            _convert("Europe/Berlin", "16:00", "America/Sao_Paulo"),
            _convert("Europe/Berlin", "16:00", "Asia/Kolkata"),
            _convert("Europe/Berlin", "16:00", "America/Los_Angeles"),
        ),
        check=times_check(
            conversions=[
                ("Europe/Berlin", "16:00", "America/Sao_Paulo"),
                ("Europe/Berlin", "16:00", "Asia/Kolkata"),
                ("Europe/Berlin", "16:00", "America/Los_Angeles"),
            ]
        ),
    ),
    McpTask(
        name="time-sydney-now-and-daylight-saving",
        instruction=(
            "What time is it in Sydney right now, and is daylight saving time in effect there? "
            "Compare with the current UTC time."
        ),
        category="current",
        server="time",
        steps=(_now("Australia/Sydney"), _now("Etc/UTC")),
        check=times_check(current=["Australia/Sydney", "Etc/UTC"]),
    ),
    McpTask(
        name="time-kathmandu-offset-from-utc",
        instruction=(
            "Find the current time in Kathmandu, then convert 12:00 UTC to Kathmandu time to "
            "see how far ahead of UTC Nepal is."
        ),
        category="convert",
        server="time",
        steps=(_now("Asia/Kathmandu"), _convert("Etc/UTC", "12:00", "Asia/Kathmandu")),
        check=times_check(
            conversions=[("Etc/UTC", "12:00", "Asia/Kathmandu")], current=["Asia/Kathmandu"]
        ),
    ),
    McpTask(
        name="time-late-flight-auckland-to-honolulu",
        instruction=(
            "A flight leaves Auckland at 23:15 local time tonight. Check what day it is in "
            "Auckland now, then find the time and the day of the week in Honolulu at take-off."
        ),
        category="convert",
        server="time",
        steps=(_now("Pacific/Auckland"), _convert("Pacific/Auckland", "23:15", "Pacific/Honolulu")),
        check=times_check(
            conversions=[("Pacific/Auckland", "23:15", "Pacific/Honolulu")],
            current=["Pacific/Auckland"],
        ),
    ),
    McpTask(
        name="time-phoenix-versus-denver",
        instruction=(
            "Arizona does not observe daylight saving time. Check the current time in Phoenix "
            "and in Denver, and convert noon in Phoenix to Denver time."
        ),
        category="current",
        server="time",
        steps=(
            _now("America/Phoenix"),
            _now("America/Denver"),
            _convert("America/Phoenix", "12:00", "America/Denver"),
        ),
        check=times_check(
            conversions=[("America/Phoenix", "12:00", "America/Denver")],
            current=["America/Phoenix", "America/Denver"],
        ),
    ),
    McpTask(
        name="time-los-angeles-after-a-bad-zone-name",
        instruction=(
            "Find the current time in Los Angeles. 'Pacific Time' is not an IANA zone name; "
            "when the server refuses it, ask again with the right one."
        ),
        category="recover",
        server="time",
        steps=(_now("Pacific Time"), _now("America/Los_Angeles")),
        check=times_check(current=["America/Los_Angeles"], failed_first=1),
    ),
    McpTask(
        name="time-chicago-evening-to-madrid-after-bad-format",
        instruction=(
            "Convert 7:05 pm in Chicago to Madrid time. The server takes 24-hour HH:MM; if it "
            "refuses '7:05 pm', send 19:05."
        ),
        category="recover",
        server="time",
        steps=(
            _convert("America/Chicago", "7:05 pm", "Europe/Madrid"),
            _convert("America/Chicago", "19:05", "Europe/Madrid"),
        ),
        check=times_check(
            conversions=[("America/Chicago", "19:05", "Europe/Madrid")], failed_first=1
        ),
    ),
    McpTask(
        name="time-lord-howe-half-hour-zone",
        instruction=(
            "Lord Howe Island keeps a half-hour offset. Convert 18:00 there to UTC and to "
            "Adelaide time."
        ),
        category="convert",
        server="time",
        steps=(
            _convert("Australia/Lord_Howe", "18:00", "Etc/UTC"),
            _convert("Australia/Lord_Howe", "18:00", "Australia/Adelaide"),
        ),
        check=times_check(
            conversions=[
                ("Australia/Lord_Howe", "18:00", "Etc/UTC"),
                ("Australia/Lord_Howe", "18:00", "Australia/Adelaide"),
            ]
        ),
    ),
    McpTask(
        name="time-midnight-tokyo-round-trip",
        instruction=(
            "Convert midnight (00:00) in Tokyo to New York time, and 10:00 in New York to "
            "Tokyo time, to plan a call that suits both offices."
        ),
        category="convert",
        server="time",
        steps=(
            _convert("Asia/Tokyo", "00:00", "America/New_York"),
            _convert("America/New_York", "10:00", "Asia/Tokyo"),
        ),
        check=times_check(
            conversions=[
                ("Asia/Tokyo", "00:00", "America/New_York"),
                ("America/New_York", "10:00", "Asia/Tokyo"),
            ]
        ),
    ),
)
"""The time server's tasks."""
