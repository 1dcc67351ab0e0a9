"""``tools``, ``tools log``, ``approve`` and ``deny`` (SPEC §12): the tools this room's agent
may use, the signed log of their calls here, and the answers to a call waiting for a yes.

Only the person whose message started the turn, or an admin, may answer a waiting call; an
answer after the deadline finds nothing and changes nothing. In Matrix these two commands
run beside the room's queue (the turn they answer holds it)."""

from __future__ import annotations

from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.tools import Journal, ToolBox

COMMANDS = CommandTree()
command = COMMANDS.command
LOGGED = 20
NO_TOOLS = "No tools beyond memory here (this peer runs without its tools part)."
ANSWER_WORDS = frozenset({"approve", "deny"})
"""The commands that answer a waiting call (a transport runs them beside a busy room)."""


def _box(ctx: Context) -> ToolBox | None:
    return ctx.tools


@command("tools", (), "the tools this room's agent may use, with their state and policy")
async def tools(ctx: Context) -> Reply:
    box = _box(ctx)
    if box is None:
        return Reply(True, NO_TOOLS)
    readers = ctx.hearing.audience
    lines = box.lines(tuple(ctx.agent.config.allowed_tools), readers)
    if not lines:
        return Reply(True, f"{ctx.agent.name} may use no tools beyond memory and reminders here.")
    shown = [f"- {t.name}: {t.state}, approval {t.policy}" for t in lines]
    waiting = box.approvals.waiting_in(ctx.session.name)
    more = [f"Waiting for an answer: {r.tool} ({r.id}, asked by {r.person})" for r in waiting]
    return Reply(
        True,
        f"Tools {ctx.agent.name} may use here:\n" + "\n".join(shown + more),
    )


@command("tools log", (), "the signed log of tool calls in this room: who approved what, when")
async def tools_log(ctx: Context) -> Reply:
    journal = Journal(ctx.ledger, ctx.agent.db, ctx.agent.key)
    room = None if ctx.hearing.audience is None else ctx.session.name
    records = await journal.in_room(room)
    if not records:
        return Reply(True, "No tool calls here yet.")
    lines = []
    for r in records[-LOGGED:]:
        by = f" by {r.decided_by}" if r.decided_by else ""
        note = f" ({r.note})" if r.note else ""
        when = r.at[:16].replace("T", " ")
        lines.append(
            f"- {when} {r.tool}({r.args}) asked by {r.asked_by}: {r.decision}{by}, "
            f"{r.outcome}{note}"
        )
    more = f"(the last {LOGGED} of {len(records)})\n" if len(records) > LOGGED else ""
    return Reply(True, "Tool calls here:\n" + more + "\n".join(lines))


async def _answer(ctx: Context, approve: bool, ref: str | None) -> Reply:
    box = _box(ctx)
    if box is None:
        return Reply(False, NO_TOOLS)
    request = box.approvals.answer(ctx.session.name, ctx.sender, ctx.is_admin, approve, ref)
    verb = "Approved" if approve else "Denied"
    return Reply(True, f"{verb}: {request.tool} ({request.id}).")


@command(
    "approve",
    (Arg("ref", optional=True, shown="id"),),
    "let a tool call waiting here run (the one waiting, or its id)",
)
async def approve(ctx: Context, ref: str | None = None) -> Reply:
    return await _answer(ctx, True, ref)


@command(
    "deny",
    (Arg("ref", optional=True, shown="id"),),
    "refuse a tool call waiting here (the one waiting, or its id)",
)
async def deny(ctx: Context, ref: str | None = None) -> Reply:
    return await _answer(ctx, False, ref)
