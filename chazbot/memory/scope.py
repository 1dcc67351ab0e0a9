"""Memory as one agent sees it: its own memory plus the banks it holds refs to.

Bank names resolve through the agent's refs (a friendly check with a helpful error); the
real decision is the bank's AuthSettings, enforced by the ledger on every write.
"""

from __future__ import annotations

from dataclasses import dataclass

from chazbot.errors import NotFound, PermissionDenied
from chazbot.ledger import KeyPair, Level
from chazbot.memory.banks import BankRef, read_refs
from chazbot.memory.engine import MemoryEngine
from chazbot.memory.rows import Hit, to_datetime

SELF = "self"


@dataclass(frozen=True)
class BankAccess:
    name: str
    db: str
    permission: str  # from the bank's AuthSettings: admin, write, read or none


class MemoryScope:
    """The memory operations of one agent (own DB + granted banks)."""

    def __init__(self, engine: MemoryEngine, name: str, key: KeyPair, db: str) -> None:
        self.engine = engine
        self.name = name
        self.key = key
        self.db = db

    async def refs(self) -> dict[str, BankRef]:
        return await read_refs(self.engine.ledger, self.db)

    async def resolve(self, bank: str | None) -> tuple[str | None, str]:
        """(bank name or None for own memory, db id) for a bank argument."""
        if bank is None or bank == "" or bank.lower() == SELF:
            return None, self.db
        refs = await self.refs()
        ref = refs.get(bank) or next(
            (r for r in refs.values() if r.name.lower() == bank.lower()), None
        )
        if ref is None:
            usable = ", ".join([SELF, *sorted(refs)])
            raise NotFound(f"no bank named {bank!r} for {self.name}; banks you can use: {usable}")
        return ref.name, ref.db

    async def banks(self) -> list[BankAccess]:
        """Every bank this agent can see, with the permission its AuthSettings grant now."""
        ledger = self.engine.ledger
        found = [BankAccess(SELF, self.db, "admin")]
        for name, ref in sorted((await self.refs()).items()):
            try:
                perm = await ledger.permission(ref.db, self.key.public)
                level = perm.name if perm.level is not Level.NONE else "none"
            except NotFound:
                level = "none"
            found.append(BankAccess(name, ref.db, level))
        return found

    async def remember(
        self, key: str, value: str, tags: list[str] | None = None, bank: str | None = None
    ) -> str:
        _, db = await self.resolve(bank)
        return await self.engine.remember(db, self.key, key, value, tags)

    async def forget(self, key: str, bank: str | None = None) -> None:
        _, db = await self.resolve(bank)
        await self.engine.forget(db, self.key, key)

    async def recall(
        self,
        query: str,
        tags: list[str] | None = None,
        limit: int | None = 10,
        bank: str | None = None,
    ) -> list[Hit]:
        name, db = await self.resolve(bank)
        if name is not None:
            perm = await self.engine.ledger.permission(db, self.key.public)
            if not perm.allows(Level.READ):
                raise PermissionDenied(f"{self.name} may not read bank {name!r} (no active grant)")
        ranked = await self.engine.recall(db, query, tags, limit)
        return [
            Hit(r.row.key, r.row.value, r.row.tags, to_datetime(r.row.ts), r.score, name)
            for r in ranked
        ]
