"""Exact BM25 top-k over a postings layout (SPEC §3), with incremental updates.

The documents, their terms and postings live in ``bm25_postings.Postings`` (slots, postings
regions, the forward index, dense tf maps, compaction and snapshots); this module scores them.

Search is term-at-a-time MaxScore, vectorised. Per term the layout keeps an upper bound of its
score that holds for any average length (from its largest tf and smallest length/tf ratio).
Terms go in order of falling bound; a document is scored in the step of the first query term it
contains, gathering the other terms' tf by binary search in their postings (or from the dense
map). The running threshold is the k-th best lower bound seen so far; documents whose bound falls
below it are dropped, and once the bounds of all remaining terms sum below it, the search stops
without reading their postings. The survivors' scores are exact; they are ordered by the tie rule
of ``fusion``: scores equal up to float rounding tie, and ties go to the higher doc id (or to the
caller's ``tiebreak`` first). ``bm25_kernel`` holds the same search compiled with numba, which
big indexes use when it is installed; both give the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import OverBudget
from chazbot.memory import bm25_kernel, bm25_state
from chazbot.memory.bm25_postings import F64, I64, Bools, Postings
from chazbot.memory.bm25_tuning import DEFAULT_SEARCH_TUNING, SearchTuning
from chazbot.memory.fusion import order_by_score, ranked
from chazbot.memory.tokenize import MAX_QUERY_TERMS, first_terms

TieBreak = Callable[[int], tuple[Any, ...]]  # a doc's sort key among tied scores

# Pruning keeps anything within this relative distance of the threshold, so float rounding in
# bounds and partial sums can never drop a document that ties the k-th score.
_EPS = 1e-9
# Up to this many results are put in order in plain Python (cheaper than numpy when few).
_SMALL_RANK = 64


def _kth_largest(values: F64, k: int) -> float:
    """The k-th largest entry of ``values`` (which holds at least k entries)."""
    return float(np.partition(values, values.size - k)[values.size - k])


class BM25Index:
    """Exact BM25 top-k over documents given as token lists, keyed by non-negative int ids.

    Scores follow SPEC §3: ``idf = ln((N - df + 0.5) / (df + 0.5) + 1)`` and
    ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` summed over the distinct
    query terms, with N, df and avgdl (at least 1) taken over the documents in the index.
    Documents are kept by its part ``postings``; it holds the scoring parameters.
    """

    def __init__(
        self, k1: float = 1.5, b: float = 0.75, tuning: SearchTuning = DEFAULT_SEARCH_TUNING
    ) -> None:
        self._k1 = float(k1)
        self._b = float(b)
        self.tuning = tuning
        self.postings = Postings(tuning.layout)

    def __len__(self) -> int:
        return len(self.postings)

    def __contains__(self, doc: object) -> bool:
        return doc in self.postings

    def add(self, doc: int, tokens: Sequence[str]) -> None:
        """Index ``tokens`` under ``doc``, replacing what ``doc`` held before."""
        self.postings.add(doc, tokens)

    def add_many(self, docs: Iterable[tuple[int, Sequence[str]]]) -> None:
        """Index many documents at once (later duplicates win); far faster than ``add``."""
        self.postings.add_many(docs)

    def remove(self, doc: int) -> None:
        """Drop ``doc`` from results and statistics; nothing happens if it is absent."""
        self.postings.remove(doc)

    def docs(self) -> I64:
        """The doc ids in the index (in slot order)."""
        return self.postings.docs()

    def memory_bytes(self) -> int:
        """Approximate bytes held: the numpy arrays plus the two hash tables (not their keys)."""
        return self.postings.memory_bytes()

    def slot_mask(self, docs: I64) -> Bools:
        """Live slots whose doc is in ``docs``; cached for the same array object and index."""
        return self.postings.slot_mask(docs)

    def export_state(self) -> tuple[list[str], dict[str, NDArray[Any]]]:
        """The vocabulary (term id order) and the arrays that make up the index, trimmed.

        ``from_state`` rebuilds an identical index from them without tokenizing anything.
        """
        return bm25_state.export_state(self.postings, self._k1, self._b)

    @classmethod
    def from_state(
        cls,
        vocab: list[str],
        arrays: dict[str, NDArray[Any]],
        tuning: SearchTuning = DEFAULT_SEARCH_TUNING,
    ) -> BM25Index:
        """The index ``export_state`` described (raises InputError if the parts disagree)."""
        postings, k1, b = bm25_state.from_state(vocab, arrays, tuning.layout)
        index = cls(k1, b, tuning)
        index.postings = postings
        return index

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
        layout = self.postings
        n_live = len(layout.slot_of)
        if k <= 0 or n_live == 0:
            return []
        term_id = layout.term_id
        if max_terms is not None:
            query_tokens = first_terms(query_tokens, max_terms)
        tids = dict.fromkeys(t for t in map(term_id.get, query_tokens) if t is not None)
        if not tids:
            return []
        q_tids = np.fromiter(tids, np.int64, len(tids))
        mask = None
        if isinstance(allowed, np.ndarray):
            mask = layout.slot_mask(allowed)
            count = int(np.count_nonzero(mask))
            if count == 0:
                return []
            if count <= self.tuning.direct_allowed:
                slots = np.flatnonzero(mask)
                return _Scorer(self, q_tids, n_live).finish(slots, k, tiebreak)
        elif allowed is not None:
            slot_of = layout.slot_of
            slots = np.fromiter((slot_of[d] for d in allowed if d in slot_of), np.int64)
            if slots.size == 0:
                return []
            if slots.size <= self.tuning.direct_allowed:
                return _Scorer(self, q_tids, n_live).finish(np.unique(slots), k, tiebreak)
            mask = np.zeros(layout.n_slots, np.bool_)
            mask[slots] = True
        compiled = bm25_kernel.loop(n_live, self.tuning.compiled_from)
        units, most_work = bm25_kernel.limits()
        if compiled is None or layout.p_tf.dtype != np.uint16:
            if units:
                raise OverBudget("search: the numpy loop is not bounded on the event loop")
            return _Scorer(self, q_tids, n_live).top_k(k, mask, tiebreak)
        if (
            units
            and most_work is not None
            and q_tids.size * (q_tids.size + 1) // 2 * n_live > most_work  # else cannot pass
            and bm25_kernel.work(layout.t_df[q_tids].tolist()) > most_work
        ):
            raise OverBudget("search: its bound passes what the event loop may try")
        found, scores, done = compiled(
            q_tids,
            layout.t_start,
            layout.t_len,
            layout.t_df,
            layout.t_maxtf,
            layout.t_minratio,
            layout.p_slot,
            layout.p_tf,
            layout.s_len,
            layout.s_alive if mask is None else mask,
            n_live,
            self._k1,
            self._b,
            layout.total_len,
            k,
            _EPS,
            units,
        )
        if not done:
            raise OverBudget("search: over its budget on the event loop")
        return self._rank(found, scores, k, tiebreak)

    def _rank(
        self, slots: I64, scores: F64, k: int, tiebreak: TieBreak | None
    ) -> list[tuple[int, float]]:
        """The top k of scored slots as ``(doc, score)`` in the tie rule's order."""
        if slots.size > _SMALL_RANK:
            near = scores >= _kth_largest(scores, k) * (1.0 - _EPS)
            slots, scores = slots[near], scores[near]
        docs = self.postings.s_doc[slots]
        if docs.size <= _SMALL_RANK or tiebreak is not None:
            return ranked(zip(docs.tolist(), scores.tolist(), strict=True), k, tiebreak)
        order = order_by_score(docs, scores)[:k]
        return list(zip(docs[order].tolist(), scores[order].tolist(), strict=True))


class _Scorer:
    """One query against one index state in numpy: the MaxScore loop (``bm25_kernel`` has
    it compiled) and exhaustive scoring of a few documents."""

    def __init__(self, index: BM25Index, q_tids: I64, n_live: int) -> None:
        self.ix = index
        self.layout = layout = index.postings
        tids, weights, rest, self.c1, self.c2 = bm25_kernel.order_terms(
            q_tids.tolist(),
            layout.t_df[q_tids].tolist(),
            layout.t_maxtf[q_tids].tolist(),
            layout.t_minratio[q_tids].tolist(),
            n_live,
            index._k1,
            index._b,
            layout.total_len,
            _EPS,
        )
        self.tids: list[int] = tids.tolist()
        self.weights: list[float] = weights.tolist()
        self.rest: list[float] = rest.tolist()  # bound of the terms from i on

    def contrib(self, j: int, tf: NDArray[np.integer], slots: NDArray[np.integer]) -> F64:
        """Score of query term ``j`` (in bound order) for documents with these tfs."""
        norm: F64 = self.layout.s_len[slots]
        norm *= self.c2
        norm += self.c1
        tf64 = tf.astype(np.float64)
        norm += tf64
        np.divide(tf64, norm, out=norm)
        norm *= self.weights[j]
        return norm

    def gather(self, j: int, slots: I64) -> NDArray[np.int32]:
        """tf of query term ``j`` in each of ``slots`` (0 where absent)."""
        return self.layout.tf_of(self.tids[j], slots)

    def top_k(
        self, k: int, mask: Bools | None, tiebreak: TieBreak | None
    ) -> list[tuple[int, float]]:
        """MaxScore over the postings; ``mask`` (over slots) limits the candidates."""
        ix, layout = self.ix, self.layout
        m = len(self.tids)
        theta = 0.0
        pool_slots: list[I64] = []
        pool_scores: list[F64] = []
        for e in range(m):
            if self.rest[e] < theta:
                break
            tid = self.tids[e]
            p_slot, p_tf = layout.of(tid)
            if mask is not None:
                sel = mask[p_slot]
                slots, tf = p_slot[sel], p_tf[sel]
            elif layout.t_len[tid] != layout.t_df[tid]:
                sel = layout.s_alive[p_slot]
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
