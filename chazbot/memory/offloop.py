"""Searches of big memory views run on worker threads, while the event loop holds their updates.

A view's indexes are Python and numpy objects that the ledger listener updates on the event
loop (``MemoryEngine._on_applied``). A search of a big view on the loop held it for as long as
the search took (seconds, for an 8,000-word query on a 20k-row bank, or while the compiled
BM25 kernel was being built and the numpy path shared the GIL with the compiler). So a view of
``min_rows`` rows or more is searched on a worker thread, and while searches read it:

- the updates that arrive for it are held, and applied in order, on the loop, as soon as the
  last search reading it ends (a search never sees an index change under it);
- a search or an engine operation that starts while updates are held waits for them first, so
  a row stored before a recall began is always found (``settled``).

The compiled kernel releases the GIL; the numpy path gives it up every switch interval
(5 ms), so the loop keeps running either way (``bench/query_lag.py``; docs/measured.md).
A search cancelled by its caller still counts until its thread is done with the view.

The hop costs 0.1-0.15 ms (a worker wakes, then the loop; more on a busy machine), more than
most searches of a big view take with the compiled BM25 loop (0.02-0.05 ms at 100k rows). So
every search of a big view is tried in place first, within a budget of work
(``bm25_kernel.budget``, about 1 ms): BM25 alone on the compiled loop runs, unless its bound
passes ``inline_work``; a vector or tag search, the numpy loop and the unbounded (no query
words: the newest of all rows, sorted) give up before any work, and one that runs past the
budget gives up there; each runs again on a thread (issue 48). The search itself decides, so
nothing is tokenized or bounded twice. The view is never copied, and the loop is never held
much more than a millisecond.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from chazbot.errors import OverBudget
from chazbot.memory import bm25_kernel

log = logging.getLogger(__name__)
T = TypeVar("T")
V = TypeVar("V")

OFF_LOOP_ROWS = 5_000
"""Views this big are searched on a worker thread (a 32-term numpy search of 5,000 rows takes
about 1 ms; the thread hop costs ~0.1 ms)."""
INLINE_WORK = 2_000_000
"""A search of a big view whose bound (``bm25_kernel.work``) is at most this is tried in
place; above it, it goes to a thread at once (a typical query's bound is 10,000-40,000 at
100k rows and auto-recall's pair of 10-word queries 500,000-1,000,000 at 20k; the 32
commonest words of tests/memory/test_query_bounds.py's 20k-row bank 3.3 million, its 8,000-word
query, cut to 32 rare words, 434)."""
INLINE_BUDGET = 60_000
"""Postings read and lookups made that a search tried in place may spend (``bm25_kernel
.budget``): 0.8-1 ms on bench/recall.py's worst queries (the 32 commonest words) at 20k and
100k rows; past it the search gives up and runs again on a thread. 1 % of that bench's
queries at 100k rows do (docs/measured.md, "Recall: when the hop to a thread pays")."""
WORKERS = 2
"""Search threads: searches of big views at once (more would only share the same cores)."""


@dataclass
class _Readers(Generic[V]):
    """The searches reading one view now and the updates held until they end."""

    view: V
    running: int = 0
    held: list[Callable[[], None]] = field(default_factory=list)
    drained: asyncio.Event = field(default_factory=asyncio.Event)


class OffLoopSearches(Generic[V]):
    """Runs searches of views (``MemoryView``: generic, so it stays free of it) off the loop."""

    def __init__(
        self,
        size: Callable[[V], int],
        min_rows: int = OFF_LOOP_ROWS,
        workers: int = WORKERS,
        inline_work: int | None = INLINE_WORK,
        inline_budget: int = INLINE_BUDGET,
    ) -> None:
        """``size``: a view's rows (a view smaller than ``min_rows`` is searched in place; a
        bigger one is tried in place when its search's bound work is at most ``inline_work``
        (None: never), within ``inline_budget``)."""
        self._size = size
        self._min_rows = min_rows
        self.inline_work = inline_work
        self.inline_budget = inline_budget
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="memory-search")
        self._readers: dict[int, _Readers[V]] = {}  # by id(view), while searches read it

    def reading(self, view: V) -> bool:
        """Whether a search reads ``view`` now (its updates are being held)."""
        readers = self._readers.get(id(view))
        return readers is not None and readers.view is view

    def hold(self, view: V, update: Callable[[], None]) -> bool:
        """Keep ``update`` of ``view`` until the searches reading it end; False (nothing kept)
        when none does: the caller applies it now."""
        readers = self._readers.get(id(view))
        if readers is None or readers.view is not view:
            return False
        readers.held.append(update)
        return True

    async def settled(self, view: V) -> None:
        """Wait until no update of ``view`` is held (at once when none is)."""
        while True:
            readers = self._readers.get(id(view))
            if readers is None or readers.view is not view or not readers.held:
                return
            await readers.drained.wait()

    async def run(self, view: V, search: Callable[[V], T]) -> T:
        """``search(view)``, which only reads the view, after any held update of the view is
        applied: in place for a small view; for a big one, tried in place within a budget
        (``bm25_kernel.budget``: ``inline_budget`` units, no bound past ``inline_work``; None:
        never in place), and on a search thread when that gives up (``OverBudget``)."""
        if self._size(view) < self._min_rows:
            return search(view)
        await self.settled(view)
        if self.inline_work is not None:
            try:  # searches on threads only read the view too
                with bm25_kernel.budget(self.inline_budget, self.inline_work):
                    return search(view)
            except OverBudget:
                pass  # a vector search, or longer than the budget: on a thread, from the start
        readers = self._readers.get(id(view))
        if readers is None or readers.view is not view:
            readers = self._readers[id(view)] = _Readers(view)
        readers.running += 1
        loop = asyncio.get_running_loop()
        try:
            future: Future[T] = self._pool.submit(search, view)
        except BaseException:
            self._end(readers)
            raise

        def done(_: Future[T]) -> None:  # on the search thread, once it let go of the view
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._end, readers)

        future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    def _end(self, readers: _Readers[V]) -> None:
        """One search of the view ended; after the last, apply what was held, in order."""
        readers.running -= 1
        if readers.running > 0:
            return
        if self._readers.get(id(readers.view)) is readers:
            del self._readers[id(readers.view)]
        held, readers.held = readers.held, []
        for update in held:
            try:
                update()
            except Exception:  # one bad row must not keep the others (a listener's rule)
                log.exception("memory update held during a search failed")
        readers.drained.set()


__all__ = ["INLINE_BUDGET", "INLINE_WORK", "OFF_LOOP_ROWS", "WORKERS", "OffLoopSearches"]
