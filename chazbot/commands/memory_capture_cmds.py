"""``/memory`` on what people said: capture (SPEC §5b) and people owning their rows, mine and
forget-mine (SPEC §5c)."""

from __future__ import annotations

import json
import re

from chazbot.agent.forgetting import restore_rows
from chazbot.agent.host import AgentHandle
from chazbot.agent.undo import UNDO_MINUTES
from chazbot.commands.context import Context
from chazbot.commands.memory_cmds import ok
from chazbot.commands.tree import Arg, CommandTree, Meaning, Reply, refused
from chazbot.errors import ConflictError, InputError, NotFound
from chazbot.memory.rows import MemoryRow, to_datetime

MINE_SHOWN = 20  # rows /memory mine lists per agent (the newest)
MINE_VALUE_CHARS = 300
LISTING_KV = "mine-listing:"
"""Peer-local: the last ``mine`` listing shown to a person in a room, ``[[agent, row id,
key], …]`` in the order numbered, so ``forget-mine 2`` means the row they saw as 2."""
_MESSAGE_KEY = re.compile(r"\d{4}-\d{2}-\d{2}/[\w-]+")
"""A captured message's key after its speaker (``2026-12-04/b6fbbb64``): not shown, the
number is what to type back."""

COMMANDS = CommandTree()
command = COMMANDS.command


@command(
    "memory mine",
    (),
    "list what the bot keeps that you said, numbered (everything, in a DM)",
    first=True,
)
async def mine(ctx: Context) -> Reply:
    found = await _said_by_sender(ctx)
    total = sum(len(rows) for _, rows in found)
    listing: list[list[str]] = []
    lines = []
    for agent, rows in found:
        for row in rows[:MINE_SHOWN]:
            listing.append([agent.name, row.row_id, row.key])
            lines.append(f"{len(listing)}. {_mine_line(ctx, agent, row)}")
    await ctx.ledger.kv.set(_listing_key(ctx), json.dumps(listing))
    if not total:
        return ok(
            "I keep nothing you said"
            + ("" if _alone(ctx) else " that this room may hear (ask in a DM for all)")
            + "."
        )
    head = f"{total} row{'s' if total != 1 else ''} you said"
    if len(listing) < total:
        head += f"; the newest {len(listing)}"
    return ok(
        head
        + ":\n"
        + "\n".join(lines)
        + f"\nForget one with {ctx.prefix}memory forget-mine <number>, or all with "
        f"{ctx.prefix}memory forget-mine all."
    )


@command(
    "memory forget-mine",
    (Arg("key", shown="number|key|all"), Arg("named", optional=True, shown="key")),
    "hide what you said (a number from your last mine, a key, or all; key <key> for a key "
    "that reads as a number or all); never anyone else's",
    first=True,
)
async def forget_mine(ctx: Context, key: str, named: str | None = None) -> Reply:
    if named is not None:
        if key.lower() != "key":
            raise InputError(
                f"to name a key, write {ctx.prefix}memory forget-mine key <key> (one key, "
                "quoted when it has spaces)"
            )
        return await _forget_key(ctx, named)
    if key.lower() == "all":
        return await _forget_key(ctx, None)
    listing = await _listing(ctx)
    number = list_number(key)
    if number is not None and 1 <= number <= len(listing):
        return await _forget_numbered(ctx, number, listing)
    forgot = await _forget_key(ctx, key)
    if forgot.ok or number is None:
        return forgot
    # plain digits that are no row's key and no number of the list: say what the list holds
    if not listing:
        raise NotFound(f"no list to take {number} from: run {ctx.prefix}memory mine first")
    raise InputError(f"your last list has rows 1 to {len(listing)}, not {number}")


def list_number(text: str) -> int | None:
    """``text`` as a number of a listing: plain ASCII digits only (``²`` or ``٣`` are keys,
    never numbers: ``int`` reads some and refuses others), None otherwise."""
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        return None
    return int(text)


async def _forget_key(ctx: Context, which: str | None) -> Reply:
    """Hide the sender's rows of key ``which`` (None: all of them) in every agent ``mine``
    reads; the ones in this room's agent can be brought back with ``undo``. A failed reply
    when none is kept (its meaning ``none_key`` or ``none_all``)."""
    hidden: dict[str, list[MemoryRow]] = {}
    for agent in _agents_for_mine(ctx):
        memory = agent.memory.within(ctx.hearing)
        rows = await memory.forget_said_by(ctx.sender, which, _alone(ctx))
        if rows:
            hidden[agent.db] = rows
    count = sum(len(rows) for rows in hidden.values())
    named = {} if which is None else {"key": which}
    if not count:
        what = "nothing you said" if which is None else f"no row {which!r} that you said"
        gone = NotFound(f"{what} is kept{'' if _alone(ctx) else ' where this room may see'}")
        return refused(gone, Meaning("none_all" if which is None else "none_key", named))
    what = "everything you said" if which is None else repr(which)
    kept = ctx.session.undo.put_all(ctx.sender, hidden)  # every agent's rows: one undo
    return Reply(
        True,
        f"Forgot {what} ({count} row{'s' if count != 1 else ''}).{_undo_hint(ctx, kept)}",
        meaning=Meaning(
            "forgot_all" if which is None else "forgot_key",
            {**named, "n": count, "undoable": kept, "minutes": UNDO_MINUTES},
        ),
    )


def _undo_hint(ctx: Context, kept: bool) -> str:
    if not kept:
        return " (Too many undos are pending here: this one cannot be undone.)"
    return f" Undo within {UNDO_MINUTES} minutes with {ctx.prefix}memory undo (or say undo)."


@command(
    "memory undo",
    (),
    "bring back what you forgot last in this room (within 10 minutes)",
)
async def undo(ctx: Context) -> Reply:
    found = ctx.session.undo.take(ctx.sender)
    agents = {a.db: a for a in _agents_for_mine(ctx)}
    if found is None or not any(db in agents for db in found.dbs):
        nothing = NotFound("there is nothing of yours to bring back here")
        return refused(nothing, Meaning("nothing_to_undo"))
    count = 0
    for db, rows in found.parts:
        if db in agents:  # an agent this room no longer uses keeps its rows hidden
            await restore_rows(agents[db].memory.within(ctx.hearing), rows)
            count += len(rows)
    return Reply(
        True,
        f"Brought back {count} row{'s' if count != 1 else ''}.",
        meaning=Meaning("brought_back", {"n": count}),
    )


@command(
    "memory capture",
    (Arg("state", optional=True, choices=("on", "off")),),
    "remember what people tell the agent in this room (without tool calls), or stop",
)
async def capture(ctx: Context, state: str | None = None) -> Reply:
    if state is not None:
        await ctx.session.set_capture(state == "on")
    mode = await ctx.models.capture_mode(ctx.agent, ctx.session)
    if mode == "off":
        why = (
            "turned off in this room"
            if await ctx.session.capture() is False
            else f"{ctx.agent.name}'s capture is off in the config"
        )
        return ok(
            f"Capture is off in this room ({why}). What was captured stays until you "
            f"{ctx.prefix}memory forget <key>; turn it on with {ctx.prefix}memory capture on."
        )
    what = "the messages it answers" if mode == "messages" else "facts from the messages it answers"
    return ok(
        f"Capture is on in this room ({mode}): {ctx.agent.name} stores {what} in its own "
        f"memory (tag captured), told only where everyone present was there. See yours "
        f"with {ctx.prefix}memory mine; stop with {ctx.prefix}memory capture off."
    )


def _listing_key(ctx: Context) -> str:
    return LISTING_KV + json.dumps([ctx.session.name, ctx.sender])


async def _listing(ctx: Context) -> list[list[str]]:
    """This person's last ``mine`` listing in this room (``[]``: none)."""
    raw = await ctx.ledger.kv.get(_listing_key(ctx))
    listing = json.loads(raw) if raw else []
    return listing if isinstance(listing, list) else []


async def _forget_numbered(ctx: Context, number: int, listing: list[list[str]]) -> Reply:
    """Forget the row shown as ``number`` (within ``listing``) in this person's last
    ``mine`` in this room: refused, changing nothing, when that row changed since."""
    agent_name, row_id, key = listing[number - 1]
    agent = next((a for a in _agents_for_mine(ctx) if a.name == agent_name), None)
    rows = (
        []
        if agent is None
        else await agent.memory.within(ctx.hearing).said_by(ctx.sender, _alone(ctx))
    )
    # that row, still the visible one of its key in its room (the same key said in another
    # room is another row, and stays)
    same_row = [r for r in rows if r.row_id == row_id and r.key == key]
    if agent is None or not same_row:
        raise ConflictError(
            f"your list changed since I showed it ({number} is gone or changed); run "
            f"{ctx.prefix}memory mine again"
        )
    await ctx.engine.forget_rows(agent.db, agent.key, same_row, ctx.hearing.origin)
    kept = ctx.session.undo.put(ctx.sender, agent.db, same_row)
    value = same_row[0].value
    shown = value if len(value) <= 80 else value[:80] + "…"
    return ok(f"Forgot {number}: {shown}{_undo_hint(ctx, kept)}")


def _alone(ctx: Context) -> bool:
    """Whether only the sender reads the reply (a DM with the bot, or the operator)."""
    audience = ctx.hearing.audience
    return audience is None or audience.full or audience.only(ctx.sender)


def _agents_for_mine(ctx: Context) -> list[AgentHandle]:
    """Whose memory ``mine`` reads: every agent the room may use in a DM, else the room's."""
    if _alone(ctx):
        return list(ctx.agents.allowed_agents(ctx.session.name))
    return [ctx.agent]


async def _said_by_sender(ctx: Context) -> list[tuple[AgentHandle, list[MemoryRow]]]:
    found = []
    for agent in _agents_for_mine(ctx):
        rows = await agent.memory.within(ctx.hearing).said_by(ctx.sender, _alone(ctx))
        if rows:
            found.append((agent, rows))
    return found


def _mine_line(ctx: Context, agent: AgentHandle, row: MemoryRow) -> str:
    when = to_datetime(row.ts)
    origin = row.origin
    where = "this room" if origin is not None and origin.room == ctx.session.name else "a room"
    if origin is not None and origin.audience is not None and len(origin.audience) == 1:
        where = "a DM" if where != "this room" else where
    value = row.value if len(row.value) <= MINE_VALUE_CHARS else row.value[:MINE_VALUE_CHARS] + "…"
    name = row.key.removeprefix("_".join(ctx.sender.split()) + "/")
    label = "" if _MESSAGE_KEY.fullmatch(name) else f" [{name}]"
    return f"{value} ({agent.name}, {where}, {when:%Y-%m-%d}){label}"
