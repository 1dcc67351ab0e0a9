"""Setting a reminder from what a person said, and the line that confirms it (#37): one path
for the ``remind`` command and for "remind me …" in words, with every model."""

from __future__ import annotations

from datetime import UTC, datetime

from chazbot.memory.audience import Provenance
from chazbot.reminders.store import MAX_ACTIVE_PER_PERSON, Reminder, Reminders
from chazbot.reminders.when import Understood, describe_rule, off_loop, understand, zone

CONFIRM = {
    "en": "OK, I'll remind {who} here on {when} ({tz}){again}{note}: {what}",
    "de": "OK, ich erinnere {who} hier am {when} ({tz}){again}{note}: {what}",
    "fr": "D'accord, je {who} le rappellerai ici le {when} ({tz}){again}{note} : {what}",
    "es": "De acuerdo, {who} lo recordaré aquí el {when} ({tz}){again}{note}: {what}",
    "nl": "Oké, ik herinner {who} hier op {when} ({tz}){again}{note}: {what}",
}
WHO = {
    "en": ("you", "everyone"),
    "de": ("dich", "alle"),
    "fr": ("te", "vous"),
    "es": ("te", "os"),
    "nl": ("je", "iedereen"),
}
_EVERYONE = ("everyone", "us", "uns", "alle", "nous", "tous", "nos", "ons", "iedereen")


def when_text(moment: datetime, tz: str) -> str:
    return moment.astimezone(zone(tz)).strftime("%a %d %b %Y %H:%M")


def confirmation(made: Reminder, understood: Understood, said: str = "") -> str:
    """The reply to a new reminder: the time understood, in the person's zone, in their
    language, so a misread time shows at once."""
    lang = made.lang if made.lang in CONFIRM else "en"
    repeat = describe_rule(made.rule)
    again = "" if repeat == "none" else f", {repeat.replace(':', ' ')}"
    note = f" ({understood.note})" if understood.note else ""
    many = any(w in said.lower().split() for w in _EVERYONE)
    return CONFIRM[lang].format(
        who=WHO[lang][1 if many else 0],
        when=when_text(made.first, made.tz),
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
) -> str:
    """Understand ``text`` in the person's zone, store the reminder, and confirm it; an
    InputError (one line) when no time can be read, or past the cap of a non-admin.
    ``origin``: where it was said and who heard it (kept, so lists obey the audience rule)."""
    tz = await store.zone_of(by, default_zone)
    understood = await off_loop(understand, text, now or datetime.now(UTC), zone(tz))
    limit = None if admin else MAX_ACTIVE_PER_PERSON
    made = await store.add(understood, room, by, limit, origin)
    return confirmation(made, understood, text)


__all__ = ["confirmation", "set_reminder", "when_text"]
