"""Loading the memory views of the engine (``MemoryEngine``): each database's view built on
first use off the event loop, from its snapshot plus the rows stored since or from all its
rows; big views saved as snapshots (``snapshot``) and their snapshot forgotten when rows are
hidden or shown again; the garbage collector held off while a view loads.

Rows committed while a view loads are kept aside and applied once it is built, so a row
stored at any moment reaches the view.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError, NotFound
from chazbot.ledger import Ledger, Row
from chazbot.memory import bm25_kernel, snapshot
from chazbot.memory.rows import (
    MEMORY_STORE,
    MemoryRow,
    decode_vector,
    embeddings_store,
    parse_memory_row,
)
from chazbot.memory.snapshot import SnapshotMeta
from chazbot.memory.view import MemoryView

log = logging.getLogger(__name__)
LOAD_CHUNK = 20_000  # rows read per ledger call while loading a view
LOG_LOAD_ROWS = 20_000  # views at least this big log their loading at INFO
SNAPSHOT_DIR = "index"  # beside the ledger's file
SNAPSHOT_MIN_ROWS = 5_000  # smaller views build faster than a snapshot pays for
SNAPSHOT_REFRESH = 10  # save again once a tenth as many rows as it holds came after it
ApplyRow = Callable[[MemoryView, Row], None]


@dataclass
class LoadStatus:
    """Progress of loading one database's view (rows read of the rows to read)."""

    done: int
    total: int
    started: float
    seconds: float = 0.0
    ready: bool = False
    from_snapshot: bool = False


class LoadedViews:
    """The views of one engine's databases: loaded once each, kept current by ``arrived``.

    ``apply_row`` applies a stored row to a view (the engine's: it waits for searches under
    way); ``loaded`` is told of each view once it is in place."""

    def __init__(
        self,
        ledger: Ledger,
        model: str | None,
        snapshot_dir: Path | bool | None,
        apply_row: ApplyRow,
        loaded: Callable[[str, MemoryView], None],
    ) -> None:
        """``snapshot_dir``: where views of big databases are saved (True: ``index/`` beside
        the ledger's file; None or False: never saved)."""
        self.ledger = ledger
        self.model = model
        if snapshot_dir is True:
            snapshot_dir = Path(ledger.path).parent / SNAPSHOT_DIR
        self.snapshot_dir: Path | None = snapshot_dir or None
        state_dir = Path(ledger.path).parent
        bm25_kernel.keep_cache_out_of(state_dir)  # compiled code never runs from a state dir
        _remove_old_compiled_code(state_dir / SNAPSHOT_DIR / "compiled")
        self.snapshot_min_rows = SNAPSHOT_MIN_ROWS
        self._apply_row = apply_row
        self._loaded = loaded
        self._forgetting: set[asyncio.Task[None]] = set()  # snapshot records being deleted
        self._views: dict[str, MemoryView] = {}
        self._loading: dict[str, asyncio.Future[MemoryView]] = {}
        self._pending: dict[str, list[Row]] = {}  # rows committed while a view loads
        self._restart: set[str] = set()  # loads to start over (their DB's view was reset)
        self._status: dict[str, LoadStatus] = {}

    def get(self, db: str) -> MemoryView | None:
        """The view of ``db`` if it is loaded."""
        return self._views.get(db)

    def items(self) -> list[tuple[str, MemoryView]]:
        """The loaded views by database."""
        return list(self._views.items())

    async def load(self, db: str) -> MemoryView:
        """The view of ``db``, loading it once however many ask meanwhile."""
        loading = self._loading.get(db)
        if loading is None:
            loading = asyncio.ensure_future(self._load_once(db))
            self._loading[db] = loading
        return await asyncio.shield(loading)

    def status(self, db: str) -> LoadStatus | None:
        """How far the view of ``db`` has loaded (None: never asked for)."""
        return self._status.get(db)

    def drop(self, db: str) -> None:
        """Forget the view of ``db``; the next use rebuilds it from SQLite (a load under way
        starts over, so it cannot return rows read before the drop)."""
        self._views.pop(db, None)
        self._status.pop(db, None)
        if db in self._loading:
            self._restart.add(db)

    def arrived(self, row: Row) -> None:
        """A memory or vector row was stored: applied to its database's view, and kept for a
        load under way (``refresh``: beside the live view)."""
        view = self._views.get(row.db)
        if view is not None:
            self._apply_row(view, row)
        if row.db in self._pending:
            self._pending[row.db].append(row)

    async def _load_once(self, db: str) -> MemoryView:
        _gc_pause()
        try:
            while True:
                self._pending[db] = []
                view = await self._build(db)
                if db in self._restart:
                    self._restart.discard(db)
                    continue
                # Rows committed while loading: applying one twice is harmless (newest-per-key
                # ignores a row that is not newer; a vector replaces itself).
                for row in self._pending.pop(db):
                    self._apply_row(view, row)
                self._views[db] = view
                self._loaded(db, view)
                return view
        finally:
            _gc_resume()
            self._pending.pop(db, None)
            self._loading.pop(db, None)
            self._restart.discard(db)

    async def _build(self, db: str) -> MemoryView:
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
        path = self.snapshot_path(db)
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

    async def refresh(self, db: str) -> bool:
        """After a bulk write: ``db``'s loaded view, when big, rebuilt beside it (it keeps
        serving) and swapped in, its snapshot saved; False when there is no loaded view to
        refresh this way (none, one loading, or no snapshots): the caller loads it instead."""
        view = self._views.get(db)
        if view is None or db in self._loading or self.snapshot_path(db) is None:
            return False
        if len(view.visible) < self.snapshot_min_rows:
            return True
        self._pending[db] = []
        _gc_pause()
        try:
            fresh = await self._build(db)
            rows = self._pending.pop(db, [])
        finally:
            _gc_resume()
            self._pending.pop(db, None)
        if self._views.get(db) is not view:
            return True  # dropped or replaced meanwhile: that one stands
        for row in rows:
            self._apply_row(fresh, row)
        self._views[db] = fresh
        return True

    def snapshot_path(self, db: str) -> Path | None:
        if self.snapshot_dir is None:
            return None
        return snapshot.snapshot_path(self.snapshot_dir, db, self.model)

    def forget_snapshot(self, db: str) -> None:
        """Delete the snapshot of ``db`` and its record (its rows were hidden or shown again)."""
        path = self.snapshot_path(db)
        if path is not None:
            # The record first: a copy of the file kept aside must not pass for current.
            task = asyncio.ensure_future(self.ledger.kv.delete(snapshot.record_key(path)))
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not delete the memory snapshot of %s: %s", db, exc)


def _remove_old_compiled_code(directory: Path) -> None:
    """Remove ``index/compiled``, where compiled code was kept before: it is never loaded
    from a state dir (one copied from elsewhere could bring a pickle that runs)."""
    if directory.is_dir() and not directory.is_symlink():
        shutil.rmtree(directory, ignore_errors=True)
        log.info("removed %s: compiled code is never loaded from the state dir", directory)
    elif directory.is_symlink():
        directory.unlink(missing_ok=True)


_gc_pauses = 0
_gc_was_enabled = False


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
    return [r for r in map(memory_row, rows) if r is not None]


def _parse_vectors(rows: list[Row]) -> list[tuple[str, NDArray[np.float32]]]:
    return [v for v in map(vector_of, rows) if v is not None]


def vector_of(row: Row) -> tuple[str, NDArray[np.float32]] | None:
    ref, vec = row.data.get("ref"), row.data.get("vec")
    if not isinstance(ref, str) or not isinstance(vec, str):
        return None
    try:
        return ref, decode_vector(vec)
    except (InputError, ValueError):
        return None


def memory_row(row: Row) -> MemoryRow | None:
    index = row.row_id.rsplit("/", 1)[-1]
    order = (row.height, row.entry_id, int(index) if index.isascii() and index.isdigit() else 0)
    return parse_memory_row(row.n, row.row_id, row.data, row.ts, order, row.author)
