"""Setting a reminder from what a person said, and the line that confirms it (#37): one path
for the ``remind`` command and for "remind me …" in words, with every model."""

from __future__ import annotations

from datetime import UTC, datetime

from chazbot.memory.audience import Provenance
from chazbot.reminders.store import MAX_ACTIVE_PER_PERSON, Reminder, Reminders
from chazbot.reminders.when import Understood, off_loop, understand, zone
from chazbot.reminders.wording import lang_of, repeat_text, when_text
from chazbot.reminders.zones import first_zone_told

CONFIRM = {
    "en": "OK, I'll remind {who} here on {when} ({tz}){note}: {what}",
    "de": "OK, ich erinnere {who} hier am {when} ({tz}){note}: {what}",
    "fr": "D'accord, je {who} le rappellerai ici le {when} ({tz}){note} : {what}",
    "es": "De acuerdo, {who} lo recordaré aquí el {when} ({tz}){note}: {what}",
    "nl": "Oké, ik herinner {who} hier op {when} ({tz}){note}: {what}",
}
CONFIRM_AGAIN = {
    "en": "OK, I'll remind {who} here {again} ({tz}), first on {when}{note}: {what}",
    "de": "OK, ich erinnere {who} hier {again} ({tz}), zuerst am {when}{note}: {what}",
    "fr": "D'accord, je {who} le rappellerai ici {again} ({tz}), la première fois le {when}"
    "{note} : {what}",
    "es": "De acuerdo, {who} lo recordaré aquí {again} ({tz}), la primera vez el {when}{note}: "
    "{what}",
    "nl": "Oké, ik herinner {who} hier {again} ({tz}), de eerste keer op {when}{note}: {what}",
}
TWICE = {
    "en": " ({time} happens twice that night; I took the first, {abbr})",
    "de": " ({time} gibt es in dieser Nacht zweimal; ich nehme das erste, {abbr})",
    "fr": " ({time} existe deux fois cette nuit-là ; je prends la première, {abbr})",
    "es": " ({time} ocurre dos veces esa noche; tomo la primera, {abbr})",
    "nl": " ({time} komt die nacht twee keer voor; ik neem de eerste, {abbr})",
}
"""Said when the time asked for happens twice (the night the clocks go back)."""
ZONE_HINT = {
    "en": "Times are in {tz} for you. To change it: {prefix}tz <zone> (e.g. {prefix}tz "
    "Europe/Lisbon), or tell me where you live.",
    "de": "Zeiten gelten für dich in {tz}. Ändern: {prefix}tz <Zone> (z. B. {prefix}tz "
    "Europe/Lisbon), oder sag mir, wo du wohnst.",
    "fr": "Les heures sont pour toi en {tz}. Pour changer : {prefix}tz <zone> (p. ex. "
    "{prefix}tz Europe/Lisbon), ou dis-moi où tu habites.",
    "es": "Las horas son para ti en {tz}. Para cambiarlo: {prefix}tz <zona> (p. ej. "
    "{prefix}tz Europe/Lisbon), o dime dónde vives.",
    "nl": "Tijden zijn voor jou in {tz}. Wijzigen: {prefix}tz <zone> (bijv. {prefix}tz "
    "Europe/Lisbon), of vertel me waar je woont.",
}
"""Added once, to the first reminder a person sets: which zone it used and how to change it."""
WHO = {
    "en": ("you", "everyone"),
    "de": ("dich", "alle"),
    "fr": ("te", "vous"),
    "es": ("te", "os"),
    "nl": ("je", "iedereen"),
}
_EVERYONE = ("everyone", "us", "uns", "alle", "nous", "tous", "nos", "ons", "iedereen")


def confirmation(made: Reminder, understood: Understood, said: str = "") -> str:
    """The reply to a new reminder, wholly in the person's language: the day and time
    understood in their zone (CLDR's words), how it repeats in words, the task as they would
    say it, so a misread time shows at once."""
    lang = lang_of(made.lang)
    first = made.first.astimezone(zone(made.tz))
    note = ""
    if first.replace(fold=1).utcoffset() != first.replace(fold=0).utcoffset():
        note = TWICE[lang].format(time=f"{first:%H:%M}", abbr=first.tzname() or made.tz)
    many = any(w in said.lower().split() for w in _EVERYONE)
    again = repeat_text(made.rule, made.first, made.tz, lang)
    return (CONFIRM_AGAIN if again else CONFIRM)[lang].format(
        who=WHO[lang][1 if many else 0],
        when=when_text(made.first, made.tz, lang),
        tz=made.tz,
        again=again,
        note=note,
        what=made.what,
    )


async def set_reminder(
    store: Reminders,
    text: str,
    room: str,
    by: str,
    default_zone: str,
    admin: bool,
    now: datetime | None = None,
    origin: Provenance | None = None,
    prefix: str | None = None,
    lang: str | None = None,
) -> str:
    """Understand ``text`` in the person's zone, store the reminder, and confirm it; an
    InputError (one line) when no time can be read, or past the cap of a non-admin.
    ``origin``: where it was said and who heard it (kept, so lists obey the audience rule).
    ``prefix`` (how commands are written where the reply goes): the first reminder a person
    sets also says which zone it used and how to change it, once (None: not said, as for
    the model's tools, whose words the model rephrases). ``lang``: the language ``text`` is
    in when it has no "remind me" to tell (a command's words)."""
    tz = await store.zone_of(by, default_zone)
    understood = await off_loop(understand, text, now or datetime.now(UTC), zone(tz), lang)
    limit = None if admin else MAX_ACTIVE_PER_PERSON
    made = await store.add(understood, room, by, limit, origin)
    said = confirmation(made, understood, text)
    if prefix is not None and await first_zone_told(store, by):
        said += "\n" + ZONE_HINT[lang_of(made.lang)].format(tz=tz, prefix=prefix)
    return said


__all__ = ["confirmation", "set_reminder", "when_text"]
