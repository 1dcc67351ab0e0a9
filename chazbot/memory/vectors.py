"""Brute-force cosine search over an in-memory float32 matrix (SPEC §3).

Rows are stored as given (float32) beside their inverse L2 norm, so cosine similarity is one
``matrix @ query`` scaled per row; the top k come from ``np.argpartition``. Brute force is exact
and, with BLAS, fast enough at the sizes a memory bank reaches (``bench/recall.py`` times it;
figures in docs/measured.md, "Memory indexes"). The matrix grows by doubling (copying it for
every row would cost seconds at 1M); removal moves the last row into the gap, so live rows
stay one dense block.

float32 dot products are off by up to about ``dim * 2**-23``: enough to turn an orthogonal pair
into a tiny positive score, or to order two equal rows by where they sit in the matrix. So the
float32 pass only picks candidates (with that much slack), and the candidates are rescored in
float64, row by row in one fixed order, before the > 0 rule and the tie rule are applied. (For
the same reason rows are not stored normalised: rounding would break exact zeros.)
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot.errors import InputError
from chazbot.memory.fusion import order_by_score

F32 = NDArray[np.float32]
# Below this share of the rows, an ``allowed`` set is scored row by row instead of in full.
_ALLOWED_SHARE = 0.5


class VectorIndex:
    """Cosine top-k over vectors of one dimension, keyed by int doc ids."""

    def __init__(self, dim: int) -> None:
        if dim <= 0:
            raise InputError(f"vector dimension must be positive, got {dim}")
        self._dim = int(dim)
        self._slack = 4.0 * self._dim * float(np.finfo(np.float32).eps)
        self._matrix: F32 = np.zeros((0, self._dim), np.float32)
        self._inv_norm: F32 = np.zeros(0, np.float32)  # 0 for an all-zero row
        self._docs: NDArray[np.int64] = np.zeros(0, np.int64)
        self._slot_of: dict[int, int] = {}

    @property
    def dim(self) -> int:
        """Length of every vector in the index."""
        return self._dim

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, doc: object) -> bool:
        return doc in self._slot_of

    def add(self, doc: int, vector: NDArray[np.floating] | Sequence[float]) -> None:
        """Store ``vector`` under ``doc``, replacing what ``doc`` held before."""
        row, inv_norm = self._rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))
        slot = self._slot_of.get(doc)
        if slot is None:
            slot = len(self._slot_of)
            self._reserve(slot + 1)
            self._docs[slot] = doc
            self._slot_of[doc] = slot
        self._matrix[slot] = row[0]
        self._inv_norm[slot] = inv_norm[0]

    def add_many(self, items: Iterable[tuple[int, NDArray[np.floating] | Sequence[float]]]) -> None:
        """Store many vectors at once (later duplicates win); faster than ``add`` one by one."""
        latest: dict[int, NDArray[np.floating] | Sequence[float]] = {}
        for doc, vector in items:
            latest[doc] = vector
        if not latest:
            return
        docs = list(latest)
        rows = np.empty((len(docs), self._dim), np.float32)
        for i, vector in enumerate(latest.values()):
            arr = np.asarray(vector, dtype=np.float32).reshape(-1)
            self._check_dim(arr.size)
            rows[i] = arr
        rows, inv_norm = self._rows(rows)
        slots = np.empty(len(docs), np.int64)
        n = len(self._slot_of)
        fresh = 0
        for i, doc in enumerate(docs):
            slot = self._slot_of.get(doc)
            if slot is None:
                slot = n + fresh
                fresh += 1
            slots[i] = slot
        self._reserve(n + fresh)
        for i, doc in enumerate(docs):
            slot = int(slots[i])
            if slot >= n:
                self._slot_of[doc] = slot
                self._docs[slot] = doc
        self._matrix[slots] = rows
        self._inv_norm[slots] = inv_norm

    def add_matrix(self, docs: NDArray[np.integer], rows: NDArray[np.floating]) -> None:
        """Store ``rows[i]`` under ``docs[i]`` for all i (later duplicates win), vectorised."""
        matrix = np.asarray(rows, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(docs):
            raise InputError("add_matrix needs one vector per doc")
        ids = np.asarray(docs, dtype=np.int64)
        if ids.size == 0:
            return
        # the last occurrence of each doc
        rev_unique, rev_first = np.unique(ids[::-1], return_index=True)
        pick = ids.size - 1 - rev_first
        ids, matrix = rev_unique, matrix[pick]
        matrix, inv_norm = self._rows(matrix)
        n = len(self._slot_of)
        slot_of = self._slot_of
        slots = np.fromiter((slot_of.get(d, -1) for d in ids.tolist()), np.int64, ids.size)
        fresh = np.flatnonzero(slots < 0)
        slots[fresh] = n + np.arange(fresh.size)
        self._reserve(n + fresh.size)
        self._docs[slots[fresh]] = ids[fresh]
        slot_of.update(zip(ids[fresh].tolist(), slots[fresh].tolist(), strict=True))
        self._matrix[slots] = matrix
        self._inv_norm[slots] = inv_norm

    def remove(self, doc: int) -> None:
        """Forget ``doc``'s vector; nothing happens if it has none."""
        slot = self._slot_of.pop(doc, None)
        if slot is None:
            return
        last = len(self._slot_of)
        if slot != last:
            moved = int(self._docs[last])
            self._matrix[slot] = self._matrix[last]
            self._inv_norm[slot] = self._inv_norm[last]
            self._docs[slot] = moved
            self._slot_of[moved] = slot

    def search(
        self,
        query: NDArray[np.floating] | Sequence[float],
        k: int,
        allowed: Collection[int] | None = None,
    ) -> list[tuple[int, float]]:
        """The ``k`` most similar docs as ``(doc, cosine)``, best first, ties to the higher id.

        Only similarities above 0 count; ``allowed`` limits the results to those doc ids (a
        set, or an int64 array, matched in numpy).
        """
        q64 = np.asarray(query, dtype=np.float64).reshape(-1)
        self._check_dim(q64.size)
        norm = float(np.linalg.norm(q64))
        n = len(self._slot_of)
        if k <= 0 or n == 0 or not np.isfinite(norm) or norm == 0.0:
            return []
        q = (q64 / norm).astype(np.float32)
        if allowed is None:
            slots = None
            sims = (self._matrix[:n] @ q) * self._inv_norm[:n]
        else:
            if isinstance(allowed, np.ndarray):
                picked = np.flatnonzero(np.isin(self._docs[:n], allowed))
            else:
                slot_of = self._slot_of
                picked = np.fromiter((slot_of[d] for d in allowed if d in slot_of), np.int64)
            if picked.size == 0:
                return []
            if picked.size < _ALLOWED_SHARE * n:
                slots = np.unique(picked)
                sims = (self._matrix[slots] @ q) * self._inv_norm[slots]
            else:
                mask = np.zeros(n, np.bool_)
                mask[picked] = True
                slots = np.flatnonzero(mask)
                sims = (self._matrix[:n] @ q)[slots] * self._inv_norm[slots]
        slack = self._slack
        hits = np.flatnonzero(sims > -slack)
        if hits.size > k:
            # The k best in float32, and whatever float64 might still rank with them.
            kth = float(sims[hits[np.argpartition(-sims[hits], k - 1)[:k]]].min())
            hits = hits[sims[hits] >= kth - 2 * slack]
        rows = hits if slots is None else slots[hits]
        exact = self._matrix[rows].astype(np.float64)
        lengths = np.sqrt((exact * exact).sum(axis=1))
        dots = (exact * q64).sum(axis=1)
        keep = (lengths > 0) & (dots > 0)
        rows, scores = rows[keep], dots[keep] / (lengths[keep] * norm)
        docs = self._docs[rows]
        order = order_by_score(docs, scores)[:k]
        return list(zip(docs[order].tolist(), scores[order].tolist(), strict=True))

    def export_state(self) -> dict[str, NDArray[Any]]:
        """The doc ids, rows and inverse norms (trimmed); ``from_state`` takes them back."""
        n = len(self._slot_of)
        return {"docs": self._docs[:n], "matrix": self._matrix[:n], "inv_norm": self._inv_norm[:n]}

    @classmethod
    def from_state(cls, arrays: dict[str, NDArray[Any]]) -> VectorIndex:
        matrix = np.ascontiguousarray(arrays["matrix"], dtype=np.float32)
        docs = arrays["docs"].astype(np.int64)
        inv_norm = arrays["inv_norm"].astype(np.float32)
        if matrix.ndim != 2 or not len(docs) == len(inv_norm) == matrix.shape[0]:
            raise InputError("vector snapshot: arrays of different lengths")
        index = cls(matrix.shape[1])
        index._reserve(len(docs) + (len(docs) >> 3) + 16)  # room to grow without a copy soon
        n = len(docs)
        index._matrix[:n], index._docs[:n], index._inv_norm[:n] = matrix, docs, inv_norm
        index._slot_of = dict(zip(docs.tolist(), range(len(docs)), strict=True))
        if len(index._slot_of) != len(docs):
            raise InputError("vector snapshot: a doc id appears twice")
        return index

    def memory_bytes(self) -> int:
        """Approximate bytes held: the matrix, the doc ids and the id table (not its keys)."""
        arrays = self._matrix.nbytes + self._inv_norm.nbytes + self._docs.nbytes
        return arrays + sys.getsizeof(self._slot_of)

    def _check_dim(self, got: int) -> None:
        if got != self._dim:
            raise InputError(f"vector has {got} dimensions, this index holds {self._dim}")

    def _rows(self, rows: F32) -> tuple[F32, F32]:
        """``rows`` checked, with their inverse L2 norms (0 for an all-zero row: never found)."""
        self._check_dim(rows.shape[1])
        if not np.isfinite(rows).all():
            raise InputError("vector holds a NaN or infinite value")
        norms = np.sqrt((rows.astype(np.float64) ** 2).sum(axis=1))
        inv = np.zeros(norms.size, np.float32)
        np.divide(1.0, norms, out=inv, where=norms > 0, casting="unsafe")
        return rows, inv

    def _reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows, doubling the capacity."""
        cap = self._matrix.shape[0]
        if rows <= cap:
            return
        new_cap = max(rows, 2 * cap, 16)
        matrix = np.zeros((new_cap, self._dim), np.float32)
        matrix[:cap] = self._matrix
        docs = np.zeros(new_cap, np.int64)
        docs[:cap] = self._docs
        inv_norm = np.zeros(new_cap, np.float32)
        inv_norm[:cap] = self._inv_norm
        self._matrix, self._docs, self._inv_norm = matrix, docs, inv_norm


__all__ = ["VectorIndex"]
