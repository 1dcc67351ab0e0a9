"""Reciprocal Rank Fusion and the shared tie rule."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chazbot.memory.fusion import order_by_score, rrf, tie_groups, top_fused


def test_rrf_values() -> None:
    fused = rrf([[10, 20, 30], [30, 10]])
    assert fused == {
        10: pytest.approx(1 / 61 + 1 / 62),
        20: pytest.approx(1 / 62),
        30: pytest.approx(1 / 63 + 1 / 61),
    }
    assert rrf([[1, 2]], k=0) == {1: 1.0, 2: 0.5}
    assert rrf([]) == {} and rrf([[], []]) == {}


def test_rrf_counts_a_doc_once_per_list_at_its_best_rank() -> None:
    assert rrf([[5, 5, 6]]) == {5: pytest.approx(1 / 61), 6: pytest.approx(1 / 63)}


def test_items_in_one_list_still_surface() -> None:
    hits = top_fused([[1, 2], [3]], limit=10)
    assert {d for d, _ in hits} == {1, 2, 3}
    [(doc, score)] = top_fused([[], [7, 8]], limit=1)
    assert doc == 7 and score == pytest.approx(1 / 61)


def test_fused_order_then_tiebreak_then_higher_doc() -> None:
    rankings = [[1, 2, 3], [4, 5, 6]]  # 1 and 4 tie, 2 and 5 tie, 3 and 6 tie
    assert [d for d, _ in top_fused(rankings, 10)] == [4, 1, 5, 2, 6, 3]
    newest_first = {1: 9, 2: 1, 3: 5, 4: 3, 5: 7, 6: 5}
    hits = top_fused(rankings, 10, tiebreak=lambda d: (-newest_first[d],))
    assert [d for d, _ in hits] == [1, 4, 5, 2, 6, 3]  # 3 and 6 tie on the key too: 6 first
    assert [d for d, _ in top_fused(rankings, 3, tiebreak=lambda d: (-newest_first[d],))] == [
        1,
        4,
        5,
    ]


def test_tiebreak_only_breaks_ties() -> None:
    hits = top_fused([[1, 2], [2]], 10, tiebreak=lambda d: (-d,))
    assert [d for d, _ in hits] == [2, 1]
    hits = top_fused([[1, 2], [2]], 10, tiebreak=lambda d: (d,))
    assert [d for d, _ in hits] == [2, 1]


def test_nothing_to_fuse() -> None:
    assert top_fused([], 10) == []
    assert top_fused([[1, 2]], 0) == []


@given(
    st.lists(st.lists(st.integers(0, 20), max_size=10, unique=True), max_size=4),
    st.integers(1, 25),
)
def test_top_fused_is_deterministic_and_sorted(rankings: list[list[int]], limit: int) -> None:
    hits = top_fused(rankings, limit, tiebreak=lambda d: (d % 3,))
    again = top_fused(list(reversed(rankings)), limit, tiebreak=lambda d: (d % 3,))
    assert [d for d, _ in again] == [d for d, _ in hits]  # list order only moves float sums
    assert [s for _, s in again] == pytest.approx([s for _, s in hits], rel=1e-12)
    fused = rrf(rankings)
    assert len(hits) == min(limit, len(fused))
    for (d1, s1), (d2, s2) in itertools.pairwise(hits):
        assert s1 >= s2 - 1e-12
        if s1 == pytest.approx(s2, rel=1e-12):
            assert (d1 % 3, -d1) < (d2 % 3, -d2)
    for doc, score in hits:
        assert score == pytest.approx(fused[doc])
    if hits:  # nothing left out scores better than the last one returned
        worst = hits[-1][1]
        chosen = {d for d, _ in hits}
        assert all(s <= worst * (1 + 1e-12) for d, s in fused.items() if d not in chosen)


def test_tie_groups_chain_near_equal_scores() -> None:
    assert tie_groups([3.0, 3.0, 2.0, 2.0 - 1e-15, 1.0]).tolist() == [0, 0, 1, 1, 2]
    assert tie_groups([]).tolist() == []
    assert tie_groups([1.0, 0.9999], rel_tol=1e-3).tolist() == [0, 0]


def test_order_by_score_puts_higher_doc_first_on_ties() -> None:
    docs = np.array([1, 7, 3, 9, 5])
    scores = np.array([0.5, 0.5, 0.9, 0.1, 0.5 + 1e-16])
    order = order_by_score(docs, scores)
    assert docs[order].tolist() == [3, 7, 5, 1, 9]
