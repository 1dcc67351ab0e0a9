"""VectorIndex: cosine top-k against brute force, and its bookkeeping."""

from __future__ import annotations

import itertools
from collections.abc import Collection

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from chazbot.errors import InputError
from chazbot.memory.fusion import tie_groups
from chazbot.memory.vectors import VectorIndex


def brute_force(
    vectors: dict[int, NDArray[np.float64]],
    query: NDArray[np.float64],
    k: int,
    allowed: Collection[int] | None = None,
) -> list[tuple[int, float]]:
    """Cosine in float64 of the vectors as stored (float32), > 0 only, best first; scores equal
    to 1e-9 tie, higher doc id first."""
    qn = float(np.linalg.norm(query))
    scores = {}
    for doc, original in vectors.items():
        vec = original.astype(np.float32).astype(np.float64)
        vn = float(np.linalg.norm(vec))
        if vn == 0 or qn == 0 or (allowed is not None and doc not in allowed):
            continue
        sim = float(vec @ query) / (vn * qn)
        if sim > 0:
            scores[doc] = sim
    ranked = sorted(scores.items(), key=lambda item: (-item[1], -item[0]))
    groups = tie_groups([s for _, s in ranked], rel_tol=1e-9).tolist()
    ranked = [
        item for _, item in sorted(zip(groups, ranked, strict=True), key=lambda g: (g[0], -g[1][0]))
    ]
    return ranked[:k]


def test_cosine_top_k_matches_brute_force() -> None:
    rng = np.random.default_rng(1)
    vectors = {int(d): rng.normal(size=16) for d in rng.choice(10_000, 300, replace=False)}
    index = VectorIndex(16)
    for doc, vec in vectors.items():
        index.add(doc, vec)
    for _ in range(50):
        query = rng.normal(size=16)
        k = int(rng.integers(1, 40))
        got = index.search(query, k)
        want = brute_force(vectors, query, k)
        assert [d for d, _ in got] == [d for d, _ in want]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_only_positive_similarity_counts() -> None:
    index = VectorIndex(2)
    index.add(1, [1.0, 0.0])  # cos 1
    index.add(2, [0.0, 1.0])  # cos 0: not returned
    index.add(3, [-1.0, 0.5])  # negative: not returned
    index.add(4, [0.0, 0.0])  # no direction: never returned
    hits = index.search(np.array([1.0, 0.0]), 10)
    assert [d for d, _ in hits] == [1]
    assert hits[0][1] == pytest.approx(1.0)
    assert index.search([0.0, -1.0], 10) == []
    assert index.search([0.0, 0.0], 10) == []


def test_orthogonal_and_opposite_pairs_are_exactly_excluded() -> None:
    grid = [np.array(v, dtype=np.float64) for v in itertools.product(range(-2, 3), repeat=3)]
    vectors = dict(enumerate(grid))
    index = VectorIndex(3)
    index.add_many(vectors.items())
    for query in grid:
        got = index.search(query, len(grid))
        assert all(float(vectors[d] @ query) > 0 for d, _ in got)
        assert [d for d, _ in got] == [d for d, _ in brute_force(vectors, query, len(grid))]


def test_rows_are_normalised() -> None:
    index = VectorIndex(3)
    index.add(1, [10.0, 0.0, 0.0])
    index.add(2, [0.1, 0.1, 0.0])
    hits = dict(index.search([3.0, 0.0, 0.0], 10))
    assert hits[1] == pytest.approx(1.0)
    assert hits[2] == pytest.approx(1 / np.sqrt(2))


def test_remove_and_replace() -> None:
    rng = np.random.default_rng(2)
    vectors = {d: rng.normal(size=8) for d in range(50)}
    index = VectorIndex(8)
    index.add_many(vectors.items())
    for doc in (0, 49, 17, 17, 1000):  # first, last, middle, twice, absent
        index.remove(doc)
        vectors.pop(doc, None)
    index.add(5, -vectors[5])  # replace
    vectors[5] = -vectors[5]
    assert len(index) == len(vectors) == 47
    assert 17 not in index and 5 in index
    for _ in range(20):
        query = rng.normal(size=8)
        got = index.search(query, 100)
        want = brute_force(vectors, query, 100)
        assert [d for d, _ in got] == [d for d, _ in want]


def test_growth_keeps_every_row() -> None:
    index = VectorIndex(4)
    small = index.memory_bytes()
    for doc in range(1000):
        index.add(doc, [1.0, doc / 1000.0, 0.0, 0.0])
    assert len(index) == 1000
    assert index.memory_bytes() >= small + 1000 * 4 * 4
    hits = index.search([1.0, 1.0, 0.0, 0.0], 1000)
    assert len(hits) == 1000
    assert hits[0][0] == 999 and hits[-1][0] == 0


def test_ties_go_to_the_higher_doc_id() -> None:
    index = VectorIndex(3)
    for doc in (4, 8, 1, 6):
        index.add(doc, [1.0, 2.0, 3.0])
    index.add(2, [3.0, 2.0, 1.0])
    assert [d for d, _ in index.search([1.0, 2.0, 3.0], 3)] == [8, 6, 4]
    assert [d for d, _ in index.search([1.0, 2.0, 3.0], 10, allowed={1, 2, 4})] == [4, 1, 2]


def test_allowed_restricts_results_both_ways() -> None:
    rng = np.random.default_rng(3)
    vectors = {d: rng.normal(size=8) for d in range(200)}
    index = VectorIndex(8)
    index.add_many(vectors.items())
    query = rng.normal(size=8)
    for allowed in ({3, 7, 150, 999}, set(range(0, 200, 2)) | {999}, set(range(200)), set()):
        want = brute_force(vectors, query, 15, allowed)
        assert [d for d, _ in index.search(query, 15, allowed)] == [d for d, _ in want]


def test_wrong_dimension_names_both() -> None:
    index = VectorIndex(384)
    with pytest.raises(InputError, match=r"\b3\b.*\b384\b"):
        index.add(1, [1.0, 2.0, 3.0])
    with pytest.raises(InputError, match=r"\b2\b.*\b384\b"):
        index.add_many([(1, np.ones(384)), (2, [1.0, 2.0])])
    assert len(index) == 0
    with pytest.raises(InputError, match=r"\b5\b.*\b384\b"):
        index.search(np.ones(5), 10)
    with pytest.raises(InputError):
        VectorIndex(0)


def test_non_finite_vectors_are_refused() -> None:
    index = VectorIndex(2)
    with pytest.raises(InputError, match="NaN"):
        index.add(1, [float("nan"), 1.0])
    with pytest.raises(InputError):
        index.add_many([(1, [float("inf"), 1.0])])
    assert len(index) == 0


def test_add_many_later_duplicates_win_and_replace_existing() -> None:
    index = VectorIndex(2)
    index.add(1, [1.0, 0.0])
    index.add_many([(2, [1.0, 0.0]), (1, [0.0, 1.0]), (2, [0.0, 1.0]), (3, [1.0, 1.0])])
    assert len(index) == 3
    assert [d for d, _ in index.search([0.0, 1.0], 2)] == [2, 1]
    assert index.dim == 2


def test_nothing_to_find() -> None:
    index = VectorIndex(2)
    assert index.search([1.0, 0.0], 5) == []
    index.add(1, [1.0, 0.0])
    assert index.search([1.0, 0.0], 0) == []
    assert index.search([1.0, 0.0], 5, allowed={2}) == []


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "remove"]),
            st.integers(0, 30),
            st.lists(st.integers(-3, 3), min_size=3, max_size=3),
        ),
        max_size=80,
    ),
    st.lists(st.integers(-3, 3), min_size=3, max_size=3),
    st.integers(1, 12),
)
def test_random_operations_match_brute_force(
    ops: list[tuple[str, int, list[int]]], query: list[int], k: int
) -> None:
    index = VectorIndex(3)
    vectors: dict[int, NDArray[np.float64]] = {}
    for op, doc, vec in ops:
        if op == "add":
            index.add(doc, vec)
            vectors[doc] = np.array(vec, dtype=np.float64)
        else:
            index.remove(doc)
            vectors.pop(doc, None)
    assert len(index) == len(vectors)
    got = index.search(np.array(query, dtype=np.float64), k)
    want = brute_force(vectors, np.array(query, dtype=np.float64), k)
    # Small integer vectors make many exact ties: then the higher doc id goes first.
    assert [d for d, _ in got] == [d for d, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
