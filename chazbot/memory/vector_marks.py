"""The peer-local records of the vectors owed (``VectorQueue``), in the queue's own tables
(``vector_tables``: ``VECTORS``, declared, with the step that moved them out of ``local_kv``);
a row owed its vector (``Pending``) and when the queue embeds (``VectorTiming``).

- a mark per database that owes vectors for the rows stored after a row number, written by a
  key (``Owed``); set before the first such row is stored, so a crash leaves them owed;
- the text of a row still waiting at a stop;
- since which row number this peer's vectors are of the current text (``EMBED_TEXT_VERSION``),
  and per database whether its vectors were all rewritten to it.

A mark is set, lowered and deleted under ``lock``, which the queue also holds while it decides
that a database owes nothing any more.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from chazbot.ledger import KeyPair, Ledger
from chazbot.memory.rows import EMBED_TEXT_VERSION
from chazbot.memory.vector_tables import Mark, VectorRecords

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VectorTiming:
    """When the queue embeds: measured values, passed in (``MemoryEngine(vectors=)``), never
    a module global a test flips; a test builds its own with ``dataclasses.replace``."""

    batch: int = 32
    """Texts per embedding call."""
    quiet_s: float = 2.0
    """No row captured for this long: the bot is quiet, embed what waits."""
    max_wait_s: float = 60.0
    """The longest a row waits for a quiet moment before it is embedded anyway."""
    max_pending: int = 4096
    """Rows that may wait in memory at once; one more is left to the scan (``skipped``)."""
    arrived_grace_s: float = 300.0
    """Rows that arrived without vectors (sync) are looked at again this much later: the peer
    that wrote them owes their vectors too, and they usually follow by then (a scan skips
    each row whose vector came meanwhile, batch by batch)."""


DEFAULT_TIMING = VectorTiming()


@dataclass(frozen=True)
class Pending:
    """A stored row that still needs its vector."""

    db: str
    key: KeyPair
    row_id: str
    text: str
    since: float = field(default_factory=time.monotonic)


@dataclass
class Owed:
    """A database marked as owing vectors (its peer-local record)."""

    after: int  # rows stored after this row number may owe one
    by: str  # the public key that writes them
    key: KeyPair | None  # that key, when this peer holds it


class OwedMarks:
    """The databases marked as owing vectors, in memory and in their table."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.records = VectorRecords(ledger)
        self.lock = asyncio.Lock()
        self._owed: dict[str, Owed] = {}

    def __contains__(self, db: object) -> bool:
        return db in self._owed

    def get(self, db: str) -> Owed | None:
        return self._owed.get(db)

    def dbs(self) -> list[str]:
        """The marked databases, oldest mark first."""
        return list(self._owed)

    async def mark(self, db: str, key: KeyPair) -> None:
        """Mark ``db`` as owing the vectors of rows stored from now on, written by ``key``
        (a mark already stored stands)."""
        async with self.lock:
            if db not in self._owed:
                after = await self.ledger.last_row_number()
                stored = await self.records.add_mark(Mark(db, after, key.public), replace=False)
                self._owed[db] = Owed(stored.after, stored.by, key)

    async def lower(self, db: str, after: int, key: KeyPair) -> None:
        """Mark ``db`` as owing the vectors of rows stored after row number ``after`` (a mark
        from earlier stands), written by ``key``."""
        async with self.lock:
            known = self._owed.get(db)
            if known is None or after < known.after:
                mark = Owed(after if known is None else min(after, known.after), key.public, key)
                await self.records.add_mark(Mark(db, mark.after, mark.by), replace=True)
                self._owed[db] = mark

    async def load(self) -> list[str]:
        """At a start: the marks stored at the last stop (each with its key when this peer
        holds it); returns the databases marked."""
        marks = await self.records.marks()
        keys = {k.public: k for _, k in await self.ledger.keys.all()}
        for mark in marks:
            self._owed[mark.db] = Owed(mark.after, mark.by, keys.get(mark.by))
        return [mark.db for mark in marks]

    async def drop(self, db: str) -> None:
        """``db`` owes nothing any more: its mark and recorded texts go (hold ``lock``)."""
        self._owed.pop(db, None)
        await self.records.drop(db)

    async def texts(self, db: str) -> dict[str, str]:
        """The texts of ``db``'s rows recorded at a stop, by row id."""
        return await self.records.texts(db)

    async def record_texts(self, texts: list[tuple[str, str, str]]) -> None:
        """Record ``(db, row id, text)`` of rows still waiting at a stop."""
        if texts:
            await self.records.record_texts(texts)

    async def text_version(self) -> int:
        """The row number up to which stored vectors are of an older text (recorded on the
        first start with this ``EMBED_TEXT_VERSION``)."""
        version, before = await self.records.since() or (1, 0)
        if version >= EMBED_TEXT_VERSION:
            return before
        before = await self.ledger.last_row_number()
        await self.records.set_since(EMBED_TEXT_VERSION, before)
        log.info(
            "memory: vectors stored so far are of an older text (version %d); each bank's are"
            " rewritten in the background after it is opened",
            version,
        )
        return before

    async def text_done(self, db: str) -> bool:
        """Whether ``db``'s vectors are all of the current text."""
        return await self.records.text_version(db) == EMBED_TEXT_VERSION

    async def set_text_done(self, db: str) -> None:
        await self.records.set_text_version(db, EMBED_TEXT_VERSION)


__all__ = ["DEFAULT_TIMING", "Owed", "OwedMarks", "Pending", "VectorTiming"]
