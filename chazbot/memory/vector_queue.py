"""Vectors written after their rows: captured and bulk-written rows are embedded in background
batches, off the turn's path and out of busy moments, and a vector owed is never lost.

A row whose vector comes later is stored at once (BM25 finds it in the next turn). Before it is
written, its database is marked as owing vectors in a peer-local record (``OwedMarks``,
``vector_marks``: the ledger's row number before the first such row and the key that writes
the vectors), so a crash at any point leaves them owed, not lost. Two ways in:

- ``add``: one captured row with the text its vector is of, kept in memory and embedded in
  calls of at most ``batch`` texts, after a quiet moment (a captured row comes with every chat
  turn, so while rows keep arriving, one in the last ``quiet_s``, the bot is busy answering and
  the embedder would take the CPU its turns need). Rows wait at most ``max_wait_s``. At
  most ``max_pending`` wait in memory; past that a row is left to the scan below (``skipped``).
- ``settle(db, scan=True)``: a bulk write (an import) is done; the scan finds the visible
  rows stored after the mark without a vector and embeds them, in batches, in the same quiet
  moments.
- ``arrived(db, after)``: rows came without their vectors from elsewhere (sync ingest, a
  write straight on the ledger, a remember whose embedding failed). The database is marked
  with a key this peer holds that may write it (none: nothing to do, the writer owes them)
  and scanned ``arrived_grace_s`` later: the writing peer's own vectors usually arrive by
  then, and only what is still missing (another model, a peer without an embedder) is
  embedded here.
- ``check_text(db)``: ``db``'s view loaded and holds vectors stored before this peer's first
  start with the current ``EMBED_TEXT_VERSION`` (``local_kv`` ``vectors-text``): they are of
  an older text, so its visible rows without a vector written since are rewritten, as a scan
  (the old vectors and BM25 serve meanwhile); ``vectors-text/<db>`` records it done.

Once a database owes nothing (the scan found nothing left, nothing waits and no write is under
way) its record is deleted. At a stop (``stop``) what waits in memory gets a bounded wait, then
the task ends before the ledger closes and the texts still waiting are recorded beside the mark;
the next start (``resume``) scans each marked database and writes what is owed, without a
reindex. A failed batch keeps its database marked: the next start tries again.

Nothing here is on a turn's path: the embedder runs documents on their own worker (the local
one) so a turn's query embedding never waits behind this (SPEC §3).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from chazbot import metrics
from chazbot.errors import ChazError
from chazbot.ledger import KeyPair, Ledger, Level
from chazbot.memory.embedders import Embedder
from chazbot.memory.rows import embeddings_store, encode_vector
from chazbot.memory.vector_marks import DEFAULT_TIMING, OwedMarks, Pending, VectorTiming

log = logging.getLogger(__name__)

Missing = Callable[[str, int], Awaitable[list[tuple[str, str]]]]
"""``missing(db, after)``: ``(row id, text)`` of the visible rows of ``db`` stored after row
number ``after`` that have no vector of the active model."""


class VectorQueue:
    """Rows waiting for their vectors, and the one task that embeds and writes them."""

    def __init__(
        self,
        ledger: Ledger,
        embedder: Embedder,
        missing: Missing | None = None,
        timing: VectorTiming = DEFAULT_TIMING,
        has_vector: Callable[[str, str], bool] | None = None,
        stale: Missing | None = None,
    ) -> None:
        """``stale(db, before)``: ``(row id, text)`` of the visible rows of ``db`` with no
        vector written after row number ``before`` (a text-version rewrite). ``timing``: when
        it embeds (``VectorTiming``)."""
        self.ledger = ledger
        self.embedder = embedder
        self.store = embeddings_store(embedder.name)
        self.timing = timing
        self.batch = timing.batch
        self._missing = missing
        self._stale = stale
        self._text_before: int | None = None  # vectors up to this row number: older text
        self._rewrite: dict[str, int] = {}  # db -> its vectors up to this n are rewritten
        self._scan_key: KeyPair | None = None  # the key the scan under way writes with
        self._scan_rewrite = False  # the scan under way rewrites vectors of an older text
        self._has_vector = has_vector or (lambda db, row_id: False)
        self._items: list[Pending] = []
        self.marks = OwedMarks(ledger)  # the databases marked as owing vectors
        self._writing: dict[str, int] = {}  # writes under way whose rows will owe vectors
        self._to_scan: dict[str, None] = {}  # databases to scan, in order
        self._scan_db = ""
        self._scan_rows: list[tuple[str, str]] = []  # the scan under way: what is left
        self._arrived: dict[str, int] = {}  # db -> row number before rows that came
        self._arrive_task: asyncio.Task[None] | None = None
        self._grace: set[str] = set()  # marked on arrival, scanned after the grace
        self._bulk: dict[str, int] = {}  # rows of bulk writes not scanned yet (a count)
        self._failed_dbs: set[str] = set()  # a batch failed: stays marked until a restart
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._running = 0
        self._chunk: list[Pending] = []  # the batch under way
        self._last_add = 0.0
        self._scan_since = 0.0
        self._waiters = 0  # callers of ``wait`` under way: no waiting for a quiet moment
        self._wake = asyncio.Event()
        self._tick = asyncio.Event()  # a batch ended or the task stopped
        self._running_items = False  # the batch under way is of rows waiting in memory
        self._stopped = False
        self.written = 0
        self.failed = 0
        self.skipped = 0
        self.recorded = 0  # texts recorded as owed at the last stop

    # ---- counts -------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Rows stored whose vector is known to be owed and not written yet: what waits in
        memory, the batch under way and what the scan under way has left."""
        return len(self._items) + self._running + len(self._scan_rows)

    def owed_in(self, db: str) -> int | None:
        """How many vectors ``db`` owes as far as known (None: marked, not counted yet)."""
        count = sum(1 for p in self._items + self._chunk if p.db == db) + self._bulk.get(db, 0)
        if self._scan_db == db:
            count += len(self._scan_rows)
        if db in self.marks and not count:
            return None
        return count

    def failed_in(self, db: str) -> bool:
        """Whether a batch of ``db`` failed (it stays owed until the next start)."""
        return db in self._failed_dbs

    def wrote(self, db: str, rows: int) -> None:
        """A bulk write under ``owe`` stored ``rows`` more rows without their vectors."""
        self._bulk[db] = self._bulk.get(db, 0) + rows

    @property
    def marked(self) -> list[str]:
        """Databases that owe vectors: marked in their peer-local record, or whose vectors
        of an older text are being rewritten."""
        return list(dict.fromkeys([*self.marks.dbs(), *self._rewrite]))

    # ---- marking ------------------------------------------------------------------------

    async def owe(self, db: str, key: KeyPair) -> None:
        """Before a write whose rows get their vectors later: mark ``db`` durably (once per
        busy stretch). Pair with ``add`` per row or ``settle`` when the write is done."""
        self._writing[db] = self._writing.get(db, 0) + 1
        if db in self.marks:
            return
        try:
            await self.marks.mark(db, key)
        except BaseException:
            self._unwrite(db)
            raise

    def add(self, item: Pending) -> None:
        """Queue a stored row for its vector (its ``owe`` is done); returns at once."""
        self._unwrite(item.db)
        self._last_add = time.monotonic()
        if self._stopped:
            return  # stays owed: the mark is stored, the next start writes it
        if len(self._items) >= self.timing.max_pending:
            self.skipped += 1
            metrics.VECTORS_LATER.labels("skipped").inc()
            if self.skipped == 1 or self.skipped % 1000 == 0:
                log.warning(
                    "%d captured memories wait for a vector beyond the %d held in memory"
                    " (BM25 finds them; a scan adds their vectors)",
                    self.skipped,
                    self.timing.max_pending,
                )
            self._to_scan[item.db] = None
        else:
            self._items.append(item)
        self._start()

    def settle(self, db: str, scan: bool = True) -> None:
        """A write announced by ``owe`` is done (or failed); ``scan``: its rows still need
        their vectors, find them in the database."""
        self._unwrite(db)
        if scan and not self._stopped:
            self._to_scan[db] = None
            self._scan_since = self._scan_since or time.monotonic()
        self._start()

    def writing(self, db: str) -> bool:
        """Whether a write announced by ``owe`` is under way in ``db`` (its rows are owed)."""
        return db in self._writing

    def arrived(self, db: str, after: int) -> None:
        """Rows of ``db`` stored after row number ``after`` came without their vectors from
        elsewhere: mark it now, scan it ``arrived_grace_s`` later."""
        if self._stopped:
            return
        known = self._arrived.get(db)
        self._arrived[db] = after if known is None else min(known, after)
        if self._arrive_task is None or self._arrive_task.done():
            self._arrive_task = asyncio.create_task(self._mark_arrived(), name="memory-arrived")

    async def _mark_arrived(self) -> None:
        while self._arrived and not self._stopped:
            db, after = next(iter(self._arrived.items()))
            del self._arrived[db]
            try:
                key = await self._writer(db)
                if key is None:
                    continue  # this peer may not write there: the writer owes them
                await self.marks.lower(db, after, key)
            except ChazError as exc:
                log.warning("memory: could not mark the vectors %s owes: %s", db, exc)
                continue
            self._grace.add(db)
            asyncio.get_running_loop().call_later(self.timing.arrived_grace_s, self._scan_later, db)

    def _scan_later(self, db: str) -> None:
        self._grace.discard(db)
        if not self._stopped and db in self.marks:
            self._to_scan[db] = None
            self._start()

    async def _writer(self, db: str) -> KeyPair | None:
        """A key this peer holds that may write to ``db``."""
        for _, key in await self.ledger.keys.all():
            if (await self.ledger.permission(db, key.public)).allows(Level.WRITE):
                return key
        return None

    def _unwrite(self, db: str) -> None:
        left = self._writing.get(db, 0) - 1
        if left > 0:
            self._writing[db] = left
        else:
            self._writing.pop(db, None)

    # ---- start and stop -----------------------------------------------------------------

    async def resume(self) -> int:
        """At a start: scan every database marked as owing vectors (in the background);
        returns how many are marked. Also reads (or, on the first start with this
        ``EMBED_TEXT_VERSION``, records) since when vectors are of the current text."""
        self._text_before = await self.marks.text_version()
        marks = await self.marks.load()
        for db in marks:
            self._to_scan[db] = None
        if marks:
            self._scan_since = time.monotonic()
            log.info("memory: %d database(s) owe vectors, written in the background", len(marks))
            self._start()
        return len(marks)

    async def check_text(self, db: str) -> bool:
        """``db``'s view is loaded: when it holds vectors stored before this text version
        (``resume`` found when), they are owed again and rewritten in the background, as a
        scan (BM25 and the old vectors serve meanwhile). True when a rewrite was queued."""
        before = self._text_before
        if before is None or self._stale is None or self._stopped or db in self._rewrite:
            return False
        if await self.marks.text_done(db):
            return False
        first = await self.ledger.rows(db, self.store, after=0, limit=1)
        if not first or first[0].n > before:
            await self.marks.set_text_done(db)
            return False
        if self._stopped:
            return False
        self._rewrite[db] = before
        self._to_scan[db] = None
        self._scan_since = self._scan_since or time.monotonic()
        log.info("memory: the vectors of %s are of an older text; rewriting them", db)
        self._start()
        return True

    async def stop(self, timeout: float | None = None) -> int:
        """Before the ledger closes: give what waits in memory ``timeout`` to be written, end
        the task, and record the texts still waiting as owed (their databases are marked);
        returns how many were recorded."""
        if self._items or self._running_items:
            await self.wait(timeout, backlog=False)
        self._stopped = True
        for task in (self._task, self._arrive_task):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        left, self._items = self._items, []
        records = [(p.db, p.row_id, p.text) for p in left]
        if records:
            await self.marks.record_texts(records)
            log.info(
                "memory: %d vectors owed at the stop; they are written after the next start",
                len(records),
            )
        self.recorded = len(records)
        self._idle.set()
        return len(records)

    async def wait(self, timeout: float | None = None, backlog: bool = True) -> bool:
        """Wait until every row queued so far has its vector written (or failed); False when
        ``timeout`` ran out first. What waits for a quiet moment is embedded at once.
        ``backlog=False``: only the rows waiting in memory, not the scans."""
        self._waiters += 1
        self._wake.set()
        try:
            async with asyncio.timeout(timeout):
                while True:
                    self._tick.clear()
                    if backlog:
                        done = self._idle.is_set()
                    else:
                        done = not (self._items or self._running_items)
                    if done or self._task is None or self._task.done():
                        return True
                    await self._tick.wait()
        except TimeoutError:
            return False
        finally:
            self._waiters -= 1

    # ---- the task -----------------------------------------------------------------------

    def _start(self) -> None:
        if self._stopped or not (self._items or self._to_scan or self._scan_rows):
            self._maybe_idle()
            return
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="memory-vectors")

    def _maybe_idle(self) -> None:
        if not (self._items or self._to_scan or self._scan_rows or self._running):
            self._idle.set()

    async def _quiet_moment(self, since: float) -> None:
        """Return when no row came for ``quiet_s``, ``since`` is ``max_wait_s`` ago, or
        ``wait`` was called."""
        while not self._waiters:
            now = time.monotonic()
            quiet_in = self._last_add + self.timing.quiet_s - now
            overdue_in = since + self.timing.max_wait_s - now
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
            while not self._stopped:
                from_memory = bool(self._items)
                if from_memory:
                    await self._quiet_moment(self._items[0].since)
                    chunk, self._items = self._items[: self.batch], self._items[self.batch :]
                elif self._scan_rows or self._to_scan:
                    if not self._scan_rows:
                        try:
                            await self._next_scan()
                        except Exception as exc:  # the mark stays: the next start tries again
                            log.warning("memory: a scan for owed vectors failed: %r", exc)
                        continue
                    await self._quiet_moment(self._scan_since)
                    if self._items:
                        continue  # captured rows came meanwhile: theirs first
                    key = self._scan_key
                    rows, self._scan_rows = (
                        self._scan_rows[: self.batch],
                        self._scan_rows[self.batch :],
                    )
                    db = self._scan_db
                    if key is None:
                        continue
                    # a row whose vector came meanwhile (from the peer that wrote it) is done;
                    # a rewrite replaces the vectors its rows have
                    rewrite = self._scan_rewrite
                    chunk = [
                        Pending(db, key, r, t)
                        for r, t in rows
                        if rewrite or not self._has_vector(db, r)
                    ]
                    if not chunk:
                        await self._clear_done({db})
                        continue
                    self._scan_since = time.monotonic()
                else:
                    break
                self._running, self._running_items = len(chunk), from_memory
                self._chunk = chunk
                try:
                    await self._embed_and_write(chunk)
                except asyncio.CancelledError:
                    if from_memory:  # a stop: recorded as owed with the rest
                        self._items = chunk + self._items
                    raise
                except Exception as exc:  # never lose the task: one line, the rows stay owed
                    self._failed(chunk)
                    log.warning(
                        "could not add vectors to %d stored memories (BM25 still finds them;"
                        " they stay owed and are tried again after the next start): %s: %s",
                        len(chunk),
                        type(exc).__name__,
                        exc,
                    )
                finally:
                    self._running, self._running_items, self._chunk = 0, False, []
                    self._tick.set()
                await self._clear_done({p.db for p in chunk})
        finally:
            self._maybe_idle()
            self._tick.set()

    async def _next_scan(self) -> None:
        db = next(iter(self._to_scan))
        del self._to_scan[db]
        if db in self._rewrite:
            await self._next_rewrite(db)
            return
        owed = self.marks.get(db)
        if owed is None or self._missing is None:
            return
        if owed.key is None or not (await self.ledger.permission(db, owed.key.public)).allows(
            Level.WRITE
        ):
            owed.key = await self._writer(db)  # the marking key lost write: another one
        if owed.key is None:
            log.warning(
                "memory: %s owes vectors but no key held here writes it; `chazbot reindex"
                " --bank BANK --agent AGENT` adds them once that agent may write it",
                db,
            )
            await self._clear_done({db}, force=True)
            return
        try:
            found = await self._missing(db, owed.after)
            texts = await self.marks.texts(db)
        except ChazError as exc:
            log.warning("memory: could not look for the vectors %s owes: %s", db, exc)
            await self._clear_done({db}, force=True)
            return
        waiting = {p.row_id for p in self._items}
        self._scan_db, self._scan_key, self._scan_rewrite = db, owed.key, False
        self._bulk.pop(db, None)
        self._scan_rows = [
            (row_id, texts.get(row_id, text)) for row_id, text in found if row_id not in waiting
        ]
        if found:
            log.info("memory: writing %d vectors %s owes", len(self._scan_rows), db)
        if not self._scan_rows:
            await self._clear_done({db})

    async def _next_rewrite(self, db: str) -> None:
        """Start rewriting ``db``'s vectors of an older text (``check_text``)."""
        assert self._stale is not None
        owed = self.marks.get(db)
        key = owed.key if owed is not None else None
        if key is None or not (await self.ledger.permission(db, key.public)).allows(Level.WRITE):
            key = await self._writer(db)
        if key is None:  # another peer writes here: its vectors are its own
            self._rewrite.pop(db, None)
            return
        try:
            found = await self._stale(db, self._rewrite[db])
        except ChazError as exc:
            log.warning("memory: could not look for the vectors %s rewrites: %s", db, exc)
            self._rewrite.pop(db, None)
            return
        waiting = {p.row_id for p in self._items}
        self._scan_db, self._scan_key, self._scan_rewrite = db, key, True
        self._bulk.pop(db, None)
        self._scan_rows = [(r, t) for r, t in found if r not in waiting]
        if self._scan_rows:
            log.info("memory: rewriting %d vectors of %s", len(self._scan_rows), db)
        await self._clear_done({db})

    async def _clear_done(self, dbs: set[str], force: bool = False) -> None:
        """Delete the mark of each of ``dbs`` that owes nothing any more; a rewrite whose
        scan wrote everything is recorded as done."""
        for db in dbs:
            if (
                db in self._rewrite
                and not (self._scan_db == db and self._scan_rows)
                and db not in self._failed_dbs
                and db not in self._to_scan
            ):
                del self._rewrite[db]
                await self.marks.set_text_done(db)
            if db not in self.marks:
                continue
            busy = (
                db in self._writing
                or db in self._grace
                or db in self._to_scan
                or (self._scan_db == db and self._scan_rows)
                or any(p.db == db for p in self._items)
            )
            if not force and (busy or db in self._failed_dbs):
                continue
            async with self.marks.lock:
                if not force and db in self._writing:
                    continue
                await self.marks.drop(db)

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
                self._failed([chunk[i] for i in indices])
                log.warning("could not store %d vectors in %s: %s", len(indices), first.db, exc)
                continue
            self.written += len(indices)
            metrics.VECTORS_LATER.labels("written").inc(len(indices))

    def _failed(self, chunk: list[Pending]) -> None:
        self.failed += len(chunk)
        self._failed_dbs.update(p.db for p in chunk)
        metrics.VECTORS_LATER.labels("failed").inc(len(chunk))


__all__ = ["DEFAULT_TIMING", "Pending", "VectorQueue", "VectorTiming"]
