"""Vectors written after their rows: captured rows are embedded in batches, off the turn's path
and out of busy moments.

A captured row is stored at once (BM25 finds it in the next turn) and handed here; one
background task embeds what has gathered, in calls of at most ``BATCH`` texts, and writes each
database's vectors as one entry in ``embeddings:<model>``, the shape ``MemoryEngine.reindex``
writes for existing rows.

It waits for a quiet moment first: a captured row comes with every chat turn, so while rows
keep arriving (one in the last ``QUIET_S``) the bot is busy answering and the embedder would
take the CPU its turns need (a captured row's vector costs about three times a turn's query
on a small CPU). Rows wait at most ``MAX_WAIT_S``: under load that never pauses, the oldest
are embedded anyway, so the vectors lag by at most that much and the work is the same as
without the wait. At most ``MAX_PENDING`` rows wait; a row beyond it is stored without a
vector (counted, BM25 finds it, ``/memory reindex`` adds it). ``wait`` (shutdown, tests)
embeds what waits at once.

Nothing here is on a turn's path: the embedder runs documents on their own worker (the local
one) so a turn's query embedding never waits behind this (SPEC §3). A failed batch loses no
memory: its rows stay stored without a vector (BM25 still finds them; ``/memory reindex``
adds them), and the failure is one log line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from chazbot import metrics
from chazbot.errors import ChazError
from chazbot.ledger import KeyPair, Ledger
from chazbot.memory.embedders import Embedder
from chazbot.memory.rows import embeddings_store, encode_vector

log = logging.getLogger(__name__)

BATCH = 32
"""Texts per embedding call."""
QUIET_S = 2.0
"""No row captured for this long: the bot is quiet, embed what waits."""
MAX_WAIT_S = 60.0
"""The longest a row waits for a quiet moment before it is embedded anyway."""
MAX_PENDING = 4096
"""Rows that may wait at once; one more is stored without a vector (``skipped``)."""


@dataclass(frozen=True)
class Pending:
    """A stored row that still needs its vector."""

    db: str
    key: KeyPair
    row_id: str
    text: str
    since: float = field(default_factory=time.monotonic)


class VectorQueue:
    """Rows waiting for their vectors, and the one task that embeds and writes them."""

    def __init__(
        self,
        ledger: Ledger,
        embedder: Embedder,
        batch: int = BATCH,
    ) -> None:
        self.ledger = ledger
        self.embedder = embedder
        self.store = embeddings_store(embedder.name)
        self.batch = batch
        self._items: list[Pending] = []
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._running = 0
        self._last_add = 0.0
        self._waiters = 0  # callers of ``wait`` under way: no waiting for a quiet moment
        self._wake = asyncio.Event()
        self.written = 0
        self.failed = 0
        self.skipped = 0

    @property
    def pending(self) -> int:
        """Rows stored whose vector is not written yet (the batch under way included)."""
        return len(self._items) + self._running

    def add(self, item: Pending) -> None:
        """Queue a stored row for its vector; returns at once."""
        self._last_add = time.monotonic()
        if len(self._items) >= MAX_PENDING:
            self.skipped += 1
            metrics.VECTORS_LATER.labels("skipped").inc()
            if self.skipped == 1 or self.skipped % 1000 == 0:
                log.warning(
                    "%d captured memories stored without a vector: over %d waited for one"
                    " (BM25 still finds them; /memory reindex adds them)",
                    self.skipped,
                    MAX_PENDING,
                )
            return
        self._items.append(item)
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="memory-vectors")

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until every row queued so far has its vector written (or failed); False when
        ``timeout`` ran out first. What waits for a quiet moment is embedded at once."""
        self._waiters += 1
        self._wake.set()
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        finally:
            self._waiters -= 1
        return True

    async def _quiet_moment(self) -> None:
        """Return when no row came for ``QUIET_S``, the oldest waited ``MAX_WAIT_S``, or
        ``wait`` was called."""
        while not self._waiters and self._items:
            now = time.monotonic()
            quiet_in = self._last_add + QUIET_S - now
            overdue_in = self._items[0].since + MAX_WAIT_S - now
            if quiet_in <= 0 or overdue_in <= 0:
                return
            self._wake.clear()
            try:
                async with asyncio.timeout(min(quiet_in, overdue_in)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _drain(self) -> None:
        try:
            while self._items:
                await self._quiet_moment()
                chunk, self._items = self._items[: self.batch], self._items[self.batch :]
                self._running = len(chunk)
                try:
                    await self._embed_and_write(chunk)
                except Exception as exc:  # never lose the task: one line, the rows stay
                    self._failed(len(chunk))
                    log.warning(
                        "could not add vectors to %d stored memories (BM25 still finds them;"
                        " /memory reindex adds them): %s: %s",
                        len(chunk),
                        type(exc).__name__,
                        exc,
                    )
                finally:
                    self._running = 0
        finally:
            if not self._items:
                self._idle.set()

    async def _embed_and_write(self, chunk: list[Pending]) -> None:
        # A row superseded or forgotten meanwhile still gets its vector: the view ignores a
        # vector whose row it does not show, as it does when loading.
        vectors = await self.embedder.embed_documents([p.text for p in chunk])
        groups: dict[tuple[str, int], list[int]] = {}
        for i, item in enumerate(chunk):
            groups.setdefault((item.db, id(item.key)), []).append(i)
        for indices in groups.values():
            first = chunk[indices[0]]
            ops = [
                {"op": "insert", "row": {"ref": chunk[i].row_id, "vec": encode_vector(vectors[i])}}
                for i in indices
            ]
            try:
                await self.ledger.write(first.db, first.key, {self.store: ops})
            except ChazError as exc:  # e.g. the key lost write meanwhile: these rows only
                self._failed(len(indices))
                log.warning("could not store %d vectors in %s: %s", len(indices), first.db, exc)
                continue
            self.written += len(indices)
            metrics.VECTORS_LATER.labels("written").inc(len(indices))

    def _failed(self, count: int) -> None:
        self.failed += count
        metrics.VECTORS_LATER.labels("failed").inc(count)


__all__ = ["BATCH", "Pending", "VectorQueue"]
