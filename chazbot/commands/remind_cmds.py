"""``remind``, ``reminders``, ``reminders cancel`` and ``tz`` (#37): reminders from chat.

A reminder belongs to the room's agent (its DB, signed) and to the room it was set in: it is
delivered there and nowhere else, listed there, and cancelled there by the person who set it
or an admin. Each is confirmed with the time understood, in the person's zone, so a misread
time shows at once.
"""

from __future__ import annotations

from datetime import UTC, datetime

from chazbot.agent.words import language
from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import InputError, PermissionDenied
from chazbot.reminders.setting import set_reminder
from chazbot.reminders.store import ZONES_STORE, Reminders
from chazbot.reminders.when import asks_for_reminder, zone
from chazbot.reminders.wording import person_name, repeat_text, when_text
from chazbot.reminders.zones import zone_in_words

COMMANDS = CommandTree()
command = COMMANDS.command
SHOWN = 20


def reminders_of(ctx: Context) -> Reminders:
    return ctx.reminders.of(ctx.agent.db, ctx.agent.key)


async def person_zone(ctx: Context, store: Reminders) -> str:
    return await store.zone_of(ctx.sender, ctx.agents.config.timezone)


@command(
    "remind",
    (Arg("when_and_what", rest=True, raw=True),),
    "set a reminder in this room: remind tomorrow at 9 to call Ines",
)
async def remind(ctx: Context, when_and_what: str) -> Reply:
    store = reminders_of(ctx)
    zone_name = ctx.agents.config.timezone
    text = await set_reminder(
        store,
        when_and_what,
        ctx.session.name,
        ctx.sender,
        zone_name,
        ctx.is_admin,
        origin=ctx.hearing.origin,
        prefix=ctx.prefix,
        lang=asks_for_reminder(when_and_what) or language(when_and_what),
    )
    return Reply(True, text)


@command("reminders", (), "list this room's reminders, numbered")
async def reminders(ctx: Context) -> Reply:
    store = reminders_of(ctx)
    listed = await store.in_room(ctx.session.name, ctx.hearing.audience)
    if not listed:
        return Reply(True, f"No reminders here. Set one with {ctx.prefix}remind <when> <what>.")
    lines = []
    for n, r in enumerate(listed[:SHOWN], 1):
        due = r.next_due() or r.first
        again = repeat_text(r.rule, r.first, r.tz, r.lang)
        again = f" ({again})" if again else ""
        said = f"{when_text(due, r.tz, r.lang)} ({r.tz}){again}: {r.what} ({person_name(r.by)})"
        lines.append(f"{n}. {said}")
    more = f"\n(and {len(listed) - SHOWN} more)" if len(listed) > SHOWN else ""
    return Reply(
        True,
        "Reminders here:\n"
        + "\n".join(lines)
        + more
        + f"\nCancel one with {ctx.prefix}reminders cancel <n>.",
    )


@command("reminders cancel", (Arg("number"),), "cancel one of this room's reminders")
async def cancel(ctx: Context, number: str) -> Reply:
    store = reminders_of(ctx)
    found = await store.by_number(ctx.session.name, number, ctx.hearing.audience)
    if found.by != ctx.sender and not ctx.is_admin:
        raise PermissionDenied(f"only {found.by} (who set it) or an admin may cancel it")
    await store.cancel(found)
    return Reply(True, f"Cancelled: {found.what}")


@command(
    "tz",
    (Arg("zone_name", optional=True, rest=True, shown="zone"),),
    "show or set your time zone (e.g. Europe/Berlin, or a city: Lisbon)",
)
async def tz(ctx: Context, zone_name: str | None = None) -> Reply:
    store = reminders_of(ctx)
    if zone_name is None:
        own = (await store.ledger.fields(store.db, ZONES_STORE)).get(ctx.sender)
        shown = await person_zone(ctx, store)
        whose = "" if isinstance(own, str) else " (this bot's default; you have set none)"
        return Reply(
            True,
            f"Your time zone: {shown}{whose}. Change it with {ctx.prefix}tz <zone>, "
            f"e.g. {ctx.prefix}tz Europe/Lisbon.",
        )
    if not zone_name.isprintable() or len(zone_name) > 100:  # "UTC\0" is no city "UTC"
        raise InputError(f"unknown time zone {zone_name[:40]!r}: use a city or an IANA name")
    if "/" not in zone_name and (said := zone_in_words(f"my time zone is {zone_name}")):
        if len(said.zones) > 1:
            some = ", ".join(said.zones[:3])
            raise InputError(f"{said.place} has several time zones ({some}…): name a city")
        zone_name = said.zones[0]
    await store.set_zone(ctx.sender, zone_name)
    now = datetime.now(UTC).astimezone(zone(zone_name)).strftime("%H:%M")
    return Reply(True, f"Your time zone is now {zone(zone_name).key} (it is {now} there now).")
