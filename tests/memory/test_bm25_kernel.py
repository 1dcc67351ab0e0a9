"""The compiled MaxScore loop (``bm25_kernel``): when it is used, and that it answers as the
numpy loop does. ``test_bm25.py`` runs every exactness test against both loops."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path

import numba  # type: ignore[import-untyped]
import pytest

from chazbot.memory import bm25_kernel
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.bm25_tuning import SearchTuning
from tests.memory.test_bm25 import assert_same, reference_top


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[bm25_kernel._State]:
    """A kernel module that has not compiled anything in this process yet."""
    state = bm25_kernel._State()
    monkeypatch.setattr(bm25_kernel, "_state", state)
    yield state
    if state.thread is not None:
        state.thread.join(120)


def zipf_docs(n_docs: int, seed: int) -> dict[int, list[str]]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)]
    weights = [1.0 / (i + 1) for i in range(len(vocab))]
    return {d: rng.choices(vocab, weights, k=rng.randint(3, 25)) for d in range(n_docs)}


def test_the_loop_compiles_in_the_background_once_an_index_is_big(
    fresh_state: bm25_kernel._State, tmp_path: Path
) -> None:
    bm25_kernel.use_cache_dir(tmp_path / "compiled")
    assert bm25_kernel.loop(bm25_kernel.MIN_DOCS - 1) is None
    small = BM25Index()
    small.add_many(zipf_docs(50, seed=2).items())
    want = small.search(["w0", "w1"], 5)
    assert not fresh_state.started  # a small index never starts it
    # an index passed a lower threshold (``SearchTuning.compiled_from``) starts it
    eager = BM25Index(tuning=SearchTuning(compiled_from=50))
    eager.add_many(zipf_docs(50, seed=2).items())
    assert eager.search(["w0", "w1"], 5) == want
    assert fresh_state.thread is not None  # it started compiling
    fresh_state.thread.join(120)
    compiled = bm25_kernel.loop(1)  # compiled: now every index uses it
    assert compiled is not None
    assert any((tmp_path / "compiled").rglob("*.nbi")), "the compiled code is kept on disk"
    with bm25_kernel.numpy_only():
        assert bm25_kernel.loop(bm25_kernel.MIN_DOCS) is None


def test_a_damaged_cache_is_compiled_afresh(
    fresh_state: bm25_kernel._State, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache file numba cannot read (disk damage, a half-written file) must not leave the
    process without the kernel: it is compiled again and the damaged cache removed."""
    cache = tmp_path / "compiled"
    bm25_kernel.use_cache_dir(cache)
    assert bm25_kernel.compile_now() is not None
    index_files = list(cache.rglob("*.nbi"))
    assert index_files
    for path in index_files:
        path.write_text("garbage\n")
    again = bm25_kernel._State()
    again.cache_dir = cache
    monkeypatch.setattr(bm25_kernel, "_state", again)
    compiled = bm25_kernel.compile_now()
    assert compiled is not None
    index = BM25Index()
    index.add_many(zipf_docs(300, seed=1).items())
    with bm25_kernel.numpy_only():
        want = index.search(["w0", "w7"], 5)
    assert index.search(["w0", "w7"], 5) == want
    assert not any(p.exists() and p.read_text() == "garbage\n" for p in index_files)


def test_no_jit_means_the_numpy_loop(
    fresh_state: bm25_kernel._State, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(numba.config, "DISABLE_JIT", 1)
    assert bm25_kernel.compile_now() is None
    assert bm25_kernel.loop(bm25_kernel.MIN_DOCS) is None


def test_a_big_index_answers_alike_with_either_loop() -> None:
    """Above MIN_DOCS the compiled loop is used on its own; its answers are the numpy
    loop's, scores equal to the bit, after removals, with filters and a tie rule."""
    assert bm25_kernel.compile_now() is not None
    docs = zipf_docs(bm25_kernel.MIN_DOCS + 5000, seed=3)
    index = BM25Index()
    index.add_many(docs.items())
    for doc in range(0, len(docs), 11):
        index.remove(doc)
    assert bm25_kernel.loop(len(index)) is not None
    rng = random.Random(4)
    allowed = set(range(0, len(docs), 2))
    cases = []
    for _ in range(300):
        tokens = rng.choice(list(docs.values()))
        query = rng.sample(tokens, min(len(tokens), rng.randint(1, 4)))
        cases.append((query, rng.choice([1, 10, 40]), rng.choice([None, allowed])))

    def tiebreak(doc: int) -> tuple[int]:
        return (doc % 5,)

    def run() -> list[list[tuple[int, float]]]:
        out = []
        for query, k, only in cases:
            out.append(index.search(query, k, only))
            out.append(index.search(query, k, only, tiebreak=tiebreak))
        return out

    compiled = run()
    with bm25_kernel.numpy_only():
        assert run() == compiled
    live = {d: t for d, t in docs.items() if d % 11}
    for query, k, only in cases[:20]:
        assert_same(index.search(query, k, only), reference_top(live, query, k, only))


def test_large_allowed_sets_filter_inside_the_loop() -> None:
    assert bm25_kernel.compile_now() is not None
    # any size compiled; sets above 4 docs: a slot mask
    tuning = SearchTuning(direct_allowed=4, compiled_from=0)
    rng = random.Random(5)
    docs = zipf_docs(400, seed=6)
    index = BM25Index(tuning=tuning)
    index.add_many(docs.items())
    for _ in range(200):
        query = rng.sample(rng.choice(list(docs.values())), 2)
        allowed = set(rng.sample(range(450), rng.randint(5, 450)))
        k = rng.randint(1, 20)
        assert_same(index.search(query, k, allowed), reference_top(docs, query, k, allowed))


def test_searches_on_many_threads_get_their_own_answers() -> None:
    """The compiled loop runs without the GIL: searches of one index from several threads at
    once must not share any state (its cursors, heap and results are its own)."""
    assert bm25_kernel.compile_now() is not None
    docs = zipf_docs(20_000, seed=8)
    index = BM25Index(tuning=SearchTuning(compiled_from=0))
    index.add_many(docs.items())
    rng = random.Random(9)
    queries = [rng.sample(rng.choice(list(docs.values())), 3) for _ in range(200)]
    want = [index.search(q, 10) for q in queries]
    failures: list[str] = []

    def worker(offset: int) -> None:
        for i in range(len(queries)):
            j = (i + offset) % len(queries)
            if index.search(queries[j], 10) != want[j]:
                failures.append(f"query {j} on thread {offset}")

    threads = [threading.Thread(target=worker, args=(n * 50,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
