"""Reciprocal Rank Fusion (SPEC §3) and the one tie rule every ranked list follows.

Scores that differ only by float rounding count as equal: two documents with mathematically
equal scores may come out one ulp apart depending on the order of the arithmetic, and the tie
rule (newer first, then key, then higher doc id) must not depend on that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
from numpy.typing import NDArray

_SCORE_THEN_DOC = itemgetter(1, 0)
"""A ``(doc, score)`` pair's sort key: score, then doc id (C-level, unlike a lambda)."""
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
    by ``tiebreak(doc)`` ascending, then by higher doc id. Plain Python, for short lists.

    ``tiebreak`` is called only for docs that tie another one within the kept places.
    """
    by_score = sorted(scored, key=_SCORE_THEN_DOC, reverse=True)  # both descending
    if limit <= 0 or not by_score:
        return []
    # Where each place starts a new tie group, up to the end of the group holding the last
    # kept place; when none ties, the order by score is the order (cheap: most lists).
    starts = [0]
    higher = by_score[0][1]
    for place in range(1, len(by_score)):
        score = by_score[place][1]
        if higher - score > rel_tol * abs(higher):
            if place >= limit:
                break
            starts.append(place)
        higher = score
    else:
        place = len(by_score)
    if len(starts) == place:
        return by_score[:limit]
    out: list[tuple[int, float]] = []
    for start, end in zip(starts, [*starts[1:], place], strict=True):
        group = by_score[start:end]
        if len(group) > 1:  # scores one ulp apart still tie: no score in this key
            if tiebreak is None:
                group.sort(key=lambda item: -item[0])
            else:
                group.sort(key=lambda item: (tiebreak(item[0]), -item[0]))
        out.extend(group)
    return out[:limit]


def rrf(
    rankings: Sequence[Sequence[int]], k: int = 60, weights: Sequence[float] | None = None
) -> dict[int, float]:
    """Fused scores: each list adds ``weight / (k + rank)`` to each of its docs, rank from 1
    (weight 1 unless ``weights`` says otherwise). A doc listed twice in one list counts at
    its best rank there.
    """
    fused: dict[int, float] = {}
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else float(weights[i])
        seen: set[int] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen:
                continue
            seen.add(doc)
            fused[doc] = fused.get(doc, 0.0) + weight / (k + rank)
    return fused


def top_fused(
    rankings: Sequence[Sequence[int]],
    limit: int,
    tiebreak: Callable[[int], tuple[Any, ...]] | None = None,
    k: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """The ``limit`` best docs by (weighted) RRF score, ties by ``tiebreak(doc)`` then higher
    doc id.

    ``tiebreak`` returns a key sorted ascending (the memory layer passes "newer first, then
    key"). Docs found by only one list still surface.
    """
    if limit <= 0:
        return []
    return ranked(rrf(rankings, k, weights).items(), limit, tiebreak)


__all__ = ["TIE_REL_TOL", "order_by_score", "ranked", "rrf", "tie_groups", "top_fused"]
