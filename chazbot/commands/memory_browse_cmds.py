"""``/memory`` to look into and tune the room's agent's memory: search, stats, config (its
auto-recall settings), reindex and forget."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chazbot.agent.recall import CONFIG_STORE, RecallSettings, recall_settings
from chazbot.commands.context import Agents, Banks, Context, SharingDesk
from chazbot.commands.memory_cmds import ok, resolve_hosted
from chazbot.commands.tree import Arg, CommandTree, Reply
from chazbot.errors import InputError, NotFound, PermissionDenied
from chazbot.memory import bm25_kernel
from chazbot.memory.banks import holder_keys, read_refs
from chazbot.memory.banks import looks_like_db_id as is_db_id
from chazbot.memory.embedders.floors import FLOOR_FIELD, default_floor, parse_floor
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.loading import LoadStatus
from chazbot.memory.rows import EMBEDDINGS_PREFIX, MEMORY_STORE, Hit, to_datetime
from chazbot.memory.tokenize import bound_query
from chazbot.memory.tools import cut_note, format_hits

if TYPE_CHECKING:
    from chazbot.ledger import Ledger, Permission

RECALL_DEFAULTS = RecallSettings.FIELDS  # the settings /memory config names
STATS_WAIT_S = 1.0  # /memory stats waits this long for a view to load, then shows progress
ROOM_TOTALS = "(the operator's: chazbot cmd memory stats)"
"""What ``stats`` in a room says of the totals (rows, vectors, entries, size)."""

COMMANDS = CommandTree()
command = COMMANDS.command


@command(
    "memory config",
    (
        Arg("action", optional=True, choices=("show", "set", "reset")),
        Arg("key", optional=True),
        Arg("value", optional=True, rest=True),
    ),
    "view the agent's auto-recall settings; set and reset (every room's) need an admin",
)
async def config(
    ctx: Context, action: str = "show", key: str | None = None, value: str | None = None
) -> Reply:
    if action == "show":
        if key is not None:
            raise InputError(f"show takes no arguments. Usage: {ctx.prefix}memory config show")
        s = await recall_settings(ctx.ledger, ctx.agent.db)
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
        if value is not None:
            raise InputError(f"Usage: {ctx.prefix}memory config reset [key]")
        if key is not None and key not in RECALL_DEFAULTS:
            raise InputError(f"unknown setting {key!r}; settings: {', '.join(RECALL_DEFAULTS)}")
        fields = [key] if key is not None else list(RECALL_DEFAULTS)
        ops = [{"op": "set", "field": k, "value": None} for k in fields]
        await ctx.ledger.write(ctx.agent.db, ctx.agent.key, {CONFIG_STORE: ops})
        if key is not None:
            return ok(f"Reset {key} to its default.")
        return ok("Auto-recall config reset to defaults.")
    if key is None or value is None:
        raise InputError(
            f"Usage: {ctx.prefix}memory config set <key> <value>; "
            f"keys: {', '.join(RECALL_DEFAULTS)}"
        )
    stored = await _config_value(ctx, key, value)
    await ctx.ledger.write(
        ctx.agent.db,
        ctx.agent.key,
        {CONFIG_STORE: [{"op": "set", "field": key, "value": stored}]},
    )
    return ok(f"Set {key} = {value.strip()}.")


@command(
    "memory reindex",
    (Arg("bank", optional=True),),
    "backfill vectors for the active embedding model",
)
async def reindex(ctx: Context, bank: str | None = None) -> Reply:
    name, total = await ctx.agent.memory.reindex(bank)
    return ok(f"Reindexed {total} rows of {name or 'own memory'} for {ctx.engine.model}.")


@command(
    "memory forget",
    (Arg("key"), Arg("bank", optional=True)),
    "hide a key from recall (history is kept)",
)
async def forget(ctx: Context, key: str, bank: str | None = None) -> Reply:
    await ctx.memory.forget(key, bank)
    return ok(f"Forgot {key!r}.")


@command(
    "memory search",
    # raw: the query as typed (no shell-style split of a 56 KB line on the loop; an
    # apostrophe is a word's, not an open quote)
    (Arg("bank", shown="bank|self"), Arg("query", rest=True, optional=True, raw=True)),
    "search the room's agent's memory (or a bank, or self) with the ranking of recall",
)
async def search(ctx: Context, bank: str, query: str | None = None) -> Reply:
    if not await _names_a_database(ctx, bank):
        # "/memory search dog": the words are the query, in the room's agent's memory
        bank, query = "self", " ".join(filter(None, [bank, query]))
    db, label = await _browse_target(ctx, bank)
    heard = await ctx.memory.filtered(db)  # a room's reply obeys its audience, admin or not
    floor = await ctx.engine.agent_floor(ctx.agent.db)  # only what recall would pass
    bounded = bound_query(query or "")  # what recall searches of it
    ranked = await ctx.engine.recall(db, bounded.text, None, 10, heard, floor)
    note = "\n" + cut_note(bounded) if bounded.cut else ""  # the tool's and the page's words
    if not ranked:
        return ok(f"No memories found in {label}." + note)
    hits = [Hit(r.row.key, r.row.value, r.row.tags, to_datetime(r.row.ts), r.score) for r in ranked]
    return ok(f"Top {len(hits)} in {label}:\n" + format_hits(hits) + note)


@command(
    "memory stats",
    (Arg("bank", optional=True),),
    "entries, keys, vectors per model, size, and the keys holding access",
)
async def stats(ctx: Context, bank: str = "self") -> Reply:
    db, label = await _browse_target(ctx, bank)
    stores = await ctx.ledger.stores(db)
    engine = ctx.engine
    status = engine.load_status(db)
    if status is None or not status.ready:
        # a big bank loads off the event loop: wait a little, then report its progress
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(engine.view(db), STATS_WAIT_S)
        status = engine.load_status(db)
    size = await ctx.ledger.db_size(db)
    heard = await ctx.memory.filtered(db)
    if status and status.ready:
        allowed = (await engine.view(db)).audience_filter(heard)
        keys = str(engine.visible_count(db) if allowed is None else len(allowed))
        if heard is not None:  # always said in a room: saying it only when rows are hidden
            keys += " (those this room may hear)"  # would tell that there are some
    else:
        keys = "…"
    vectors = [
        f"{s.removeprefix(EMBEDDINGS_PREFIX)}: {n}"
        for s, n in sorted(stores.items())
        if s.startswith(EMBEDDINGS_PREFIX)
    ]
    if heard is not None:
        # a room is told only what it may hear: totals move with what is said elsewhere (a
        # DM), so they are the operator's (SPEC §5c)
        written = vectors_line = entries = size_line = ROOM_TOTALS
    else:
        written = str(stores.get(MEMORY_STORE, 0))
        vectors_line = f"{', '.join(vectors) or 'none'}{_owed_note(engine, db)}"
        entries = str(await ctx.ledger.count_entries(db))
        size_line = f"{size} bytes"
    return ok(
        f"Stats for {label}:\n"
        f"rows written   = {written}\n"
        f"visible keys   = {keys}\n"
        f"index          = {_index_line(status)}\n"
        f"search         = {bm25_kernel.describe()}\n"
        f"vectors        = {vectors_line}\n"
        f"recall         = {_recall_line(engine, heard is None)}\n"
        f"entries        = {entries}\n"
        f"size           = {size_line}\n" + await _access_lines(ctx, db)
    )


def _floor_line(ctx: Context, chosen: float | None) -> str:
    """``min_similarity`` as ``show`` prints it: the value in effect and where it comes from."""
    engine = ctx.engine
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


def _recall_line(engine: MemoryEngine, totals: bool = True) -> str:
    """How recall ranks, and how often it fell back to BM25 since the start (SPEC §3:
    never silently), with the captured rows still waiting for their vectors (``totals``:
    not in a room, where they would count what is said elsewhere)."""
    if engine.model is None:
        return "BM25 only (no embedder)"
    falls = engine.fallbacks
    line = f"hybrid ({engine.model}); {falls.total} fell back to BM25 since the start"
    if falls.total:
        line += " (" + ", ".join(f"{n} {r}" for r, n in sorted(falls.by_reason.items())) + ")"
    waiting = engine.vectors_later.pending if engine.vectors_later is not None else 0
    if waiting and totals:
        line += f"; {waiting} rows waiting for their vectors (all databases)"
    return line


def _owed_note(engine: MemoryEngine, db: str) -> str:
    """How many of ``db``'s rows still owe their vector (written in the background)."""
    queue = engine.vectors_later
    if queue is None or db not in queue.marked:
        return ""
    if queue.failed_in(db):
        return "; vectors owed after a failed batch, tried again after the next start"
    owed = queue.owed_in(db)
    if owed is None:
        return "; vectors owed (being counted), written in the background"
    return f"; {owed} vectors owed, written in the background"


def _index_line(status: LoadStatus | None) -> str:
    if status is None:
        return "not loaded"
    if not status.ready:
        return f"loading, {status.done}/{status.total} rows read"
    source = "snapshot + newer rows" if status.from_snapshot else "all rows"
    return f"loaded from {source} in {status.seconds:.2f} s"


async def _names_a_database(ctx: Context, ref: str) -> bool:
    """Whether ``ref`` is self, a bank the room's agent holds, or (for an admin) a bank or
    agent hosted here. For anyone else a name the agent holds no ref to is a word of the
    query, whether or not such a bank exists: the answer must not tell which names do."""
    try:
        await ctx.agent.memory.resolve(ref)
        return True
    except NotFound:
        pass
    if not ctx.is_admin:
        return False
    reg = ctx.banks.registry
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
    if not ctx.is_admin:  # the same words whether or not a bank has that name
        readable = [b.name for b in await scope.banks() if b.permission != "none"]
        raise PermissionDenied(
            f"{ctx.agent.name} cannot read {ref[:80]!r} (or nothing has that name); here you"
            f" may browse {', '.join(readable)} (other databases need an admin)"
        )
    hosted = await resolve_hosted(ctx, ref)
    return hosted.db, hosted.name


@dataclass(frozen=True)
class KeyHolder:
    """A key holding access to a database, as a person reads it (``memory stats``, the web's
    bank page)."""

    key: str
    perm: Permission
    who: str
    revoke_as: str
    """What ``memory revoke <bank> …`` takes for it: an agent's name or the key ('': none)."""

    @property
    def level(self) -> str:
        return str(self.perm)


async def key_holders(
    ledger: Ledger, banks: Banks, agents: Agents, sharing: SharingDesk, db: str
) -> tuple[list[KeyHolder], int]:
    """Who holds access to ``db`` (the highest first), labelled by what this peer knows of
    each key; and how many grants were revoked. The one wording of "who holds this key"."""
    state = await ledger.auth_state(db)
    labels = {k.public: label for label, k in await banks.registry.labelled_keys()}
    names = {ag.key.public: ag.name for ag in agents.agents.values()}
    requests = {r.key: r for r in await sharing.requests_of(db)}
    delegated = await banks.registry.delegations(db)
    held_here = await holder_keys(banks.registry, state)
    via = held_here[0][1].public if held_here else None  # the key delegated agents act with
    found = []
    active = sorted(
        ((k, g) for k, g in state.items() if g.active),
        key=lambda item: (-item[1].perm.rank()[0], -item[1].perm.rank()[1], item[0]),
    )
    for key, held in active:
        label = labels.get(key, "")
        if key in names:
            who, target = f"agent {names[key]}", names[key]
        elif label == "peer":
            who, target = "this peer", key
        elif label.startswith("bank:"):
            who, target = "this peer (the bank's key)", ""
        elif key in requests:
            who, target = f"another peer (import request {requests[key].id})", key
        else:
            who, target = "another peer or agent", key
        if key == via and delegated:
            shown = ", ".join(f"{d.agent} ({d.permission})" for d in delegated.values())
            who += f"; delegated to {shown}"
        found.append(KeyHolder(key, held.perm, who, target))
    return found, sum(1 for g in state.values() if not g.active)


async def _access_lines(ctx: Context, db: str) -> str:
    """Who holds access, with level and what this peer knows of each key."""
    found, revoked = await key_holders(ctx.ledger, ctx.banks, ctx.agents, ctx.sharing, db)
    lines = [f"- {h.key} {h.perm.name} — {h.who}" for h in found]
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
        if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 20:
            raise InputError("max_entries takes a whole number from 1 to 20")
        return int(text)
    if key == "auto_recall_banks":
        names = [n.strip() for n in text.split(",") if n.strip()]
        refs = await read_refs(ctx.ledger, ctx.agent.db)
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
