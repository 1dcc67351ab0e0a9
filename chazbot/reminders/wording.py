"""How reminders read to the person (#50): dates, weekdays and months in their language from
CLDR (Babel's date formats, not tables of our own), repeats in words ("every Sunday at 20:00",
"jeden Sonntag um 20:00"), the task as they would say it ("die Blumen gießen", not "daran,
die Blumen zu gießen"), and people by name rather than Matrix ID.

Pure: every function takes the moment, the zone and the language it words.
"""

from __future__ import annotations

import re
from datetime import datetime
from functools import cache
from zoneinfo import ZoneInfo

from babel import Locale
from babel.dates import format_datetime, format_skeleton, format_time, get_day_names

LANGS = ("en", "de", "fr", "es", "nl")
"""The languages reminders are worded in (those ``reminders.when`` reads)."""

TIME = "HH:mm"
"""Times of day on the 24-hour clock in every language ("20:00"), as people write them in
chat in four of the five and as the issue's examples do in English."""


def lang_of(lang: str) -> str:
    return lang if lang in LANGS else "en"


@cache
def _pattern(lang: str) -> str:
    """The locale's full date with the time of day, joined as CLDR joins them."""
    locale = Locale.parse(lang)
    joined = str(locale.datetime_formats["full"])
    return joined.replace("{1}", locale.date_formats["full"].pattern).replace("{0}", TIME)


def when_text(moment: datetime, tz: str, lang: str = "en") -> str:
    """``moment`` in ``tz``, in ``lang``: "Tuesday, December 8, 2026, 09:00", "Dienstag,
    8. Dezember 2026, 09:00", "mardi 8 décembre 2026, 09:00"."""
    local = moment.astimezone(ZoneInfo(tz))
    lang = lang_of(lang)
    return format_datetime(local, _pattern(lang), tzinfo=local.tzinfo, locale=lang)


def short_when(moment: datetime, tz: str, lang: str = "en") -> str:
    """A day and time for a line (a late delivery, a list): "Wed 9 Dec, 08:00"."""
    local = moment.astimezone(ZoneInfo(tz))
    lang = lang_of(lang)
    day = format_skeleton("MMMEd", local, tzinfo=local.tzinfo, locale=lang)
    return f"{day}, {format_time(local, TIME, tzinfo=local.tzinfo, locale=lang)}"


_AT = {"en": "at", "de": "um", "fr": "à", "es": "a las", "nl": "om"}
_DAILY = {
    "en": "every day",
    "de": "jeden Tag",
    "fr": "tous les jours",
    "es": "todos los días",
    "nl": "elke dag",
}
_WEEKLY = {
    "en": "every {day}",
    "de": "jeden {day}",
    "fr": "chaque {day}",
    "es": "cada {day}",
    "nl": "elke {day}",
}
_MONTHLY = {
    "en": "every {nth} {day} of the month",
    "de": "jeden {nth} {day} im Monat",
    "fr": "chaque {nth} {day} du mois",
    "es": "el {nth} {day} de cada mes",
    "nl": "elke {nth} {day} van de maand",
}
_MONTHLY_ON = {
    "en": "on day {d} of every month",
    "de": "jeden Monat am {d}.",
    "fr": "chaque mois le {d}",
    "es": "el día {d} de cada mes",
    "nl": "elke maand op de {d}e",
}
_NTH = {
    "en": {1: "first", 2: "second", 3: "third", 4: "fourth", -1: "last"},
    "de": {1: "ersten", 2: "zweiten", 3: "dritten", 4: "vierten", -1: "letzten"},
    "fr": {1: "premier", 2: "deuxième", 3: "troisième", 4: "quatrième", -1: "dernier"},
    "es": {1: "primer", 2: "segundo", 3: "tercer", 4: "cuarto", -1: "último"},
    "nl": {1: "eerste", 2: "tweede", 3: "derde", 4: "vierde", -1: "laatste"},
}
_EVERY_N = {
    "en": {"DAILY": "every {n} days", "WEEKLY": "every {n} weeks", "MONTHLY": "every {n} months"},
    "de": {"DAILY": "alle {n} Tage", "WEEKLY": "alle {n} Wochen", "MONTHLY": "alle {n} Monate"},
    "fr": {
        "DAILY": "tous les {n} jours",
        "WEEKLY": "toutes les {n} semaines",
        "MONTHLY": "tous les {n} mois",
    },
    "es": {"DAILY": "cada {n} días", "WEEKLY": "cada {n} semanas", "MONTHLY": "cada {n} meses"},
    "nl": {"DAILY": "elke {n} dagen", "WEEKLY": "elke {n} weken", "MONTHLY": "elke {n} maanden"},
}
_ON = {"en": "on", "de": "am", "fr": "le", "es": "el", "nl": "op"}
_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_BYDAY = re.compile(r"^(?P<n>[+-]?[1-4])?(?P<day>MO|TU|WE|TH|FR|SA|SU)$")


def repeat_text(rule: str | None, first: datetime, tz: str, lang: str = "en") -> str:
    """A stored RRULE in words with its time of day: "every Sunday at 20:00", "jeden Sonntag
    um 20:00", "el primer lunes de cada mes a las 08:00"; "" for a reminder that fires once."""
    if not rule:
        return ""
    lang = lang_of(lang)
    parts = dict(p.split("=", 1) for p in rule.split(";") if "=" in p)
    freq, every = parts.get("FREQ", ""), int(parts.get("INTERVAL", "1") or 1)
    local = first.astimezone(ZoneInfo(tz))
    at = f"{_AT[lang]} {format_time(local, TIME, tzinfo=local.tzinfo, locale=lang)}"
    byday = _BYDAY.match(parts.get("BYDAY", ""))
    names = get_day_names("wide", locale=lang)
    day = names[local.weekday()] if freq == "WEEKLY" else None
    nth = None
    if byday is not None:
        day = names[_CODES.index(byday.group("day"))]
        nth = int(byday.group("n")) if byday.group("n") else None
    if every > 1 and freq in _EVERY_N[lang]:
        said = _EVERY_N[lang][freq].format(n=every)
        if day is not None:
            said += f" {_ON[lang]} " + (f"{_NTH[lang][nth]} {day}" if nth else day)
    elif freq == "DAILY":
        said = _DAILY[lang]
    elif freq == "WEEKLY" and day is not None:
        said = _WEEKLY[lang].format(day=day)
    elif freq == "MONTHLY" and day is not None and nth is not None:
        said = _MONTHLY[lang].format(nth=_NTH[lang][nth], day=day)
    elif freq == "MONTHLY":
        said = _MONTHLY_ON[lang].format(d=local.day)
    else:
        said = _DAILY[lang]
    return f"{said} {at}"


_DE_LEAD = re.compile(r"^(?:daran|darauf|dran)\s*,?\s*(?:dass\s+)?", re.IGNORECASE)
_DE_INFIX = re.compile(
    r"^(?P<pre>zurück|heraus|herein|weg|raus|rein|auf|aus|ein|mit|vor|nach|ab|an|zu|los|fest|"
    r"her|hin|um|durch|vorbei)zu(?P<verb>[a-zäöüß]+(?:en|ern|eln))$"
)
"""A separable verb with "zu" inside ("rauszubringen", "anzurufen")."""
_INFINITIVE = re.compile(r"^[a-zäöüßéèàáíóúñ]+(?:en|ern|eln|n)$")
"""A verb's infinitive in German or Dutch: lower case, ending as one ("gießen", "bellen",
"wandern"); a noun ("zu Hause") is capitalised in German and stays as said."""
_NL_LEAD = re.compile(r"^(?:eraan|daaraan)\s*,?\s*(?:om\s+|dat\s+)?", re.IGNORECASE)
_NL_PREFIX = re.compile(r"^(?:terug|op|af|in|uit|mee|weg|aan|door|na|toe|voor|bij)$", re.I)
"""A Dutch separable prefix before "te" ("op te bellen" → "opbellen")."""
_ES_LEAD = re.compile(r"^(?:(?:el|la|los|las)\s+)?(?:de\s+)?que\s+", re.IGNORECASE)


def as_task(what: str, lang: str) -> str:
    """``what`` as the person would say the task, not as it hangs off "remind me":
    "daran, die Blumen zu gießen" → "die Blumen gießen", "den Müll rauszubringen" → "den Müll
    rausbringen", "eraan om de planten water te geven" → "de planten water geven"."""
    text = what.strip()
    if lang == "de":
        text = _DE_LEAD.sub("", text)
        words = text.split()
        if len(words) >= 2 and words[-2].lower() == "zu" and _INFINITIVE.match(words[-1]):
            words = words[:-2] + words[-1:]
        elif words and (m := _DE_INFIX.match(words[-1].rstrip(".!"))):
            words[-1] = m.group("pre") + m.group("verb") + words[-1][len(m.group(0)) :]
        text = " ".join(words)
    elif lang == "nl":
        text = _NL_LEAD.sub("", text)
        words = text.split()
        if len(words) >= 2 and words[-2].lower() == "te" and _INFINITIVE.match(words[-1]):
            if len(words) >= 3 and _NL_PREFIX.match(words[-3]):
                words = [*words[:-3], words[-3] + words[-1]]
            else:
                words = words[:-2] + words[-1:]
        text = " ".join(words)
    elif lang == "es":
        text = _ES_LEAD.sub("", text)
    return text or what


def person_name(mxid: str) -> str:
    """Someone named without a display name at hand: the localpart of a Matrix ID ("ana"
    for "@ana:example.org"), anything else as it is."""
    if mxid.startswith("@") and ":" in mxid:
        return mxid[1:].split(":", 1)[0]
    return mxid


__all__ = [
    "LANGS",
    "as_task",
    "lang_of",
    "person_name",
    "repeat_text",
    "short_when",
    "when_text",
]
