"""BM25Index against the SPEC check and a naive pure-Python reference."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chazbot.errors import InputError
from chazbot.memory import bm25_kernel
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.bm25_tuning import LayoutTuning, SearchTuning
from chazbot.memory.fusion import tie_groups
from chazbot.memory.tokenize import document_text, tokenize


@pytest.fixture(autouse=True, scope="module", params=["numpy", "compiled"])
def search_loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs with each MaxScore loop: numpy's, and numba's compiled one
    (``bm25_kernel``, used whatever the index size here)."""
    if request.param == "numpy":
        with bm25_kernel.numpy_only():
            yield "numpy"
        return
    assert bm25_kernel.compile_now() is not None, "numba (a dev dependency) did not compile"
    yield "compiled"


ANY_SIZE = SearchTuning(compiled_from=0)
"""Every index here takes the compiled loop (when the numpy one is not asked for)."""
TINY = SearchTuning(
    direct_allowed=4,
    compiled_from=0,
    layout=LayoutTuning(compact_min=3, dense_min=3, dense_share=4, dense_big=2, u16_max=2),
)
"""Size thresholds shrunk so tiny corpora take every code path: compaction, dense tf maps (and
their tf overflow marker), wide tf storage, and both ``allowed`` strategies (sets above 4
docs go through a slot mask)."""


# -- the naive reference ----------------------------------------------------------------------


def reference_scores(
    docs: Mapping[int, Sequence[str]], query: Sequence[str], k1: float = 1.5, b: float = 0.75
) -> dict[int, float]:
    """SPEC §3 BM25, written out with dicts and math.fsum; only positive scores."""
    n = len(docs)
    if n == 0:
        return {}
    avgdl = max(1.0, sum(len(t) for t in docs.values()) / n)
    df: Counter[str] = Counter()
    for tokens in docs.values():
        df.update(set(tokens))
    terms = list(dict.fromkeys(query))
    scores: dict[int, float] = {}
    for doc, tokens in docs.items():
        tf = Counter(tokens)
        dl = len(tokens)
        parts = []
        for term in terms:
            if tf[term]:
                idf = math.log((n - df[term] + 0.5) / (df[term] + 0.5) + 1.0)
                parts.append(idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * dl / avgdl)))
        score = math.fsum(parts)
        if score > 0:
            scores[doc] = score
    return scores


def reference_top(
    docs: Mapping[int, Sequence[str]],
    query: Sequence[str],
    k: int,
    allowed: Collection[int] | None = None,
) -> list[tuple[int, float]]:
    """Top k of the reference: score descending, equal scores by higher doc id."""
    scores = reference_scores(docs, query)
    if allowed is not None:
        scores = {d: s for d, s in scores.items() if d in allowed}
    ranked = sorted(scores.items(), key=lambda item: (-item[1], -item[0]))
    groups = tie_groups([s for _, s in ranked]).tolist()
    ranked = [
        item for _, item in sorted(zip(groups, ranked, strict=True), key=lambda g: (g[0], -g[1][0]))
    ]
    return ranked[: max(k, 0)]


def assert_same(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> None:
    assert [d for d, _ in got] == [d for d, _ in want]
    for (_, g), (_, w) in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=1e-9)


# -- the SPEC check ---------------------------------------------------------------------------


def spec_index() -> BM25Index:
    index = BM25Index(tuning=ANY_SIZE)
    rows = [
        (1, "ops_note_a", "deploy on monday"),
        (2, "ops_note_b", "deploy on friday"),
        (3, "ops_note_c", "weekly status"),
    ]
    for doc, key, value in rows:
        index.add(doc, tokenize(document_text(key, value, [])))
    return index


def test_spec_check_scores() -> None:
    hits = spec_index().search(tokenize("deploy friday"), 10)
    assert [doc for doc, _ in hits] == [2, 1]
    assert round(hits[0][1], 4) == 1.4057
    assert round(hits[1][1], 4) == 0.4554


def test_spec_check_with_bulk_build() -> None:
    index = BM25Index(tuning=ANY_SIZE)
    index.add_many(
        [
            (1, tokenize(document_text("ops_note_a", "deploy on monday", []))),
            (2, tokenize(document_text("ops_note_b", "deploy on friday", []))),
            (3, tokenize(document_text("ops_note_c", "weekly status", []))),
        ]
        * 30  # duplicates: the last one wins, and the batch is big enough for the bulk path
    )
    hits = index.search(["deploy", "friday"], 10)
    assert [(d, round(s, 4)) for d, s in hits] == [(2, 1.4057), (1, 0.4554)]


# -- unit behaviour ---------------------------------------------------------------------------


def test_duplicate_query_tokens_count_once() -> None:
    index = spec_index()
    assert index.search(["deploy", "friday", "friday", "deploy"], 10) == index.search(
        ["deploy", "friday"], 10
    )


def test_nothing_to_find() -> None:
    index = spec_index()
    assert index.search([], 10) == []
    assert index.search(["unknown"], 10) == []
    assert index.search(["deploy"], 0) == []
    assert index.search(["deploy"], 10, allowed=set()) == []
    assert index.search(["deploy"], 10, allowed={3, 99}) == []
    assert BM25Index(tuning=ANY_SIZE).search(["deploy"], 10) == []


def test_remove_updates_statistics_and_results() -> None:
    index = spec_index()
    index.remove(2)
    index.remove(2)  # absent: no-op
    index.remove(12345)
    assert 2 not in index and len(index) == 2
    assert_same(
        index.search(["deploy", "friday"], 10),
        reference_top(
            {1: ["ops", "note", "deploy", "on", "monday"], 3: ["ops", "note", "weekly", "status"]},
            ["deploy", "friday"],
            10,
        ),
    )
    index.remove(1)
    assert index.search(["deploy"], 10) == []


def test_add_replaces_existing_document() -> None:
    index = spec_index()
    index.add(1, ["weekly", "friday"])
    assert len(index) == 3
    hits = dict(index.search(["friday"], 10))
    assert set(hits) == {1, 2}
    assert index.search(["monday"], 10) == []


def test_empty_documents_count_in_n_and_avgdl() -> None:
    index = BM25Index(tuning=ANY_SIZE)
    docs: dict[int, Sequence[str]] = {1: ["alpha", "beta"], 2: [], 3: [], 4: ["beta"]}
    for doc, tokens in docs.items():
        index.add(doc, tokens)
    assert len(index) == 4
    assert_same(index.search(["alpha", "beta"], 10), reference_top(docs, ["alpha", "beta"], 10))


def test_large_and_sparse_doc_ids() -> None:
    index = BM25Index(tuning=ANY_SIZE)
    docs = {2**62: ["alpha"], 7: ["alpha", "alpha"], 10**12: ["beta", "alpha"]}
    index.add_many(docs.items())
    assert set(docs) <= {d for d, _ in index.search(["alpha"], 10)}
    assert_same(index.search(["alpha"], 10), reference_top(docs, ["alpha"], 10))


def test_negative_doc_id_is_an_input_error() -> None:
    with pytest.raises(InputError, match="non-negative"):
        BM25Index(tuning=ANY_SIZE).add(-1, ["alpha"])
    with pytest.raises(InputError, match="non-negative"):
        BM25Index(tuning=ANY_SIZE).add_many([(-5, ["alpha"])])


def test_ties_go_to_the_higher_doc_id() -> None:
    index = BM25Index(tuning=ANY_SIZE)
    for doc in (5, 1, 9, 3):
        index.add(doc, ["same", "text"])
    index.add(4, ["other"])
    assert [d for d, _ in index.search(["same"], 3)] == [9, 5, 3]
    assert [d for d, _ in index.search(["same"], 10, allowed={1, 3, 4})] == [3, 1]


def test_mathematically_equal_scores_tie_despite_rounding() -> None:
    # tf=1 in a doc of length x scores like tf=2 in a doc of length avgdl/3 + 2x; with avgdl 6
    # that is (1, 2) against (2, 6). Float arithmetic may differ by an ulp; the tie rule holds.
    docs: dict[int, Sequence[str]] = {
        10: ["t", "pad"],  # tf 1, dl 2
        3: ["t", "t", "p1", "p2", "p3", "p4"],  # tf 2, dl 6
        4: ["q"] * 10,  # makes avgdl = 18 / 3 = 6
    }
    index = BM25Index(tuning=ANY_SIZE)
    index.add_many(docs.items())
    hits = index.search(["t"], 10)
    assert [d for d, _ in hits] == [10, 3]
    assert hits[0][1] == pytest.approx(hits[1][1], rel=1e-12)


def test_pruning_keeps_a_document_that_ties_the_threshold() -> None:
    # Docs 0 and 2 score the same for this query; 2 must win the tie although the pruning
    # bound of the remaining terms is exactly what 2 still needs (found by mutation testing).
    docs: dict[int, Sequence[str]] = {0: ["a", "b"], 1: ["c", "d", "d", "b"], 2: ["a", "c"]}
    index = BM25Index(tuning=ANY_SIZE)
    index.add_many(docs.items())
    assert_same(index.search(["a", "b", "c"], 1), reference_top(docs, ["a", "b", "c"], 1))
    assert index.search(["a", "b", "c"], 1)[0][0] == 2


def test_huge_tf_switches_tf_storage() -> None:
    index = BM25Index(tuning=ANY_SIZE)
    docs: dict[int, Sequence[str]] = {1: ["big"] * 70_000 + ["x"], 2: ["big", "x"], 3: ["x"]}
    for doc, tokens in docs.items():
        index.add(doc, tokens)
    assert_same(index.search(["big", "x"], 10), reference_top(docs, ["big", "x"], 10))
    bulk = BM25Index(tuning=ANY_SIZE)
    bulk.add_many(list(docs.items()) * 30)
    assert_same(bulk.search(["big", "x"], 10), reference_top(docs, ["big", "x"], 10))


def test_a_damaged_index_state_is_refused_not_searched() -> None:
    """A snapshot's arrays are checked before any search walks them (the compiled loop does
    not check bounds): each kind of damage is one InputError, and the intact state loads."""
    index = BM25Index(tuning=ANY_SIZE)
    index.add_many((d, [f"w{d % 7}", "common", f"v{d % 3}"]) for d in range(300))
    index.remove(5)
    vocab, arrays = index.export_state()
    assert BM25Index.from_state(vocab, arrays, ANY_SIZE).search(["w1", "v2"], 5) == index.search(
        ["w1", "v2"], 5
    )

    def damaged(name: str, change: Callable[[np.ndarray], None]) -> dict[str, np.ndarray]:
        copy = {k: v.copy() for k, v in arrays.items()}
        change(copy[name])
        return copy

    def grow(a: np.ndarray) -> None:
        a[0] += 10_000

    def negative(a: np.ndarray) -> None:
        a[-1] = -1

    def zero(a: np.ndarray) -> None:
        a[:] = 0

    def nan(a: np.ndarray) -> None:
        a[0] = np.nan

    cases = [
        damaged("t_len", grow),  # a region longer than its room
        damaged("t_start", grow),  # a region past the pool
        damaged("t_start", negative),
        damaged("p_slot", grow),  # a posting of a slot that does not exist
        damaged("p_slot", negative),
        damaged("f_term", grow),
        damaged("s_fwd", grow),
        damaged("t_df", grow),  # more documents than postings
        damaged("t_maxtf", zero),  # a bound that would divide by zero
        damaged("t_minratio", nan),
        damaged("counters", zero),  # k1 = 0
    ]
    short = {k: v.copy() for k, v in arrays.items()}
    short["s_len"] = short["s_len"][:-1]
    cases.append(short)
    for case in cases:
        with pytest.raises(InputError, match="index snapshot"):
            BM25Index.from_state(vocab, case)


def test_len_contains_and_memory() -> None:
    index = BM25Index(tuning=ANY_SIZE)
    empty = index.memory_bytes()
    index.add_many((d, [f"w{d % 7}", "common"]) for d in range(1000))
    assert len(index) == 1000 and 999 in index and 1000 not in index
    assert index.memory_bytes() > empty + 1000 * 8


def test_bulk_and_incremental_builds_agree_on_a_zipf_corpus() -> None:
    """A corpus big enough for the real thresholds: dense tf maps, pruning, compaction."""
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(3000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    docs: dict[int, list[str]] = {
        d * 3 + 1: rng.choices(vocab, weights, k=rng.randint(5, 30)) for d in range(6000)
    }
    bulk = BM25Index(tuning=ANY_SIZE)
    bulk.add_many(docs.items())
    incremental = BM25Index(tuning=ANY_SIZE)
    for doc, tokens in docs.items():
        incremental.add(doc, tokens)
    for doc in rng.sample(sorted(docs), 2500):  # enough removals to compact
        del docs[doc]
        bulk.remove(doc)
        incremental.remove(doc)
    for doc in range(2, 1500, 3):
        docs[doc] = rng.choices(vocab, weights, k=rng.randint(5, 30))
        incremental.add(doc, docs[doc])
    bulk.add_many((doc, docs[doc]) for doc in range(2, 1500, 3))
    assert len(bulk) == len(incremental) == len(docs)
    keys = sorted(docs)
    for _ in range(60):
        source = docs[rng.choice(keys)]
        query = rng.sample(source, min(3, len(source)))
        k = rng.choice([1, 10, 50])
        allowed = set(rng.sample(keys, 3000)) if rng.random() < 0.3 else None
        want = reference_top(docs, query, k, allowed)
        assert_same(bulk.search(query, k, allowed), want)
        assert_same(incremental.search(query, k, allowed), want)


# -- random operations against the reference --------------------------------------------------

VOCAB = ["common", "often", "mid", "rare", "x1", "x2", "x3", "x4", "x5", "x6"]
# A skewed choice of words, so that most documents share a few words (as in real text).
words = st.sampled_from(VOCAB[:2] * 6 + VOCAB[2:4] * 2 + VOCAB[4:])
token_lists = st.lists(words, max_size=8)
doc_ids = st.integers(min_value=0, max_value=40)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), doc_ids, token_lists),
        st.tuples(st.just("add"), doc_ids, token_lists),
        st.tuples(st.just("remove"), doc_ids),
        st.tuples(st.just("add_many"), st.lists(st.tuples(doc_ids, token_lists), max_size=80)),
        st.tuples(
            st.just("search"),
            st.lists(words, min_size=1, max_size=4),
            st.integers(min_value=1, max_value=20),
            st.none() | st.sets(doc_ids),
        ),
    ),
    max_size=60,
)


def run_against_reference(ops: list[tuple[object, ...]], tuning: SearchTuning = ANY_SIZE) -> None:
    index = BM25Index(tuning=tuning)
    docs: dict[int, Sequence[str]] = {}
    for op in ops:
        if op[0] == "add":
            _, doc, tokens = op
            assert isinstance(doc, int) and isinstance(tokens, list)
            index.add(doc, tokens)
            docs[doc] = tokens
        elif op[0] == "remove":
            _, doc = op
            assert isinstance(doc, int)
            index.remove(doc)
            docs.pop(doc, None)
        elif op[0] == "add_many":
            _, batch = op
            assert isinstance(batch, list)
            index.add_many(batch)
            docs.update(batch)
        else:
            _, query, k, allowed = op
            assert isinstance(query, list) and isinstance(k, int)
            assert allowed is None or isinstance(allowed, set)
            assert_same(index.search(query, k, allowed), reference_top(docs, query, k, allowed))
        assert len(index) == len(docs)
    for term in VOCAB:
        assert_same(index.search([term, "common"], 20), reference_top(docs, [term, "common"], 20))


@settings(max_examples=300, deadline=None)
@given(operations)
def test_random_operations_match_reference(ops: list[tuple[object, ...]]) -> None:
    run_against_reference(ops)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_random_operations_match_reference_with_tiny_thresholds(
    ops: list[tuple[object, ...]],
) -> None:
    run_against_reference(ops, TINY)


@pytest.mark.parametrize("tiny", [False, True], ids=["real-thresholds", "tiny-thresholds"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_seeded_random_workloads(seed: int, tiny: bool) -> None:
    """Longer mixed workloads than hypothesis builds: more documents, words and query terms."""
    rng = random.Random(seed)
    for _ in range(40):
        vocab = [f"w{i}" for i in range(rng.randint(1, 30))]
        index = BM25Index(tuning=TINY if tiny else ANY_SIZE)
        docs: dict[int, Sequence[str]] = {}
        for _ in range(rng.randint(1, 300)):
            r = rng.random()
            if r < 0.6:
                doc = rng.randint(0, 80)
                prefix = vocab[: rng.randint(1, len(vocab))]
                docs[doc] = [rng.choice(prefix) for _ in range(rng.randint(0, 8))]
                index.add(doc, docs[doc])
            elif r < 0.8:
                doc = rng.randint(0, 80)
                index.remove(doc)
                docs.pop(doc, None)
            elif r < 0.85:
                batch = [
                    (rng.randint(0, 200), [rng.choice(vocab) for _ in range(rng.randint(0, 8))])
                    for _ in range(rng.randint(0, 100))
                ]
                index.add_many(batch)
                docs.update(batch)
            else:
                query = [rng.choice(vocab) for _ in range(rng.randint(1, 4))]
                k = rng.randint(1, 20)
                allowed = None
                if rng.random() < 0.3:
                    allowed = set(rng.sample(range(210), rng.randint(0, 210)))
                assert_same(index.search(query, k, allowed), reference_top(docs, query, k, allowed))
        assert len(index) == len(docs)


def test_tiny_thresholds_reach_every_layout_path() -> None:
    """``TINY`` is passed in (``SearchTuning.layout``), not patched: a small index built with
    it keeps dense tf maps, widens its tf storage and compacts, where the defaults do none."""
    docs = {d: ["common"] * (d % 5 + 1) + [f"w{d % 3}"] for d in range(40)}
    for tuning, expected in ((TINY, True), (ANY_SIZE, False)):
        index = BM25Index(tuning=tuning)
        for doc, tokens in docs.items():
            index.add(doc, tokens)
        layout = index.postings
        assert bool(layout.dense) is expected
        assert (layout.p_tf.dtype == np.int32) is expected
        for doc in range(0, 40, 2):
            index.remove(doc)
        # 20 documents of 2 terms each removed: 40 dead postings, fewer once compacted
        assert (layout.p_dead < 40) is expected
        live = {d: t for d, t in docs.items() if d % 2}
        for query in (["common"], ["w1", "common"]):
            assert_same(index.search(query, 10), reference_top(live, query, 10))
