"""Memory as one agent sees it: its own memory plus the banks it holds refs to.

Bank names (or DB ids) resolve through the agent's refs (a friendly check with a helpful
error); the real decision is the bank's AuthSettings, enforced by the ledger on every write.
An agent reaches a bank either with its own key (a direct grant) or through this peer's key
(a delegation, when this peer holds no admin key on the bank): then its writes are signed by
the peer key and name the agent in the row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

from chazbot.errors import NotFound, PermissionDenied
from chazbot.ledger import KeyPair, Level
from chazbot.ledger.auth import permission_of
from chazbot.memory.audience import MAX_ROOM_CHARS, Audience, Provenance
from chazbot.memory.banks import BankRef, Registry, holder_keys, read_refs
from chazbot.memory.engine import MemoryEngine, ReindexProgress
from chazbot.memory.rows import Hit, MemoryRow, check_key, to_datetime

SELF = "self"


@dataclass(frozen=True)
class BankAccess:
    name: str
    db: str
    permission: str  # from the bank's AuthSettings: admin, write, read or none
    delegated: bool = False  # through this peer's key rather than the agent's own


@dataclass(frozen=True)
class Access:
    """How an agent reaches one database: the level, and the key it acts with."""

    level: Level
    signer: KeyPair
    delegated: bool = False
    why: str | None = None  # why the level is lower than the grant says, if it is

    @property
    def name(self) -> str:
        return self.level.name.lower()


@dataclass(frozen=True)
class Hearing:
    """Who a scope's reads are told to and how its writes are marked (SPEC §5c).

    ``audience``: rows of agent DBs are filtered for it (None: the full view); ``origin``:
    stamped on rows written in own memory (None: the operator's); ``scoped``: those rows
    supersede only rows of their room (``memory_audience: room``); ``prefix``: how commands
    are written where it is heard (``!chaz `` in Matrix), for replies that name them."""

    audience: Audience | None = None
    origin: Provenance | None = None
    scoped: bool = False
    prefix: str = "/"

    @property
    def scope(self) -> str:
        return self.origin.room if self.scoped and self.origin is not None else ""


OPERATOR_HEARING = Hearing()


class MemoryScope:
    """The memory operations of one agent (own DB + granted banks), as heard in one place:
    ``within`` gives the same agent bound to a turn's audience."""

    def __init__(
        self,
        engine: MemoryEngine,
        name: str,
        key: KeyPair,
        db: str,
        registry: Registry | None = None,
        hearing: Hearing = OPERATOR_HEARING,
    ) -> None:
        self.engine = engine
        self.name = name
        self.key = key
        self.db = db
        self.registry = registry
        self.hearing = hearing

    def within(self, hearing: Hearing) -> MemoryScope:
        """This agent's memory as told in a session with ``hearing``."""
        return MemoryScope(self.engine, self.name, self.key, self.db, self.registry, hearing)

    async def filtered(self, db: str) -> Audience | None:
        """The audience rows of ``db`` are filtered for (None: the full view). The rule is
        the row's, whatever reads it (SPEC §5c): agent DBs (own, or another agent's read as a
        bank) and banks alike; in a bank, rows without provenance are the bank's."""
        audience = self.hearing.audience
        if audience is None or audience.full:
            return None
        if db != self.db and await self.engine.db_kind(db) == "bank":
            return audience.in_bank()
        return audience

    async def refs(self) -> dict[str, BankRef]:
        return await read_refs(self.engine.ledger, self.db)

    async def resolve(self, bank: str | None) -> tuple[str | None, str]:
        """(bank name or None for own memory, db id) for a bank argument (name or DB id)."""
        if bank is None or bank == "" or bank.lower() == SELF or bank == self.db:
            return None, self.db
        refs = await self.refs()
        ref = (
            refs.get(bank)
            or next((r for r in refs.values() if r.name.lower() == bank.lower()), None)
            or next((r for r in refs.values() if r.db == bank), None)
        )
        if ref is None:
            usable = ", ".join([SELF, *sorted(refs)])
            raise NotFound(
                f"no bank named {bank[:80]!r} for {self.name}; banks you can use: {usable}"
            )
        return ref.name, ref.db

    async def access(self, db: str) -> Access:
        """What this agent may do on ``db`` now, and the key to act with."""
        if db == self.db:
            return Access(Level.ADMIN, self.key)
        try:
            state = await self.engine.ledger.auth_state(db)
        except NotFound:
            return Access(Level.NONE, self.key)
        best = Access(permission_of(state, self.key.public).level, self.key)
        if self.registry is not None:
            delegated = await self.registry.delegation(db, self.name)
            held = await holder_keys(self.registry, state) if delegated is not None else []
            if delegated is not None and held:
                cap = Level[delegated.permission.upper()]
                level = min(cap, held[0][0].level)
                why = self.registry.withdrawn(db)
                if why is not None and level > Level.READ:
                    level = Level.READ  # the owner no longer takes this peer's writes
                if level > best.level or (why and level == best.level):
                    best = Access(level, held[0][1], delegated=True, why=why)
        return best

    async def can_read(self, db: str) -> bool:
        return (await self.access(db)).level >= Level.READ

    async def _need(self, bank: str | None, level: Level) -> tuple[str | None, str, Access]:
        name, db = await self.resolve(bank)
        found = await self.access(db)
        if found.level < level:
            verb = "write to" if level >= Level.WRITE else "read"
            held = f"it holds {found.name}" if found.level > Level.NONE else "no active grant"
            if found.why:
                held += f"; {found.why}"
            raise PermissionDenied(f"{self.name} may not {verb} bank {name!r} ({held})")
        return name, db, found

    async def banks(self) -> list[BankAccess]:
        """Every bank this agent can see, with the permission it holds there now."""
        found = [BankAccess(SELF, self.db, "admin")]
        for name, ref in sorted((await self.refs()).items()):
            access = await self.access(ref.db)
            level = access.name if access.level is not Level.NONE else "none"
            found.append(BankAccess(name, ref.db, level, access.delegated))
        return found

    async def remember(
        self,
        key: str,
        value: str,
        tags: list[str] | None = None,
        bank: str | None = None,
        *,
        embed_as: str | None = None,
        vector_later: bool = False,
    ) -> str:
        """Store a row; ``embed_as`` and ``vector_later`` as in ``MemoryEngine.remember``
        (capture: the message alone, its vector in a background batch)."""
        _, db, found = await self._need(bank, Level.WRITE)
        agent = self.name if found.delegated else None
        origin = self.hearing.origin
        # a row a turn writes into a bank keeps the room's audience (SPEC §5c)
        room = origin.room if origin is not None else ""
        scope = self.hearing.scope if db == self.db else room
        if scope and origin is not None:
            scope = await self._scope_apart(db, scope, key, origin)
        return await self.engine.remember(
            db,
            found.signer,
            key,
            value,
            tags,
            agent,
            origin,
            scope,
            embed_as=embed_as,
            vector_later=vector_later,
        )

    async def _scope_apart(self, db: str, scope: str, key: str, origin: Provenance) -> str:
        """The scope a write of ``key`` heard by this audience takes: the room's, unless the
        row of ``key`` there is one this audience may not be told (said before a newcomer
        came, under ``joined`` history): then a scope of its own for this audience, so the
        write supersedes nothing it cannot see (SPEC §5c: one key in two audiences is two
        rows). The same audience writing again finds the same scope."""
        audience = await self.filtered(db)
        if audience is None:
            return scope
        current = (await self.engine.view(db)).latest.get((scope, check_key(key)))
        if current is None or current.forgotten or audience.sees(current.origin, current.scope):
            return scope
        heard = json.dumps([origin.audience, origin.history], separators=(",", ":"))
        digest = hashlib.sha256(heard.encode()).hexdigest()[:12]
        return f"{scope[: MAX_ROOM_CHARS - 13]}#{digest}"

    async def forget(self, key: str, bank: str | None = None, speaker: str | None = None) -> int:
        """Hide ``key`` wherever this scope's audience may see it (only rows said by
        ``speaker`` when given); how many rows it hid."""
        _, db, found = await self._need(bank, Level.WRITE)
        agent = self.name if found.delegated else None
        origin = self.hearing.origin
        return await self.engine.forget(
            db, found.signer, key, agent, origin, await self.filtered(db), speaker
        )

    async def reindex(
        self, bank: str | None = None, progress: Callable[[ReindexProgress], None] | None = None
    ) -> tuple[str | None, int]:
        """Backfill vectors of the active model in own memory or a bank: (name, rows)."""
        name, db, found = await self._need(bank, Level.WRITE)
        return name, await self.engine.reindex(db, found.signer, progress)

    async def recall(
        self,
        query: str,
        tags: list[str] | None = None,
        limit: int | None = 10,
        bank: str | None = None,
    ) -> list[Hit]:
        name, db, _ = await self._need(bank, Level.READ)
        floor = await self.engine.agent_floor(self.db)  # the agent's relevance floor (SPEC §5)
        ranked = await self.engine.recall(db, query, tags, limit, await self.filtered(db), floor)
        return [
            Hit(
                r.row.key,
                r.row.value,
                r.row.tags,
                to_datetime(r.row.ts),
                r.score,
                name,
                r.row.origin,
                r.row.scope,
            )
            for r in ranked
        ]

    async def said_by(self, speaker: str, everywhere: bool = False) -> list[MemoryRow]:
        """Rows of own memory said by ``speaker`` that this scope's audience may be told
        (``everywhere``: all of them, for a room where only the speaker reads), newest first
        (``/memory mine``)."""
        view = await self.engine.view(self.db)
        return view.rows_by(speaker, None if everywhere else self.hearing.audience)

    async def forget_said_by(
        self, speaker: str, key: str | None, everywhere: bool = False
    ) -> list[MemoryRow]:
        """Hide ``speaker``'s own rows (of ``key``, or all of them) that this scope may see
        (``everywhere``: all of them); other people's rows are never touched. The rows
        hidden (for an undo)."""
        rows = [r for r in await self.said_by(speaker, everywhere) if key is None or r.key == key]
        if not rows:
            return []
        origin = self.hearing.origin
        await self.engine.forget_rows(self.db, self.key, rows, origin)
        return rows
