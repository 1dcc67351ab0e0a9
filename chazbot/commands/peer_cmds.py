"""Peer-level commands: agents, agent, pubkey, clear, and the /sharing group (the admins'
``/agent new|set|reset|show|delete|reload`` are in ``agent_cmds``; ``/help``, which lists the whole
tree, is declared beside it in ``chazbot/commands/__init__.py``)."""

from __future__ import annotations

import time

from chazbot.commands.agent_cmds import model_of, origin_of
from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import InputError, PermissionDenied
from chazbot.sync.outcomes import ago

COMMANDS = CommandTree()
command = COMMANDS.command


@command(
    "agents",
    (),
    "list the agents that may answer in this session: model, capture, where defined",
)
async def agents(ctx: Context) -> Reply:
    lines = [
        f"- {ag.name}"
        + (" (this session)" if ag.name == ctx.agent.name else "")
        + f": model {model_of(ctx, ag)}, capture {await ctx.models.capture_mode(ag)}, "
        f"defined in {origin_of(ag)}"
        for ag in ctx.agents.allowed_agents(ctx.session.name)
    ]
    return Reply(True, "Agents:\n" + "\n".join(lines))


@command(
    "agent",
    (Arg("name", optional=True),),
    "show this session's agent, or choose another one (admins)",
)
async def agent(ctx: Context, name: str | None = None) -> Reply:
    if name is None:
        banks = [
            f"{b.name} ({b.permission})"
            for b in await ctx.agent.memory.banks()
            if b.permission != "none"
        ]
        return Reply(
            True,
            f"{ctx.agent.name} answers in this session; its memory: {', '.join(banks)}.",
        )
    chosen = ctx.agents.agent(name)
    ctx.agents.check_agent_allowed(ctx.session.name, chosen)
    if chosen is not ctx.agent and not ctx.is_admin:
        raise PermissionDenied(
            f"only admins may choose another agent for this session ({ctx.agent.name} answers here)"
        )
    await ctx.session.set_agent(chosen.name)
    return Reply(True, f"{chosen.name} answers in this session now.")


@command("pubkey", (), "show this peer's public key (and the current agent's)")
async def pubkey(ctx: Context) -> Reply:
    return Reply(True, f"peer: {ctx.key.public}\n{ctx.agent.name}: {ctx.agent.key.public}")


@command("clear", (), "start a fresh context in this session (history is kept)", first=True)
async def clear(ctx: Context) -> Reply:
    await ctx.session.clear()
    return Reply(True, "Context cleared.")


@command("sharing requests", (), "list pending import requests from other peers", admin=True)
async def requests(ctx: Context) -> Reply:
    pending = await ctx.sharing.pending_requests()
    if not pending.total:
        return Reply(True, "No pending requests.")
    per_db = ", ".join(f"{label}: {n}" for label, n in pending.per_db)
    lines = [
        f"- request {r.id}: {r.key[:24]}… wants {r.permission} on "
        f"{pending.labels.get(r.db, r.db[:19])}"
        for r in pending.newest
    ]
    head = f"{pending.total} pending request{'s' if pending.total != 1 else ''} ({per_db})"
    if pending.total > len(pending.newest):
        head += f"; the newest {len(pending.newest)}"
    head += f" (decide with {ctx.prefix}sharing approve|reject <id>)"
    return Reply(True, head + ":\n" + "\n".join(lines))


@command(
    "sharing status",
    (),
    "the banks synced with other peers: cursors, last pull and push, errors",
    admin=True,
)
async def status(ctx: Context) -> Reply:
    pairs = await ctx.sharing.sync_pairs()
    if not pairs:
        return Reply(
            True,
            "No bank here is synced with another peer (import one with "
            f"{ctx.prefix}memory import <ticket>).",
        )
    now = time.time()
    if pairs[0].state == "off":
        head = f"Sync is off on this peer (sync_listen); {len(pairs)} to sync when it is on:"
    else:
        failing = sum(p.state == "failing" for p in pairs)
        head = f"Synced with other peers: {len(pairs)}" + (
            f", {failing} failing:" if failing else ", all ok:"
        )
    lines = [head]
    for p in pairs:
        line = f"- {p.bank} with {p.address}: pulled to {p.pulled}, pushed to {p.pushed}"
        if p.state != "off":
            line += f"; last pull {ago(p.last_pull, now)}, last push {ago(p.last_push, now)}"
        if p.state == "failing":
            line += f"; failing: {p.error}"
        lines.append(line)
    return Reply(True, "\n".join(lines))


@command("sharing approve", (Arg("id"),), "approve an import request", admin=True)
async def approve(ctx: Context, id: str) -> Reply:
    done = await ctx.sharing.decide_request(_request_id(id), True)
    return Reply(True, f"Approved request {done.id}: {done.permission} for {done.key[:24]}….")


@command("sharing reject", (Arg("id"),), "reject an import request", admin=True)
async def reject(ctx: Context, id: str) -> Reply:
    done = await ctx.sharing.decide_request(_request_id(id), False)
    return Reply(True, f"Rejected request {done.id}.")


def _request_id(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise InputError(f"a request id is a number: {text[:40]!r}")
    return int(text)
