"""The memory engine: remember, recall, forget and reindex on any database of the ledger.

It keeps one ``MemoryView`` per database, built on first use and kept current by a ledger
listener, so a row committed here or received by sync is searchable as soon as it is stored.
Authorisation is the ledger's: a write by a key the database does not allow is refused there.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import shutil
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
from chazbot.memory import bm25_kernel, snapshot, tokenize
from chazbot.memory.audience import Audience, Provenance
from chazbot.memory.embedders import Embedder
from chazbot.memory.embedders.floors import (
    AGENT_CONFIG_STORE,
    FLOOR_FIELD,
    default_floor,
    stored_floor,
)
from chazbot.memory.offloop import OffLoopSearches
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
    row_text,
)
from chazbot.memory.snapshot import SnapshotMeta
from chazbot.memory.tokenize import only_small_talk
from chazbot.memory.vector_queue import DEFAULT_TIMING, Pending, VectorQueue, VectorTiming
from chazbot.memory.view import DEFAULT_RANKING, MemoryView, Ranked, RankingSettings

log = logging.getLogger(__name__)
FALLBACK_LOG_EVERY_S = 60.0  # a BM25 fallback is logged at most this often, with the count
LOAD_CHUNK = 20_000  # rows read per ledger call while loading a view
FORGET_BATCH = 1_000  # tombstones per entry (an entry holds at most 4,096 operations)
LOG_LOAD_ROWS = 20_000  # views at least this big log their loading at INFO
SNAPSHOT_DIR = "index"  # beside the ledger's file
SNAPSHOT_MIN_ROWS = 5_000  # smaller views build faster than a snapshot pays for
SNAPSHOT_REFRESH = 10  # save again once a tenth as many rows as it holds came after it


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


@dataclass
class LoadStatus:
    """Progress of loading one database's view (rows read of the rows to read)."""

    done: int
    total: int
    started: float
    seconds: float = 0.0
    ready: bool = False
    from_snapshot: bool = False


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
        if snapshot_dir is True:
            snapshot_dir = Path(ledger.path).parent / SNAPSHOT_DIR
        self.snapshot_dir: Path | None = snapshot_dir or None
        state_dir = Path(ledger.path).parent
        bm25_kernel.keep_cache_out_of(state_dir)  # compiled code never runs from a state dir
        _remove_old_compiled_code(state_dir / SNAPSHOT_DIR / "compiled")
        self.snapshot_min_rows = SNAPSHOT_MIN_ROWS
        self._forgetting: set[asyncio.Task[None]] = set()  # snapshot records being deleted
        self._checks: set[asyncio.Task[None]] = set()  # text-version checks of loaded views
        self.embedder = embedder
        self._views: dict[str, MemoryView] = {}
        self._loading: dict[str, asyncio.Future[MemoryView]] = {}
        self._pending: dict[str, list[Row]] = {}  # rows committed while a view loads
        self._restart: set[str] = set()  # loads to start over (their DB's view was reset)
        self._status: dict[str, LoadStatus] = {}
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
        view = self._views.get(db)
        if view is not None:
            await self.searches.settled(view)
            return view if self._views.get(db) is view else await self.view(db)
        loading = self._loading.get(db)
        if loading is None:
            loading = asyncio.ensure_future(self._load_once(db))
            self._loading[db] = loading
        return await asyncio.shield(loading)

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
        view = self._views.get(db)
        return len(view.visible) if view is not None else 0

    def load_status(self, db: str) -> LoadStatus | None:
        """How far the view of ``db`` has loaded (None: never asked for)."""
        return self._status.get(db)

    def drop_view(self, db: str) -> None:
        """Forget the view of ``db``; the next use rebuilds it from SQLite (a load under way
        starts over, so it cannot return rows read before the drop)."""
        self._views.pop(db, None)
        self._status.pop(db, None)
        if db in self._loading:
            self._restart.add(db)

    async def _load_once(self, db: str) -> MemoryView:
        _gc_pause()
        try:
            while True:
                self._pending[db] = []
                view = await self._load(db)
                if db in self._restart:
                    self._restart.discard(db)
                    continue
                # Rows committed while loading: applying one twice is harmless (newest-per-key
                # ignores a row that is not newer; a vector replaces itself).
                for row in self._pending.pop(db):
                    self._apply_row(view, row)
                self._views[db] = view
                if self.vectors_later is not None and view.vectors is not None and view.vectors:
                    task = asyncio.ensure_future(self._text_check(db, len(view.vectors)))
                    self._checks.add(task)
                    task.add_done_callback(self._checks.discard)
                return view
        finally:
            _gc_resume()
            self._pending.pop(db, None)
            self._loading.pop(db, None)
            self._restart.discard(db)

    async def _load(self, db: str) -> MemoryView:
        """Build ``db``'s view: from its snapshot plus the rows stored since, or from all its
        rows. Rows are read in chunks and parsed, indexed and saved on worker threads, so the
        event loop only hops; rows committed meanwhile reach the view through ``_pending``."""
        if not await self.ledger.exists(db):
            raise NotFound(f"no database {db}")
        started = time.perf_counter()
        high = await self.ledger.last_row_number()  # every row up to here is committed
        counts = await self.ledger.stores(db)
        vector_store = embeddings_store(self.model) if self.model is not None else None
        n_rows = counts.get(MEMORY_STORE, 0)
        n_vectors = counts.get(vector_store, 0) if vector_store is not None else 0
        path = self._snapshot_path(db)
        saved = None
        if path is not None and n_rows >= self.snapshot_min_rows:
            recorded = await self.ledger.kv.get(snapshot.record_key(path))
            saved = await asyncio.to_thread(snapshot.read, path, db, self.model, recorded)
            if saved is not None and (
                saved[1].rows > n_rows or saved[1].vectors > n_vectors or saved[1].last_n > high
            ):
                log.info("memory snapshot of %s does not match the ledger; rebuilding", db)
                saved = None
        base = saved[1] if saved is not None else SnapshotMeta(db, self.model, 0, 0, 0)
        total = max(0, n_rows - base.rows) + max(0, n_vectors - base.vectors)
        status = LoadStatus(0, total, started, from_snapshot=saved is not None)
        self._status[db] = status
        big = n_rows >= LOG_LOAD_ROWS
        if big:
            log.info(
                "loading memory of %s: %d rows%s",
                db,
                n_rows,
                f" (snapshot + {total} newer rows)" if saved is not None else "",
            )
        parsed: list[MemoryRow] = []
        vectors: list[tuple[str, NDArray[np.float32]]] = []
        read = {MEMORY_STORE: 0, vector_store: 0}
        stores: list[tuple[str, Callable[[list[Row]], list[Any]], list[Any]]] = [
            (MEMORY_STORE, _parse_rows, parsed)
        ]
        if vector_store is not None:
            stores.append((vector_store, _parse_vectors, vectors))
        for store, parse, out in stores:
            after = base.last_n
            while after < high:
                chunk = await self.ledger.rows(db, store, after=after, limit=LOAD_CHUNK)
                after = chunk[-1].n if len(chunk) == LOAD_CHUNK else high
                chunk = [r for r in chunk if r.n <= high]  # newer ones come through _pending
                out.extend(await asyncio.to_thread(parse, chunk))
                read[store] += len(chunk)
                status.done += len(chunk)
                if big:
                    log.info("loading memory of %s: %d/%d rows", db, status.done, total)
        meta = SnapshotMeta(
            db, self.model, high, base.rows + read[MEMORY_STORE], base.vectors + read[vector_store]
        )
        if saved is not None:
            view = saved[0]
            await asyncio.to_thread(_apply_all, view, parsed, vectors, high)
        else:
            view = MemoryView(self.model)
            await asyncio.to_thread(view.load, parsed, vectors, high)
        fresh = read[MEMORY_STORE] + read[vector_store]
        least = self.snapshot_min_rows
        if (
            path is not None
            and meta.rows >= least
            and (saved is None or fresh >= max(least, base.rows // SNAPSHOT_REFRESH))
        ):
            try:
                digest = await asyncio.to_thread(snapshot.write, path, view, meta)
                await self.ledger.kv.set(snapshot.record_key(path), digest)
            except OSError as exc:
                log.warning("could not save the memory snapshot of %s: %s", db, exc)
        status.seconds = time.perf_counter() - started
        status.done = max(status.done, status.total)
        status.ready = True
        bm25_kernel.loop(len(view.visible))  # a big bank: compile the search loop meanwhile
        (log.info if big else log.debug)(
            "memory of %s loaded: %d visible rows in %.2f s", db, len(view.visible), status.seconds
        )
        return view

    async def warm(self, db: str) -> None:
        """After a bulk write: ``db``'s index loaded and, when big, its snapshot current, so
        the next open and first recall read the snapshot instead of every row. A view that
        was live during the write is rebuilt beside it (it keeps serving) and swapped in."""
        view = self._views.get(db)
        if view is None or db in self._loading or self._snapshot_path(db) is None:
            await self.view(db)
            return
        if len(view.visible) < self.snapshot_min_rows:
            return
        self._pending[db] = []
        _gc_pause()
        try:
            fresh = await self._load(db)
            rows = self._pending.pop(db, [])
        finally:
            _gc_resume()
            self._pending.pop(db, None)
        if self._views.get(db) is not view:
            return  # dropped or replaced meanwhile: that one stands
        for row in rows:
            self._apply_row(fresh, row)
        self._views[db] = fresh

    def _snapshot_path(self, db: str) -> Path | None:
        if self.snapshot_dir is None:
            return None
        return snapshot.snapshot_path(self.snapshot_dir, db, self.model)

    def _forget_snapshot(self, db: str) -> None:
        path = self._snapshot_path(db)
        if path is not None:
            # The record first: a copy of the file kept aside must not pass for current.
            task = asyncio.ensure_future(self.ledger.kv.delete(snapshot.record_key(path)))
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not delete the memory snapshot of %s: %s", db, exc)

    def _on_applied(self, applied: Applied) -> None:
        for db in applied.reset_dbs:
            # rows were hidden or shown again: the snapshot and the view no longer hold
            self._forget_snapshot(db)
            self.drop_view(db)
        vector_store = embeddings_store(self.model) if self.model else None
        wanted = [r for r in applied.rows if r.store == MEMORY_STORE] + [
            r for r in applied.rows if r.store == vector_store
        ]
        if self.vectors_later is not None:
            self._owe_arrived(applied, vector_store)
        for row in wanted:
            view = self._views.get(row.db)
            if view is not None:
                self._apply_row(view, row)
            if row.db in self._pending:  # a load under way (``warm``: beside the live view)
                self._pending[row.db].append(row)

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
        for db, view in list(self._views.items()):  # loaded before: their text checked now
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
        view = self._views.get(db)
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
            lambda v: v.search_work([(query, qvec)], clean_tags),
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


def _memory_row(row: Row) -> MemoryRow | None:
    index = row.row_id.rsplit("/", 1)[-1]
    order = (row.height, row.entry_id, int(index) if index.isascii() and index.isdigit() else 0)
    return parse_memory_row(row.n, row.row_id, row.data, row.ts, order, row.author)


_gc_pauses = 0
_gc_was_enabled = False


def _remove_old_compiled_code(directory: Path) -> None:
    """Remove ``index/compiled``, where compiled code was kept before: it is never loaded
    from a state dir (one copied from elsewhere could bring a pickle that runs)."""
    if directory.is_dir() and not directory.is_symlink():
        shutil.rmtree(directory, ignore_errors=True)
        log.info("removed %s: compiled code is never loaded from the state dir", directory)
    elif directory.is_symlink():
        directory.unlink(missing_ok=True)


def _gc_pause() -> None:
    """Hold off the cyclic garbage collector while a view loads.

    Loading allocates hundreds of thousands of objects; each full collection then walks the
    whole heap while holding the GIL, which stalled the event loop for long stretches
    (docs/measured.md, "Memory indexes"). Loads nest by count.
    """
    global _gc_pauses, _gc_was_enabled
    if _gc_pauses == 0:
        _gc_was_enabled = gc.isenabled()
        gc.disable()
    _gc_pauses += 1


def _gc_resume() -> None:
    """End a pause; after the last one, move what exists now (the loaded views among it) to
    the collector's permanent generation, so later full collections do not walk it again."""
    global _gc_pauses
    _gc_pauses -= 1
    if _gc_pauses == 0 and _gc_was_enabled:
        gc.freeze()
        gc.enable()


def _apply_all(
    view: MemoryView,
    rows: list[MemoryRow],
    vectors: list[tuple[str, NDArray[np.float32]]],
    last_n: int,
) -> None:
    """Apply rows stored after a snapshot (memory rows first: a vector needs its row)."""
    for row in rows:
        view.apply(row)
    for row_id, vector in vectors:
        view.apply_vector(row_id, vector)
    view.last_n = max(view.last_n, last_n)


def _parse_rows(rows: list[Row]) -> list[MemoryRow]:
    return [r for r in map(_memory_row, rows) if r is not None]


def _parse_vectors(rows: list[Row]) -> list[tuple[str, NDArray[np.float32]]]:
    return [v for v in map(_vector_of, rows) if v is not None]


def _vector_of(row: Row) -> tuple[str, NDArray[np.float32]] | None:
    ref, vec = row.data.get("ref"), row.data.get("vec")
    if not isinstance(ref, str) or not isinstance(vec, str):
        return None
    try:
        return ref, decode_vector(vec)
    except (InputError, ValueError):
        return None
