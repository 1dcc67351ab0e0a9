"""The postings layout of the BM25 index (``bm25``): documents, terms and their postings in
numpy arrays, kept so that one ``add`` is a handful of vectorised numpy operations and a search
reads only the postings it needs.

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
- Per term, the bounds a search prunes with: its largest tf and smallest length/tf ratio.
- When tombstones or moved-out regions pile up, ``_rebuild`` compacts everything in a few
  vectorised passes, renumbering slots. ``add_many`` uses the same pass to build in bulk.

Scoring reads the arrays (public attributes, written only here and by ``bm25_state``, which
saves and loads them) and looks up tfs through ``of`` and ``tf_of``.

Costs: ``add`` and ``remove`` are a few numpy operations on the document's terms (amortised).
Compaction rewrites every array, so it runs once per quarter of the index removed
(``bench/recall.py`` times one; figure in docs/measured.md, "Memory indexes").
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError
from chazbot.memory.bm25_tuning import DEFAULT_LAYOUT, LayoutTuning

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
Bools = NDArray[np.bool_]
U8 = NDArray[np.uint8]
Tfs = NDArray[np.integer[Any]]  # uint16, or int32 once some tf needs it
_T = TypeVar("_T", bound=np.generic)

_FIRST_CAP = 2  # postings room a new term starts with
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


def with_room(arr: NDArray[_T]) -> NDArray[_T]:
    """``arr`` followed by zeroed room for a sixteenth more entries."""
    out = np.zeros(len(arr) + (len(arr) >> 4) + 16, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


class Postings:
    """Documents (token lists keyed by non-negative int ids) in slots, their terms' postings,
    and the statistics BM25 needs: N (``len``), df, document lengths and their total."""

    def __init__(self, tuning: LayoutTuning = DEFAULT_LAYOUT) -> None:
        self.tuning = tuning
        # Vocabulary: token -> term id, ids dense in insertion order.
        self.term_id: defaultdict[str, int] = defaultdict()
        self.term_id.default_factory = self.term_id.__len__  # a new token gets the next id
        self.t_start: I64 = np.zeros(0, np.int64)  # region start in the pool
        self.t_len: I64 = np.zeros(0, np.int64)  # postings stored, dead ones included
        self.t_cap: I64 = np.zeros(0, np.int64)  # region capacity
        self.t_df: I64 = np.zeros(0, np.int64)  # live documents holding the term
        self.t_maxtf: F64 = np.zeros(0, np.float64)  # bound: largest tf stored
        self.t_minratio: F64 = np.zeros(0, np.float64)  # bound: smallest dl / tf stored
        # Postings pool.
        self.p_slot: I32 = np.zeros(0, np.int32)
        self.p_tf: Tfs = np.zeros(0, np.uint16)  # int32 once some tf needs it
        self.p_used = 0  # pool entries handed out to regions
        self.p_garbage = 0  # pool entries in regions that were moved away
        self.p_dead = 0  # stored postings of removed slots
        self.dense: dict[int, U8] = {}  # term id -> tf by slot (capped), for long lists
        # Slots.
        self.slot_of: dict[int, int] = {}
        self.s_doc: I64 = np.zeros(0, np.int64)
        self.s_len: F64 = np.zeros(0, np.float64)
        self.s_alive: Bools = np.zeros(0, np.bool_)
        self.s_fwd: I64 = np.zeros(0, np.int64)  # start in the forward index
        self.s_nterms: I32 = np.zeros(0, np.int32)  # distinct terms of the slot
        self.n_slots = 0
        self.version = 0  # changes whenever a slot is made, removed or renumbered
        self._mask_cache: tuple[object, int, Bools] | None = None
        # Forward index: distinct term ids of each slot, slot after slot.
        self.f_term: I32 = np.zeros(0, np.int32)
        self.f_used = 0
        # Statistics over live documents.
        self.total_len = 0

    def __len__(self) -> int:
        return len(self.slot_of)

    def __contains__(self, doc: object) -> bool:
        return doc in self.slot_of

    def add(self, doc: int, tokens: Sequence[str]) -> None:
        """Index ``tokens`` under ``doc``, replacing what ``doc`` held before."""
        if doc < 0:
            raise InputError(f"document id must be non-negative, got {doc}")
        if doc in self.slot_of:
            self.remove(doc)
        counts: dict[int, int] = {}
        term_id = self.term_id
        for tok in tokens:
            tid = term_id[tok]
            counts[tid] = counts.get(tid, 0) + 1
        self._ensure_terms(len(term_id))
        n = len(counts)
        slot = self._new_slots(1, n)
        dl = len(tokens)
        self.s_doc[slot] = doc
        self.s_len[slot] = dl
        self.s_alive[slot] = True
        self.slot_of[doc] = slot
        self.total_len += dl
        if n == 0:
            return
        tids = np.fromiter(counts.keys(), np.int64, n)
        tfs = np.fromiter(counts.values(), np.int32, n)
        fwd = int(self.s_fwd[slot])
        self.f_term[fwd : fwd + n] = tids
        lens = self.t_len[tids]
        full = lens >= self.t_cap[tids]
        moved = bool(full.any())
        if moved:
            self._move_regions(tids[full])
        pos = self.t_start[tids] + lens
        u16_max = self.tuning.u16_max
        if dl > u16_max and self.p_tf.dtype == np.uint16 and int(tfs.max()) > u16_max:
            self.p_tf = self.p_tf.astype(np.int32)
        self.p_slot[pos] = slot
        self.p_tf[pos] = tfs
        self.t_len[tids] = lens + 1
        self.t_df[tids] += 1
        self.t_maxtf[tids] = np.maximum(self.t_maxtf[tids], tfs)
        self.t_minratio[tids] = np.minimum(self.t_minratio[tids], dl / tfs)
        dense = self.dense
        if dense:
            big = self.tuning.dense_big
            for tid, tf in counts.items():
                tf_map = dense.get(tid)
                if tf_map is not None:
                    tf_map[slot] = min(tf, big)
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
        if len(batch) < max(64.0, _BULK_SHARE * len(self.slot_of)):
            for doc, tokens in batch.items():
                self.add(doc, tokens)
            return
        for doc in batch:
            if doc in self.slot_of:
                self.remove(doc)
        self._bulk_add(list(batch.keys()), list(batch.values()))

    def remove(self, doc: int) -> None:
        """Drop ``doc`` from results and statistics; nothing happens if it is absent."""
        slot = self.slot_of.pop(doc, None)
        if slot is None:
            return
        self.version += 1
        self.s_alive[slot] = False
        self.total_len -= int(self.s_len[slot])
        n = int(self.s_nterms[slot])
        if n:
            fwd = int(self.s_fwd[slot])
            self.t_df[self.f_term[fwd : fwd + n]] -= 1
            self.p_dead += n
        self._maybe_compact()

    def docs(self) -> I64:
        """The doc ids in the index (in slot order)."""
        return self.s_doc[: self.n_slots][self.s_alive[: self.n_slots]]

    def memory_bytes(self) -> int:
        """Approximate bytes held: the numpy arrays plus the two hash tables (not their keys)."""
        arrays = (
            self.t_start,
            self.t_len,
            self.t_cap,
            self.t_df,
            self.t_maxtf,
            self.t_minratio,
            self.p_slot,
            self.p_tf,
            self.s_doc,
            self.s_len,
            self.s_alive,
            self.s_fwd,
            self.s_nterms,
            self.f_term,
        )
        tables = sys.getsizeof(self.term_id) + sys.getsizeof(self.slot_of)
        dense = sum(a.nbytes for a in self.dense.values())
        return sum(a.nbytes for a in arrays) + dense + tables

    def slot_mask(self, docs: I64) -> Bools:
        """Live slots whose doc is in ``docs``; cached for the same array object and index."""
        cached = self._mask_cache
        if cached is not None and cached[0] is docs and cached[1] == self.version:
            return cached[2]
        n = self.n_slots
        mask = np.zeros(len(self.s_doc), np.bool_)
        mask[:n] = np.isin(self.s_doc[:n], docs) & self.s_alive[:n]
        self._mask_cache = (docs, self.version, mask)
        return mask

    def of(self, tid: int) -> tuple[I32, Tfs]:
        """Views of the slots and tfs stored for term ``tid``, sorted by slot."""
        start = int(self.t_start[tid])
        end = start + int(self.t_len[tid])
        return self.p_slot[start:end], self.p_tf[start:end]

    def tf_of(self, tid: int, slots: I64) -> NDArray[np.int32]:
        """tf of term ``tid`` in each of ``slots`` (0 where absent): from its dense map when it
        has one (the postings for a capped entry), else by binary search in its postings."""
        tf_map = self.dense.get(tid)
        if tf_map is not None:
            tf = tf_map[slots].astype(np.int32)
            big = np.flatnonzero(tf == self.tuning.dense_big)
            if big.size:
                p_slot, p_tf = self.of(tid)
                tf[big] = p_tf[np.searchsorted(p_slot, slots[big])]
            return tf
        p_slot, p_tf = self.of(tid)
        if p_slot.size == 0:
            return np.zeros(slots.size, np.int32)
        pos = np.searchsorted(p_slot, slots)
        np.minimum(pos, p_slot.size - 1, out=pos)
        return np.where(p_slot[pos] == slots, p_tf[pos], 0).astype(np.int32)

    def _ensure_terms(self, n_terms: int) -> None:
        """Make the per-term arrays hold ``n_terms`` terms."""
        if n_terms <= len(self.t_start):
            return
        self.t_start = _grown(self.t_start, n_terms)
        self.t_len = _grown(self.t_len, n_terms)
        self.t_cap = _grown(self.t_cap, n_terms)
        self.t_df = _grown(self.t_df, n_terms)
        self.t_maxtf = _grown(self.t_maxtf, n_terms)
        self.t_minratio = _grown(self.t_minratio, n_terms, np.inf)

    def _new_slots(self, count: int, fwd_entries: int) -> int:
        """Reserve ``count`` slots and ``fwd_entries`` forward entries; the first slot."""
        first = self.n_slots
        need = first + count
        self.version += 1
        if need > len(self.s_doc):
            self.s_doc = _grown(self.s_doc, need)
            self.s_len = _grown(self.s_len, need)
            self.s_alive = _grown(self.s_alive, need)
            self.s_fwd = _grown(self.s_fwd, need)
            self.s_nterms = _grown(self.s_nterms, need)
            cap = len(self.s_doc)
            for tid, tf_map in self.dense.items():
                self.dense[tid] = _grown(tf_map, cap)
        if count == 1:
            self.s_fwd[first] = self.f_used
            self.s_nterms[first] = fwd_entries
        f_need = self.f_used + fwd_entries
        if f_need > len(self.f_term):
            self.f_term = _grown(self.f_term, f_need)
        self.f_used = f_need
        self.n_slots = need
        return first

    def _move_regions(self, tids: I64) -> None:
        """Move the full regions of ``tids`` to the end of the pool with double capacity."""
        caps = self.t_cap[tids].tolist()
        new_caps = [max(2 * cap, _FIRST_CAP) for cap in caps]
        total = sum(new_caps)
        used = self.p_used
        if used + total > len(self.p_slot):
            self.p_slot = _grown(self.p_slot, used + total)
            self.p_tf = _grown(self.p_tf, used + total)
        new_starts = []
        for tid, cap, new_cap in zip(tids.tolist(), caps, new_caps, strict=True):
            new_starts.append(used)
            if cap:
                old = int(self.t_start[tid])
                n = int(self.t_len[tid])
                self.p_slot[used : used + n] = self.p_slot[old : old + n]
                self.p_tf[used : used + n] = self.p_tf[old : old + n]
            used += new_cap
        self.t_start[tids] = new_starts
        self.t_cap[tids] = new_caps
        self.p_used = used
        self.p_garbage += sum(caps)
        if max(new_caps) >= self._dense_threshold():
            self._promote_dense(tids)

    def _dense_threshold(self) -> int:
        """Postings a term needs for a dense tf map."""
        return max(self.tuning.dense_min, self.n_slots // self.tuning.dense_share)

    def _dense_map(self, tid: int) -> U8:
        """A dense tf map of term ``tid`` (capped at ``tuning.dense_big``) over the slots."""
        p_slot, p_tf = self.of(tid)
        tf_map = np.zeros(len(self.s_doc), np.uint8)
        tf_map[p_slot] = np.minimum(p_tf, self.tuning.dense_big)
        return tf_map

    def _promote_dense(self, tids: I64) -> None:
        """Give the terms among ``tids`` whose lists grew long a dense tf map."""
        threshold = self._dense_threshold()
        for tid in tids[self.t_len[tids] >= threshold].tolist():
            if tid not in self.dense:
                self.dense[tid] = self._dense_map(tid)

    def _maybe_compact(self) -> None:
        """Compact when tombstoned postings or abandoned regions outweigh the live data."""
        live = self.p_used - self.p_garbage - self.p_dead
        if (
            self.p_dead > max(self.tuning.compact_min, live // 4)
            or self.p_garbage > max(16 * self.tuning.compact_min, live)
            or self.n_slots > max(self.tuning.compact_min, 2 * len(self.slot_of))
        ):
            self._rebuild()

    def _bulk_add(self, docs: list[int], token_lists: list[Sequence[str]]) -> None:
        """Append new documents (ids not in the index) in bulk, then rebuild the postings."""
        n_docs = len(docs)
        lengths = np.fromiter((len(t) for t in token_lists), np.int64, n_docs)
        term_id = self.term_id
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
        first = self.n_slots
        f_start = self.f_used
        self._new_slots(n_docs, int(pair_term.size))
        sl = slice(first, first + n_docs)
        self.s_doc[sl] = docs
        self.s_len[sl] = lengths
        self.s_alive[sl] = True
        self.s_fwd[sl] = f_start + np.cumsum(per_doc) - per_doc
        self.s_nterms[sl] = per_doc
        self.f_term[f_start : f_start + pair_term.size] = pair_term
        self.slot_of.update(zip(docs, range(first, first + n_docs), strict=True))
        self.total_len += int(lengths.sum())
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
        n_terms = len(self.term_id)
        n_slots = self.n_slots
        alive = self.s_alive[:n_slots]
        remap = np.cumsum(alive, dtype=np.int64) - 1
        # Stored postings, term after term.
        lens = self.t_len[:n_terms]
        nz = np.flatnonzero(lens)
        seg = lens[nz]
        total = int(seg.sum())
        idx = np.repeat(self.t_start[nz] - (np.cumsum(seg) - seg), seg) + np.arange(total)
        e_slot = self.p_slot[idx].astype(np.int64)
        keep = alive[e_slot]
        e_slot = e_slot[keep]
        e_tf = self.p_tf[idx][keep]
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
        big = max(int(e_tf.max(initial=0)), int(x_tf.max(initial=0))) > self.tuning.u16_max
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
        s_nterms = self.s_nterms[live]
        f_idx = np.repeat(self.s_fwd[live] - (np.cumsum(s_nterms) - s_nterms), s_nterms)
        f_used = int(f_idx.size)
        self.f_term = with_room(self.f_term[f_idx + np.arange(f_used)])
        self.s_doc = with_room(self.s_doc[live])
        self.s_len = with_room(self.s_len[live])
        self.s_alive = with_room(np.ones(n_live, np.bool_))
        self.s_fwd = with_room(np.cumsum(s_nterms) - s_nterms)
        self.s_nterms = with_room(s_nterms)
        self.f_used = f_used
        self.n_slots = n_live
        self.version += 1
        self.slot_of = dict(zip(self.s_doc[:n_live].tolist(), range(n_live), strict=True))
        # Per-term data and bounds, from the compacted postings.
        self.p_slot, self.p_tf = p_slot, p_tf
        self.p_used, self.p_garbage, self.p_dead = used, 0, 0
        self.t_start[:n_terms] = starts
        self.t_len[:n_terms] = new_lens
        self.t_cap[:n_terms] = caps
        self.t_df[:n_terms] = new_lens
        self.t_maxtf[:n_terms] = 0.0
        self.t_minratio[:n_terms] = np.inf
        nz = np.flatnonzero(new_lens)
        if nz.size:
            seg = new_lens[nz]
            offsets = np.cumsum(seg) - seg
            idx = np.repeat(starts[nz] - offsets, seg) + np.arange(int(seg.sum()))
            tf = p_tf[idx].astype(np.float64)
            ratio = self.s_len[p_slot[idx]] / tf
            self.t_maxtf[nz] = np.maximum.reduceat(tf, offsets)
            self.t_minratio[nz] = np.minimum.reduceat(ratio, offsets)
        self.build_dense()

    def build_dense(self) -> None:
        """Give each term whose list is long enough a dense tf map, and no other term one."""
        long = self.t_len[: len(self.term_id)] >= self._dense_threshold()
        self.dense = {tid: self._dense_map(tid) for tid in np.flatnonzero(long).tolist()}
