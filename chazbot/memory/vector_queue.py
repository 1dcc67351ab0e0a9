"""Vectors written after their rows: captured rows are embedded in batches, off the turn's path.

A captured row is stored at once (BM25 finds it in the next turn) and handed here; one
background task embeds what has gathered, in one call of at most ``BATCH`` texts (rows that
arrive while a batch runs wait for the next one, so under load the batches grow by themselves
and an idle bot embeds a row as soon as it comes), and writes each database's vectors as one
entry in ``embeddings:<model>``, the shape ``MemoryEngine.reindex`` writes for existing rows.

Nothing here is on a turn's path: the embedder runs documents on their own worker (the local
one) so a turn's query embedding never waits behind this (SPEC §3). A failed batch loses no
memory: its rows stay stored without a vector (BM25 still finds them; ``/memory reindex``
adds them), and the failure is one log line.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from chazbot import metrics
from chazbot.errors import ChazError
from chazbot.ledger import KeyPair, Ledger
from chazbot.memory.embedders import Embedder
from chazbot.memory.rows import embeddings_store, encode_vector

log = logging.getLogger(__name__)

BATCH = 32
"""Texts per embedding call (a captured row is ~60 tokens: ~0.1 s each on one core)."""


@dataclass(frozen=True)
class Pending:
    """A stored row that still needs its vector."""

    db: str
    key: KeyPair
    row_id: str
    text: str


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
        self.written = 0
        self.failed = 0

    @property
    def pending(self) -> int:
        """Rows stored whose vector is not written yet (the batch under way included)."""
        return len(self._items) + self._running

    def add(self, item: Pending) -> None:
        """Queue a stored row for its vector; returns at once."""
        self._items.append(item)
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="memory-vectors")

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until every row queued so far has its vector written (or failed); False when
        ``timeout`` ran out first."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def _drain(self) -> None:
        try:
            while self._items:
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
