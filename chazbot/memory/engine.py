"""The memory engine: remember, recall, forget and reindex on any database of the ledger.

It keeps one ``MemoryView`` per database, built on first use and kept current by a ledger
listener, so a row committed here or received by sync is searchable as soon as it is stored.
Authorisation is the ledger's: a write by a key the database does not allow is refused there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot import metrics
from chazbot.errors import BackendError, ChazError, InputError, NotFound
from chazbot.ledger import Applied, KeyPair, Ledger, Row
from chazbot.memory import tokenize
from chazbot.memory.audience import Audience, Provenance
from chazbot.memory.embedders import Embedder
from chazbot.memory.embedders.floors import (
    AGENT_CONFIG_STORE,
    FLOOR_FIELD,
    default_floor,
    stored_floor,
)
from chazbot.memory.loading import LOAD_CHUNK, LoadedViews, LoadStatus, memory_row, vector_of
from chazbot.memory.offloop import OffLoopSearches
from chazbot.memory.rows import (
    MEMORY_STORE,
    MemoryRow,
    check_key,
    check_limit,
    check_tags,
    check_value,
    embeddings_store,
    encode_vector,
    forget_ops,
    remember_ops,
    row_text,
)
from chazbot.memory.tokenize import only_small_talk
from chazbot.memory.vector_queue import DEFAULT_TIMING, Pending, VectorQueue, VectorTiming
from chazbot.memory.view import DEFAULT_RANKING, MemoryView, Ranked, RankingSettings

log = logging.getLogger(__name__)
FALLBACK_LOG_EVERY_S = 60.0  # a BM25 fallback is logged at most this often, with the count
FORGET_BATCH = 1_000  # tombstones per entry (an entry holds at most 4,096 operations)


def embed_text(key: str, value: str, speaker: str | None = None) -> str:
    """What gets embedded for a memory row: its human text (``rows.row_text``, version
    ``EMBED_TEXT_VERSION``); ``speaker`` is who told it (the row's provenance)."""
    return row_text(key, value, speaker)


@dataclass(frozen=True)
class VectorsOwed:
    """A database's rows still waiting for their vectors (``/memory stats`` and the bank's
    page read this)."""

    count: int | None  # None: marked as owing some, not counted yet
    failed: bool  # a batch failed: tried again after the next start


class Fallbacks:
    """Recalls that fell back to BM25 because the query's vector failed (SPEC §3: never
    silently): counted here (``/memory stats``) and in ``/metrics``, logged at most once per
    ``FALLBACK_LOG_EVERY_S`` with how many happened since the last line."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = 0
        self.by_reason: dict[str, int] = {}
        self._clock = clock
        self._logged_at: float | None = None
        self._unlogged = 0

    def add(self, reason: str, detail: str) -> None:
        """Count one fallback (``reason``: error or timeout) and log it if a minute passed."""
        self.total += 1
        self.by_reason[reason] = self.by_reason.get(reason, 0) + 1
        self._unlogged += 1
        metrics.RECALL_BM25_FALLBACKS.labels(reason).inc()
        now = self._clock()
        if self._logged_at is None or now - self._logged_at >= FALLBACK_LOG_EVERY_S:
            log.warning(
                "recall fell back to BM25 only %d time(s) since the last report (%d in all);"
                " latest: %s",
                self._unlogged,
                self.total,
                detail,
            )
            self._logged_at, self._unlogged = now, 0


@dataclass(frozen=True)
class ReindexProgress:
    done: int
    total: int


@dataclass(frozen=True)
class EngineTiming:
    """How long the engine waits: measured values, passed in (``MemoryEngine(timing=)``,
    ``PeerTuning.memory``), never a module global a test flips."""

    query_embed_timeout_s: float = 5.0
    """Recall never waits longer than this for a query vector (then BM25 alone)."""
    vectors: VectorTiming = DEFAULT_TIMING
    """When captured rows' vectors are embedded (``VectorQueue``)."""


DEFAULT_ENGINE_TIMING = EngineTiming()


class MemoryEngine:
    """Memory operations over the databases of one ledger."""

    def __init__(
        self,
        ledger: Ledger,
        embedder: Embedder | None = None,
        snapshot_dir: Path | bool | None = True,
        ranking: RankingSettings = DEFAULT_RANKING,
        timing: EngineTiming = DEFAULT_ENGINE_TIMING,
    ) -> None:
        """``snapshot_dir``: where views of big databases are saved (True: ``index/`` beside
        the ledger's file; None or False: never saved). ``ranking``: how every search of
        this engine ranks (``recall`` and auto-recall's; the measured defaults). ``timing``:
        how long it waits for a query vector, and when captured rows are embedded."""
        self.ledger = ledger
        self._ranking = ranking
        self.timing = timing
        self._checks: set[asyncio.Task[None]] = set()  # text-version checks of loaded views
        self.embedder = embedder
        self.views = LoadedViews(ledger, self.model, snapshot_dir, self._apply_row, self._loaded)
        self._kinds: dict[str, str] = {}
        self.vectors_later = (
            VectorQueue(
                ledger,
                embedder,
                self._missing_vectors,
                timing.vectors,
                has_vector=self._has_vector,
                stale=self._stale_vectors,
            )
            if embedder is not None
            else None
        )
        self.fallbacks = Fallbacks()
        # big views are searched on worker threads; their updates wait for those searches
        self.searches: OffLoopSearches[MemoryView] = OffLoopSearches(lambda v: len(v.visible))
        ledger.add_listener(self._on_applied)

    @property
    def ranking(self) -> RankingSettings:
        """How this engine's searches rank (set when it is made)."""
        return self._ranking

    @property
    def model(self) -> str | None:
        return self.embedder.name if self.embedder is not None else None

    def similarity_floor(self, chosen: float | None = None) -> float | None:
        """The relevance floor of vector-only rows (SPEC §5): ``chosen`` (an agent's own
        setting) or the active model's measured default; None without an embedder or when
        the model has no measured floor."""
        if self.model is None:
            return None
        return chosen if chosen is not None else default_floor(self.model)

    async def agent_floor(self, agent_db: str) -> float | None:
        """The floor the agent whose DB is ``agent_db`` recalls with (its ``min_similarity``
        setting, else the model's default)."""
        if self.model is None:
            return None
        fields = await self.ledger.fields(agent_db, AGENT_CONFIG_STORE)
        return self.similarity_floor(stored_floor(fields.get(FLOOR_FIELD)))

    # ---- views --------------------------------------------------------------------------

    async def view(self, db: str) -> MemoryView:
        """The memory view of ``db``, loaded from SQLite on first use (off the event loop),
        with every row stored so far applied (none held for a search under way)."""
        view = self.views.get(db)
        if view is not None:
            await self.searches.settled(view)
            return view if self.views.get(db) is view else await self.view(db)
        return await self.views.load(db)

    async def warm(self, db: str) -> None:
        """After a bulk write: ``db``'s index loaded and, when big, its snapshot current, so
        the next open and first recall read the snapshot instead of every row. A view that
        was live during the write is rebuilt beside it (it keeps serving) and swapped in."""
        if not await self.views.refresh(db):
            await self.view(db)

    def _loaded(self, db: str, view: MemoryView) -> None:
        """A view is in place: its stored vectors of an older text version are checked."""
        if self.vectors_later is not None and view.vectors is not None and view.vectors:
            task = asyncio.ensure_future(self._text_check(db, len(view.vectors)))
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    async def db_kind(self, db: str) -> str:
        """A database's ``meta.kind`` (agent, bank, session; '' when unknown), cached: it is
        set when the database is made."""
        kind = self._kinds.get(db)
        if kind is None:
            found = (await self.ledger.fields(db, "meta")).get("kind")
            kind = self._kinds[db] = found if isinstance(found, str) else ""
        return kind

    def visible_count(self, db: str) -> int:
        """Rows recall can see in ``db`` (0 while its view is not loaded)."""
        view = self.views.get(db)
        return len(view.visible) if view is not None else 0

    def load_status(self, db: str) -> LoadStatus | None:
        """How far the view of ``db`` has loaded (None: never asked for)."""
        return self.views.status(db)

    def drop_view(self, db: str) -> None:
        """Forget the view of ``db``; the next use rebuilds it from SQLite (a load under way
        starts over, so it cannot return rows read before the drop)."""
        self.views.drop(db)

    def _on_applied(self, applied: Applied) -> None:
        for db in applied.reset_dbs:
            # rows were hidden or shown again: the snapshot and the view no longer hold
            self.views.forget_snapshot(db)
            self.drop_view(db)
        vector_store = embeddings_store(self.model) if self.model else None
        wanted = [r for r in applied.rows if r.store == MEMORY_STORE] + [
            r for r in applied.rows if r.store == vector_store
        ]
        if self.vectors_later is not None:
            self._owe_arrived(applied, vector_store)
        for row in wanted:
            self.views.arrived(row)

    def _owe_arrived(self, applied: Applied, vector_store: str | None) -> None:
        """Memory rows committed without a vector and not owed by a write of ours (rows from
        sync, say): handed to the queue, which looks at them again a little later."""
        queue = self.vectors_later
        assert queue is not None
        with_vector = {r.data.get("ref") for r in applied.rows if r.store == vector_store}
        first: dict[str, int] = {}
        for row in applied.rows:
            if (
                row.store == MEMORY_STORE
                and row.row_id not in with_vector
                and not queue.writing(row.db)
                and not row.data.get("forget")
            ):
                first[row.db] = min(first.get(row.db, row.n), row.n)
        for db, n in first.items():
            queue.arrived(db, n - 1)

    def _apply_row(self, view: MemoryView, row: Row) -> None:
        if self.searches.hold(view, partial(self._apply_row, view, row)):
            return  # a search reads the view on its thread: applied when it ends
        if row.store == MEMORY_STORE:
            parsed = memory_row(row)
            if parsed is not None:
                view.apply(parsed)
        else:
            vec = vector_of(row)
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
        origin: Provenance | None = None,
        scope: str = "",
        embed_as: str | None = None,
        vector_later: bool = False,
    ) -> str:
        """Store a memory row (and its vector when an embedder is set); return its row id.

        ``origin``: where it was learned (None: the operator's); ``scope``: it supersedes only
        the row of its key in that scope (SPEC §5c). ``embed_as``: the text whose vector the
        row gets (default ``key value``). ``vector_later``: store the row now and its vector in
        a later entry, batched with others in the background (capture, after the reply), so
        the caller never waits for the embedder."""
        mkey, value, clean_tags = check_key(mkey), check_value(value), check_tags(tags)
        speaker = origin.speaker if origin is not None else None
        text = embed_as if embed_as is not None else embed_text(mkey, value, speaker)
        vector = None
        later = self.vectors_later if vector_later else None
        if self.embedder is not None and later is None:
            try:
                vector = (await self.embedder.embed_documents([text]))[0]
            except BackendError as exc:
                log.warning("embedding failed, memory stored without a vector: %s", exc)
        if later is not None:
            await later.owe(db, key)  # marked before the row: a crash leaves it owed
        try:
            applied = await self.ledger.write(
                db,
                key,
                remember_ops(mkey, value, clean_tags, vector, self.model, agent, origin, scope),
            )
        except BaseException:
            if later is not None:  # cancelled, the row may be stored all the same: look
                later.settle(db, scan=True)
            raise
        row_id = next(r.row_id for r in applied.rows if r.store == MEMORY_STORE)
        if later is not None:
            later.add(Pending(db, key, row_id, text))
        return row_id

    async def wait_vectors(self, timeout: float | None = None, backlog: bool = True) -> bool:
        """Wait until every vector owed (queued by ``remember(vector_later=True)``, a bulk
        write or found owed at the start) is written (or failed); False when ``timeout`` ran
        out first. ``backlog=False``: only the captured rows waiting in memory."""
        if self.vectors_later is None:
            return True
        return await self.vectors_later.wait(timeout, backlog)

    async def resume_vectors(self) -> int:
        """At a start: write in the background the vectors owed at the last stop or crash;
        how many databases owe some."""
        if self.vectors_later is None:
            return 0
        marked = await self.vectors_later.resume()
        for db, view in self.views.items():  # loaded before: their text checked now
            if view.vectors is not None and len(view.vectors):
                await self._text_check(db, len(view.vectors))
        return marked

    async def stop_vectors(self, timeout: float | None = None) -> int:
        """Before the ledger closes: the captured rows' vectors get ``timeout`` to be written,
        what is left is recorded as owed (the next start writes it); how many were left."""
        checks = list(self._checks)  # text-version checks under way: not after the close
        for task in checks:
            task.cancel()
        await asyncio.gather(*checks, return_exceptions=True)
        if self.vectors_later is None:
            return 0
        return await self.vectors_later.stop(timeout)

    def vectors_owed(self, db: str) -> VectorsOwed | None:
        """The vectors ``db`` still owes (written in the background), or None."""
        queue = self.vectors_later
        if queue is None or db not in queue.marked:
            return None
        return VectorsOwed(queue.owed_in(db), queue.failed_in(db))

    def _has_vector(self, db: str, row_id: str) -> bool:
        view = self.views.get(db)
        return view is not None and view.has_vector(row_id)

    async def _missing_vectors(self, db: str, after: int) -> list[tuple[str, str]]:
        """``(row id, text)`` of the visible rows of ``db`` stored after row number ``after``
        without a vector of the active model (the owed-vectors scan)."""
        if not await self.ledger.exists(db):
            return []
        view = await self.view(db)
        rows = await asyncio.to_thread(view.missing_vectors)
        return [(r.row_id, row_embed_text(r)) for r in rows if r.doc > after]

    async def _stale_vectors(self, db: str, before: int) -> list[tuple[str, str]]:
        """``(row id, text)`` of the visible rows of ``db`` whose vector of the active model
        was not written after row number ``before`` (their vector, if any, is of an older
        ``EMBED_TEXT_VERSION``), in row order: what a text-version rewrite writes again."""
        if self.model is None or not await self.ledger.exists(db):
            return []
        store = embeddings_store(self.model)
        fresh: set[str] = set()
        after = before
        while True:
            chunk = await self.ledger.rows(db, store, after=after, limit=LOAD_CHUNK)
            fresh.update(str(r.data.get("ref")) for r in chunk)
            if len(chunk) < LOAD_CHUNK:
                break
            after = chunk[-1].n
        view = await self.view(db)
        rows = sorted(view.visible.values(), key=lambda r: r.doc)
        return [(r.row_id, row_embed_text(r)) for r in rows if r.row_id not in fresh]

    async def _text_check(self, db: str, n_vectors: int) -> None:
        """After ``db``'s view loaded: its stored vectors of an older text version are owed
        again (``VectorQueue.check_text``)."""
        queue = self.vectors_later
        if queue is None or self.model is None or not n_vectors:
            return
        try:
            await queue.check_text(db)
        except ChazError as exc:
            log.warning("memory: could not check the vectors' text version of %s: %s", db, exc)

    async def forget(
        self,
        db: str,
        key: KeyPair,
        mkey: str,
        agent: str | None = None,
        origin: Provenance | None = None,
        audience: Audience | None = None,
        speaker: str | None = None,
    ) -> int:
        """Hide ``mkey`` wherever ``audience`` may see it (every scope it has a visible row
        in; None: everywhere), only rows said by ``speaker`` when given; one entry. Returns
        how many rows it hid; NotFound when none."""
        mkey = check_key(mkey)
        view = await self.view(db)
        rows = [
            r
            for r in view.rows_for(mkey, audience)
            if speaker is None or (r.origin is not None and r.origin.speaker == speaker)
        ]
        if not rows:
            raise NotFound(f"no memory with key {mkey!r}")
        scopes = sorted({r.scope for r in rows})
        await self.ledger.write(db, key, forget_ops(mkey, agent, origin, scopes))
        return len(rows)

    async def forget_rows(
        self, db: str, key: KeyPair, rows: list[MemoryRow], origin: Provenance | None = None
    ) -> int:
        """Hide exactly these rows (each one's key in its scope), in entries of at most
        ``FORGET_BATCH`` tombstones; how many were hidden (``/memory forget-mine all``)."""
        idents = sorted({r.ident for r in rows})
        for start in range(0, len(idents), FORGET_BATCH):
            ops: list[Any] = []
            for scope, mkey in idents[start : start + FORGET_BATCH]:
                ops += forget_ops(mkey, None, origin, (scope,))[MEMORY_STORE]
            await self.ledger.write(db, key, {MEMORY_STORE: ops})
        return len(idents)

    async def visible_rows(self, db: str, row_ids: Collection[str]) -> list[MemoryRow]:
        """Those of ``row_ids`` that are still the visible row of their key (a row since
        replaced or forgotten is not), for forgetting what one message gave."""
        wanted = set(row_ids)
        if not wanted:
            return []
        view = await self.view(db)
        return [r for r in view.visible.values() if r.row_id in wanted]

    async def recall(
        self,
        db: str,
        query: str,
        tags: list[str] | None = None,
        limit: int | None = 10,
        audience: Audience | None = None,
        min_similarity: float | None = None,
    ) -> list[Ranked]:
        """Ranked rows of ``db`` that ``audience`` may be told (None: all of them); rows found
        only by the vector ranker need a cosine of ``min_similarity`` (None: no floor; an
        agent's is ``agent_floor``)."""
        if not isinstance(query, str):
            raise InputError("query must be a string")
        clean_tags, lim = check_tags(tags), check_limit(limit)
        query = tokenize.bound_query(query).text  # before anything scores it (MAX_QUERY_*)
        view = await self.view(db)
        qvec = await self.query_vector(query)
        started = time.perf_counter()
        found = await self.searches.run(
            view,
            lambda v: v.search(
                query, clean_tags, lim, qvec, audience, min_similarity, self.ranking
            ),
        )
        metrics.RECALL_SECONDS.observe(time.perf_counter() - started)
        return found

    async def query_vector(self, query: str) -> NDArray[np.float32] | None:
        """The query's vector, or None (no embedder, empty query, a query of only greetings
        and stopwords, whose nearest rows are never relevant, or the embedder failed)."""
        if self.embedder is None or not query.strip() or only_small_talk(query):
            return None
        try:
            async with asyncio.timeout(self.timing.query_embed_timeout_s):
                return await self.embedder.embed_query(tokenize.bound_query(query).text)
        except BackendError as exc:
            self.fallbacks.add("error", str(exc))
        except TimeoutError:
            self.fallbacks.add(
                "timeout",
                f"query embedding took over {self.timing.query_embed_timeout_s:.0f} s",
            )
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
                vectors = await self.embedder.embed_documents([row_embed_text(r) for r in chunk])
                ops = [
                    {"op": "insert", "row": {"ref": r.row_id, "vec": encode_vector(v)}}
                    for r, v in zip(chunk, vectors, strict=True)
                ]
                await self.ledger.write(db, key, {store: ops})
            done += len(todo[start : start + batch])
            if progress is not None:
                progress(ReindexProgress(done, total))
        return total


def row_embed_text(row: MemoryRow) -> str:
    """What a stored row's vector is of (``embed_text`` with the row's speaker)."""
    return embed_text(row.key, row.value, row.origin.speaker if row.origin is not None else None)
