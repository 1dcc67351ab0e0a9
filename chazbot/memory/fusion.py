"""Reciprocal Rank Fusion (SPEC §3) and the one tie rule every ranked list follows.

Scores that differ only by float rounding count as equal: two documents with mathematically
equal scores may come out one ulp apart depending on the order of the arithmetic, and the tie
rule (newer first, then key, then higher doc id) must not depend on that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

# Scores closer than this (relative, chained from the higher one) are a tie.
TIE_REL_TOL = 1e-12


def tie_groups(
    scores: Sequence[float] | NDArray[np.floating], rel_tol: float = TIE_REL_TOL
) -> NDArray[np.int64]:
    """Group numbers for scores sorted descending: equal numbers mean a tie.

    A new group starts where a score falls more than ``rel_tol`` (relative) below the one before.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return np.zeros(0, np.int64)
    gaps = (s[:-1] - s[1:]) > rel_tol * np.abs(s[:-1])
    return np.concatenate((np.zeros(1, np.int64), np.cumsum(gaps, dtype=np.int64)))


def order_by_score(
    docs: NDArray[np.integer], scores: NDArray[np.floating], rel_tol: float = TIE_REL_TOL
) -> NDArray[np.intp]:
    """Indices that sort by score descending, ties (see ``tie_groups``) by higher doc id."""
    first = np.lexsort((-docs.astype(np.int64), -scores.astype(np.float64)))
    groups = tie_groups(scores[first], rel_tol)
    second = np.lexsort((-docs[first].astype(np.int64), groups))
    return first[second]


def ranked(
    scored: Iterable[tuple[int, float]],
    limit: int,
    tiebreak: Callable[[int], tuple[Any, ...]] | None = None,
    rel_tol: float = TIE_REL_TOL,
) -> list[tuple[int, float]]:
    """The ``limit`` best ``(doc, score)`` pairs: score descending, ties (see ``tie_groups``)
    by ``tiebreak(doc)`` ascending, then by higher doc id. Plain Python, for short lists."""
    by_score = sorted(scored, key=lambda item: (-item[1], -item[0]))
    keyed: list[tuple[int, tuple[Any, ...], int, int, float]] = []
    group = 0
    previous = 0.0
    for i, (doc, score) in enumerate(by_score):
        if i and previous - score > rel_tol * abs(previous):
            group += 1
        previous = score
        keyed.append((group, tiebreak(doc) if tiebreak else (), -doc, doc, score))
    keyed.sort(key=lambda item: item[:3])
    return [(doc, score) for *_, doc, score in keyed[: max(limit, 0)]]


def rrf(rankings: Sequence[Sequence[int]], k: int = 60) -> dict[int, float]:
    """Fused scores: each list adds ``1 / (k + rank)`` to each of its docs, rank from 1.

    A doc listed twice in one list counts at its best rank there.
    """
    fused: dict[int, float] = {}
    for ranking in rankings:
        seen: set[int] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen:
                continue
            seen.add(doc)
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (k + rank)
    return fused


def top_fused(
    rankings: Sequence[Sequence[int]],
    limit: int,
    tiebreak: Callable[[int], tuple[Any, ...]] | None = None,
    k: int = 60,
) -> list[tuple[int, float]]:
    """The ``limit`` best docs by RRF score, ties by ``tiebreak(doc)`` then higher doc id.

    ``tiebreak`` returns a key sorted ascending (the memory layer passes "newer first, then
    key"). Docs found by only one list still surface.
    """
    if limit <= 0:
        return []
    return ranked(rrf(rankings, k).items(), limit, tiebreak)


__all__ = ["TIE_REL_TOL", "order_by_score", "ranked", "rrf", "tie_groups", "top_fused"]
