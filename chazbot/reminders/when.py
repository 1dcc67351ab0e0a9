"""When a reminder is for, read from what people say (#37), in English, German, French, Spanish
and Dutch: "remind me tomorrow at 9 to call Ines", "erinnere mich jeden Montag um 8 an die
Miete", "every first Monday of the month at 8:00 remind me to pay rent".

The work is split by what each part is good at, and no calendar arithmetic is written here:

- the time of day ("at 9", "um 18:30 Uhr", "à 9h", "a las 22", "om 9 uur", "7pm") and the
  recurrence ("every Monday", "tous les jours", "el primer lunes de cada mes") are phrases
  this module reads, with its own small tables;
- the day ("tomorrow", "übermorgen", "mardi", "next Monday", "24 December", "in 20 minutes")
  is ``dateparser``'s (200+ languages, relative to an injected now);
- the occurrences of a recurrence are ``dateutil.rrule``'s, and the time zone arithmetic
  (DST) ``zoneinfo``'s.

A time that does not exist (the hour the clocks skip) is refused with a one-line reason; an
ambiguous one (the hour that happens twice) takes the first and says so. Pure: the caller
passes now and the zone.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil import rrule

from chazbot.errors import InputError
from chazbot.reminders.wording import as_task

T = TypeVar("T")
_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reminder-time")
"""One thread reads times: dateparser is pure Python and takes up to a second or two on a
long hostile text, which must not hold the event loop (every room's turns wait on it)."""


async def off_loop(read: Callable[..., T], *args: object) -> T:
    """``read(*args)`` on the time-reading thread, one at a time (dateparser's caches are
    shared), while the event loop goes on."""
    return await asyncio.get_running_loop().run_in_executor(_READER, read, *args)


MAX_TEXT = 500
"""Characters of a reminder's text (what to remind of)."""

_WEEKDAYS: dict[str, int] = {}
for _names, _index in (
    ("monday mon montag montags lundi lundis lunes maandag maandags", 0),
    ("tuesday tue tues dienstag dienstags mardi mardis martes dinsdag dinsdags", 1),
    ("wednesday wed mittwoch mittwochs mercredi mercredis miércoles miercoles woensdag", 2),
    ("thursday thu thurs donnerstag donnerstags jeudi jeudis jueves donderdag donderdags", 3),
    ("friday fri freitag freitags vendredi vendredis viernes vrijdag vrijdags", 4),
    ("saturday sat samstag samstags samedi samedis sábado sabado sábados zaterdag", 5),
    ("sunday sun sonntag sonntags dimanche dimanches domingo domingos zondag zondags", 6),
):
    for _name in _names.split():
        _WEEKDAYS[_name] = _index
_DAY = "|".join(sorted(_WEEKDAYS, key=len, reverse=True))
_ORDINALS = {
    **dict.fromkeys(
        ["first", "1st", "ersten", "erste", "premier", "première", "primer", "primero", "eerste"], 1
    ),
    **dict.fromkeys(
        ["second", "2nd", "zweiten", "zweite", "deuxième", "second", "segundo", "tweede"], 2
    ),
    **dict.fromkeys(
        ["third", "3rd", "dritten", "dritte", "troisième", "tercer", "tercero", "derde"], 3
    ),
    **dict.fromkeys(["fourth", "4th", "vierten", "vierte", "quatrième", "cuarto", "vierde"], 4),
    **dict.fromkeys(
        ["last", "letzten", "letzte", "dernier", "dernière", "último", "ultimo", "laatste"], -1
    ),
}
_ORD = "|".join(sorted(_ORDINALS, key=len, reverse=True))

TRIGGERS: dict[str, tuple[str, ...]] = {
    "en": ("remind me", "remind us", "remind everyone", "remind all of us", "remind the family"),
    "de": ("erinnere mich", "erinnere uns", "erinnere alle", "erinner mich", "erinner uns"),
    "fr": ("rappelle-moi", "rappelle-nous", "rappelle moi", "rappelle nous", "rappelle à tous"),
    "es": ("recuérdame", "recuérdanos", "recuerdame", "recuerdanos", "recuérdales"),
    "nl": ("herinner me", "herinner mij", "herinner ons", "herinner iedereen"),
}
"""How a request for a reminder starts (anywhere in the sentence), per language."""
_TRIGGER = re.compile(
    r"(?<!\w)(?:"
    + "|".join(re.escape(t) for ts in TRIGGERS.values() for t in sorted(ts, key=len, reverse=True))
    + r")(?!\w)",
    re.IGNORECASE,
)
_LANG_OF_TRIGGER = {t: lang for lang, ts in TRIGGERS.items() for t in ts}

_DAILY = re.compile(
    r"(?<!\w)(?:every\s+day|each\s+day|daily|jeden\s+tag|täglich|tous\s+les\s+jours|"
    r"chaque\s+jour|todos\s+los\s+d[ií]as|cada\s+d[ií]a|a\s+diario|elke\s+dag|iedere\s+dag|"
    r"dagelijks)(?!\w)",
    re.IGNORECASE,
)
_MONTHLY = re.compile(
    rf"(?<!\w)(?:every|each|jeden|chaque|tous\s+les|elke|iedere|el|cada)?\s*"
    rf"(?P<ord>{_ORD})s?\s+(?P<day>{_DAY})s?\s+"
    r"(?:of\s+(?:the|each|every)\s+month|im\s+monat|des\s+monats|du\s+mois|de\s+cada\s+mes|"
    r"del\s+mes|van\s+de\s+maand|van\s+elke\s+maand)(?!\w)",
    re.IGNORECASE,
)
_WEEKLY = re.compile(
    rf"(?<!\w)(?:every|each|jeden|chaque|tous\s+les|todos\s+los|cada|elke|iedere)\s+"
    rf"(?P<day>{_DAY})(?!\w)",
    re.IGNORECASE,
)
_TIME = re.compile(
    r"(?<![\w:])(?:(?:at|um|à|a\s+las|a\s+la|om|@)\s+)?"
    r"(?P<h>[01]?\d|2[0-3])(?:(?::|h|\.)(?P<m>[0-5]\d))?\s*"
    r"(?P<suffix>am|pm|a\.m\.|p\.m\.|uhr|uur|h)?(?![\w:])",
    re.IGNORECASE,
)
_EVENING = re.compile(
    r"(?<!\w)(?:tonight|this\s+evening|heute\s+abend|ce\s+soir|esta\s+noche|vanavond)(?!\w)",
    re.IGNORECASE,
)
_DURATION = re.compile(
    r"(?<!\w)(?:in|dans|en|over|binnen)\s+(?P<n>\d{1,4})\s*(?P<unit>[a-zäöüéèíó]+)",
    re.IGNORECASE,
)
_UNITS = {
    **dict.fromkeys(
        ["second", "seconds", "sec", "secs", "sekunden", "secondes", "segundos", "seconden"],
        "seconds",
    ),
    **dict.fromkeys(
        ["minute", "minutes", "min", "mins", "minuten", "minuto", "minutos"], "minutes"
    ),
    **dict.fromkeys(
        ["hour", "hours", "stunde", "stunden", "heure", "heures", "hora", "horas", "uur"], "hours"
    ),
    **dict.fromkeys(
        [
            "day",
            "days",
            "tag",
            "tage",
            "tagen",
            "jour",
            "jours",
            "día",
            "días",
            "dias",
            "dag",
            "dagen",
        ],
        "days",
    ),
    **dict.fromkeys(
        ["week", "weeks", "woche", "wochen", "semaine", "semaines", "semana", "semanas", "weken"],
        "weeks",
    ),
}
_CONNECTORS = re.compile(
    r"^(?:\s|,|:|-)*(?:to|about|that|of|zu|an|dass|de|d'|du|des|que|a|aan|om|te|dat|me|us)\b"
    r"\s*",
    re.IGNORECASE,
)
_JUNK_DATES = frozenset({"me", "us", "a", "an", "to", "de", "el", "la", "on", "am", "aan"})
DEFAULT_HOUR = 9
"""A day with no time ("remind me on Sunday to …") is for 09:00."""


@dataclass(frozen=True)
class Understood:
    """A reminder as understood: when it first fires (in the person's zone), its recurrence
    (an RRULE, None for once), what to say, and the language it was asked in."""

    first: datetime
    rule: str | None
    what: str
    lang: str
    note: str = ""
    """Said in the confirmation: how an ambiguous time was read."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``; InputError naming the problem."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a path
        raise InputError(
            f"unknown time zone {name[:60]!r}: use an IANA name such as Europe/Berlin"
        ) from None


def asks_for_reminder(text: str) -> str | None:
    """The language of a request for a reminder in ``text`` ("remind me …"), or None."""
    found = _TRIGGER.search(text)
    return None if found is None else _LANG_OF_TRIGGER.get(found.group(0).lower(), "en")


def understand(text: str, now: datetime, tz: ZoneInfo, lang: str | None = None) -> Understood:
    """Read ``text`` (with or without "remind me") said at ``now`` by someone in ``tz``;
    InputError (one line) when no time can be read or the time does not exist."""
    if len(text) > MAX_TEXT * 2:
        raise InputError(f"a reminder is at most {MAX_TEXT} characters")
    here = now.astimezone(tz)
    lang = lang or asks_for_reminder(text) or "en"
    rest = _TRIGGER.sub(" ", text)
    rule: rrule.rrule | None = None
    base = here.replace(tzinfo=None, second=0, microsecond=0)

    hour = minute = None
    clock = _find_time(rest)
    if clock is not None:
        hour, minute, span = clock
        rest = rest[: span[0]] + " " + rest[span[1] :]
        if hour < 12 and _EVENING.search(text) and not re.search(r"am\b", text, re.I):
            hour += 12
    rest = _EVENING.sub(" ", rest)

    if m := _MONTHLY.search(rest):
        day = rrule.weekdays[_WEEKDAYS[m.group("day").lower()]](_ORDINALS[m.group("ord").lower()])
        rule = rrule.rrule(rrule.MONTHLY, byweekday=day, dtstart=base)
        rest = rest[: m.start()] + " " + rest[m.end() :]
    elif m := _DAILY.search(rest):
        rule = rrule.rrule(rrule.DAILY, dtstart=base)
        rest = rest[: m.start()] + " " + rest[m.end() :]
    elif m := _WEEKLY.search(rest):
        day = rrule.weekdays[_WEEKDAYS[m.group("day").lower()]]
        rule = rrule.rrule(rrule.WEEKLY, byweekday=day, dtstart=base)
        rest = rest[: m.start()] + " " + rest[m.end() :]

    if rule is not None:
        h, mi = (hour, minute) if hour is not None else (DEFAULT_HOUR, 0)
        rule = rule.replace(byhour=h, byminute=mi or 0, bysecond=0)  # type: ignore[no-untyped-call]
        first_naive = rule.after(base)
        if first_naive is None:
            raise InputError("that recurrence never happens after now")
        what = as_task(_what(rest), lang)
        first, note = localise(first_naive, tz)
        return Understood(first, _rule_text(rule), what, lang, note)

    when, rest = _day(rest, base, lang, here.replace(tzinfo=None, microsecond=0))
    if when is None and hour is None:
        raise InputError(
            "I could not tell when: say a day and a time, e.g. 'tomorrow at 9' or 'in 20 minutes'"
        )
    if when is None:
        assert hour is not None
        when = base.replace(hour=hour, minute=minute or 0)
        if when <= base:
            when += timedelta(days=1)
    elif hour is not None:
        when = when.replace(hour=hour, minute=minute or 0, second=0, microsecond=0)
    first, note = localise(when, tz)
    if first <= here:
        raise InputError(f"{first:%A %d %B %Y %H:%M} is in the past; say a later time")
    return Understood(first, None, as_task(_what(rest), lang), lang, note)


def localise(naive: datetime, tz: ZoneInfo) -> tuple[datetime, str]:
    """``naive`` as a time in ``tz``: InputError when the clocks skip it; the first of the
    two when they pass it twice (and a note saying so)."""
    first = naive.replace(tzinfo=tz, fold=0)
    second = naive.replace(tzinfo=tz, fold=1)
    back = first.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
    if back != naive:
        raise InputError(
            f"{naive:%H:%M} on {naive:%d %B %Y} does not exist in {tz.key}: the clocks skip "
            "that hour; pick another time"
        )
    if first.utcoffset() != second.utcoffset():
        return first, f"{naive:%H:%M} happens twice that night; I took the first ({first:%Z})"
    return first, ""


def _find_time(text: str) -> tuple[int, int, tuple[int, int]] | None:
    """A time of day in ``text``: (hour, minute, span). A bare number counts only after
    "at"/"um"/"à"/"a las"/"om" or with a unit ("9am", "9 Uhr", "9h")."""
    for m in _TIME.finditer(text):
        whole = m.group(0)
        suffix = (m.group("suffix") or "").lower().replace(".", "")
        has_prep = whole.strip().lower()[:1].isalpha() and not whole.strip()[:1].isdigit()
        if not (m.group("m") or suffix or has_prep):
            continue
        if _DURATION.search(text[max(0, m.start() - 12) : m.end() + 12]) and not (
            has_prep or suffix in ("am", "pm", "uhr", "uur", "h") or m.group("m")
        ):
            continue
        hour, minute = int(m.group("h")), int(m.group("m") or 0)
        if suffix == "pm" and hour < 12:
            hour += 12
        elif suffix == "am" and hour == 12:
            hour = 0
        return hour, minute, m.span()
    return None


def _day(text: str, base: datetime, lang: str, exact: datetime) -> tuple[datetime | None, str]:
    """The day named in ``text`` (dateparser's reading, relative to ``base``) and the text
    without it; a duration ("in 20 minutes") gives a full time."""
    import dateparser
    from dateparser.search import search_dates

    if m := _DURATION.search(text):
        unit = _UNITS.get(m.group("unit").lower())
        if unit is not None:
            # dateparser reads durations too; timedelta is the arithmetic, stated plainly
            when = exact + timedelta(**{unit: int(m.group("n"))})
            return when, text[: m.start()] + " " + text[m.end() :]
    settings = {
        "PREFER_DATES_FROM": "future",
        "RELATIVE_BASE": base,
        "RETURN_AS_TIMEZONE_AWARE": False,
        "PREFER_DAY_OF_MONTH": "first",
    }
    languages = [lang] + [code for code in TRIGGERS if code != lang]
    found = search_dates(text, languages=languages[:1], settings=settings)  # type: ignore[arg-type]
    for phrase, when in found or []:
        if phrase.strip().lower() in _JUNK_DATES or len(phrase.strip()) < 3:
            continue
        parsed = dateparser.parse(phrase, languages=languages[:1], settings=settings)  # type: ignore[arg-type]
        when = parsed or when
        if when.date() < base.date():
            raise InputError(f"{when:%d %B %Y} is in the past; say a later day")
        day = when.replace(hour=DEFAULT_HOUR, minute=0, second=0, microsecond=0)
        start = text.find(phrase)
        rest = text[:start] + " " + text[start + len(phrase) :] if start >= 0 else text
        return day, rest
    return None, text


def _what(text: str) -> str:
    what = " ".join(text.split())
    for _ in range(3):
        what = _CONNECTORS.sub("", what).strip(" ,.:;-")
    if not what:
        raise InputError("what should I remind you of? e.g. 'tomorrow at 9 to call Ines'")
    if len(what) > MAX_TEXT:
        raise InputError(f"a reminder is at most {MAX_TEXT} characters")
    return what


def _rule_text(rule: rrule.rrule) -> str:
    """The RRULE line of ``rule`` without its DTSTART (stored beside the first time)."""
    return "\n".join(
        line for line in str(rule).splitlines() if not line.startswith("DTSTART")
    ).removeprefix("RRULE:")


FREQUENCIES = {"daily": rrule.DAILY, "weekly": rrule.WEEKLY, "monthly": rrule.MONTHLY}
"""The recurrences a reminder may have: at most one occurrence a day."""
MAX_INTERVAL = 12
WEEKDAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def recurring(
    frequency: str,
    hour: int,
    minute: int,
    now: datetime,
    tz: ZoneInfo,
    what: str,
    weekday: int | None = None,
    week: int | None = None,
    interval: int = 1,
    lang: str = "en",
) -> Understood:
    """A recurrence from its parts (the ``schedule_every`` tool): ``frequency`` one of
    ``FREQUENCIES``, at ``hour``:``minute`` in ``tz``; ``weekday`` (0 = Monday) for weekly and
    monthly, ``week`` (1-4, or -1 for the last) for monthly; every ``interval``-th. The
    caller checks the bounds; dateutil builds the rule and finds the first occurrence."""
    freq = FREQUENCIES[frequency]
    base = now.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)
    day: rrule.weekday | None = None
    if weekday is not None:
        day = rrule.weekdays[weekday]
        if week is not None:
            day = day(week)
    rule = rrule.rrule(
        freq,
        dtstart=base,
        interval=interval,
        byweekday=day,
        byhour=hour,
        byminute=minute,
        bysecond=0,
    )
    first_naive = rule.after(base)
    if first_naive is None:
        raise InputError("that recurrence never happens after now")
    first, note = localise(first_naive, tz)
    return Understood(first, _rule_text(rule), what, lang, note)


def occurrences_after(rule: str, first: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    """The first occurrence of ``rule`` (from ``first``) later than ``after``, in ``tz``:
    dateutil steps the local wall clock (DST-correct: 08:00 stays 08:00 across a change)."""
    start = first.astimezone(tz).replace(tzinfo=None)
    parsed = rrule.rrulestr(rule, dtstart=start)
    local_after = after.astimezone(tz).replace(tzinfo=None)
    nxt = parsed.after(local_after)
    while nxt is not None:
        try:
            return localise(nxt, tz)[0]
        except InputError:  # a skipped hour: the next occurrence
            nxt = parsed.after(nxt)
    raise InputError("that recurrence has no more occurrences")


def describe_rule(rule: str | None) -> str:
    """A rule as the bench and tests compare it: None, daily, weekly:MO, monthly:1MO."""
    if rule is None:
        return "none"
    parts = dict(p.split("=", 1) for p in rule.split(";") if "=" in p)
    freq = parts.get("FREQ", "")
    every = parts.get("INTERVAL", "1")
    also = "" if every == "1" else f" (every {every})"
    if freq == "DAILY":
        return "daily" + also
    if freq == "WEEKLY":
        return f"weekly:{parts.get('BYDAY', '')}" + also
    if freq == "MONTHLY":
        return f"monthly:{parts.get('BYDAY', '').lstrip('+')}" + also
    return freq.lower() + also


__all__ = [
    "FREQUENCIES",
    "MAX_INTERVAL",
    "MAX_TEXT",
    "TRIGGERS",
    "WEEKDAY_NAMES",
    "Understood",
    "asks_for_reminder",
    "describe_rule",
    "localise",
    "occurrences_after",
    "off_loop",
    "recurring",
    "understand",
    "zone",
]
