"""The reminder tools a model with tools calls (#37): ``schedule_once``, ``schedule_every``,
``list_schedules``, ``cancel_schedule``.

Their arguments come from the model, and through it from whatever it read, so they are
checked as hostile input, by the same rules as ``remind``/``reminders`` in chat: a reminder is
the person's whose turn it is, is set in and delivered to that room only, counts against
their cap (``MAX_ACTIVE_PER_PERSON``) unless the turn is the operator's, is listed only where
the audience rule lets the room's readers now see it (``Reminder.told_in``), and is cancelled
only by the person who set it (or the operator). Every argument is checked before anything is
written: one signed entry or none. A refusal is a one-line reply to the model, never raised.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from chazbot.errors import ChazError, InputError, NotFound, PermissionDenied
from chazbot.memory.audience import Audience, Provenance
from chazbot.memory.tools import Tool, check_args
from chazbot.reminders.setting import confirmation, when_text
from chazbot.reminders.store import MAX_ACTIVE_PER_PERSON, Reminder, Reminders
from chazbot.reminders.when import (
    FREQUENCIES,
    MAX_INTERVAL,
    MAX_TEXT,
    TRIGGERS,
    WEEKDAY_NAMES,
    Understood,
    describe_rule,
    localise,
    off_loop,
    recurring,
    understand,
    zone,
)

MAX_WHEN_CHARS = 100
MAX_AHEAD = timedelta(days=5 * 366)
"""How far ahead a reminder may be set by a tool (a typo'd year is caught, not kept)."""
LISTED = 20
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_ID = re.compile(r"^r[0-9a-f]{8}$")
_SENTINEL = "zzchazbotwhat"


@dataclass(frozen=True)
class Asking:
    """Whose turn it is and where: the reminders of the turn's agent, the room (session),
    the person, whether they act as the operator, their default zone, who hears the room now
    (None: the operator's full view) and the clock."""

    store: Reminders
    room: str
    person: str
    admin: bool
    default_zone: str
    audience: Audience | None
    origin: Provenance | None = None
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)


ReminderTool = Tool[Asking]
_args = check_args


def _text(args: dict[str, Any], name: str, most: int) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string")
    if len(value) > most:
        raise InputError(f"{name} is at most {most} characters")
    value = " ".join(_CONTROL.sub(" ", value).split())
    if not value:
        raise InputError(f"{name} is empty")
    return value


def _integer(args: dict[str, Any], name: str, low: int, high: int, default: int) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{name} must be a whole number from {low} to {high}")
    return value


async def _zone(asking: Asking) -> str:
    return await asking.store.zone_of(asking.person, asking.default_zone)


def _in_bounds(first: datetime, now: datetime) -> None:
    if first <= now:
        raise InputError(f"{first:%Y-%m-%d %H:%M %Z} is in the past; give a later time")
    if first - now > MAX_AHEAD:
        raise InputError("that is more than 5 years ahead; give a nearer time")


def _once(when: str, what: str, now: datetime, tz_name: str) -> Understood:
    """``when`` as an ISO 8601 time (without an offset: in the person's zone) or in words
    ("tomorrow at 9", "in 20 minutes"); never a recurrence."""
    tz = zone(tz_name)
    try:
        moment = datetime.fromisoformat(when)
    except ValueError:
        moment = None
    if moment is not None:
        if moment.tzinfo is None:
            first, note = localise(moment.replace(second=0, microsecond=0), tz)
        else:
            first, note = moment.astimezone(tz), ""
        return Understood(first, None, what, "en", note)
    understood: Understood | None = None
    leftover = False
    for lang in TRIGGERS:  # English first, then the other languages of the words
        try:
            found = understand(f"{when} {_SENTINEL}", now, tz, lang)
        except InputError as exc:
            if "in the past" in str(exc) or "does not exist" in str(exc):
                raise
            continue
        if found.what == _SENTINEL:
            understood = found
            break
        leftover = True  # words not read as the time: another language may read them
    if understood is None:
        if leftover:
            raise InputError("when must hold only the time; put what to say in what")
        raise InputError(
            "when is not a time I can read: give ISO 8601 (2027-01-05T09:00) or words "
            "such as 'tomorrow at 9' or 'in 20 minutes'"
        )
    if understood.rule is not None:
        raise InputError("when is a recurrence; use schedule_every for repeating reminders")
    return Understood(understood.first, None, what, "en", understood.note)


async def _add(asking: Asking, understood: Understood) -> str:
    limit = None if asking.admin else MAX_ACTIVE_PER_PERSON
    made = await asking.store.add(understood, asking.room, asking.person, limit, asking.origin)
    return f"Set {made.id}. " + confirmation(made, understood)


async def _schedule_once(asking: Asking, args: dict[str, Any]) -> str:
    a = _args(args, {"when", "what"}, {"when", "what"})
    when = _text(a, "when", MAX_WHEN_CHARS)
    what = _text(a, "what", MAX_TEXT)
    now = asking.clock()
    understood = await off_loop(_once, when, what, now, await _zone(asking))
    _in_bounds(understood.first, now)
    return await _add(asking, understood)


async def _schedule_every(asking: Asking, args: dict[str, Any]) -> str:
    a = _args(
        args,
        {"frequency", "time", "what", "weekday", "week", "interval"},
        {"frequency", "time", "what"},
    )
    frequency = a.get("frequency")
    if not isinstance(frequency, str) or frequency not in FREQUENCIES:
        raise InputError(f"frequency is one of {', '.join(FREQUENCIES)}")
    clock = _HHMM.match(a["time"]) if isinstance(a.get("time"), str) else None
    if clock is None:
        raise InputError("time must be HH:MM on a 24-hour clock, e.g. 08:00")
    what = _text(a, "what", MAX_TEXT)
    weekday: int | None = None
    if frequency != "daily" or "weekday" in a:
        name = a.get("weekday")
        if not isinstance(name, str) or name.lower() not in WEEKDAY_NAMES:
            raise InputError(f"weekday is one of {', '.join(WEEKDAY_NAMES)}")
        weekday = WEEKDAY_NAMES.index(name.lower())
    week: int | None = None
    if frequency == "monthly":
        week = a.get("week")
        if isinstance(week, bool) or week not in (1, 2, 3, 4, -1):
            raise InputError("week is 1, 2, 3, 4 or -1 (the last) for a monthly reminder")
    elif "week" in a:
        raise InputError("week is only for a monthly reminder")
    interval = _integer(a, "interval", 1, MAX_INTERVAL, 1)
    now = asking.clock()
    tz = zone(await _zone(asking))
    understood = recurring(
        frequency,
        int(clock.group(1)),
        int(clock.group(2)),
        now,
        tz,
        what,
        weekday,
        week,
        interval,
    )
    _in_bounds(understood.first, now)
    return await _add(asking, understood)


def _line(n: int, r: Reminder) -> str:
    due = r.next_due() or r.first
    repeat = describe_rule(r.rule)
    again = "" if repeat == "none" else f", {repeat.replace(':', ' ')}"
    return f"{n}. [{r.id}] {when_text(due, r.tz)} ({r.tz}){again}: {r.what} (set by {r.by})"


async def _visible(asking: Asking) -> list[Reminder]:
    return await asking.store.in_room(asking.room, asking.audience)


async def _list(asking: Asking, args: dict[str, Any]) -> str:
    _args(args, set(), set())
    listed = await _visible(asking)
    if not listed:
        return "No reminders in this room."
    more = f"\n(and {len(listed) - LISTED} more)" if len(listed) > LISTED else ""
    return (
        "Reminders in this room:\n"
        + "\n".join(_line(n, r) for n, r in enumerate(listed[:LISTED], 1))
        + more
    )


async def _cancel(asking: Asking, args: dict[str, Any]) -> str:
    a = _args(args, {"id", "number"}, set())
    if ("id" in a) == ("number" in a):
        raise InputError("give exactly one of id (from list_schedules) or number")
    listed = await _visible(asking)
    if "id" in a:
        rid = a["id"]
        if not isinstance(rid, str) or not _ID.match(rid):
            raise InputError("id looks like r0123abcd (from list_schedules)")
        found = next((r for r in listed if r.id == rid), None)
        if found is None:
            raise NotFound(f"no reminder {rid} in this room (see list_schedules)")
    else:
        n = _integer(a, "number", 1, max(1, len(listed)), 0)
        if not listed:
            raise NotFound("no reminders in this room")
        found = listed[n - 1]
    if found.by != asking.person and not asking.admin:
        raise PermissionDenied(f"only {found.by} (who set it) may cancel {found.id}")
    await asking.store.cancel(found)
    return f"Cancelled {found.id}: {found.what}"


_WHAT = {"type": "string", "maxLength": MAX_TEXT, "description": "what to remind of"}
TOOLS: dict[str, ReminderTool] = {
    t.name: t
    for t in [
        ReminderTool(
            "schedule_once",
            "Set a reminder delivered once, in this room only, for the person speaking. when: "
            "the person's own words for the time ('tomorrow at 9', 'in 20 minutes', 'on 24 "
            "December at 18:00'), or ISO 8601 local time (2027-01-05T09:00, their time zone) "
            "for a date they gave. The reply says the time understood: tell them.",
            {
                "type": "object",
                "properties": {
                    "when": {"type": "string", "maxLength": MAX_WHEN_CHARS},
                    "what": _WHAT,
                },
                "required": ["when", "what"],
                "additionalProperties": False,
            },
            _schedule_once,
        ),
        ReminderTool(
            "schedule_every",
            "Set a repeating reminder in this room for the person speaking: daily, weekly on "
            "a weekday, or monthly on the week-th weekday (week -1: the last), at time HH:MM "
            "in their time zone; interval: every n-th (default 1).",
            {
                "type": "object",
                "properties": {
                    "frequency": {"type": "string", "enum": list(FREQUENCIES)},
                    "time": {"type": "string", "pattern": "^[0-2]?[0-9]:[0-5][0-9]$"},
                    "weekday": {"type": "string", "enum": list(WEEKDAY_NAMES)},
                    "week": {"type": "integer", "enum": [1, 2, 3, 4, -1]},
                    "interval": {"type": "integer", "minimum": 1, "maximum": MAX_INTERVAL},
                    "what": _WHAT,
                },
                "required": ["frequency", "time", "what"],
                "additionalProperties": False,
            },
            _schedule_every,
        ),
        ReminderTool(
            "list_schedules",
            "List the active reminders of this room, numbered, with their ids.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            _list,
        ),
        ReminderTool(
            "cancel_schedule",
            "Cancel one reminder of this room that the person speaking set: its id or its "
            "number from list_schedules.",
            {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "maxLength": 9},
                    "number": {"type": "integer", "minimum": 1},
                },
                "additionalProperties": False,
            },
            _cancel,
        ),
    ]
}
NAMES = tuple(TOOLS)


async def run_reminder_tool(
    asking: Asking, allowed: list[str], name: str, arguments: str | dict[str, Any]
) -> tuple[bool, str]:
    """Run a reminder tool call from the model: (ok, reply). Never raises for bad input."""
    tool = TOOLS.get(name)
    if tool is None or name not in allowed:
        return False, f"Error: tool {name[:40]!r} is not allowed for this agent."
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
        return True, await tool.run(asking, {} if args is None else args)
    except (json.JSONDecodeError, RecursionError):  # nested past the parser's depth too
        return False, "Error: the arguments are not valid JSON; send a JSON object."
    except ChazError as exc:
        return False, f"Error: {str(exc).splitlines()[0] if str(exc) else 'refused'}"
    except (ValueError, OverflowError, TypeError) as exc:  # a library's refusal of odd input
        return False, f"Error: {type(exc).__name__}: that input cannot be read as a time"


__all__ = ["NAMES", "TOOLS", "Asking", "ReminderTool", "run_reminder_tool"]
