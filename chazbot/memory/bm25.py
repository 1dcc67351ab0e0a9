"""An exact, incrementally updated BM25 index over numpy arrays (SPEC §3).

Layout, chosen so that one ``add`` is a handful of vectorised numpy operations and one
``search`` touches only the postings that can still change the top k:

- Slots. Every added document gets the next *slot* (a dense int32); per-slot arrays hold the
  caller's doc id, the document length and a live flag. Removing a document clears its flag
  (a tombstone) and updates N, df and the total length at once, so statistics stay exact.
- Postings. One pool of ``(slot, tf)`` pairs. Each term owns a contiguous region of the pool
  with spare capacity; appending to a full region moves it to the end of the pool with double
  the capacity. Slots only grow, so each region stays sorted by slot (``np.searchsorted`` works).
- A forward index (the distinct term ids of each slot) lets ``remove`` decrement df.
- Terms in a large share of the documents also get a dense ``slot -> tf`` byte map, so that
  looking up their tf for a few candidates is one indexing step instead of a binary search
  through a list too long for the CPU cache (tf above 254 is marked and looked up in the list).
- When tombstones or moved-out regions pile up, ``_rebuild`` compacts everything in a few
  vectorised passes, renumbering slots. ``add_many`` uses the same pass to build in bulk.

Search is term-at-a-time MaxScore, vectorised. Per term we keep an upper bound of its score
that holds for any average length (from its largest tf and smallest length/tf ratio). Terms go
in order of falling bound; a document is scored in the step of the first query term it contains,
gathering the other terms' tf by binary search in their postings (or from the dense map). The
running threshold is the k-th best lower bound seen so far; documents whose bound falls below it
are dropped, and once the bounds of all remaining terms sum below it, the search stops without
reading their postings. The survivors' scores are exact; they are ordered by the tie rule of
``fusion``: scores equal up to float rounding tie, and ties go to the higher doc id (or to the
caller's ``tiebreak`` first). ``bm25_kernel`` holds the same search compiled with numba, which
big indexes use when it is installed; both give the same results.

Costs: ``add`` and ``remove`` are a few numpy operations on the document's terms (amortised;
now and then a region moves or an array doubles). Compaction rewrites every array, so it
runs once per quarter of the index removed (``bench/recall.py`` times one; figure in
docs/measured.md, "Memory indexes").
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import chain
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError, OverBudget
from chazbot.memory import bm25_kernel
from chazbot.memory.fusion import order_by_score, ranked
from chazbot.memory.tokenize import MAX_QUERY_TERMS, first_terms

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
Bools = NDArray[np.bool_]
U8 = NDArray[np.uint8]
Tfs = NDArray[np.integer[Any]]  # uint16, or int32 once some tf needs it
_T = TypeVar("_T", bound=np.generic)
TieBreak = Callable[[int], tuple[Any, ...]]  # a doc's sort key among tied scores

# Pruning keeps anything within this relative distance of the threshold, so float rounding in
# bounds and partial sums can never drop a document that ties the k-th score.
_EPS = 1e-9
# An ``allowed`` set this small is scored directly instead of through the postings.
_DIRECT_ALLOWED = 2048
# Tombstones (and moved-out regions, times 16) tolerated before compacting, whatever the size.
_COMPACT_MIN = 4096
# A term gets a dense tf map once its list holds this many postings and this share of the slots.
_DENSE_MIN = 4096
_DENSE_SHARE = 32
_FIRST_CAP = 2  # postings room a new term starts with
_DENSE_BIG = 255  # dense map value meaning "tf >= 255, read the postings"
_U16_MAX = 65535  # postings keep tf in 16 bits until some tf is larger
# Up to this many results are put in order in plain Python (cheaper than numpy when few).
_SMALL_RANK = 64
# ``add_many`` batches smaller than this share of the index go through ``add`` one by one.
_BULK_SHARE = 0.125
# Documents per slice of the bulk build's token-to-id pass (a few ms each).
_SLICE = 4096


def _grown(arr: NDArray[_T], need: int, fill: float = 0) -> NDArray[_T]:
    """``arr`` copied into an array of at least ``need`` entries, doubling; the rest ``fill``."""
    size = max(need, 2 * len(arr), 16)
    out = np.full(size, fill, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def _with_room(arr: NDArray[_T]) -> NDArray[_T]:
    """``arr`` followed by zeroed room for a sixteenth more entries."""
    out = np.zeros(len(arr) + (len(arr) >> 4) + 16, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def _kth_largest(values: F64, k: int) -> float:
    """The k-th largest entry of ``values`` (which holds at least k entries)."""
    return float(np.partition(values, values.size - k)[values.size - k])


class BM25Index:
    """Exact BM25 top-k over documents given as token lists, keyed by non-negative int ids.

    Scores follow SPEC §3: ``idf = ln((N - df + 0.5) / (df + 0.5) + 1)`` and
    ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` summed over the distinct
    query terms, with N, df and avgdl (at least 1) taken over the documents in the index.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        self._k1 = float(k1)
        self._b = float(b)
        # Vocabulary: token -> term id, ids dense in insertion order.
        self._term_id: defaultdict[str, int] = defaultdict()
        self._term_id.default_factory = self._term_id.__len__  # a new token gets the next id
        self._t_start: I64 = np.zeros(0, np.int64)  # region start in the pool
        self._t_len: I64 = np.zeros(0, np.int64)  # postings stored, dead ones included
        self._t_cap: I64 = np.zeros(0, np.int64)  # region capacity
        self._t_df: I64 = np.zeros(0, np.int64)  # live documents holding the term
        self._t_maxtf: F64 = np.zeros(0, np.float64)  # bound: largest tf stored
        self._t_minratio: F64 = np.zeros(0, np.float64)  # bound: smallest dl / tf stored
        # Postings pool.
        self._p_slot: I32 = np.zeros(0, np.int32)
        self._p_tf: Tfs = np.zeros(0, np.uint16)  # int32 once some tf needs it
        self._p_used = 0  # pool entries handed out to regions
        self._p_garbage = 0  # pool entries in regions that were moved away
        self._p_dead = 0  # stored postings of removed slots
        self._dense: dict[int, U8] = {}  # term id -> tf by slot (capped), for long lists
        # Slots.
        self._slot_of: dict[int, int] = {}
        self._s_doc: I64 = np.zeros(0, np.int64)
        self._s_len: F64 = np.zeros(0, np.float64)
        self._s_alive: Bools = np.zeros(0, np.bool_)
        self._s_fwd: I64 = np.zeros(0, np.int64)  # start in the forward index
        self._s_nterms: I32 = np.zeros(0, np.int32)  # distinct terms of the slot
        self._n_slots = 0
        self._version = 0  # changes whenever a slot is made, removed or renumbered
        self._mask_cache: tuple[object, int, Bools] | None = None
        # Forward index: distinct term ids of each slot, slot after slot.
        self._f_term: I32 = np.zeros(0, np.int32)
        self._f_used = 0
        # Statistics over live documents.
        self._total_len = 0

    # -- public API -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, doc: object) -> bool:
        return doc in self._slot_of

    def add(self, doc: int, tokens: Sequence[str]) -> None:
        """Index ``tokens`` under ``doc``, replacing what ``doc`` held before."""
        if doc < 0:
            raise InputError(f"document id must be non-negative, got {doc}")
        if doc in self._slot_of:
            self.remove(doc)
        counts: dict[int, int] = {}
        term_id = self._term_id
        for tok in tokens:
            tid = term_id[tok]
            counts[tid] = counts.get(tid, 0) + 1
        self._ensure_terms(len(term_id))
        n = len(counts)
        slot = self._new_slots(1, n)
        dl = len(tokens)
        self._s_doc[slot] = doc
        self._s_len[slot] = dl
        self._s_alive[slot] = True
        self._slot_of[doc] = slot
        self._total_len += dl
        if n == 0:
            return
        tids = np.fromiter(counts.keys(), np.int64, n)
        tfs = np.fromiter(counts.values(), np.int32, n)
        fwd = int(self._s_fwd[slot])
        self._f_term[fwd : fwd + n] = tids
        lens = self._t_len[tids]
        full = lens >= self._t_cap[tids]
        moved = bool(full.any())
        if moved:
            self._move_regions(tids[full])
        pos = self._t_start[tids] + lens
        if dl > _U16_MAX and self._p_tf.dtype == np.uint16 and int(tfs.max()) > _U16_MAX:
            self._p_tf = self._p_tf.astype(np.int32)
        self._p_slot[pos] = slot
        self._p_tf[pos] = tfs
        self._t_len[tids] = lens + 1
        self._t_df[tids] += 1
        self._t_maxtf[tids] = np.maximum(self._t_maxtf[tids], tfs)
        self._t_minratio[tids] = np.minimum(self._t_minratio[tids], dl / tfs)
        dense = self._dense
        if dense:
            for tid, tf in counts.items():
                tf_map = dense.get(tid)
                if tf_map is not None:
                    tf_map[slot] = min(tf, _DENSE_BIG)
        if moved:
            self._maybe_compact()

    def add_many(self, docs: Iterable[tuple[int, Sequence[str]]]) -> None:
        """Index many documents at once (later duplicates win); far faster than ``add``."""
        batch: dict[int, Sequence[str]] = {}
        for doc, tokens in docs:
            if doc < 0:
                raise InputError(f"document id must be non-negative, got {doc}")
            batch.pop(doc, None)
            batch[doc] = tokens
        if not batch:
            return
        if len(batch) < max(64.0, _BULK_SHARE * len(self._slot_of)):
            for doc, tokens in batch.items():
                self.add(doc, tokens)
            return
        for doc in batch:
            if doc in self._slot_of:
                self.remove(doc)
        self._bulk_add(list(batch.keys()), list(batch.values()))

    def remove(self, doc: int) -> None:
        """Drop ``doc`` from results and statistics; nothing happens if it is absent."""
        slot = self._slot_of.pop(doc, None)
        if slot is None:
            return
        self._version += 1
        self._s_alive[slot] = False
        self._total_len -= int(self._s_len[slot])
        n = int(self._s_nterms[slot])
        if n:
            fwd = int(self._s_fwd[slot])
            self._t_df[self._f_term[fwd : fwd + n]] -= 1
            self._p_dead += n
        self._maybe_compact()

    def docs(self) -> I64:
        """The doc ids in the index (in slot order)."""
        return self._s_doc[: self._n_slots][self._s_alive[: self._n_slots]]

    def memory_bytes(self) -> int:
        """Approximate bytes held: the numpy arrays plus the two hash tables (not their keys)."""
        arrays = (
            self._t_start,
            self._t_len,
            self._t_cap,
            self._t_df,
            self._t_maxtf,
            self._t_minratio,
            self._p_slot,
            self._p_tf,
            self._s_doc,
            self._s_len,
            self._s_alive,
            self._s_fwd,
            self._s_nterms,
            self._f_term,
        )
        tables = sys.getsizeof(self._term_id) + sys.getsizeof(self._slot_of)
        dense = sum(a.nbytes for a in self._dense.values())
        return sum(a.nbytes for a in arrays) + dense + tables

    def search(
        self,
        query_tokens: Sequence[str],
        k: int,
        allowed: Collection[int] | None = None,
        tiebreak: TieBreak | None = None,
        max_terms: int | None = MAX_QUERY_TERMS,
    ) -> list[tuple[int, float]]:
        """The top ``k`` documents as ``(doc, score)``, best first, ties (``fusion``) by
        ``tiebreak(doc)`` ascending when given, then by the higher doc id.

        Only the first ``max_terms`` distinct query tokens count (``tokenize.bound_query``
        says why; None: every one, for benchmarks of the unbounded cost).

        ``allowed`` limits the results to those doc ids (a set, or an int64 array: then its
        slot mask is computed in numpy and kept until the index or the array changes, so the
        searches of one turn share it); N, df and avgdl still cover the whole index.
        Documents without any query term (score 0) are never returned.
        """
        n_live = len(self._slot_of)
        if k <= 0 or n_live == 0:
            return []
        term_id = self._term_id
        if max_terms is not None:
            query_tokens = first_terms(query_tokens, max_terms)
        tids = dict.fromkeys(t for t in map(term_id.get, query_tokens) if t is not None)
        if not tids:
            return []
        q_tids = np.fromiter(tids, np.int64, len(tids))
        mask = None
        if isinstance(allowed, np.ndarray):
            mask = self.slot_mask(allowed)
            count = int(np.count_nonzero(mask))
            if count == 0:
                return []
            if count <= _DIRECT_ALLOWED:
                slots = np.flatnonzero(mask)
                return _Scorer(self, q_tids, n_live).finish(slots, k, tiebreak)
        elif allowed is not None:
            slot_of = self._slot_of
            slots = np.fromiter((slot_of[d] for d in allowed if d in slot_of), np.int64)
            if slots.size == 0:
                return []
            if slots.size <= _DIRECT_ALLOWED:
                return _Scorer(self, q_tids, n_live).finish(np.unique(slots), k, tiebreak)
            mask = np.zeros(self._n_slots, np.bool_)
            mask[slots] = True
        compiled = bm25_kernel.loop(n_live)
        if compiled is None or self._p_tf.dtype != np.uint16:
            return _Scorer(self, q_tids, n_live).top_k(k, mask, tiebreak)
        found, scores, done = compiled(
            q_tids,
            self._t_start,
            self._t_len,
            self._t_df,
            self._t_maxtf,
            self._t_minratio,
            self._p_slot,
            self._p_tf,
            self._s_len,
            self._s_alive if mask is None else mask,
            n_live,
            self._k1,
            self._b,
            self._total_len,
            k,
            _EPS,
            bm25_kernel.current_budget(),
        )
        if not done:
            raise OverBudget("search: over its budget on the event loop")
        return self._rank(found, scores, k, tiebreak)

    def search_work(
        self, query_tokens: Sequence[str], max_terms: int | None = MAX_QUERY_TERMS
    ) -> int | None:
        """What ``search`` of these tokens costs the compiled loop at most
        (``bm25_kernel.work``), or None when it would take the numpy loop (slower by far
        per posting, and by a few numpy calls per term)."""
        n_live = len(self._slot_of)
        if n_live == 0:
            return 0
        if bm25_kernel.loop(n_live) is None or self._p_tf.dtype != np.uint16:
            return None
        if max_terms is not None:
            query_tokens = first_terms(query_tokens, max_terms)
        term_id, df = self._term_id, self._t_df
        tids = {t for t in map(term_id.get, query_tokens) if t is not None}
        return bm25_kernel.work([int(df[t]) for t in tids])

    def slot_mask(self, docs: I64) -> Bools:
        """Live slots whose doc is in ``docs``; cached for the same array object and index."""
        cached = self._mask_cache
        if cached is not None and cached[0] is docs and cached[1] == self._version:
            return cached[2]
        n = self._n_slots
        mask = np.zeros(len(self._s_doc), np.bool_)
        mask[:n] = np.isin(self._s_doc[:n], docs) & self._s_alive[:n]
        self._mask_cache = (docs, self._version, mask)
        return mask

    def _rank(
        self, slots: I64, scores: F64, k: int, tiebreak: TieBreak | None
    ) -> list[tuple[int, float]]:
        """The top k of scored slots as ``(doc, score)`` in the tie rule's order."""
        if slots.size > _SMALL_RANK:
            near = scores >= _kth_largest(scores, k) * (1.0 - _EPS)
            slots, scores = slots[near], scores[near]
        docs = self._s_doc[slots]
        if docs.size <= _SMALL_RANK or tiebreak is not None:
            return ranked(zip(docs.tolist(), scores.tolist(), strict=True), k, tiebreak)
        order = order_by_score(docs, scores)[:k]
        return list(zip(docs[order].tolist(), scores[order].tolist(), strict=True))

    # -- snapshots ----------------------------------------------------------------------------

    def export_state(self) -> tuple[list[str], dict[str, NDArray[Any]]]:
        """The vocabulary (term id order) and the arrays that make up the index, trimmed.

        ``from_state`` rebuilds an identical index from them without tokenizing anything.
        """
        n_terms, n_slots, used, f_used = (
            len(self._term_id),
            self._n_slots,
            self._p_used,
            self._f_used,
        )
        arrays: dict[str, NDArray[Any]] = {
            "t_start": self._t_start[:n_terms],
            "t_len": self._t_len[:n_terms],
            "t_cap": self._t_cap[:n_terms],
            "t_df": self._t_df[:n_terms],
            "t_maxtf": self._t_maxtf[:n_terms],
            "t_minratio": self._t_minratio[:n_terms],
            "p_slot": self._p_slot[:used],
            "p_tf": self._p_tf[:used],
            "s_doc": self._s_doc[:n_slots],
            "s_len": self._s_len[:n_slots],
            "s_alive": self._s_alive[:n_slots],
            "s_fwd": self._s_fwd[:n_slots],
            "s_nterms": self._s_nterms[:n_slots],
            "f_term": self._f_term[:f_used],
            "counters": np.array(
                [self._p_garbage, self._p_dead, self._total_len, self._k1 * 1e6, self._b * 1e6],
                np.int64,
            ),
        }
        return list(self._term_id), arrays

    @classmethod
    def from_state(cls, vocab: list[str], arrays: dict[str, NDArray[Any]]) -> BM25Index:
        """The index ``export_state`` described (raises InputError if the parts disagree)."""
        counters = arrays["counters"]
        index = cls(float(counters[3]) / 1e6, float(counters[4]) / 1e6)
        n_terms = len(vocab)
        _check_state(n_terms, arrays)
        term_id: defaultdict[str, int] = defaultdict()
        term_id.update(zip(vocab, range(n_terms), strict=True))
        term_id.default_factory = term_id.__len__
        index._term_id = term_id
        index._t_start = _with_room(arrays["t_start"].astype(np.int64))
        index._t_len = _with_room(arrays["t_len"].astype(np.int64))
        index._t_cap = _with_room(arrays["t_cap"].astype(np.int64))
        index._t_df = _with_room(arrays["t_df"].astype(np.int64))
        index._t_maxtf = _with_room(arrays["t_maxtf"].astype(np.float64))
        minratio = arrays["t_minratio"].astype(np.float64)
        room = np.full(len(index._t_start) - n_terms, np.inf)
        index._t_minratio = np.concatenate((minratio, room))
        index._p_slot = _with_room(arrays["p_slot"].astype(np.int32))
        p_tf = arrays["p_tf"]
        index._p_tf = _with_room(p_tf if p_tf.dtype == np.int32 else p_tf.astype(np.uint16))
        index._p_used = len(arrays["p_slot"])
        index._p_garbage, index._p_dead, index._total_len = (int(c) for c in counters[:3])
        index._s_doc = _with_room(arrays["s_doc"].astype(np.int64))
        index._s_len = _with_room(arrays["s_len"].astype(np.float64))
        index._s_alive = _with_room(arrays["s_alive"].astype(np.bool_))
        index._s_fwd = _with_room(arrays["s_fwd"].astype(np.int64))
        index._s_nterms = _with_room(arrays["s_nterms"].astype(np.int32))
        index._n_slots = n_slots = len(arrays["s_doc"])
        index._f_term = _with_room(arrays["f_term"].astype(np.int32))
        index._f_used = len(arrays["f_term"])
        alive = np.flatnonzero(index._s_alive[:n_slots])
        index._slot_of = dict(zip(index._s_doc[alive].tolist(), alive.tolist(), strict=True))
        for tid in np.flatnonzero(index._t_len[:n_terms] >= index._dense_threshold()).tolist():
            index._dense[tid] = index._dense_map(tid)
        return index

    # -- internals ----------------------------------------------------------------------------

    def _postings(self, tid: int) -> tuple[I32, Tfs]:
        """Views of the slots and tfs stored for term ``tid``, sorted by slot."""
        start = int(self._t_start[tid])
        end = start + int(self._t_len[tid])
        return self._p_slot[start:end], self._p_tf[start:end]

    def _ensure_terms(self, n_terms: int) -> None:
        """Make the per-term arrays hold ``n_terms`` terms."""
        if n_terms <= len(self._t_start):
            return
        self._t_start = _grown(self._t_start, n_terms)
        self._t_len = _grown(self._t_len, n_terms)
        self._t_cap = _grown(self._t_cap, n_terms)
        self._t_df = _grown(self._t_df, n_terms)
        self._t_maxtf = _grown(self._t_maxtf, n_terms)
        self._t_minratio = _grown(self._t_minratio, n_terms, np.inf)

    def _new_slots(self, count: int, fwd_entries: int) -> int:
        """Reserve ``count`` slots and ``fwd_entries`` forward entries; the first slot."""
        first = self._n_slots
        need = first + count
        self._version += 1
        if need > len(self._s_doc):
            self._s_doc = _grown(self._s_doc, need)
            self._s_len = _grown(self._s_len, need)
            self._s_alive = _grown(self._s_alive, need)
            self._s_fwd = _grown(self._s_fwd, need)
            self._s_nterms = _grown(self._s_nterms, need)
            cap = len(self._s_doc)
            for tid, tf_map in self._dense.items():
                self._dense[tid] = _grown(tf_map, cap)
        if count == 1:
            self._s_fwd[first] = self._f_used
            self._s_nterms[first] = fwd_entries
        f_need = self._f_used + fwd_entries
        if f_need > len(self._f_term):
            self._f_term = _grown(self._f_term, f_need)
        self._f_used = f_need
        self._n_slots = need
        return first

    def _move_regions(self, tids: I64) -> None:
        """Move the full regions of ``tids`` to the end of the pool with double capacity."""
        caps = self._t_cap[tids].tolist()
        new_caps = [max(2 * cap, _FIRST_CAP) for cap in caps]
        total = sum(new_caps)
        used = self._p_used
        if used + total > len(self._p_slot):
            self._p_slot = _grown(self._p_slot, used + total)
            self._p_tf = _grown(self._p_tf, used + total)
        new_starts = []
        for tid, cap, new_cap in zip(tids.tolist(), caps, new_caps, strict=True):
            new_starts.append(used)
            if cap:
                old = int(self._t_start[tid])
                n = int(self._t_len[tid])
                self._p_slot[used : used + n] = self._p_slot[old : old + n]
                self._p_tf[used : used + n] = self._p_tf[old : old + n]
            used += new_cap
        self._t_start[tids] = new_starts
        self._t_cap[tids] = new_caps
        self._p_used = used
        self._p_garbage += sum(caps)
        if max(new_caps) >= self._dense_threshold():
            self._promote_dense(tids)

    def _dense_threshold(self) -> int:
        """Postings a term needs for a dense tf map."""
        return max(_DENSE_MIN, self._n_slots // _DENSE_SHARE)

    def _dense_map(self, tid: int) -> U8:
        """A dense tf map of term ``tid`` (capped at ``_DENSE_BIG``) over the slot capacity."""
        p_slot, p_tf = self._postings(tid)
        tf_map = np.zeros(len(self._s_doc), np.uint8)
        tf_map[p_slot] = np.minimum(p_tf, _DENSE_BIG)
        return tf_map

    def _promote_dense(self, tids: I64) -> None:
        """Give the terms among ``tids`` whose lists grew long a dense tf map."""
        threshold = self._dense_threshold()
        for tid in tids[self._t_len[tids] >= threshold].tolist():
            if tid not in self._dense:
                self._dense[tid] = self._dense_map(tid)

    def _maybe_compact(self) -> None:
        """Compact when tombstoned postings or abandoned regions outweigh the live data."""
        live = self._p_used - self._p_garbage - self._p_dead
        if (
            self._p_dead > max(_COMPACT_MIN, live // 4)
            or self._p_garbage > max(16 * _COMPACT_MIN, live)
            or self._n_slots > max(_COMPACT_MIN, 2 * len(self._slot_of))
        ):
            self._rebuild()

    def _bulk_add(self, docs: list[int], token_lists: list[Sequence[str]]) -> None:
        """Append new documents (ids not in the index) in bulk, then rebuild the postings."""
        n_docs = len(docs)
        lengths = np.fromiter((len(t) for t in token_lists), np.int64, n_docs)
        term_id = self._term_id
        # In slices: one C-level loop over every token would hold the GIL for long enough
        # to stall the event loop while a worker thread builds a big index.
        flat = np.concatenate(
            [
                np.fromiter(
                    map(term_id.__getitem__, chain.from_iterable(token_lists[i : i + _SLICE])),
                    np.int64,
                    int(lengths[i : i + _SLICE].sum()),
                )
                for i in range(0, n_docs, _SLICE)
            ]
            or [np.zeros(0, np.int64)]
        )
        n_terms = len(term_id)
        self._ensure_terms(n_terms)
        # Distinct (document, term) pairs with their tf, document-major then by term.
        local = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
        keys = np.sort(local * n_terms + flat)
        del local, flat
        first_of_run = np.ones(keys.size, np.bool_)
        np.not_equal(keys[1:], keys[:-1], out=first_of_run[1:])
        runs = np.flatnonzero(first_of_run)
        tfs = np.diff(np.append(runs, keys.size))
        keys = keys[runs]
        pair_doc = keys // n_terms
        pair_term = keys - pair_doc * n_terms
        del keys, runs, first_of_run
        per_doc = np.bincount(pair_doc, minlength=n_docs)
        first = self._n_slots
        f_start = self._f_used
        self._new_slots(n_docs, int(pair_term.size))
        sl = slice(first, first + n_docs)
        self._s_doc[sl] = docs
        self._s_len[sl] = lengths
        self._s_alive[sl] = True
        self._s_fwd[sl] = f_start + np.cumsum(per_doc) - per_doc
        self._s_nterms[sl] = per_doc
        self._f_term[f_start : f_start + pair_term.size] = pair_term
        self._slot_of.update(zip(docs, range(first, first + n_docs), strict=True))
        self._total_len += int(lengths.sum())
        # The same pairs term-major (then by document), as the postings want them.
        tf_bits = int(tfs.max()).bit_length()
        if (n_terms * n_docs) << tf_bits < 2**62:
            packed = np.sort(((pair_term * n_docs + pair_doc) << tf_bits) | tfs)
            x_tf = packed & ((1 << tf_bits) - 1)
            packed >>= tf_bits
            x_term = packed // n_docs
            x_slot = packed - x_term * n_docs + first
        else:
            order = np.argsort(pair_term, kind="stable")
            x_term, x_slot, x_tf = pair_term[order], pair_doc[order] + first, tfs[order]
        self._rebuild(x_term, x_slot.astype(np.int64), x_tf.astype(np.int32))

    def _rebuild(
        self, x_term: I64 | None = None, x_slot: I64 | None = None, x_tf: Tfs | None = None
    ) -> None:
        """Compact the index (drop tombstones, renumber slots) and merge extra postings.

        ``x_*`` are postings of new, live slots, sorted by term then slot, all above the slots
        already stored. Everything is recomputed from the live data, so df and bounds are exact.
        """
        n_terms = len(self._term_id)
        n_slots = self._n_slots
        alive = self._s_alive[:n_slots]
        remap = np.cumsum(alive, dtype=np.int64) - 1
        # Stored postings, term after term.
        lens = self._t_len[:n_terms]
        nz = np.flatnonzero(lens)
        seg = lens[nz]
        total = int(seg.sum())
        idx = np.repeat(self._t_start[nz] - (np.cumsum(seg) - seg), seg) + np.arange(total)
        e_slot = self._p_slot[idx].astype(np.int64)
        keep = alive[e_slot]
        e_slot = e_slot[keep]
        e_tf = self._p_tf[idx][keep]
        e_term = np.repeat(nz, seg)[keep]
        del idx, keep
        if x_term is None or x_slot is None or x_tf is None:
            x_term = np.zeros(0, np.int64)
            x_slot = np.zeros(0, np.int64)
            x_tf = np.zeros(0, np.uint16)
        cnt_e = np.bincount(e_term, minlength=n_terms)
        cnt_x = np.bincount(x_term, minlength=n_terms)
        new_lens = cnt_e + cnt_x
        caps = new_lens + (new_lens >> 3) + (new_lens > 0)
        starts = np.cumsum(caps) - caps
        used = int(caps.sum())
        pos_e = starts[e_term] + np.arange(e_term.size) - (np.cumsum(cnt_e) - cnt_e)[e_term]
        pos_x = (
            starts[x_term]
            + cnt_e[x_term]
            + np.arange(x_term.size)
            - (np.cumsum(cnt_x) - cnt_x)[x_term]
        )
        pool_size = used + (used >> 4) + 16
        p_slot = np.zeros(pool_size, np.int32)
        big = max(int(e_tf.max(initial=0)), int(x_tf.max(initial=0))) > _U16_MAX
        p_tf: Tfs = np.zeros(pool_size, np.int32) if big else np.zeros(pool_size, np.uint16)
        p_slot[pos_e] = remap[e_slot]
        p_tf[pos_e] = e_tf
        p_slot[pos_x] = remap[x_slot]
        p_tf[pos_x] = x_tf
        del e_slot, e_tf, e_term, pos_e, pos_x
        # Slots and forward index, live ones only.
        # Some headroom, so that the adds after a bulk build do not start by growing arrays.
        live = np.flatnonzero(alive)
        n_live = int(live.size)
        s_nterms = self._s_nterms[live]
        f_idx = np.repeat(self._s_fwd[live] - (np.cumsum(s_nterms) - s_nterms), s_nterms)
        f_used = int(f_idx.size)
        self._f_term = _with_room(self._f_term[f_idx + np.arange(f_used)])
        self._s_doc = _with_room(self._s_doc[live])
        self._s_len = _with_room(self._s_len[live])
        self._s_alive = _with_room(np.ones(n_live, np.bool_))
        self._s_fwd = _with_room(np.cumsum(s_nterms) - s_nterms)
        self._s_nterms = _with_room(s_nterms)
        self._f_used = f_used
        self._n_slots = n_live
        self._version += 1
        self._slot_of = dict(zip(self._s_doc[:n_live].tolist(), range(n_live), strict=True))
        # Per-term data and bounds, from the compacted postings.
        self._p_slot, self._p_tf = p_slot, p_tf
        self._p_used, self._p_garbage, self._p_dead = used, 0, 0
        self._t_start[:n_terms] = starts
        self._t_len[:n_terms] = new_lens
        self._t_cap[:n_terms] = caps
        self._t_df[:n_terms] = new_lens
        self._t_maxtf[:n_terms] = 0.0
        self._t_minratio[:n_terms] = np.inf
        nz = np.flatnonzero(new_lens)
        if nz.size:
            seg = new_lens[nz]
            offsets = np.cumsum(seg) - seg
            idx = np.repeat(starts[nz] - offsets, seg) + np.arange(int(seg.sum()))
            tf = p_tf[idx].astype(np.float64)
            ratio = self._s_len[p_slot[idx]] / tf
            self._t_maxtf[nz] = np.maximum.reduceat(tf, offsets)
            self._t_minratio[nz] = np.minimum.reduceat(ratio, offsets)
        self._dense = {}
        for tid in np.flatnonzero(new_lens >= self._dense_threshold()).tolist():
            self._dense[tid] = self._dense_map(tid)


def _check_state(n_terms: int, arrays: dict[str, NDArray[Any]]) -> None:
    """Raise InputError unless ``export_state``'s arrays describe an index that searches can
    walk without leaving them (the compiled loop does not check bounds): array sizes, postings
    regions inside the pool, slots and term ids in range, statistics that divide safely."""
    n_slots, used, f_used = len(arrays["s_doc"]), len(arrays["p_slot"]), len(arrays["f_term"])
    sizes = {
        **dict.fromkeys(("t_start", "t_len", "t_cap", "t_df", "t_maxtf", "t_minratio"), n_terms),
        **dict.fromkeys(("s_len", "s_alive", "s_fwd", "s_nterms"), n_slots),
        "p_tf": used,
        "counters": 5,
    }
    if any(len(arrays[name]) != size for name, size in sizes.items()):
        raise InputError("index snapshot: array sizes do not match")
    start, length, cap = arrays["t_start"], arrays["t_len"], arrays["t_cap"]
    df, maxtf, fwd, nterms = arrays["t_df"], arrays["t_maxtf"], arrays["s_fwd"], arrays["s_nterms"]
    if (
        (start < 0).any()
        or (length < 0).any()
        or (length > cap).any()
        or (start + cap > used).any()
        or ((arrays["p_slot"] < 0) | (arrays["p_slot"] >= max(n_slots, 1))).any()
        or ((arrays["f_term"] < 0) | (arrays["f_term"] >= max(n_terms, 1))).any()
        or (fwd < 0).any()
        or (nterms < 0).any()
        or (fwd + nterms > f_used).any()
    ):
        raise InputError("index snapshot: postings out of range")
    if (
        (df < 0).any()
        or (df > length).any()
        or (maxtf[df > 0] < 1).any()
        or not (arrays["t_minratio"] >= 0).all()  # NaN fails too
        or not (arrays["s_len"] >= 0).all()
        or arrays["counters"][2] < 0  # total length
        or not 0 < arrays["counters"][3] <= 100e6  # k1 x 1e6
        or not 0 <= arrays["counters"][4] <= 1e6  # b x 1e6
    ):
        raise InputError("index snapshot: statistics out of range")


class _Scorer:
    """One query against one index state in numpy: the MaxScore loop (``bm25_kernel`` has
    it compiled) and exhaustive scoring of a few documents."""

    def __init__(self, index: BM25Index, q_tids: I64, n_live: int) -> None:
        self.ix = index
        tids, weights, rest, self.c1, self.c2 = bm25_kernel.order_terms(
            q_tids.tolist(),
            index._t_df[q_tids].tolist(),
            index._t_maxtf[q_tids].tolist(),
            index._t_minratio[q_tids].tolist(),
            n_live,
            index._k1,
            index._b,
            index._total_len,
            _EPS,
        )
        self.tids: list[int] = tids.tolist()
        self.weights: list[float] = weights.tolist()
        self.rest: list[float] = rest.tolist()  # bound of the terms from i on

    def contrib(self, j: int, tf: NDArray[np.integer], slots: NDArray[np.integer]) -> F64:
        """Score of query term ``j`` (in bound order) for documents with these tfs."""
        norm: F64 = self.ix._s_len[slots]
        norm *= self.c2
        norm += self.c1
        tf64 = tf.astype(np.float64)
        norm += tf64
        np.divide(tf64, norm, out=norm)
        norm *= self.weights[j]
        return norm

    def gather(self, j: int, slots: I64) -> NDArray[np.int32]:
        """tf of query term ``j`` in each of ``slots`` (0 where absent)."""
        tid = self.tids[j]
        tf_map = self.ix._dense.get(tid)
        if tf_map is not None:
            tf = tf_map[slots].astype(np.int32)
            big = np.flatnonzero(tf == _DENSE_BIG)
            if big.size:
                p_slot, p_tf = self.ix._postings(tid)
                tf[big] = p_tf[np.searchsorted(p_slot, slots[big])]
            return tf
        p_slot, p_tf = self.ix._postings(tid)
        if p_slot.size == 0:
            return np.zeros(slots.size, np.int32)
        pos = np.searchsorted(p_slot, slots)
        np.minimum(pos, p_slot.size - 1, out=pos)
        return np.where(p_slot[pos] == slots, p_tf[pos], 0).astype(np.int32)

    def top_k(
        self, k: int, mask: Bools | None, tiebreak: TieBreak | None
    ) -> list[tuple[int, float]]:
        """MaxScore over the postings; ``mask`` (over slots) limits the candidates."""
        ix = self.ix
        m = len(self.tids)
        theta = 0.0
        pool_slots: list[I64] = []
        pool_scores: list[F64] = []
        for e in range(m):
            if self.rest[e] < theta:
                break
            tid = self.tids[e]
            p_slot, p_tf = ix._postings(tid)
            if mask is not None:
                sel = mask[p_slot]
                slots, tf = p_slot[sel], p_tf[sel]
            elif ix._t_len[tid] != ix._t_df[tid]:
                sel = ix._s_alive[p_slot]
                slots, tf = p_slot[sel], p_tf[sel]
            else:
                slots, tf = p_slot, p_tf
            if slots.size == 0:
                continue
            part = self.contrib(e, tf, slots)
            cand = slots.astype(np.int64)
            if part.size >= k:
                theta = max(theta, _kth_largest(part, k) * (1.0 - _EPS))
            if theta > 0.0:
                keep = part + self.rest[e + 1] >= theta
                cand, part = cand[keep], part[keep]
            # A document holding an earlier term was settled in that term's step.
            for i in range(e):
                if cand.size == 0:
                    break
                fresh = self.gather(i, cand) == 0
                cand, part = cand[fresh], part[fresh]
            for j in range(e + 1, m):
                if cand.size == 0:
                    break
                part = part + self.contrib(j, self.gather(j, cand), cand)
                if part.size >= k:
                    theta = max(theta, _kth_largest(part, k) * (1.0 - _EPS))
                keep = part + self.rest[j + 1] >= theta
                cand, part = cand[keep], part[keep]
            if cand.size:
                pool_slots.append(cand)
                pool_scores.append(part)
                n_pool = sum(p.size for p in pool_scores)
                if n_pool >= k:
                    scores = np.concatenate(pool_scores)
                    theta = max(theta, _kth_largest(scores, k) * (1.0 - _EPS))
        if not pool_slots:
            return []
        return ix._rank(np.concatenate(pool_slots), np.concatenate(pool_scores), k, tiebreak)

    def finish(self, slots: I64, k: int, tiebreak: TieBreak | None) -> list[tuple[int, float]]:
        """Score ``slots`` (sorted) exhaustively; the top k of them."""
        scores = np.zeros(slots.size, np.float64)
        for j in range(len(self.tids)):
            scores += self.contrib(j, self.gather(j, slots), slots)
        hit = scores > 0.0
        return self.ix._rank(slots[hit], scores[hit], k, tiebreak)


__all__ = ["BM25Index"]
