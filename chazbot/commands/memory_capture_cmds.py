"""``/memory`` on what people said: capture (SPEC §5b) and people owning their rows, mine and
forget-mine (SPEC §5c)."""

from __future__ import annotations

from chazbot.agent.host import AgentHandle
from chazbot.commands.context import Context
from chazbot.commands.memory_cmds import ok
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import NotFound
from chazbot.memory.rows import MemoryRow, to_datetime

MINE_SHOWN = 20  # rows /memory mine lists per agent (the newest)
MINE_VALUE_CHARS = 300

COMMANDS = CommandTree()
command = COMMANDS.command


@command("memory mine", (), "list what the bot keeps that you said (everything, in a DM)")
async def mine(ctx: Context) -> Reply:
    found = await _said_by_sender(ctx)
    total = sum(len(rows) for _, rows in found)
    if not total:
        return ok(
            "I keep nothing you said"
            + ("" if _alone(ctx) else " that this room may hear (ask in a DM for all)")
            + "."
        )
    lines = []
    for agent, rows in found:
        for row in rows[:MINE_SHOWN]:
            lines.append(_mine_line(ctx, agent, row))
    shown = min(total, MINE_SHOWN * len(found))
    head = f"{total} row{'s' if total != 1 else ''} you said"
    if shown < total:
        head += f"; the newest {shown}"
    return ok(
        head
        + ":\n"
        + "\n".join(lines)
        + f"\nForget one with {ctx.prefix}memory forget-mine <key>, or all with "
        f"{ctx.prefix}memory forget-mine all."
    )


@command(
    "memory forget-mine",
    (Arg("key", shown="key|all"),),
    "hide what you said (one key, or all); never touches anyone else's rows",
)
async def forget_mine(ctx: Context, key: str) -> Reply:
    which = None if key.lower() == "all" else key
    hidden = 0
    for agent in _agents_for_mine(ctx):
        memory = agent.memory.within(ctx.hearing)
        hidden += await memory.forget_said_by(ctx.sender, which, _alone(ctx))
    if not hidden:
        what = "nothing you said" if which is None else f"no row {which!r} that you said"
        raise NotFound(f"{what} is kept{'' if _alone(ctx) else ' where this room may see'}")
    what = "everything you said" if which is None else repr(which)
    return ok(f"Forgot {what} ({hidden} row{'s' if hidden != 1 else ''}).")


@command(
    "memory capture",
    (Arg("state", optional=True, choices=("on", "off")),),
    "remember what people tell the agent in this room (without tool calls), or stop",
)
async def capture(ctx: Context, state: str | None = None) -> Reply:
    if state is not None:
        await ctx.session.set_capture(state == "on")
    mode = await ctx.peer.capture_mode(ctx.agent, ctx.session)
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


def _alone(ctx: Context) -> bool:
    """Whether only the sender reads the reply (a DM with the bot, or the operator)."""
    audience = ctx.hearing.audience
    return audience is None or audience.full or audience.only(ctx.sender)


def _agents_for_mine(ctx: Context) -> list[AgentHandle]:
    """Whose memory ``mine`` reads: every agent the room may use in a DM, else the room's."""
    if _alone(ctx):
        return list(ctx.peer.allowed_agents(ctx.session.name))
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
    return f"- [{row.key}] ({agent.name}, {where}, {when:%Y-%m-%d}): {value}"
