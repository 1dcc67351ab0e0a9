"""The memory engine: remember, recall, forget and reindex on any database of the ledger.

It keeps one ``MemoryView`` per database, built on first use and kept current by a ledger
listener, so a row committed here or received by sync is searchable as soon as it is stored.
Authorisation is the ledger's: a write by a key the database does not allow is refused there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from chazbot import metrics
from chazbot.errors import BackendError, InputError, NotFound
from chazbot.ledger import Applied, KeyPair, Ledger, Row
from chazbot.memory.embedders import Embedder
from chazbot.memory.rows import (
    MEMORY_STORE,
    MemoryRow,
    check_key,
    check_limit,
    check_tags,
    check_value,
    decode_vector,
    embeddings_store,
    encode_vector,
    forget_ops,
    parse_memory_row,
    remember_ops,
)
from chazbot.memory.view import MemoryView, Ranked

log = logging.getLogger(__name__)
QUERY_EMBED_TIMEOUT_S = 5.0  # recall never waits longer than this for a query vector


def embed_text(key: str, value: str) -> str:
    """What gets embedded for a memory row (the seed: key + " " + value)."""
    return f"{key} {value}"


@dataclass(frozen=True)
class ReindexProgress:
    done: int
    total: int


class MemoryEngine:
    """Memory operations over the databases of one ledger."""

    def __init__(self, ledger: Ledger, embedder: Embedder | None = None) -> None:
        self.ledger = ledger
        self.embedder = embedder
        self._views: dict[str, MemoryView] = {}
        self._loading: dict[str, asyncio.Future[MemoryView]] = {}
        self._pending: dict[str, list[Row]] = {}
        ledger.add_listener(self._on_applied)

    @property
    def model(self) -> str | None:
        return self.embedder.name if self.embedder is not None else None

    # ---- views --------------------------------------------------------------------------

    async def view(self, db: str) -> MemoryView:
        """The memory view of ``db``, loaded from SQLite on first use."""
        view = self._views.get(db)
        if view is not None:
            return view
        loading = self._loading.get(db)
        if loading is not None:
            return await asyncio.shield(loading)
        future: asyncio.Future[MemoryView] = asyncio.get_running_loop().create_future()
        self._loading[db] = future
        self._pending[db] = []
        try:
            view = await self._load(db)
        except BaseException as exc:
            del self._loading[db]
            self._pending.pop(db, None)
            future.set_exception(exc)
            future.exception()  # mark retrieved
            raise
        for row in self._pending.pop(db):
            if row.n > view.last_n:
                self._apply_row(view, row)
        self._views[db] = view
        del self._loading[db]
        future.set_result(view)
        return view

    async def _load(self, db: str) -> MemoryView:
        if not await self.ledger.exists(db):
            raise NotFound(f"no database {db}")
        view = MemoryView(self.model)
        stored = await self.ledger.rows(db, MEMORY_STORE)
        parsed = [r for r in map(_memory_row, stored) if r is not None]
        vectors: list[tuple[str, NDArray[np.float32]]] = []
        last_n = stored[-1].n if stored else 0
        if self.model is not None:
            for row in await self.ledger.rows(db, embeddings_store(self.model)):
                vec = _vector_of(row)
                if vec is not None:
                    vectors.append(vec)
                last_n = max(last_n, row.n)
        view.load(parsed, vectors, last_n)
        return view

    def _on_applied(self, applied: Applied) -> None:
        for db in applied.reset_dbs:  # rows were hidden or shown again: rebuild on next use
            self._views.pop(db, None)
        vector_store = embeddings_store(self.model) if self.model else None
        wanted = [r for r in applied.rows if r.store == MEMORY_STORE] + [
            r for r in applied.rows if r.store == vector_store
        ]
        for row in wanted:
            view = self._views.get(row.db)
            if view is not None:
                self._apply_row(view, row)
            elif row.db in self._pending:
                self._pending[row.db].append(row)

    def _apply_row(self, view: MemoryView, row: Row) -> None:
        if row.store == MEMORY_STORE:
            parsed = _memory_row(row)
            if parsed is not None:
                view.apply(parsed)
        else:
            vec = _vector_of(row)
            if vec is not None:
                view.apply_vector(vec[0], vec[1], row.n)

    # ---- operations ---------------------------------------------------------------------

    async def remember(
        self,
        db: str,
        key: KeyPair,
        mkey: str,
        value: str,
        tags: list[str] | None = None,
        agent: str | None = None,
    ) -> str:
        """Store a memory row (and its vector when an embedder is set); return its row id."""
        mkey, value, clean_tags = check_key(mkey), check_value(value), check_tags(tags)
        vector = None
        if self.embedder is not None:
            try:
                vector = (await self.embedder.embed_documents([embed_text(mkey, value)]))[0]
            except BackendError as exc:
                log.warning("embedding failed, memory stored without a vector: %s", exc)
        applied = await self.ledger.write(
            db, key, remember_ops(mkey, value, clean_tags, vector, self.model, agent)
        )
        return next(r.row_id for r in applied.rows if r.store == MEMORY_STORE)

    async def forget(self, db: str, key: KeyPair, mkey: str, agent: str | None = None) -> None:
        mkey = check_key(mkey)
        view = await self.view(db)
        current = view.latest.get(mkey)
        if current is None or current.forgotten:
            raise NotFound(f"no memory with key {mkey!r}")
        await self.ledger.write(db, key, forget_ops(mkey, agent))

    async def recall(
        self, db: str, query: str, tags: list[str] | None = None, limit: int | None = 10
    ) -> list[Ranked]:
        if not isinstance(query, str):
            raise InputError("query must be a string")
        clean_tags, lim = check_tags(tags), check_limit(limit)
        view = await self.view(db)
        qvec = await self.query_vector(query)
        started = time.perf_counter()
        found = view.search(query, clean_tags, lim, qvec)
        metrics.RECALL_SECONDS.observe(time.perf_counter() - started)
        return found

    async def query_vector(self, query: str) -> NDArray[np.float32] | None:
        """The query's vector, or None (no embedder, empty query, or the embedder failed)."""
        if self.embedder is None or not query.strip():
            return None
        try:
            async with asyncio.timeout(QUERY_EMBED_TIMEOUT_S):
                return await self.embedder.embed_query(query)
        except BackendError as exc:
            log.warning("query embedding failed, BM25 only: %s", exc)
        except TimeoutError:
            log.warning("query embedding took over %.0f s, BM25 only", QUERY_EMBED_TIMEOUT_S)
        return None

    async def reindex(
        self,
        db: str,
        key: KeyPair,
        progress: Callable[[ReindexProgress], None] | None = None,
        batch: int = 64,
    ) -> int:
        """Backfill vectors of the active model for visible rows that lack one.

        Idempotent and resumable: each batch is one entry, and rows that already have a
        vector are skipped, so a run cut short leaves no duplicate when run again.
        """
        if self.embedder is None or self.model is None:
            raise InputError("no embedding backend is configured; reindex has nothing to do")
        view = await self.view(db)
        todo = view.missing_vectors()
        total, done = len(todo), 0
        store = embeddings_store(self.model)
        for start in range(0, total, batch):
            chunk = [r for r in todo[start : start + batch] if not view.has_vector(r.row_id)]
            if chunk:
                vectors = await self.embedder.embed_documents(
                    [embed_text(r.key, r.value) for r in chunk]
                )
                ops = [
                    {"op": "insert", "row": {"ref": r.row_id, "vec": encode_vector(v)}}
                    for r, v in zip(chunk, vectors, strict=True)
                ]
                await self.ledger.write(db, key, {store: ops})
            done += len(todo[start : start + batch])
            if progress is not None:
                progress(ReindexProgress(done, total))
        return total


def _memory_row(row: Row) -> MemoryRow | None:
    index = row.row_id.rsplit("/", 1)[-1]
    order = (row.height, row.entry_id, int(index) if index.isdigit() else 0)
    return parse_memory_row(row.n, row.row_id, row.data, row.ts, order, row.author)


def _vector_of(row: Row) -> tuple[str, NDArray[np.float32]] | None:
    ref, vec = row.data.get("ref"), row.data.get("vec")
    if not isinstance(ref, str) or not isinstance(vec, str):
        return None
    try:
        return ref, decode_vector(vec)
    except (InputError, ValueError):
        return None
