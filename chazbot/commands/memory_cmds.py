"""``/memory`` on banks and who may use them: new, list, delete, grant, revoke, attach and
detach (and their user-facing strings). Browsing and recall settings are in
``memory_browse_cmds``, what people said and capture in ``memory_capture_cmds``, sharing in
``sharing_cmds``."""

from __future__ import annotations

from chazbot.agent.host import AgentHandle
from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import ConflictError, InputError, NotFound, PermissionDenied
from chazbot.ledger import Permission
from chazbot.memory.banks import (
    BANKS_PER_PERSON,
    Hosted,
    NeedsOwnerGrant,
    check_name,
    grant,
    looks_like_key,
    revoke,
    set_key,
)
from chazbot.memory.banks import looks_like_db_id as is_db_id

COMMANDS = CommandTree()
command = COMMANDS.command


def ok(text: str) -> Reply:
    return Reply(True, text)


async def resolve_hosted(ctx: Context, ref: str) -> Hosted:
    """A bank or hosted agent DB by display name or DB id."""
    reg = ctx.banks.registry
    if is_db_id(ref):
        found = await reg.by_db(ref)
    else:
        found = await reg.get("bank", ref) or await reg.get("agent", ref)
    if found is None:
        banks = ", ".join(h.name for h in await reg.all("bank")) or "none"
        raise NotFound(
            f"no bank or agent {ref!r} on this peer; banks: {banks} (self is the room's "
            f"agent's own memory: {ctx.prefix}memory search self <words>)"
        )
    return found


@command(
    "memory new",
    (Arg("name"), Arg("description", optional=True, rest=True)),
    f"create a bank on this peer (it holds the key); non-admins: {BANKS_PER_PERSON} each",
)
async def new(ctx: Context, name: str, description: str = "") -> Reply:
    checked = check_name(name)
    if await ctx.banks.registry.get("bank", checked) is not None:
        raise ConflictError(f"a bank named {checked!r} exists already")
    # a non-admin is held to the peer's banks.BankLimits (issue 22, item 9)
    db = await ctx.banks.create_bank(
        checked, description, created_by=ctx.sender, bounded=not ctx.is_admin
    )
    return ok(f"Created bank {checked} ({db}).")


@command(
    "memory list",
    (),
    "list the banks hosted by this peer (non-admins, and rooms not only of admins: those the "
    "room's agent can read)",
)
async def list_(ctx: Context) -> Reply:
    banks = await ctx.banks.registry.all("bank")
    heard = ctx.hearing.audience
    if not ctx.is_admin or not (heard is None or heard.full or heard.admins_only):
        # in a room, whoever asked, the reply is read by everyone there (SPEC §5c, §6)
        return await _list_readable(ctx, banks)
    if not banks:
        return ok(f"No banks yet. Create one with {ctx.prefix}memory new <name>.")
    lines = [_bank_line(b) for b in banks]
    return ok("Banks on this peer:\n" + "\n".join(lines))


@command(
    "memory delete",
    (Arg("ref"),),
    "unregister a bank; its DB stays on disk as an archive",
    admin=True,
)
async def delete(ctx: Context, ref: str) -> Reply:
    hosted = await resolve_hosted(ctx, ref)
    if hosted.kind != "bank":
        raise InputError(
            f"{hosted.name!r} is an agent, not a bank; delete an agent with "
            f"{ctx.prefix}agent delete {hosted.name}"
        )
    await ctx.banks.delete_bank(hosted)
    return ok(
        f"Deleted bank {hosted.name} from this peer (and from every agent and session; "
        f"no longer shared); its database {hosted.db[:19]}… is kept as an archive."
    )


@command(
    "memory grant",
    (
        Arg("bank"),
        Arg("agent", shown="agent|key"),
        Arg("permission", choices=("read", "write")),
    ),
    "authorise an agent (or another peer's key) on a bank or a hosted agent's DB",
    admin=True,
)
async def grant_(ctx: Context, bank: str, agent: str, permission: str) -> Reply:
    hosted = await resolve_hosted(ctx, bank)
    perm = Permission.parse(permission)
    if looks_like_key(agent) and not _local_agent(ctx, agent):
        await set_key(ctx.ledger, ctx.banks.registry, hosted.db, agent, perm)
        return ok(f"Granted key {agent} {perm.name} on {hosted.name}.")
    handle = _local_agent(ctx, agent) or ctx.agents.agent(agent)
    if hosted.db == handle.db:
        raise InputError(f"{handle.name} always has its own memory; grant another agent instead")
    meta = await ctx.ledger.fields(hosted.db, "meta")
    try:
        done = await grant(
            ctx.ledger,
            ctx.banks.registry,
            hosted.name,
            hosted.db,
            handle.key,
            handle.db,
            perm,
            agent_name=handle.name,
            owner_ref=str(meta.get("name") or hosted.db),
        )
    except NeedsOwnerGrant as exc:  # the way out, in this transport's words (SPEC §4)
        raise PermissionDenied(
            f"{exc}: on their peer, {ctx.prefix}memory grant {exc.bank} {exc.key} {exc.permission}"
        ) from exc
    if done.delegated_via is not None:
        return ok(
            f"Granted {handle.name} {perm.name} on {hosted.name} through this peer's key "
            f"{done.delegated_via} (this peer is not the bank's admin: {handle.name}'s "
            "writes are signed by that key and name the agent)."
        )
    return ok(f"Granted {handle.name} {perm.name} on {hosted.name}.")


@command(
    "memory revoke",
    (Arg("bank"), Arg("agent", shown="agent|key")),
    "take an agent's grant on a bank away, or another peer's key (as /pubkey prints it)",
    admin=True,
)
async def revoke_(ctx: Context, bank: str, agent: str) -> Reply:
    hosted = await resolve_hosted(ctx, bank)
    if looks_like_key(agent) and not _local_agent(ctx, agent):
        await set_key(ctx.ledger, ctx.banks.registry, hosted.db, agent, None)
        return ok(
            f"Revoked key {agent} on {hosted.name}; whatever it (or agents behind it) "
            "writes from now on is refused."
        )
    handle = _local_agent(ctx, agent) or ctx.agents.agent(agent)
    removed = await revoke(
        ctx.ledger,
        ctx.banks.registry,
        hosted.name,
        hosted.db,
        handle.key,
        handle.db,
        agent_name=handle.name,
    )
    tail = (
        "" if removed else " (its bank ref could not be removed; writes are refused all the same)"
    )
    return ok(f"Revoked {handle.name} on {hosted.name}.{tail}")


@command("memory attach", (Arg("bank"),), "surface a bank's memories in this session's auto-recall")
async def attach(ctx: Context, bank: str) -> Reply:
    name, db = await ctx.agent.memory.resolve(bank)
    if name is None:
        raise InputError("own memory is always searched; attach a bank instead")
    if not await ctx.agent.memory.can_read(db):
        raise PermissionDenied(
            f"{ctx.agent.name} has no grant on {name}; ask an admin to "
            f"{ctx.prefix}memory grant {name} {ctx.agent.name} read"
        )
    await ctx.session.attach(name, db)
    return ok(f"Attached {name} to this session.")


@command("memory detach", (Arg("bank"),), "stop surfacing a bank in this session")
async def detach(ctx: Context, bank: str) -> Reply:
    attached = await ctx.session.attachments()
    name = next((n for n in attached if n.lower() == bank.lower()), None) or next(
        (n for n, db in attached.items() if db == bank), None
    )
    if name is None:
        listed = ", ".join(attached) or "none"
        raise NotFound(f"{bank!r} is not attached to this session; attached: {listed}")
    await ctx.session.detach(name)
    return ok(f"Detached {name} from this session.")


def _bank_line(bank: Hosted, permission: str | None = None) -> str:
    described = f": {bank.data['description']}" if bank.data.get("description") else ""
    held = f" [{permission}]" if permission is not None else ""
    return f"- {bank.name}{described}{held} ({bank.db[:19]}…)"


async def _list_readable(ctx: Context, banks: list[Hosted]) -> Reply:
    """A non-admin's ``list``: the banks the room's agent can read, and nothing else hosted
    here (SPEC §6: their names are not everyone's to see)."""
    hosted = {b.db: b for b in banks}
    lines = []
    for access in await ctx.agent.memory.banks():
        if access.db == ctx.agent.db or access.permission == "none":
            continue
        bank = hosted.get(access.db) or Hosted("bank", access.name, access.db, {})
        lines.append(_bank_line(bank, access.permission))
    if not lines:
        return ok(
            f"{ctx.agent.name} can read no bank here besides its own memory. "
            f"Create one with {ctx.prefix}memory new <name>."
        )
    return ok(f"Banks {ctx.agent.name} can read:\n" + "\n".join(lines))


def _local_agent(ctx: Context, ref: str) -> AgentHandle | None:
    """The hosted agent whose key is ``ref`` (a key as /pubkey prints it), if any."""
    return next((ag for ag in ctx.agents.agents.values() if ag.key.public == ref), None)
