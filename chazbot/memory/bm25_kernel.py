"""The MaxScore loop of ``BM25Index.search``, compiled with numba for big indexes.

The numpy loop in ``bm25._Scorer.top_k`` makes some thirty numpy calls a query, a few µs
each: at 100k documents that is most of its time. Compiled, the same loop is one call
(``bench/recall.py`` prints both; figures in docs/measured.md, "Memory indexes"). numba is
optional (the ``fast`` extra, which the install script and the image include): without it,
with an index under ``MIN_DOCS`` documents, or while it compiles (on a worker thread, once,
then cached on disk), searches take the numpy path. Both compute each score with the same
float operations in the same order, so both return the same documents and scores
(``tests/memory/test_bm25_kernel.py`` compares them).

The compiled code's cache is code: numba loads it with pickle. So it is kept in the user's
cache directory (``$XDG_CACHE_HOME/chazbot/compiled``, else ``~/.cache/...``; or
``NUMBA_CACHE_DIR``), never inside the state dir (``keep_cache_out_of``: a state dir copied
from elsewhere never runs code from it), and used only when it and every directory above it
are owned by this user (or root) and writable by nobody else (a sticky directory such as /tmp
excepted); otherwise the kernel is compiled at each start, with a warning naming why.

The loop is document-at-a-time MaxScore: query terms in order of falling score bound, and
for each posting of a term: its score, dropped at once if that plus the bound of the terms
after it falls below the running threshold (the k-th best score so far, from a min-heap,
less a rounding margin), or if the document holds an earlier term (it was scored in that
term's step); else the later terms' tf is added while the bound still allows. A step visits
slots in growing order, so each lookup in another term's postings gallops on from where the
last one ended (a long list costs a step or two per lookup, not a binary search). The steps
stop when the bound of the terms left falls below the threshold. Survivors come back
unordered; ``BM25Index._rank`` applies the tie rule.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

log = logging.getLogger(__name__)

# Below this many documents the numpy loop is fast enough that importing numba (tens of MB)
# and compiling (seconds) does not pay (docs/measured.md, "Memory indexes"). The default of
# ``bm25.SearchTuning.compiled_from``: an index is passed its own.
MIN_DOCS = 20_000

Loop = Callable[..., tuple[NDArray[np.int64], NDArray[np.float64], bool]]
Terms = tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64], float, float]


def order_terms(
    q_tids: Sequence[int],
    q_df: Sequence[int],
    q_maxtf: Sequence[float],
    q_minratio: Sequence[float],
    n_live: int,
    k1: float,
    b: float,
    total_len: int,
    eps: float,
) -> Terms:
    """The query's terms held by some live document (``q_*``: each term's df, largest tf
    and smallest length / tf), in order of falling score bound (query order among equal
    bounds), with their weights idf x (k1 + 1), ``rest`` (``rest[i]``: the bound of terms
    i.. with a margin of ``eps``) and the length-norm constants c1, c2.

    Plain Python for the numpy loop (given lists, so that the arithmetic stays in Python
    floats); compiled into the kernel (given arrays; same operations in the same order).
    """
    size = len(q_tids)
    tids = np.empty(size, np.int64)
    weights = np.empty(size, np.float64)
    bounds = np.empty(size, np.float64)
    avgdl = max(1.0, total_len / n_live)
    c1 = k1 * (1.0 - b)
    c2 = k1 * b / avgdl
    m = 0
    for i in range(size):
        df = q_df[i]
        if df <= 0:
            continue
        weight = math.log((n_live - df + 0.5) / (df + 0.5) + 1.0) * (k1 + 1.0)
        # Largest possible term score: tf as large and dl / tf as small as stored anywhere.
        bound = weight / (1.0 + c1 / q_maxtf[i] + c2 * q_minratio[i])
        j = m
        while j > 0 and bounds[j - 1] < bound:  # insertion sort, stable
            tids[j], weights[j], bounds[j] = tids[j - 1], weights[j - 1], bounds[j - 1]
            j -= 1
        tids[j], weights[j], bounds[j] = q_tids[i], weight, bound
        m += 1
    rest = np.zeros(m + 1, np.float64)
    for i in range(m - 1, -1, -1):
        rest[i] = rest[i + 1] + bounds[i]
    for i in range(m + 1):
        rest[i] = rest[i] * (1.0 + eps)
    return tids[:m], weights[:m], rest, c1, c2


def work(dfs: Sequence[int]) -> int:
    """A bound on what the compiled loop does for query terms of these document frequencies:
    each term's postings, each weighted by the lookups in the terms before it (rarest first,
    as the loop orders them roughly). A search tried on the event loop gives up before it
    starts when this passes its ``budget``'s ``most_work`` (``OffLoopSearches.inline_work``):
    on bench/recall.py's corpus, queries under 200,000 took at most 0.45 ms at 100k documents
    (0.7 ms at 20k); over 1,000,000 up to 50 ms.
    """
    return sum(df * (i + 1) for i, df in enumerate(sorted(dfs)))


def seek(p_slot: NDArray[np.int32], lo: int, hi: int, slot: int) -> int:
    """The first position in the sorted ``p_slot[lo:hi]`` holding ``slot`` or more (``hi`` if
    none): galloping from ``lo``, so that a run of growing slots costs little per lookup."""
    if lo >= hi or p_slot[lo] >= slot:
        return lo
    step = 1
    while lo + step < hi and p_slot[lo + step] < slot:
        lo += step
        step *= 2
    hi = min(lo + step, hi)
    lo += 1
    while lo < hi:  # p_slot[lo - 1] < slot <= p_slot[hi] (or hi is the end)
        mid = (lo + hi) >> 1
        if p_slot[mid] < slot:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _search(
    q_tids: NDArray[np.int64],
    t_start: NDArray[np.int64],
    t_len: NDArray[np.int64],
    t_df: NDArray[np.int64],
    t_maxtf: NDArray[np.float64],
    t_minratio: NDArray[np.float64],
    p_slot: NDArray[np.int32],
    p_tf: NDArray[np.uint16],
    s_len: NDArray[np.float64],
    live: NDArray[np.bool_],
    n_live: int,
    k1: float,
    b: float,
    total_len: int,
    k: int,
    eps: float,
    budget: int,
) -> tuple[NDArray[np.int64], NDArray[np.float64], bool]:  # pragma: no cover - compiled
    """Slots and exact scores of the documents within ``eps`` of the k-th best score or
    above, unordered (see the module), and True; ``live``: documents that may be returned.
    ``budget`` (0: none): after that many postings read and lookups made, it gives up and
    returns nothing and False (a search held on the event loop, ``budget``)."""
    tids, weights, rest, c1, c2 = _order_terms(
        q_tids, t_df[q_tids], t_maxtf[q_tids], t_minratio[q_tids], n_live, k1, b, total_len, eps
    )
    m = tids.size
    starts = t_start[tids]
    ends = starts + t_len[tids]
    cursor = starts.copy()  # per term: where the last lookup in its postings ended
    heap = np.zeros(k, np.float64)  # the k best scores so far, a min-heap
    n_heap = 0
    theta = 0.0
    cap = 64
    out_slot = np.empty(cap, np.int64)
    out_score = np.empty(cap, np.float64)
    n_out = 0
    spent = 0
    for e in range(m):
        if rest[e] < theta:
            break
        w = weights[e]
        cursor[:] = starts  # this step visits growing slots: lookups move forward
        for p in range(starts[e], ends[e]):
            if budget > 0:
                spent += 1  # the posting (its lookups are counted where they are made)
                if spent > budget:
                    return out_slot[:0], out_score[:0], False
            slot = p_slot[p]
            tf = float(p_tf[p])
            norm = s_len[slot] * c2
            norm += c1
            norm += tf
            score = tf / norm * w
            if score + rest[e + 1] < theta or not live[slot]:
                continue  # cannot reach the top k, or removed or filtered out
            settled = False  # scored in the step of an earlier term it holds
            for i in range(e):
                spent += 1
                cursor[i] = _seek(p_slot, cursor[i], ends[i], slot)
                if cursor[i] < ends[i] and p_slot[cursor[i]] == slot:
                    settled = True
                    break
            if settled:
                continue
            keep = True
            j = e + 1
            while keep and j < m:
                spent += 1
                at = cursor[j] = _seek(p_slot, cursor[j], ends[j], slot)
                if at < ends[j] and p_slot[at] == slot:
                    tf_j = float(p_tf[at])
                    norm = s_len[slot] * c2
                    norm += c1
                    norm += tf_j
                    score = score + tf_j / norm * weights[j]
                j += 1
                keep = score + rest[j] >= theta
            if not keep:
                continue
            if n_out == cap:
                cap *= 2
                grown_slot = np.empty(cap, np.int64)
                grown_slot[:n_out] = out_slot[:n_out]
                out_slot = grown_slot
                grown_score = np.empty(cap, np.float64)
                grown_score[:n_out] = out_score[:n_out]
                out_score = grown_score
            out_slot[n_out] = slot
            out_score[n_out] = score
            n_out += 1
            if n_heap < k:  # push
                i = n_heap
                heap[i] = score
                n_heap += 1
                while i > 0:
                    parent = (i - 1) >> 1
                    if heap[parent] <= heap[i]:
                        break
                    heap[parent], heap[i] = heap[i], heap[parent]
                    i = parent
            elif score > heap[0]:  # replace the smallest
                heap[0] = score
                i = 0
                while True:
                    child = 2 * i + 1
                    if child >= k:
                        break
                    if child + 1 < k and heap[child + 1] < heap[child]:
                        child += 1
                    if heap[i] <= heap[child]:
                        break
                    heap[i], heap[child] = heap[child], heap[i]
                    i = child
            if n_heap == k:
                theta = max(theta, heap[0] * (1.0 - eps))
    kept = 0
    for i in range(n_out):  # those that fell below the final threshold go
        if out_score[i] >= theta:
            out_slot[kept] = out_slot[i]
            out_score[kept] = out_score[i]
            kept += 1
    return out_slot[:kept], out_score[:kept], True


# order_terms and seek compiled, for _search; set by _build.
_order_terms: Any = None
_seek: Any = None


class _State:
    """The compiled loop, once there is one, and whether compiling was started."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.loop: Loop | None = None
        self.started = False
        self.thread: threading.Thread | None = None  # the one compiling in the background
        self.cache_dir: Path | None = None
        self.not_in: list[Path] = []  # state dirs: a cache inside one is never used
        self.off = 0  # numpy_only() blocks open


_state = _State()


def use_cache_dir(path: Path) -> None:
    """Keep the compiled code under ``path`` instead of the user's cache directory (tests and
    benchmarks; NUMBA_CACHE_DIR still wins). Checked as any cache directory is."""
    _state.cache_dir = path


def keep_cache_out_of(state_dir: Path) -> None:
    """Never keep or load compiled code inside ``state_dir`` (the engine names its state dir:
    one copied from elsewhere must not bring code that runs, and ``~/.cache`` may lie inside
    it, as in the image, whose home is its state volume)."""
    with contextlib.suppress(OSError):
        state_dir = state_dir.resolve()
    if state_dir not in _state.not_in:
        _state.not_in.append(state_dir)


def default_cache_dir() -> Path:
    """The user's cache directory for the compiled code (outside any state dir)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "chazbot" / "compiled"


def cache_dir_problem(path: Path) -> str | None:
    """Why numba must not load code from ``path`` (it unpickles what it finds there), or None.

    The directory and every one above it must be owned by this user or root and writable by
    nobody else; a directory above it may be writable by all if sticky (``/tmp``): others
    cannot rename or remove what is ours in it.
    """
    uid = os.geteuid()
    try:
        where = path.resolve(strict=True)
        info = os.stat(where)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory"
    for directory in (where, *where.parents):
        info = os.stat(directory)
        if info.st_uid not in (uid, 0):
            return f"{directory} is owned by uid {info.st_uid}, not by this user ({uid}) or root"
        writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and (directory == where or not info.st_mode & stat.S_ISVTX):
            return f"{directory} is writable by others (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def configured_cache_dir() -> Path:
    """The compiled code's cache directory asked for: NUMBA_CACHE_DIR, ``use_cache_dir``'s,
    or the user's (``chazbot verify`` checks it; ``cache_dir_problem`` says if it is used)."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    return Path(env) if env else (_state.cache_dir or default_cache_dir())


def _cache_dir() -> Path | None:
    """Where numba may keep and load the compiled code, or None (compile without a cache)."""
    path = configured_cache_dir()
    try:
        # Owner-only, as the state dir: numba loads its cache with pickle.
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        log.warning("BM25 kernel not cached (%s): compiled at each start", exc)
        return None
    problem = cache_dir_problem(path)
    resolved = path.resolve()
    inside = [d for d in _state.not_in if resolved == d or d in resolved.parents]
    if inside:
        problem = f"inside the state dir {inside[0]}"
    if problem is not None:
        log.warning(
            "BM25 kernel: not loading compiled code from %s (%s): compiled at each start",
            path,
            problem,
        )
        return None
    return path


def loop(n_docs: int, min_docs: int = MIN_DOCS) -> Loop | None:
    """The compiled loop, or None (numpy path): starts compiling the first time an index of
    ``n_docs >= min_docs`` documents asks (``bm25.SearchTuning.compiled_from``)."""
    if _state.off:
        return None
    if _state.loop is not None or n_docs < min_docs or _state.started:
        return _state.loop
    with _state.lock:
        if not _state.started:
            _state.started = True
            _state.thread = threading.Thread(target=compile_now, name="bm25-compile", daemon=True)
            _state.thread.start()
    return _state.loop


@contextmanager
def numpy_only() -> Iterator[None]:
    """Searches in this block take the numpy path (tests and benchmarks compare the two)."""
    _state.off += 1
    try:
        yield
    finally:
        _state.off -= 1


_budget: ContextVar[tuple[int, int | None]] = ContextVar("bm25_budget", default=(0, None))


class budget:
    """Compiled searches in this block (of this thread or task) give up after ``units``
    postings read and lookups made, and ``BM25Index.search`` raises ``OverBudget``: a search
    held on the event loop stops there (``memory.offloop``). In the block, a search whose
    bound (``work``) passes ``most_work`` (None: no such check), or that would take the numpy
    loop, gives up before it starts; so does any ``MemoryView.search`` that is not BM25's
    alone (a vector or tag search, the newest of all rows), which no budget bounds. A class,
    not a generator: it is entered for every search of a big view."""

    __slots__ = ("_limits", "_token")

    def __init__(self, units: int, most_work: int | None = None) -> None:
        self._limits = (units, most_work)
        self._token: Token[tuple[int, int | None]] | None = None

    def __enter__(self) -> None:
        self._token = _budget.set(self._limits)

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _budget.reset(self._token)
            self._token = None


def current_budget() -> int:
    """The budget of searches here (``budget``; 0: none)."""
    return _budget.get()[0]


def limits() -> tuple[int, int | None]:
    """``(units, most_work)`` of the ``budget`` block searches here run in (``(0, None)``:
    none)."""
    return _budget.get()


def describe() -> str:
    """How BM25 searches run in this process, for ``/memory stats``."""
    if _state.loop is not None:
        return "compiled (numba)"
    if _state.started and _state.thread is not None and _state.thread.is_alive():
        return "numpy, compiling"
    if _state.started:
        return "numpy (numba not available)"
    return f"numpy (compiled once a bank holds {MIN_DOCS:,} rows)"


def compile_now() -> Loop | None:
    """Compile in this thread (if no other did); the loop, or None without numba."""
    with _state.lock:
        _state.started = True
        if _state.loop is None:
            _state.loop = _build()
    return _state.loop


def _build() -> Loop | None:
    """numba's compiled ``_search``, called once so it is ready; None without numba."""
    started = time.perf_counter()
    try:
        import numba  # type: ignore[import-untyped]
    except Exception as exc:  # ImportError, or a broken llvmlite
        log.info("BM25 search uses numpy (numba is not available: %s)", exc)
        return None
    if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]
        log.info("BM25 search uses numpy (NUMBA_DISABLE_JIT is set)")
        return None
    where = _cache_dir()
    if where is not None:
        numba.config.CACHE_DIR = str(where)  # type: ignore[attr-defined]
    ours = where if where is not None and not os.environ.get("NUMBA_CACHE_DIR") else None
    for cache in (True, False) if where is not None else (False,):
        try:
            compiled = _jit(numba, cache)
        except Exception as exc:
            if not cache:
                log.warning("BM25 kernel did not compile, numpy is used: %s", exc)
                return None
            # A damaged or unwritable cache: compile afresh (and start a new cache of ours).
            log.warning("BM25 kernel: its cache is unusable (%s); compiling afresh", exc)
            if ours is not None:
                shutil.rmtree(ours, ignore_errors=True)
            continue
        log.info(
            "BM25 kernel ready in %.1f s (numba %s)",
            time.perf_counter() - started,
            numba.__version__,
        )
        return compiled
    return None


def _jit(numba: Any, cache: bool) -> Loop:
    """Compile ``_search`` and its helpers, and run it once."""
    global _order_terms, _seek
    jit = numba.njit(nogil=True, cache=cache)
    _order_terms, _seek = jit(order_terms), jit(seek)
    compiled: Loop = jit(_search)
    _warm(compiled)
    return compiled


def _warm(compiled: Any) -> None:
    """One call with the argument types searches use, so the first real one is fast."""
    ints, floats = np.ones(1, np.int64), np.ones(1, np.float64)
    compiled(
        np.zeros(1, np.int64),  # the query: term 0
        np.zeros(1, np.int64),
        ints,
        ints,
        floats,
        floats,
        np.zeros(1, np.int32),  # its posting: slot 0, tf 1
        np.ones(1, np.uint16),
        floats,
        np.ones(1, np.bool_),
        1,
        1.5,
        0.75,
        1,
        10,
        1e-9,
        0,
    )


__all__ = [
    "MIN_DOCS",
    "budget",
    "cache_dir_problem",
    "compile_now",
    "configured_cache_dir",
    "current_budget",
    "default_cache_dir",
    "describe",
    "keep_cache_out_of",
    "limits",
    "loop",
    "numpy_only",
    "order_terms",
    "use_cache_dir",
    "work",
]
