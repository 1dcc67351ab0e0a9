"""A person's time zone without thinking about it (#50): read from what they say ("I live in
Berlin", "ich wohne in Wien", "mon fuseau horaire est Europe/Paris"), and the once-only
word on the first reminder about which zone it used.

Places are CLDR's, from Babel: every zone's exemplar city in each of the five languages
("Wien", "Vienne", "Viena", "Wenen" for Europe/Vienna) and every country's name, a country
counting only when it has one zone (for the United States the person is asked for a city).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from zoneinfo import ZoneInfo, available_timezones

from babel import Locale
from babel.core import get_global

from chazbot.errors import InputError
from chazbot.reminders.store import ZONES_STORE, Reminders
from chazbot.reminders.when import zone
from chazbot.reminders.wording import LANGS, lang_of

TOLD_STORE = "people_tz_told"
"""Per person (MXID): true once a reminder of theirs said which zone it used."""

_SAYING = {
    "en": (
        r"i(?:'m| am)? (?:now )?(?:live|living|reside|based) in",
        r"i(?:'ve| have)? (?:just )?moved to",
        r"my time ?zone is(?: now)?",
    ),
    "de": (
        r"ich (?:wohne|lebe) (?:jetzt |seit \w+ )?(?:in|im)",
        r"ich bin (?:jetzt )?nach",
        r"meine zeitzone ist(?: jetzt)?",
    ),
    "fr": (
        r"j'habite (?:maintenant )?(?:à|a|au|aux|en)",
        r"je (?:vis|réside|reside) (?:maintenant )?(?:à|a|au|aux|en)",
        r"mon fuseau(?: horaire)? est(?: maintenant)?",
    ),
    "es": (
        r"(?:ahora )?(?:vivo|resido) en",
        r"me (?:he )?mud[ée] a",
        r"mi zona horaria es(?: ahora)?",
    ),
    "nl": (
        r"ik woon (?:nu )?in",
        r"ik ben (?:nu )?verhuisd naar",
        r"mijn tijdzone is(?: nu)?",
    ),
}
"""How a person says where they live or their zone, per language (what follows is the place)."""
_SAID = [
    (lang, re.compile(rf"(?:^|[\s,.;:!¡¿])(?:{pattern})\s+(?P<place>.+)$", re.IGNORECASE))
    for lang, patterns in _SAYING.items()
    for pattern in patterns
]
_LEADING = re.compile(r"^(?:(?:the|de|het|la|el|los|las|le|les|der|die|das)\s+|l')", re.IGNORECASE)
MAX_PLACE_WORDS = 4


def _fold(text: str) -> str:
    """A place name as compared: case and accents folded, one space."""
    plain = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in plain if not unicodedata.combining(c))
    return " ".join(re.sub(r"[^\w/+-]+", " ", plain).split())


@cache
def _places() -> dict[str, tuple[str, ...]]:
    """Folded place name → the zones it may mean (one for a city or a one-zone country)."""
    zones = available_timezones()
    canonical = get_global("zone_territories")
    places: dict[str, list[str]] = {}
    for name in zones:
        if name not in canonical or "/" not in name:
            continue
        places.setdefault(_fold(name.rsplit("/", 1)[-1].replace("_", " ")), []).append(name)
    for lang in LANGS:
        locale = Locale.parse(lang)
        for name, info in locale.time_zones.items():
            city = info.get("city") if isinstance(info, Mapping) else None
            if isinstance(city, str) and name in zones:
                places.setdefault(_fold(city), []).append(name)
        for code, zones_of in get_global("territory_zones").items():
            country = locale.territories.get(code)
            known = _one_clock(tuple(z for z in zones_of if z in zones))
            if country and known:
                places.setdefault(_fold(country), []).extend(known)
    return {place: tuple(dict.fromkeys(found)) for place, found in places.items()}


def _one_clock(zones: tuple[str, ...]) -> tuple[str, ...]:
    """A country's zones; only its first (CLDR's main one) when all keep the same clock
    (Germany: Berlin and Büsingen), since then any of them is right."""
    probes = [datetime(2026, month, 15, 12, tzinfo=UTC) for month in (1, 7)]
    clocks = {tuple(p.astimezone(ZoneInfo(z)).utcoffset() for p in probes) for z in zones}
    return zones[:1] if len(clocks) == 1 else zones


@dataclass(frozen=True)
class ZoneSaid:
    """A zone read from words: the language, the place as said, and the zones it may mean
    (one: set it; several: ask for a city)."""

    lang: str
    place: str
    zones: tuple[str, ...]
    span: tuple[int, int] = (0, 0)
    """Where it was said in the text (after ``’`` became ``'``, and stripped)."""

    def without(self, text: str) -> str:
        """``text`` without the saying ("I live in Lisbon, remind me …" → ", remind me …")."""
        plain = text.replace("’", "'").strip()
        return plain[: self.span[0]] + " " + plain[self.span[1] :]


def says_where(text: str) -> bool:
    """Whether ``text`` has a saying of where the person lives ("I live in", "mi zona horaria
    es"…): a few regexes over at most 300 characters, cheap enough for the event loop, so a
    turn goes to the reading thread (``zone_in_words``, CLDR's places) only when it does."""
    plain = text.replace("’", "'").strip()
    return len(plain) <= 300 and any(said.search(plain) for _, said in _SAID)


def zone_in_words(text: str) -> ZoneSaid | None:
    """The place or zone ``text`` says the person lives in, or None (nothing said, or a place
    no zone is known for: "I live in a small flat")."""
    plain = text.replace("’", "'").strip()
    if len(plain) > 300:
        return None
    for lang, said in _SAID:
        found = said.search(plain)
        if found is None:
            continue
        rest = found.group("place").strip()
        first = rest.split()[0].strip(".,!;:") if rest.split() else ""
        if "/" in first or first.upper() in ("UTC", "GMT"):
            try:
                return ZoneSaid(lang, first, (zone(first).key,), _span(plain, found, [first]))
            except InputError:  # not a zone name: read it as a place below
                pass
        words = _LEADING.sub("", re.split(r"[.,;:!?()]", rest, maxsplit=1)[0]).split()
        for n in range(min(MAX_PLACE_WORDS, len(words)), 0, -1):
            place = " ".join(words[:n])
            zones = _places().get(_fold(place))
            if zones:
                return ZoneSaid(lang, place, zones, _span(plain, found, words[:n]))
    return None


def _span(plain: str, found: re.Match[str], words: list[str]) -> tuple[int, int]:
    """Where the saying starts and its place ends in ``plain`` (the rest of the message may
    ask for something else: "I live in Lisbon, remind me …")."""
    place = re.compile(r"\s+".join(re.escape(w) for w in words))
    end = place.search(plain, found.start("place"))
    return found.start(), end.end() if end is not None else len(plain)


SET_FROM_WORDS = {
    "en": "Got it: your time zone is now {zone} (it is {time} there now{was}). Reminders use "
    "it; to change it: {prefix}tz <zone>.",
    "de": "Alles klar: deine Zeitzone ist jetzt {zone} (dort ist es jetzt {time}{was}). "
    "Erinnerungen richten sich danach; ändern: {prefix}tz <Zone>.",
    "fr": "C'est noté : ton fuseau horaire est maintenant {zone} (il y est {time}{was}). Les "
    "rappels le suivent ; pour le changer : {prefix}tz <zone>.",
    "es": "Entendido: tu zona horaria ahora es {zone} (allí son las {time}{was}). Los "
    "recordatorios la usan; para cambiarla: {prefix}tz <zona>.",
    "nl": "Begrepen: je tijdzone is nu {zone} (het is daar nu {time}{was}). Herinneringen "
    "gebruiken die; wijzigen: {prefix}tz <zone>.",
}
WAS = {"en": "; before: {old}", "de": "; vorher: {old}", "fr": " ; avant : {old}",
       "es": "; antes: {old}", "nl": "; eerder: {old}"}  # fmt: skip
SEVERAL = {
    "en": '{place} has several time zones ({some}…): tell me your city ("I live in '
    '{city}") or use {prefix}tz <zone>.',
    "de": '{place} hat mehrere Zeitzonen ({some}…): sag mir deine Stadt ("ich wohne in '
    '{city}") oder nutze {prefix}tz <Zone>.',
    "fr": "{place} a plusieurs fuseaux horaires ({some}…) : dis-moi ta ville (« j'habite à "
    "{city} ») ou utilise {prefix}tz <zone>.",
    "es": "{place} tiene varias zonas horarias ({some}…): dime tu ciudad («vivo en {city}») "
    "o usa {prefix}tz <zona>.",
    "nl": '{place} heeft meerdere tijdzones ({some}…): vertel me je stad ("ik woon in '
    '{city}") of gebruik {prefix}tz <zone>.',
}


async def set_zone_from_words(
    store: Reminders, person: str, said: ZoneSaid, prefix: str, now: datetime
) -> str:
    """Set ``person``'s zone from ``said`` when it names one, and confirm it in their
    language with the time there now (so a wrong guess shows at once) and the way back; ask
    for a city when the place has several zones."""
    lang = lang_of(said.lang)
    if len(said.zones) > 1:
        city = said.zones[0].rsplit("/", 1)[-1].replace("_", " ")
        return SEVERAL[lang].format(
            place=said.place, some=", ".join(said.zones[:3]), city=city, prefix=prefix
        )
    chosen = said.zones[0]
    old = (await store.ledger.fields(store.db, ZONES_STORE)).get(person)
    await store.set_zone(person, chosen)
    was = WAS[lang].format(old=old) if isinstance(old, str) and old != chosen else ""
    time = now.astimezone(ZoneInfo(chosen)).strftime("%H:%M")
    return SET_FROM_WORDS[lang].format(zone=chosen, time=time, was=was, prefix=prefix)


async def first_zone_told(store: Reminders, person: str) -> bool:
    """True (once per person and agent) when a reminder of ``person``'s has not yet said which
    zone it used; marks it said."""
    told = (await store.ledger.fields(store.db, TOLD_STORE)).get(person)
    if told is True:
        return False
    await store.ledger.write(
        store.db, store.key, {TOLD_STORE: [{"op": "set", "field": person, "value": True}]}
    )
    return True


__all__ = [
    "TOLD_STORE",
    "ZoneSaid",
    "first_zone_told",
    "says_where",
    "set_zone_from_words",
    "zone_in_words",
]
