"""The in-memory view of one database's memory: newest row per key, BM25 and vectors.

Built from SQLite on first use and updated in place for every row committed or synced, so
that it never answers with a row recall would hide (superseded by a newer row for its key,
or forgotten). Pure: no I/O; the engine feeds it rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError, OverBudget
from chazbot.memory import bm25_kernel
from chazbot.memory.audience import Audience, GroupKey, group_of
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.current import MAX_STATEMENT_WORDS, newest_first, told_of
from chazbot.memory.fusion import top_fused
from chazbot.memory.rows import MemoryRow, person_name
from chazbot.memory.tokenize import document_text, tokenize
from chazbot.memory.vectors import VectorIndex
from chazbot.memory.when import day_words, in_months, key_day, named_months, written_day

Allowed = set[int] | NDArray[np.int64] | None
"""Docs a search may return: a set, an array (the audience rule's), or None (all)."""
RRF_K = 60  # SPEC §3
UNION_CACHE = 64  # audiences whose visible docs a view keeps (a busy peer has few rooms)


def indexed_tokens(row: MemoryRow) -> list[str]:
    """What BM25 indexes of a row: SPEC §3's document (key, value, tags); for a row learned
    in a room (with a provenance) also what a row of another shape says itself: who told it
    (the speaker as a name, ``@alice:x.org`` -> alice) unless the row names them, and the day
    it was told in words (``8 May 2023``) unless its key names a day. So a row a model's
    ``remember`` tool writes ("loves painting", the teller only in its provenance) is found by
    its teller and its day as a captured row (``alice/2023-05-08/…``) is; an operator's row
    is indexed exactly as SPEC §3 says (issue 35; LoCoMo dev, tool rows, hybrid recall@10
    0.657 -> 0.678, chosen in each of five folds: docs/memory.md, "Row shape")."""
    tokens = tokenize(document_text(row.key, row.value, row.tags))
    if row.origin is None:
        return tokens
    name = tokenize(person_name(row.origin.speaker))
    if name and not all(t in tokens for t in name):
        tokens.extend(name)
    if key_day(row.key) is None and (day := written_day(row)) is not None:
        tokens.extend(tokenize(day_words(day)))
    return tokens


@dataclass(frozen=True)
class RankingSettings:
    """How ``MemoryView.search`` ranks, passed in by whoever searches (the engine holds the
    peer's, ``MemoryEngine.ranking``; a bench builds its own with ``dataclasses.replace``).
    The defaults are the measured ones (docs/measured.md, "Memory indexes")."""

    min_candidates: int = 20
    """Candidates per ranker before fusion: max(``min_candidates``, ``candidates_per_result``
    x limit). With many per ranker, rows that both rankers place low outrank rows one ranker
    places first (bench/locomo.py)."""
    candidates_per_result: int = 2
    dense_weight: float = 1.0
    """The cosine list's RRF weight (BM25's is 1): equal weights were best on LoCoMo dev."""
    time_aware: bool = True
    """When the query names a month (``chazbot.memory.when``), the rows of that month go
    first among the fused top ``date_window``, each part in fused order."""
    date_window: int = 30
    newest_first: bool = True
    """Last, one teller's statements about one subject go together, the newest first
    (``chazbot.memory.current``; off: the fused order as it is, as bench/updates.py's anchor)."""
    statement_words: int = MAX_STATEMENT_WORDS
    """A longer row is never judged an update by that step (``current.MAX_STATEMENT_WORDS``)."""

    def __post_init__(self) -> None:
        counts = (self.min_candidates, self.candidates_per_result, self.date_window)
        if min(*counts, self.statement_words) < 1:
            raise InputError("ranking: counts, date window and statement words must be 1 or more")
        if not self.dense_weight > 0:
            raise InputError("ranking: the cosine list's weight must be more than 0")

    def depth(self, window: int) -> int:
        """Candidates each ranker gives for a fused top ``window``."""
        return max(self.min_candidates, window * self.candidates_per_result)


DEFAULT_RANKING = RankingSettings()


class Ranked(NamedTuple):
    """One result: ``score`` is the exact BM25 score when BM25 ranked alone, else the fused
    RRF score; ``bm25`` is the row's exact BM25 score whenever BM25 found it (SPEC §3);
    ``cosine`` its similarity to the query vector whenever the vector ranker found it.
    A named tuple: ten are made per recall, a frozen dataclass costs twice as much each."""

    row: MemoryRow
    score: float
    bm25: float | None = None
    cosine: float | None = None


class MemoryView:
    """Newest-per-key memory of one database with its lexical and vector indexes."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model  # the active embedding model name, or None for BM25 only
        # newest row per (scope, key), tombstones included (``MemoryRow.ident``)
        self.latest: dict[tuple[str, str], MemoryRow] = {}
        self.visible: dict[int, MemoryRow] = {}  # doc -> row, only rows recall can return
        self._by_row_id: dict[str, int] = {}
        self._tags: dict[str, set[int]] = {}
        # visible docs by where they were learned (audience.group_of): audience filtering
        # decides per group, and is free when a session may see every group
        self._groups: dict[GroupKey, set[int]] = {}
        self._group_arrays: dict[GroupKey, NDArray[np.int64]] = {}
        self._union_cache: dict[tuple[GroupKey, ...], NDArray[np.int64]] = {}
        self.bm25 = BM25Index()
        self.vectors: VectorIndex | None = None
        self.last_n = 0  # highest local row number applied

    # ---- updates ------------------------------------------------------------------------

    def load(
        self,
        rows: Iterable[MemoryRow],
        vectors: Iterable[tuple[str, NDArray[np.float32]]],
        last_n: int,
    ) -> None:
        """Bulk build from stored rows (in any order) and stored vectors (row id, vector).

        Pure and self-contained: the engine runs it on a worker thread on a view nobody else
        holds yet, so a big bank never stalls the event loop.
        """
        for row in rows:
            current = self.latest.get(row.ident)
            if current is None or row.newer_than(current):
                self.latest[row.ident] = row
        live = self._index_live()
        self.bm25.add_many((r.doc, indexed_tokens(r)) for r in live)
        by_row_id = self._by_row_id
        docs: list[int] = []
        kept: list[NDArray[np.float32]] = []
        dim = self.vectors.dim if self.vectors is not None else None
        for rid, vec in vectors:
            doc = by_row_id.get(rid)
            if doc is None:
                continue
            if dim is None:
                dim = len(vec)
            if len(vec) == dim:
                docs.append(doc)
                kept.append(vec)
        if docs:
            assert dim is not None
            self._ensure_vectors(dim)
            assert self.vectors is not None
            self.vectors.add_matrix(np.asarray(docs, np.int64), np.vstack(kept))
        self.last_n = max(self.last_n, last_n)

    def restore(
        self,
        latest: Iterable[MemoryRow],
        bm25: BM25Index,
        vectors: VectorIndex | None,
        last_n: int,
    ) -> None:
        """Take back a saved state (see ``snapshot``): newest rows per key and built indexes."""
        self.latest = {r.ident: r for r in latest}
        self._index_live()
        docs = np.fromiter(self.visible, np.int64, len(self.visible))
        if len(bm25) != docs.size or not np.isin(bm25.docs(), docs).all():
            raise InputError("snapshot: the BM25 index does not hold the visible rows")
        if vectors is not None and not np.isin(vectors.export_state()["docs"], docs).all():
            raise InputError("snapshot: vectors of rows that are not visible")
        self.bm25, self.vectors = bm25, vectors
        self.last_n = last_n

    def _index_live(self) -> list[MemoryRow]:
        """Fill the row maps from ``latest``; the rows recall can see."""
        live = [r for r in self.latest.values() if not r.forgotten]
        self.visible = {r.doc: r for r in live}
        self._by_row_id = {r.row_id: r.doc for r in live}
        self._groups = {}
        self._group_arrays = {}
        self._union_cache = {}
        for r in live:
            self._groups.setdefault(group_of(r.origin, r.scope), set()).add(r.doc)
            if r.tags:
                self._tag(r)
        return live

    def apply(self, row: MemoryRow) -> bool:
        """Apply one new memory row; True when it changed what recall sees."""
        self.last_n = max(self.last_n, row.doc)
        current = self.latest.get(row.ident)
        if current is not None and not row.newer_than(current):
            return False
        self.latest[row.ident] = row
        if current is not None and not current.forgotten:
            self._drop(current)
        if not row.forgotten:
            self.visible[row.doc] = row
            self._by_row_id[row.row_id] = row.doc
            group = group_of(row.origin, row.scope)
            self._groups.setdefault(group, set()).add(row.doc)
            self._changed_group(group)
            self._tag(row)
            self.bm25.add(row.doc, indexed_tokens(row))
        return True

    def apply_vector(self, row_id: str, vector: NDArray[np.float32], n: int = 0) -> None:
        self.last_n = max(self.last_n, n)
        doc = self._by_row_id.get(row_id)
        if doc is None:
            return  # superseded, forgotten or unknown: never searchable
        self._ensure_vectors(len(vector))
        assert self.vectors is not None
        if len(vector) == self.vectors.dim:
            self.vectors.add(doc, vector)

    def _ensure_vectors(self, dim: int) -> None:
        if self.vectors is None:
            self.vectors = VectorIndex(dim)

    def _tag(self, row: MemoryRow) -> None:
        for tag in row.tags:
            self._tags.setdefault(tag.lower(), set()).add(row.doc)

    def _drop(self, row: MemoryRow) -> None:
        self.visible.pop(row.doc, None)
        self._by_row_id.pop(row.row_id, None)
        group = group_of(row.origin, row.scope)
        members = self._groups.get(group)
        if members is not None:
            members.discard(row.doc)
            self._changed_group(group)
            if not members:
                del self._groups[group]
        self.bm25.remove(row.doc)
        if self.vectors is not None:
            self.vectors.remove(row.doc)
        for tag in row.tags:
            docs = self._tags.get(tag.lower())
            if docs is not None:
                docs.discard(row.doc)
                if not docs:
                    del self._tags[tag.lower()]

    # ---- queries ------------------------------------------------------------------------

    def has_vector(self, row_id: str) -> bool:
        doc = self._by_row_id.get(row_id)
        return doc is not None and self.vectors is not None and doc in self.vectors

    def missing_vectors(self) -> list[MemoryRow]:
        """Visible rows without a vector for the active model (for reindex)."""
        have = self.vectors
        return [r for d, r in self.visible.items() if have is None or d not in have]

    def tag_filter(self, tags: Sequence[str]) -> set[int] | None:
        if not tags:
            return None
        sets = [self._tags.get(t.lower(), set()) for t in tags]
        sets.sort(key=len)
        result = set(sets[0])
        for other in sets[1:]:
            result &= other
        return result

    def audience_filter(self, audience: Audience | None) -> NDArray[np.int64] | None:
        """The docs ``audience`` may be told (SPEC §5c) as an array, or None when that is all
        of them. Per group the array is kept until the group changes, and the union until
        any does, so the searches of a turn share one array (and the indexes' masks of it)."""
        if audience is None or audience.full:
            return None
        seen = tuple(g for g in self._groups if audience.sees_group(g))
        if len(seen) == len(self._groups):
            return None
        cached = self._union_cache.get(seen)
        if cached is not None:
            return cached
        parts = [self._group_array(g) for g in seen]
        union = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        if len(self._union_cache) >= UNION_CACHE:
            self._union_cache.clear()
        self._union_cache[seen] = union
        return union

    def _group_array(self, group: GroupKey) -> NDArray[np.int64]:
        found = self._group_arrays.get(group)
        if found is None:
            docs = self._groups[group]
            found = self._group_arrays[group] = np.fromiter(docs, np.int64, len(docs))
        return found

    def _changed_group(self, group: GroupKey) -> None:
        self._group_arrays.pop(group, None)
        self._union_cache.clear()

    def allowed(self, tags: Sequence[str], audience: Audience | None) -> Allowed:
        """Docs passing the tag filter and the audience rule (None: no restriction)."""
        by_tags = self.tag_filter(tags)
        heard = self.audience_filter(audience)
        if by_tags is None or heard is None:
            return heard if by_tags is None else by_tags
        keep = np.fromiter(by_tags, np.int64, len(by_tags))
        return set(keep[np.isin(keep, heard)].tolist())

    def rows_for(self, key: str, audience: Audience | None) -> list[MemoryRow]:
        """The visible rows of ``key`` that ``audience`` may be told (one per scope)."""
        return [
            r
            for (_, k), r in self.latest.items()
            if k == key
            and not r.forgotten
            and (audience is None or audience.sees(r.origin, r.scope))
        ]

    def rows_by(self, speaker: str | None, audience: Audience | None) -> list[MemoryRow]:
        """Visible rows whose speaker is ``speaker`` (None: the operator's rows) that
        ``audience`` may be told, newest first."""
        found = [
            r
            for r in self.visible.values()
            if (r.origin.speaker == speaker if r.origin is not None else speaker is None)
            and (audience is None or audience.sees(r.origin, r.scope))
        ]
        return sorted(found, key=lambda r: (r.ts, r.order), reverse=True)

    def recent(self, limit: int, allowed: Allowed = None) -> list[Ranked]:
        visible = self.visible
        pool = visible.values() if allowed is None else (visible[int(d)] for d in allowed)
        rows = sorted(pool, key=lambda r: (r.ts, r.order), reverse=True)[:limit]
        return [Ranked(r, 0.0) for r in rows]

    def search(
        self,
        query: str,
        tags: Sequence[str] = (),
        limit: int = 10,
        query_vector: NDArray[np.float32] | None = None,
        audience: Audience | None = None,
        min_similarity: float | None = None,
        ranking: RankingSettings = DEFAULT_RANKING,
    ) -> list[Ranked]:
        """Recall: BM25 alone (exact SPEC §3 scores), or BM25 and cosine fused by weighted RRF
        when there is a query vector; recency when there is nothing to rank. Only rows
        ``audience`` may be told (SPEC §5c; None: every row).

        ``min_similarity`` (the relevance floor, SPEC §5; None: none): a row found by the
        vector ranker but not among BM25's candidates is relevant only with a cosine at least
        that. The fusion runs over the full lists first and the rows under the floor are left
        out after it, so what passes keeps its score and its order (SPEC §3).

        ``ranking``: how deep each ranker is read, the cosine list's weight and the steps
        below (``RankingSettings``; the product's is the engine's, ``MemoryEngine.ranking``).

        Time-aware: when the query names a month, the rows about that month (``when``) among
        the fused top ``ranking.date_window`` (each ranker read deeper for it) go first, in
        fused order, then the rest of the usual ranking; BM25 alone keeps its exact order
        (SPEC §3). When no row is about that month (a conversation told in one sitting: every
        row is of the day it was told), the query ranks as any other. Otherwise, last, one
        teller's statements about one subject go together, the newest first (``current``).

        Returns [] when the query has tokens or a vector but nothing matches.

        In a ``bm25_kernel.budget`` block (a search tried on the event loop, ``offloop``)
        only BM25 alone is tried: a vector or tag search, or no query words, raises
        ``OverBudget`` before any work, as does BM25 past its budget.
        """
        tokens = tokenize(query)
        vectors = self.vectors
        dense = (
            query_vector is not None and vectors is not None and len(query_vector) == vectors.dim
        )
        if (tags or dense or not tokens) and bm25_kernel.current_budget():
            raise OverBudget("search: only BM25 alone is bounded on the event loop")
        allowed = self.allowed(tags, audience)
        if allowed is not None and len(allowed) == 0:
            return []
        if not query.strip() or (not tokens and query_vector is None):
            return self.recent(limit, allowed)
        if not dense:
            return self._bm25_only(tokens, limit, allowed) if tokens else []
        assert query_vector is not None and vectors is not None
        months = named_months(query) if ranking.time_aware else frozenset()
        depth = ranking.depth(limit)
        deep = max(depth, ranking.depth(ranking.date_window)) if months else depth
        hits = self.bm25.search(tokens, deep, allowed) if tokens else []
        near = vectors.search(query_vector, deep, allowed)
        weights = (1.0, ranking.dense_weight) if tokens else (ranking.dense_weight,)
        passed = self._fused(hits[:depth], near[:depth], weights, depth, min_similarity)
        if months:  # rows of a named month first, found deeper; then the rest as ever
            wide = self._fused(hits, near, weights, deep, min_similarity)
            dated = [r for r in wide[: ranking.date_window] if in_months(r.row, months)]
            if dated:  # asked about a time: not the newest statement first
                first = {r.row.doc for r in dated}
                return (dated + [r for r in passed if r.row.doc not in first])[:limit]
        ranked, pool = passed[:limit], passed[limit:]
        if not ranking.newest_first:
            return ranked
        current = newest_first(
            ranked, lambda r: told_of(r.row), pool=pool, max_words=ranking.statement_words
        )
        return [r for r, _ in current][:limit]

    def _fused(
        self,
        hits: list[tuple[int, float]],
        near: list[tuple[int, float]],
        weights: tuple[float, ...],
        depth: int,
        min_similarity: float | None,
    ) -> list[Ranked]:
        """BM25's ``hits`` and the cosine list ``near`` fused by weighted RRF (the best
        ``2 x depth``), less the rows only the vector ranker found under ``min_similarity``."""
        exact = dict(hits)
        cosine = dict(near)
        lists = [[d for d, _ in near]]  # after BM25's when it ranked (a weight each)
        if len(weights) > 1:
            lists.insert(0, [d for d, _ in hits])
        weak = (
            set()
            if min_similarity is None
            else {d for d, c in near if c < min_similarity and d not in exact}
        )
        fused = top_fused(lists, 2 * depth, tiebreak=self._tiebreak, k=RRF_K, weights=weights)
        visible = self.visible
        return [
            Ranked(visible[doc], score, exact.get(doc), cosine.get(doc))
            for doc, score in fused
            if doc not in weak
        ]

    def _bm25_only(self, tokens: list[str], limit: int, allowed: Allowed) -> list[Ranked]:
        """The top ``limit`` by exact BM25 score, ties newest first then by key."""
        visible = self.visible
        top = self.bm25.search(tokens, limit, allowed, tiebreak=self._tiebreak)
        return [Ranked(visible[doc], score, score) for doc, score in top]

    def _tiebreak(self, doc: int) -> tuple[int, int, str, int, str]:
        """Newer first (timestamp, then entry order), then key."""
        row = self.visible[doc]
        return (-row.ts, -row.order[0], row.order[1], -row.order[2], row.key)
