"""The in-memory view of one database's memory: newest row per key, BM25 and vectors.

Built from SQLite on first use and updated in place for every row committed or synced, so
that it never answers with a row recall would hide (superseded by a newer row for its key,
or forgotten). Pure: no I/O; the engine feeds it rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from chazbot.memory.bm25 import BM25Index
from chazbot.memory.fusion import top_fused
from chazbot.memory.rows import MemoryRow
from chazbot.memory.tokenize import document_text, tokenize
from chazbot.memory.vectors import VectorIndex

RRF_K = 60
MIN_CANDIDATES = 50
CANDIDATES_PER_RESULT = 5


@dataclass(frozen=True)
class Ranked:
    row: MemoryRow
    score: float


class MemoryView:
    """Newest-per-key memory of one database with its lexical and vector indexes."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model  # the active embedding model name, or None for BM25 only
        self.latest: dict[str, MemoryRow] = {}  # newest row per key, tombstones included
        self.visible: dict[int, MemoryRow] = {}  # doc -> row, only rows recall can return
        self._by_row_id: dict[str, int] = {}
        self._tags: dict[str, set[int]] = {}
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
        """Bulk build from stored rows (in any order) and stored vectors (row id, vector)."""
        for row in rows:
            current = self.latest.get(row.key)
            if current is None or row.newer_than(current):
                self.latest[row.key] = row
        live = [r for r in self.latest.values() if not r.forgotten]
        self.visible = {r.doc: r for r in live}
        self._by_row_id = {r.row_id: r.doc for r in live}
        for r in live:
            self._tag(r)
        self.bm25.add_many((r.doc, tokenize(document_text(r.key, r.value, r.tags))) for r in live)
        pending = [(self._by_row_id[rid], vec) for rid, vec in vectors if rid in self._by_row_id]
        if pending:
            self._ensure_vectors(len(pending[0][1]))
            assert self.vectors is not None
            ok = [(doc, vec) for doc, vec in pending if len(vec) == self.vectors.dim]
            self.vectors.add_many(ok)
        self.last_n = max(self.last_n, last_n)

    def apply(self, row: MemoryRow) -> bool:
        """Apply one new memory row; True when it changed what recall sees."""
        self.last_n = max(self.last_n, row.doc)
        current = self.latest.get(row.key)
        if current is not None and not row.newer_than(current):
            return False
        self.latest[row.key] = row
        if current is not None and not current.forgotten:
            self._drop(current)
        if not row.forgotten:
            self.visible[row.doc] = row
            self._by_row_id[row.row_id] = row.doc
            self._tag(row)
            self.bm25.add(row.doc, tokenize(document_text(row.key, row.value, row.tags)))
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

    def recent(self, limit: int, allowed: set[int] | None = None) -> list[Ranked]:
        pool = self.visible.values() if allowed is None else (self.visible[d] for d in allowed)
        rows = sorted(pool, key=lambda r: (r.ts, r.order), reverse=True)[:limit]
        return [Ranked(r, 0.0) for r in rows]

    def search(
        self,
        query: str,
        tags: Sequence[str] = (),
        limit: int = 10,
        query_vector: NDArray[np.float32] | None = None,
    ) -> list[Ranked]:
        """Hybrid recall: BM25 and cosine fused by RRF; recency when there is nothing to rank.

        Returns [] when the query has tokens or a vector but nothing matches.
        """
        allowed = self.tag_filter(tags)
        if allowed is not None and not allowed:
            return []
        tokens = tokenize(query)
        if not query.strip() or (not tokens and query_vector is None):
            return self.recent(limit, allowed)
        depth = max(MIN_CANDIDATES, limit * CANDIDATES_PER_RESULT)
        lists: list[list[int]] = []
        if tokens:
            lists.append([doc for doc, _ in self.bm25.search(tokens, depth, allowed)])
        vectors = self.vectors
        if query_vector is not None and vectors is not None and len(query_vector) == vectors.dim:
            lists.append([d for d, _ in vectors.search(query_vector, depth, allowed)])
        lists = [lst for lst in lists if lst]
        if not lists:
            return []
        visible = self.visible

        def tiebreak(doc: int) -> tuple[int, int, str, int, str]:
            row = visible[doc]
            return (-row.ts, -row.order[0], row.order[1], -row.order[2], row.key)

        fused = top_fused(lists, limit, tiebreak=tiebreak, k=RRF_K)
        return [Ranked(visible[doc], score) for doc, score in fused]
