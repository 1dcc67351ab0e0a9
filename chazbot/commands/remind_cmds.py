"""``remind``, ``reminders``, ``reminders cancel`` and ``tz`` (#37): reminders from chat.

A reminder belongs to the room's agent (its DB, signed) and to the room it was set in: it is
delivered there and nowhere else, listed there, and cancelled there by the person who set it
or an admin. Each is confirmed with the time understood, in the person's zone, so a misread
time shows at once.
"""

from __future__ import annotations

from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import PermissionDenied
from chazbot.reminders.setting import set_reminder, when_text
from chazbot.reminders.store import Reminders
from chazbot.reminders.when import describe_rule, zone

COMMANDS = CommandTree()
command = COMMANDS.command
SHOWN = 20


def reminders_of(ctx: Context) -> Reminders:
    return ctx.reminders.of(ctx.agent.db, ctx.agent.key)


async def person_zone(ctx: Context, store: Reminders) -> str:
    return await store.zone_of(ctx.sender, ctx.agents.config.timezone)


@command(
    "remind",
    (Arg("when_and_what", rest=True),),
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
        repeat = describe_rule(r.rule)
        again = "" if repeat == "none" else f", {repeat.replace(':', ' ')}"
        lines.append(f"{n}. {when_text(due, r.tz)}{again}: {r.what} ({r.by})")
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
    (Arg("zone_name", optional=True, shown="zone"),),
    "show or set your time zone (e.g. Europe/Berlin)",
)
async def tz(ctx: Context, zone_name: str | None = None) -> Reply:
    store = reminders_of(ctx)
    if zone_name is None:
        return Reply(True, f"Your time zone: {await person_zone(ctx, store)}")
    await store.set_zone(ctx.sender, zone_name)
    return Reply(True, f"Your time zone is now {zone(zone_name).key}.")
