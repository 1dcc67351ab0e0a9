"""The ``/memory`` commands (and their user-facing strings)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from chazbot.agent.host import AgentHandle
from chazbot.agent.recall import CONFIG_STORE, RecallSettings, recall_settings
from chazbot.commands.context import Context
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import ConflictError, InputError, NotFound, PermissionDenied
from chazbot.ledger import Permission
from chazbot.memory import bm25_kernel
from chazbot.memory.banks import (
    BANKS_PER_PERSON,
    Hosted,
    NeedsOwnerGrant,
    check_name,
    grant,
    holder_keys,
    looks_like_key,
    read_refs,
    revoke,
    set_key,
)
from chazbot.memory.banks import looks_like_db_id as is_db_id
from chazbot.memory.embedders.floors import FLOOR_FIELD, default_floor, parse_floor
from chazbot.memory.engine import LoadStatus, MemoryEngine
from chazbot.memory.rows import EMBEDDINGS_PREFIX, MEMORY_STORE, MemoryRow, to_datetime
from chazbot.memory.tools import format_hits

RECALL_DEFAULTS = RecallSettings.FIELDS  # the settings /memory config names
STATS_WAIT_S = 1.0  # /memory stats waits this long for a view to load, then shows progress
MINE_SHOWN = 20  # rows /memory mine lists per agent (the newest)
MINE_VALUE_CHARS = 300


def ok(text: str) -> Reply:
    return Reply(True, text)


async def resolve_hosted(ctx: Context, ref: str) -> Hosted:
    """A bank or hosted agent DB by display name or DB id."""
    reg = ctx.peer.registry
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


def register(tree: CommandTree) -> None:
    add = tree.add

    @add(
        "memory new",
        (Arg("name"), Arg("description", optional=True, rest=True)),
        f"create a bank on this peer (it holds the key); non-admins: {BANKS_PER_PERSON} each",
    )
    async def new(ctx: Context, a: dict[str, str]) -> Reply:
        name = check_name(a["name"])
        if await ctx.peer.registry.get("bank", name) is not None:
            raise ConflictError(f"a bank named {name!r} exists already")
        # a non-admin is held to banks.BANKS_PER_PERSON and BANKS_TOTAL (issue 22, item 9)
        db = await ctx.peer.create_bank(
            name, a.get("description", ""), created_by=ctx.sender, bounded=not ctx.is_admin
        )
        return ok(f"Created bank {name} ({db}).")

    @add(
        "memory list",
        (),
        "list the banks hosted by this peer (non-admins: those the room's agent can read)",
    )
    async def list_(ctx: Context, a: dict[str, str]) -> Reply:
        banks = await ctx.peer.registry.all("bank")
        if not ctx.is_admin:
            return await _list_readable(ctx, banks)
        if not banks:
            return ok(f"No banks yet. Create one with {ctx.prefix}memory new <name>.")
        lines = [_bank_line(b) for b in banks]
        return ok("Banks on this peer:\n" + "\n".join(lines))

    @add(
        "memory delete",
        (Arg("ref"),),
        "unregister a bank; its DB stays on disk as an archive",
        admin=True,
    )
    async def delete(ctx: Context, a: dict[str, str]) -> Reply:
        hosted = await resolve_hosted(ctx, a["ref"])
        if hosted.kind != "bank":
            raise InputError(
                f"{hosted.name!r} is an agent, not a bank; agents are removed in the config"
            )
        await ctx.peer.delete_bank(hosted)
        return ok(
            f"Deleted bank {hosted.name} from this peer (and from every agent and session; "
            f"no longer shared); its database {hosted.db[:19]}… is kept as an archive."
        )

    @add(
        "memory grant",
        (
            Arg("bank"),
            Arg("agent", shown="agent|key"),
            Arg("permission", choices=("read", "write")),
        ),
        "authorise an agent (or another peer's key) on a bank or a hosted agent's DB",
        admin=True,
    )
    async def grant_(ctx: Context, a: dict[str, str]) -> Reply:
        hosted = await resolve_hosted(ctx, a["bank"])
        perm = Permission.parse(a["permission"])
        if looks_like_key(a["agent"]) and not _local_agent(ctx, a["agent"]):
            await set_key(ctx.peer.ledger, ctx.peer.registry, hosted.db, a["agent"], perm)
            return ok(f"Granted key {a['agent']} {perm.name} on {hosted.name}.")
        agent = _local_agent(ctx, a["agent"]) or ctx.peer.agent(a["agent"])
        if hosted.db == agent.db:
            raise InputError(f"{agent.name} always has its own memory; grant another agent instead")
        meta = await ctx.peer.ledger.fields(hosted.db, "meta")
        try:
            done = await grant(
                ctx.peer.ledger,
                ctx.peer.registry,
                hosted.name,
                hosted.db,
                agent.key,
                agent.db,
                perm,
                agent_name=agent.name,
                owner_ref=str(meta.get("name") or hosted.db),
            )
        except NeedsOwnerGrant as exc:  # the way out, in this transport's words (SPEC §4)
            raise PermissionDenied(
                f"{exc}: on their peer, {ctx.prefix}memory grant {exc.bank} {exc.key} "
                f"{exc.permission}"
            ) from exc
        if done.delegated_via is not None:
            return ok(
                f"Granted {agent.name} {perm.name} on {hosted.name} through this peer's key "
                f"{done.delegated_via} (this peer is not the bank's admin: {agent.name}'s "
                "writes are signed by that key and name the agent)."
            )
        return ok(f"Granted {agent.name} {perm.name} on {hosted.name}.")

    @add(
        "memory revoke",
        (Arg("bank"), Arg("agent", shown="agent|key")),
        "take an agent's grant on a bank away, or another peer's key (as /pubkey prints it)",
        admin=True,
    )
    async def revoke_(ctx: Context, a: dict[str, str]) -> Reply:
        hosted = await resolve_hosted(ctx, a["bank"])
        if looks_like_key(a["agent"]) and not _local_agent(ctx, a["agent"]):
            await set_key(ctx.peer.ledger, ctx.peer.registry, hosted.db, a["agent"], None)
            return ok(
                f"Revoked key {a['agent']} on {hosted.name}; whatever it (or agents behind it) "
                "writes from now on is refused."
            )
        agent = _local_agent(ctx, a["agent"]) or ctx.peer.agent(a["agent"])
        removed = await revoke(
            ctx.peer.ledger,
            ctx.peer.registry,
            hosted.name,
            hosted.db,
            agent.key,
            agent.db,
            agent_name=agent.name,
        )
        tail = (
            ""
            if removed
            else " (its bank ref could not be removed; writes are refused all the same)"
        )
        return ok(f"Revoked {agent.name} on {hosted.name}.{tail}")

    @add("memory attach", (Arg("bank"),), "surface a bank's memories in this session's auto-recall")
    async def attach(ctx: Context, a: dict[str, str]) -> Reply:
        name, db = await ctx.agent.memory.resolve(a["bank"])
        if name is None:
            raise InputError("own memory is always searched; attach a bank instead")
        if not await ctx.agent.memory.can_read(db):
            raise PermissionDenied(
                f"{ctx.agent.name} has no grant on {name}; ask an admin to "
                f"{ctx.prefix}memory grant {name} {ctx.agent.name} read"
            )
        await ctx.session.attach(name, db)
        return ok(f"Attached {name} to this session.")

    @add("memory detach", (Arg("bank"),), "stop surfacing a bank in this session")
    async def detach(ctx: Context, a: dict[str, str]) -> Reply:
        attached = await ctx.session.attachments()
        name = next((n for n in attached if n.lower() == a["bank"].lower()), None) or next(
            (n for n, db in attached.items() if db == a["bank"]), None
        )
        if name is None:
            listed = ", ".join(attached) or "none"
            raise NotFound(f"{a['bank']!r} is not attached to this session; attached: {listed}")
        await ctx.session.detach(name)
        return ok(f"Detached {name} from this session.")

    @add(
        "memory config",
        (
            Arg("action", optional=True, choices=("show", "set", "reset")),
            Arg("key", optional=True),
            Arg("value", optional=True, rest=True),
        ),
        "view the agent's auto-recall settings; set and reset (every room's) need an admin",
    )
    async def config(ctx: Context, a: dict[str, str]) -> Reply:
        action = a.get("action", "show")
        if action == "show":
            if "key" in a:
                raise InputError(f"show takes no arguments. Usage: {ctx.prefix}memory config show")
            s = await recall_settings(ctx.peer.ledger, ctx.agent.db)
            banks = s.banks
            shown = "(all attached)" if banks is None else (", ".join(banks) or "(none)")
            return ok(
                f"Auto-recall config for {ctx.agent.name}:\n"
                f"auto_recall_enabled = {str(s.enabled).lower()}\n"
                f"max_entries         = {s.max_entries}\n"
                f"auto_recall_banks   = {shown}\n"
                f"min_similarity      = {_floor_line(ctx, s.min_similarity)}"
            )
        if not ctx.is_admin:  # the agent's settings hold in every room it answers in
            raise PermissionDenied(
                f"changing {ctx.agent.name}'s config changes it in every room; only admins may "
                f"(see it with {ctx.prefix}memory config)"
            )
        if action == "reset":
            if "value" in a:
                raise InputError(f"Usage: {ctx.prefix}memory config reset [key]")
            if "key" in a and a["key"] not in RECALL_DEFAULTS:
                raise InputError(
                    f"unknown setting {a['key']!r}; settings: {', '.join(RECALL_DEFAULTS)}"
                )
            fields = [a["key"]] if "key" in a else list(RECALL_DEFAULTS)
            ops = [{"op": "set", "field": k, "value": None} for k in fields]
            await ctx.peer.ledger.write(ctx.agent.db, ctx.agent.key, {CONFIG_STORE: ops})
            if "key" in a:
                return ok(f"Reset {a['key']} to its default.")
            return ok("Auto-recall config reset to defaults.")
        key, raw = a.get("key"), a.get("value")
        if key is None or raw is None:
            raise InputError(
                f"Usage: {ctx.prefix}memory config set <key> <value>; "
                f"keys: {', '.join(RECALL_DEFAULTS)}"
            )
        value = await _config_value(ctx, key, raw)
        await ctx.peer.ledger.write(
            ctx.agent.db,
            ctx.agent.key,
            {CONFIG_STORE: [{"op": "set", "field": key, "value": value}]},
        )
        return ok(f"Set {key} = {raw.strip()}.")

    @add(
        "memory reindex",
        (Arg("bank", optional=True),),
        "backfill vectors for the active embedding model",
    )
    async def reindex(ctx: Context, a: dict[str, str]) -> Reply:
        name, total = await ctx.agent.memory.reindex(a.get("bank"))
        return ok(f"Reindexed {total} rows of {name or 'own memory'} for {ctx.peer.memory.model}.")

    @add(
        "memory forget",
        (Arg("key"), Arg("bank", optional=True)),
        "hide a key from recall (history is kept)",
    )
    async def forget(ctx: Context, a: dict[str, str]) -> Reply:
        await ctx.memory.forget(a["key"], a.get("bank"))
        return ok(f"Forgot {a['key']!r}.")

    # ---- people own what they said (SPEC §5c) -------------------------------------------

    @add("memory mine", (), "list what the bot keeps that you said (everything, in a DM)")
    async def mine(ctx: Context, a: dict[str, str]) -> Reply:
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

    @add(
        "memory forget-mine",
        (Arg("key", shown="key|all"),),
        "hide what you said (one key, or all); never touches anyone else's rows",
    )
    async def forget_mine(ctx: Context, a: dict[str, str]) -> Reply:
        key = None if a["key"].lower() == "all" else a["key"]
        hidden = 0
        for agent in _agents_for_mine(ctx):
            memory = agent.memory.within(ctx.hearing)
            hidden += await memory.forget_said_by(ctx.sender, key, _alone(ctx))
        if not hidden:
            what = "nothing you said" if key is None else f"no row {key!r} that you said"
            raise NotFound(f"{what} is kept{'' if _alone(ctx) else ' where this room may see'}")
        what = "everything you said" if key is None else repr(key)
        return ok(f"Forgot {what} ({hidden} row{'s' if hidden != 1 else ''}).")

    @add(
        "memory search",
        (Arg("bank", shown="bank|self"), Arg("query", rest=True, optional=True)),
        "search the room's agent's memory (or a bank, or self) with the ranking of recall",
    )
    async def search(ctx: Context, a: dict[str, str]) -> Reply:
        if not await _names_a_database(ctx, a["bank"]):
            # "/memory search dog": the words are the query, in the room's agent's memory
            a = {"bank": "self", "query": " ".join(filter(None, [a["bank"], a.get("query")]))}
        db, label = await _browse_target(ctx, a["bank"])
        heard = await ctx.memory.filtered(db)  # a room's reply obeys its audience, admin or not
        floor = await ctx.peer.memory.agent_floor(ctx.agent.db)  # only what recall would pass
        ranked = await ctx.peer.memory.recall(db, a.get("query", ""), None, 10, heard, floor)
        if not ranked:
            return ok(f"No memories found in {label}.")
        from chazbot.memory.rows import Hit, to_datetime

        hits = [
            Hit(r.row.key, r.row.value, r.row.tags, to_datetime(r.row.ts), r.score) for r in ranked
        ]
        return ok(f"Top {len(hits)} in {label}:\n" + format_hits(hits))

    @add(
        "memory stats",
        (Arg("bank", optional=True),),
        "entries, keys, vectors per model, size, and the keys holding access",
    )
    async def stats(ctx: Context, a: dict[str, str]) -> Reply:
        db, label = await _browse_target(ctx, a.get("bank", "self"))
        stores = await ctx.peer.ledger.stores(db)
        engine = ctx.peer.memory
        status = engine.load_status(db)
        if status is None or not status.ready:
            # a big bank loads off the event loop: wait a little, then report its progress
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(engine.view(db), STATS_WAIT_S)
            status = engine.load_status(db)
        size = await ctx.peer.ledger.db_size(db)
        heard = await ctx.memory.filtered(db)
        if status and status.ready:
            allowed = (await engine.view(db)).audience_filter(heard)
            keys = str(engine.visible_count(db) if allowed is None else len(allowed))
            if allowed is not None:
                keys += " (those this room may hear)"
        else:
            keys = "…"
        vectors = [
            f"{s.removeprefix(EMBEDDINGS_PREFIX)}: {n}"
            for s, n in sorted(stores.items())
            if s.startswith(EMBEDDINGS_PREFIX)
        ]
        return ok(
            f"Stats for {label}:\n"
            f"rows written   = {stores.get(MEMORY_STORE, 0)}\n"
            f"visible keys   = {keys}\n"
            f"index          = {_index_line(status)}\n"
            f"search         = {bm25_kernel.describe()}\n"
            f"vectors        = {', '.join(vectors) or 'none'}\n"
            f"recall         = {_recall_line(engine)}\n"
            f"entries        = {await ctx.peer.ledger.count_entries(db)}\n"
            f"size           = {size} bytes\n" + await _access_lines(ctx, db)
        )

    # ---- capture (SPEC §5b) -------------------------------------------------------------

    @add(
        "memory capture",
        (Arg("state", optional=True, choices=("on", "off")),),
        "remember what people tell the agent in this room (without tool calls), or stop",
    )
    async def capture(ctx: Context, a: dict[str, str]) -> Reply:
        state = a.get("state")
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
        what = (
            "the messages it answers"
            if mode == "messages"
            else "facts from the messages it answers"
        )
        return ok(
            f"Capture is on in this room ({mode}): {ctx.agent.name} stores {what} in its own "
            f"memory (tag captured), told only where everyone present was there. See yours "
            f"with {ctx.prefix}memory mine; stop with {ctx.prefix}memory capture off."
        )


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


def _floor_line(ctx: Context, chosen: float | None) -> str:
    """``min_similarity`` as ``show`` prints it: the value in effect and where it comes from."""
    engine = ctx.peer.memory
    model = engine.model
    if model is None:
        held = f"{chosen:g} set, " if chosen is not None else ""
        return f"none ({held}no embedder: recall is BM25 only)"
    floor = engine.similarity_floor(chosen)
    if chosen is not None:
        default = default_floor(model)
        was = f"{default:g}" if default is not None else "none"
        return f"{floor:g} (set for {ctx.agent.name}; {model}'s default is {was})"
    if floor is None:
        return f"none ({model} has no measured default: every vector match counts)"
    return f"{floor:g} ({model}'s default)"


def _alone(ctx: Context) -> bool:
    """Whether only the sender reads the reply (a DM with the bot, or the operator)."""
    audience = ctx.hearing.audience
    return audience is None or audience.full or audience.present <= {ctx.sender}


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


def _recall_line(engine: MemoryEngine) -> str:
    """How recall ranks, and how often it fell back to BM25 since the start (SPEC §3:
    never silently), with the captured rows still waiting for their vectors."""
    if engine.model is None:
        return "BM25 only (no embedder)"
    falls = engine.fallbacks
    line = f"hybrid ({engine.model}); {falls.total} fell back to BM25 since the start"
    if falls.total:
        line += " (" + ", ".join(f"{n} {r}" for r, n in sorted(falls.by_reason.items())) + ")"
    waiting = engine.vectors_later.pending if engine.vectors_later is not None else 0
    if waiting:
        line += f"; {waiting} captured rows waiting for their vectors"
    return line


def _index_line(status: LoadStatus | None) -> str:
    if status is None:
        return "not loaded"
    if not status.ready:
        return f"loading, {status.done}/{status.total} rows read"
    source = "snapshot + newer rows" if status.from_snapshot else "all rows"
    return f"loaded from {source} in {status.seconds:.2f} s"


async def _names_a_database(ctx: Context, ref: str) -> bool:
    """Whether ``ref`` is self, a bank the room's agent holds, or a bank or agent hosted here."""
    try:
        await ctx.agent.memory.resolve(ref)
        return True
    except NotFound:
        pass
    reg = ctx.peer.registry
    if is_db_id(ref):
        return await reg.by_db(ref) is not None
    return await reg.get("bank", ref) is not None or await reg.get("agent", ref) is not None


async def _browse_target(ctx: Context, ref: str) -> tuple[str, str]:
    """The database a person browses (search, stats): the session agent's own memory or a
    bank that agent can read; anything else hosted here only for admins (SPEC §6)."""
    scope = ctx.agent.memory
    try:
        name, db = await scope.resolve(ref)
    except NotFound:
        name, db = "", ""
    if db == ctx.agent.db:
        return db, f"{ctx.agent.name}'s own memory"
    if db and await scope.can_read(db):
        return db, name or db
    if not ctx.is_admin:
        readable = [b.name for b in await scope.banks() if b.permission != "none"]
        raise PermissionDenied(
            f"{ctx.agent.name} cannot read {ref[:80]!r}; here you may browse "
            f"{', '.join(readable)} (other databases need an admin)"
        )
    hosted = await resolve_hosted(ctx, ref)
    return hosted.db, hosted.name


def _local_agent(ctx: Context, ref: str) -> AgentHandle | None:
    """The hosted agent whose key is ``ref`` (a key as /pubkey prints it), if any."""
    return next((ag for ag in ctx.peer.agents.values() if ag.key.public == ref), None)


async def _access_lines(ctx: Context, db: str) -> str:
    """Who holds access, with level and what this peer knows of each key."""
    peer = ctx.peer
    state = await peer.ledger.auth_state(db)
    labels = {k.public: label for label, k in await peer.registry.labelled_keys()}
    agents = {ag.key.public: ag.name for ag in peer.agents.values()}
    requests = {r.key: r for r in await peer.sharing.requests(db, status=None)}
    delegated = await peer.registry.delegations(db)
    held_here = await holder_keys(peer.registry, state)
    via = held_here[0][1].public if held_here else None  # the key delegated agents act with
    lines = []
    active = sorted(
        ((k, g) for k, g in state.items() if g.active),
        key=lambda item: (-item[1].perm.rank()[0], -item[1].perm.rank()[1], item[0]),
    )
    for key, held in active:
        label = labels.get(key, "")
        if key in agents:
            who = f"agent {agents[key]}"
        elif label == "peer":
            who = "this peer"
        elif label.startswith("bank:"):
            who = "this peer (the bank's key)"
        elif key in requests:
            who = f"another peer (import request {requests[key].id})"
        else:
            who = "another peer or agent"
        if key == via and delegated:
            names = ", ".join(f"{d.agent} ({d.permission})" for d in delegated.values())
            who += f"; delegated to {names}"
        lines.append(f"- {key} {held.perm.name} — {who}")
    revoked = sum(1 for g in state.values() if not g.active)
    tail = f" ({revoked} revoked)" if revoked else ""
    return f"access{tail}:\n" + ("\n".join(lines) or "- nobody")


async def _config_value(ctx: Context, key: str, raw: str) -> Any:
    text = raw.strip()
    if key == "auto_recall_enabled":
        truth = {"true": True, "on": True, "yes": True, "false": False, "off": False, "no": False}
        if text.lower() not in truth:
            raise InputError("auto_recall_enabled takes true or false")
        return truth[text.lower()]
    if key == "max_entries":
        if not text.isdigit() or not 1 <= int(text) <= 20:
            raise InputError("max_entries takes a whole number from 1 to 20")
        return int(text)
    if key == "auto_recall_banks":
        names = [n.strip() for n in text.split(",") if n.strip()]
        refs = await read_refs(ctx.peer.ledger, ctx.agent.db)
        known = {r.lower(): r for r in refs}
        unknown = [n for n in names if n.lower() not in known]
        if unknown:
            have = ", ".join(sorted(refs)) or "none"
            raise InputError(
                f"unknown bank(s) {', '.join(unknown)}; {ctx.agent.name} holds: {have}"
            )
        return [known[n.lower()] for n in names]
    if key == FLOOR_FIELD:
        return repr(parse_floor(text))  # a decimal string: entries hold no floats
    raise InputError(f"unknown setting {key!r}; settings: {', '.join(RECALL_DEFAULTS)}")
