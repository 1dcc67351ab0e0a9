"""Retrieval core benchmark: chazbot's BM25Index and VectorIndex beside bm25s and rank-bm25.

Run (venv python; not a test, CI does not run it)::

    .venv/bin/python bench/recall.py                  # 10k, 100k and 1M documents, ~2-3 min
    .venv/bin/python bench/recall.py --quick          # 10k and 100k only
    .venv/bin/python bench/recall.py --sizes 10000,300000 --queries 500 --json out.json
    .venv/bin/python bench/recall.py --quick --numpy  # chazbot's numpy loop only (no numba)

Corpus (the one docs/measured.md's retrieval figures come from): documents of 5-30 tokens
drawn from a Zipf (1/rank) vocabulary of 500k words, so the commonest word is in ~69 % of
documents. Queries are 3 tokens from a random document, so most hold a very common word (the
worst case for postings).
Top-10 throughout. Per size and implementation it prints build time, query latency
(mean / p50 / p95 wall, and p50 thread CPU time, which the noise of a shared machine disturbs
less), top-10 agreement with an exact brute-force reference ("top10 %": share of the exact
top 10 matched by returned documents whose exact score reaches the exact 10th score, so another
pick among tied documents still agrees; "same %": lists identical, order included), index
memory, and for chazbot the cost of one incremental ``add`` (median, mean and thread-CPU mean
over ``--adds`` adds into the built index: the mean includes the amortised growth), of one
``remove``, and of one full compaction. chazbot's search runs its compiled loop
(``bm25_kernel``, numba; compiled before anything is timed) and, on the same queries, its
numpy loop ("same %": results identical to the compiled loop's). At 100k it also times
cosine search (beside the bare numpy ``matrix @ q`` + argpartition anchor) and hybrid recall:
BM25 and 384-d cosine (random-normal float32 vectors), 50 candidates each, fused by RRF into
10, as the memory view does, and the same cosine search over float16 or int8 storage
(memory, latency, and the share of the float32 top 10 each finds). The matrix product is
memory bound and shares BLAS threads with whatever else runs: on a busy 2-core machine
``OPENBLAS_NUM_THREADS=1`` gives the better p50.

Comparisons:

- bm25s (numba backend, one thread, ``method="lucene"``): its idf is ours,
  ln(1 + (N - df + 0.5) / (df + 0.5)); its tf part leaves out the constant factor (k1 + 1), so
  the ranking is the same. It scores in float32, so near ties can swap.
- rank-bm25 ``BM25Okapi``: idf ln((N - df + 0.5) / (df + 0.5)), floored at 0.25 x the mean
  idf for words in more than half the documents, hence its lower agreement. Its per-query cost
  is linear in N in Python, so it runs on ``--rank-bm25-queries`` queries and only up to
  ``--rank-bm25-max`` documents (at 1M its build alone takes minutes and GBs of dicts).

Each measurement is a function returning a ``Row``; add one for the full memory store by
writing another ``measure_*`` function and calling it from ``run_size``. The process freezes
the corpus objects out of the garbage collector (``gc.freeze``) so that collections of the
benchmark's own millions of lists do not land in the timings.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from chazbot.memory import bm25_kernel
from chazbot.memory.bm25 import BM25Index
from chazbot.memory.fusion import order_by_score, top_fused
from chazbot.memory.vectors import VectorIndex

K1, B = 1.5, 0.75
TOP = 10
VOCAB_SIZE = 500_000
ANCHOR_NOTE = "docs/measured.md"


# -- data --------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """Token lists (for the libraries), and the same as term ids in CSR form (for the reference)."""

    docs: list[list[str]]
    vocab: list[str]
    ids: NDArray[np.int64]  # all token ids, document after document
    offsets: NDArray[np.int64]  # document d is ids[offsets[d]:offsets[d + 1]]


def zipf_cdf(vocab_size: int) -> NDArray[np.float64]:
    weights = 1.0 / np.arange(1, vocab_size + 1)
    return np.cumsum(weights / weights.sum())


def make_corpus(n_docs: int, rng: np.random.Generator, vocab_size: int = VOCAB_SIZE) -> Corpus:
    """``n_docs`` documents of 5-30 tokens from a Zipf vocabulary."""
    vocab = [f"w{i}" for i in range(vocab_size)]
    lengths = rng.integers(5, 31, n_docs)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    ids = np.searchsorted(zipf_cdf(vocab_size), rng.random(int(offsets[-1])))
    ids = np.minimum(ids, vocab_size - 1).astype(np.int64)
    flat = [vocab[i] for i in ids.tolist()]
    bounds = offsets.tolist()
    docs = [flat[bounds[d] : bounds[d + 1]] for d in range(n_docs)]
    return Corpus(docs, vocab, ids, offsets)


def make_queries(corpus: Corpus, n_queries: int, rng: np.random.Generator) -> list[list[str]]:
    """3 tokens at distinct positions of a random document."""
    queries = []
    for d in rng.integers(0, len(corpus.docs), n_queries).tolist():
        doc = corpus.docs[d]
        queries.append([doc[i] for i in rng.choice(len(doc), 3, replace=False).tolist()])
    return queries


class ExactReference:
    """Brute-force BM25 (SPEC §3) over the whole corpus with dense numpy score arrays."""

    def __init__(self, corpus: Corpus) -> None:
        n = len(corpus.docs)
        lengths = np.diff(corpus.offsets)
        doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        keys = np.sort(corpus.ids * n + doc_of)
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        tf = np.diff(np.append(starts, keys.size))
        keys = keys[starts]
        term = keys // n
        self.doc = (keys - term * n).astype(np.int32)  # sorted by term, then by doc
        self.tf = tf.astype(np.float32)
        self.bounds = np.searchsorted(term, np.arange(len(corpus.vocab) + 1))
        self.term_id = {w: i for i, w in enumerate(corpus.vocab)}
        self.n = n
        self.norm = K1 * (1 - B + B * lengths / max(1.0, float(lengths.mean())))

    def terms(self, query: Sequence[str]) -> list[tuple[float, slice]]:
        """(idf, postings slice) of the distinct query words in the corpus."""
        out = []
        for tid in dict.fromkeys(self.term_id[w] for w in query if w in self.term_id):
            lo, hi = int(self.bounds[tid]), int(self.bounds[tid + 1])
            if hi > lo:
                df = hi - lo
                out.append((float(np.log((self.n - df + 0.5) / (df + 0.5) + 1.0)), slice(lo, hi)))
        return out

    def top(self, query: Sequence[str], k: int = TOP) -> tuple[list[int], float]:
        """The exact top k (tie rule applied) and the k-th score."""
        scores = np.zeros(self.n)
        for idf, sl in self.terms(query):
            docs, tf = self.doc[sl], self.tf[sl].astype(np.float64)
            scores[docs] += idf * tf * (K1 + 1) / (tf + self.norm[docs])
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            kth = np.partition(scores[hits], hits.size - k)[hits.size - k]
            hits = hits[scores[hits] >= kth * (1 - 1e-9)]
        order = order_by_score(hits, scores[hits])[:k]
        return hits[order].tolist(), float(scores[hits[order[-1]]]) if order.size else 0.0

    def scores_of(self, query: Sequence[str], docs: Sequence[int]) -> NDArray[np.float64]:
        """Exact scores of ``docs`` for ``query``."""
        wanted = np.asarray(docs, dtype=np.int64)
        scores = np.zeros(wanted.size)
        for idf, sl in self.terms(query):
            postings = self.doc[sl]
            pos = np.minimum(np.searchsorted(postings, wanted), postings.size - 1)
            tf = np.where(postings[pos] == wanted, self.tf[sl][pos], 0).astype(np.float64)
            scores += idf * tf * (K1 + 1) / (tf + self.norm[wanted])
        return scores


@dataclass
class Truth:
    """What the exact reference says about the first queries."""

    reference: ExactReference
    queries: list[list[str]]
    tops: list[list[int]]
    kth: list[float]


# -- measuring ---------------------------------------------------------------------------------


@dataclass
class Row:
    size: int
    impl: str
    build_s: float | None = None
    mean_ms: float | None = None
    p50_ms: float | None = None
    p95_ms: float | None = None
    cpu_p50_ms: float | None = None
    agree_pct: float | None = None
    same_pct: float | None = None
    memory_mb: float | None = None
    add_p50_us: float | None = None
    add_mean_us: float | None = None
    queries: int = 0
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Timings:
    wall_ms: list[float]
    cpu_ms: list[float]
    results: list[Any]


def time_queries(run: Callable[[Any], Any], queries: Sequence[Any]) -> Timings:
    """Wall and thread-CPU milliseconds per query, and the results."""
    wall: list[float] = []
    cpu: list[float] = []
    results: list[Any] = []
    for query in queries:
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        results.append(run(query))
        w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        wall.append((w1 - w0) / 1e6)
        cpu.append((c1 - c0) / 1e6)
    return Timings(wall, cpu, results)


def fill_latency(row: Row, timings: Timings) -> None:
    wall, cpu = timings.wall_ms, timings.cpu_ms
    row.queries = len(wall)
    row.mean_ms = statistics.fmean(wall)
    row.p50_ms = float(np.percentile(wall, 50))
    row.p95_ms = float(np.percentile(wall, 95))
    row.cpu_p50_ms = float(np.percentile(cpu, 50))


def fill_agreement(row: Row, got: Sequence[Sequence[int]], truth: Truth) -> None:
    """``agree``: share of the exact top 10 matched by documents scoring at least the exact 10th
    score (so a different pick among tied documents still agrees); ``same``: identical lists."""
    shares, same = [], []
    for query, docs, want, kth in zip(truth.queries, got, truth.tops, truth.kth, strict=False):
        if not want:
            continue
        exact = truth.reference.scores_of(query, list(docs)[: len(want)])
        shares.append(min(len(want), int((exact >= kth * (1 - 1e-6)).sum())) / len(want))
        same.append(list(docs) == want)
    row.agree_pct = 100.0 * statistics.fmean(shares) if shares else None
    row.same_pct = 100.0 * statistics.fmean(same) if same else None


def measure_chazbot_bm25(
    corpus: Corpus,
    queries: Sequence[list[str]],
    truth: Truth,
    adds: int,
    rng: np.random.Generator,
) -> tuple[list[Row], BM25Index]:
    """Bulk build, query latency, agreement, memory, and incremental add cost; the numpy
    loop's latency beside the compiled one's when numba compiled it."""
    row = Row(len(corpus.docs), "chazbot BM25Index")
    rows = [row]
    index = BM25Index(K1, B)
    t0 = time.perf_counter()
    index.add_many(enumerate(corpus.docs))
    row.build_s = time.perf_counter() - t0
    row.memory_mb = index.memory_bytes() / 1e6
    for query in queries[:20]:
        index.search(query, TOP)
    timings = time_queries(lambda q: index.search(q, TOP), queries)
    fill_latency(row, timings)
    fill_agreement(row, [[d for d, _ in r] for r in timings.results], truth)
    if bm25_kernel.loop(len(index)) is not None:
        row.impl += ", compiled"
        with bm25_kernel.numpy_only():
            numpy_row = Row(len(corpus.docs), "chazbot BM25Index, numpy loop")
            plain = time_queries(lambda q: index.search(q, TOP), queries)
        fill_latency(numpy_row, plain)
        numpy_row.same_pct = 100.0 * statistics.fmean(
            a == b for a, b in zip(plain.results, timings.results, strict=True)
        )
        numpy_row.note = "same % = results identical to the compiled loop's"
        rows.append(numpy_row)
    if adds:
        row.extra.update(measure_adds(index, corpus, adds, rng))
        row.add_p50_us, row.add_mean_us = row.extra["add_p50_us"], row.extra["add_mean_us"]
    row.extra["compact_s"] = measure_compaction(index)
    row.note = f"compaction {row.extra['compact_s']:.2f} s"
    if "remove_p50_us" in row.extra:
        row.note += f"; remove p50 {row.extra['remove_p50_us']:.1f} µs"
    return rows, index


def measure_adds(
    index: BM25Index, corpus: Corpus, adds: int, rng: np.random.Generator
) -> dict[str, float]:
    """µs of ``add`` for new documents (wall median and mean, thread CPU mean), then of
    ``remove`` for the same documents (wall median)."""
    fresh = make_corpus(adds, rng, len(corpus.vocab)).docs
    first = len(corpus.docs)
    add_ns, add_cpu_ns = [], []
    for i, tokens in enumerate(fresh):
        c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
        index.add(first + i, tokens)
        t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
        add_ns.append(t1 - t0)
        add_cpu_ns.append(c1 - c0)
    remove_ns = []
    for i in range(adds):
        t0 = time.perf_counter_ns()
        index.remove(first + i)
        remove_ns.append(time.perf_counter_ns() - t0)
    return {
        "add_p50_us": statistics.median(add_ns) / 1e3,
        "add_mean_us": statistics.fmean(add_ns) / 1e3,
        "add_cpu_mean_us": statistics.fmean(add_cpu_ns) / 1e3,
        "remove_p50_us": statistics.median(remove_ns) / 1e3,
    }


def measure_compaction(index: BM25Index) -> float:
    """Seconds of one full compaction (what a remove costs once per quarter of the index
    removed). Calls the private ``_rebuild``: there is no public way to force one."""
    t0 = time.perf_counter()
    index.postings._rebuild()
    return time.perf_counter() - t0


def measure_bm25s(corpus: Corpus, queries: Sequence[list[str]], truth: Truth) -> Row:
    """bm25s with the numba backend, one query per call on one thread."""
    import bm25s

    row = Row(len(corpus.docs), "bm25s numba", note="full rebuild to add a document")
    retriever = bm25s.BM25(k1=K1, b=B, method="lucene", backend="numba")
    t0 = time.perf_counter()
    retriever.index(corpus.docs, show_progress=False)
    row.build_s = time.perf_counter() - t0
    scores = retriever.scores
    row.memory_mb = sum(scores[name].nbytes for name in ("data", "indices", "indptr")) / 1e6

    def run(query: list[str]) -> list[int]:
        docs, _ = retriever.retrieve([query], k=TOP, show_progress=False, n_threads=1)
        return [int(d) for d in docs[0]]

    for query in queries[:20]:  # compiles the numba functions
        run(query)
    timings = time_queries(run, queries)
    fill_latency(row, timings)
    fill_agreement(row, timings.results, truth)
    return row


def measure_rank_bm25(corpus: Corpus, queries: Sequence[list[str]], truth: Truth) -> Row:
    """rank-bm25's BM25Okapi: scores every document in Python/numpy per query."""
    from rank_bm25 import BM25Okapi

    row = Row(len(corpus.docs), "rank-bm25 BM25Okapi", note="full rebuild to add a document")
    t0 = time.perf_counter()
    okapi = BM25Okapi(corpus.docs, k1=K1, b=B)
    row.build_s = time.perf_counter() - t0

    def run(query: list[str]) -> list[int]:
        scores = okapi.get_scores(query)
        top = np.argpartition(-scores, TOP)[:TOP]
        top = top[scores[top] > 0]
        best: list[int] = top[np.lexsort((-top, -scores[top]))].tolist()
        return best

    timings = time_queries(run, queries)
    fill_latency(row, timings)
    fill_agreement(row, timings.results, truth)
    return row


def measure_vectors_and_hybrid(
    index: BM25Index, queries: Sequence[list[str]], dim: int, rng: np.random.Generator
) -> list[Row]:
    """Cosine alone, then BM25 + cosine fused by RRF, on the documents of ``index``."""
    n = len(index)
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vec_index = VectorIndex(dim)
    t0 = time.perf_counter()
    vec_index.add_many(zip(range(n), vectors, strict=True))
    build_s = time.perf_counter() - t0
    query_vectors = rng.standard_normal((len(queries), dim), dtype=np.float32)
    depth = 50
    cosine = Row(n, f"chazbot VectorIndex {dim}-d", build_s=build_s)
    cosine.memory_mb = vec_index.memory_bytes() / 1e6
    fill_latency(cosine, time_queries(lambda qv: vec_index.search(qv, TOP), list(query_vectors)))
    anchor = Row(n, f"numpy {dim}-d matrix @ q + argpartition", note="anchor: bare brute force")
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    def bare(qv: NDArray[np.float32]) -> list[int]:
        sims = unit @ qv
        top = np.argpartition(-sims, TOP)[:TOP]
        best: list[int] = top[np.argsort(-sims[top])].tolist()
        return best

    fill_latency(anchor, time_queries(bare, list(query_vectors)))

    def hybrid(i: int) -> list[tuple[int, float]]:
        lists = [[d for d, _ in index.search(queries[i], depth)]]
        lists.append([d for d, _ in vec_index.search(query_vectors[i], depth)])
        return top_fused(lists, TOP, tiebreak=lambda d: (-d,))

    fused = Row(n, f"hybrid BM25 + {dim}-d cosine + RRF", note=f"{depth} candidates per list")
    fill_latency(fused, time_queries(hybrid, list(range(len(queries)))))
    return [anchor, cosine, fused, *measure_vector_storage(unit, list(query_vectors))]


def measure_vector_storage(
    unit: NDArray[np.float32], query_vectors: list[NDArray[np.float32]]
) -> list[Row]:
    """Smaller vector storage, for the memory it saves and what it costs: float16, and int8
    with a scale per row, each converted to float32 in blocks of 4,096 rows for the BLAS
    product (numpy has no float16 or int8 BLAS). "top10 %" is the share of the float32 top
    10 that each finds."""
    n, dim = unit.shape
    block = 4096
    buffer = np.empty((block, dim), np.float32)

    def blocked(matrix: NDArray[Any], q: NDArray[np.float32]) -> NDArray[np.float32]:
        sims = np.empty(n, np.float32)
        for start in range(0, n, block):
            end = min(n, start + block)
            part = buffer[: end - start]
            np.copyto(part, matrix[start:end], casting="unsafe")
            np.dot(part, q, out=sims[start:end])
        return sims

    def top(sims: NDArray[np.float32]) -> list[int]:
        best = np.argpartition(-sims, TOP)[:TOP]
        return best[np.argsort(-sims[best])].tolist()  # type: ignore[no-any-return]

    truth = [set(top(unit @ q)) for q in query_vectors]
    half = unit.astype(np.float16)
    scale = np.abs(unit).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    small = np.round(unit / scale[:, None]).astype(np.int8)
    rows = []
    for name, matrix, post in (
        ("float16", half, None),
        ("int8 + row scale", small, scale.astype(np.float32)),
    ):

        def run(q: NDArray[np.float32], m: NDArray[Any] = matrix, s: Any = post) -> list[int]:
            sims = blocked(m, q)
            return top(sims if s is None else sims * s)

        row = Row(n, f"vectors stored as {name}", note="blocks of 4096 rows to float32")
        timings = time_queries(run, query_vectors)
        fill_latency(row, timings)
        row.memory_mb = matrix.nbytes / 1e6
        pairs = zip(timings.results, truth, strict=True)
        found = [len(set(got) & want) / TOP for got, want in pairs]
        row.agree_pct = 100.0 * statistics.fmean(found)
        rows.append(row)
    return rows


# -- driver ------------------------------------------------------------------------------------


def measure_api(
    corpus: Corpus, queries: Sequence[list[str]], args: argparse.Namespace
) -> list[Row]:
    """The same corpus as memory rows of a real ledger (key ``d<i>``, value the document),
    recalled through the public path (``MemoryScope.recall``, what ``agent.recall`` runs:
    view lookup, tokenizing, BM25 with exact scores and the tie rule, ``Hit`` results), and
    the index load time: a full build, then from the snapshot that build saved."""
    import asyncio
    import tempfile
    from pathlib import Path

    from chazbot.ledger import KeyPair, Ledger
    from chazbot.memory.engine import MemoryEngine
    from chazbot.memory.scope import MemoryScope

    size = len(corpus.docs)

    async def run() -> list[Row]:
        with tempfile.TemporaryDirectory(dir=args.api_dir) as tmp:
            ledger = await Ledger.open(Path(tmp) / "bench.sqlite3")
            try:
                key = KeyPair.generate()
                db = await ledger.create_db(key, {"name": "bench"})
                t0 = time.perf_counter()
                for first in range(0, size, 1000):
                    ops = [
                        {"op": "insert", "row": {"key": f"d{i}", "value": " ".join(doc)}}
                        for i, doc in enumerate(corpus.docs[first : first + 1000], first)
                    ]
                    await ledger.write(db, key, {"memory": ops})
                write_s = time.perf_counter() - t0
                loads: list[float] = []
                engine = None
                for _ in ("build", "snapshot"):
                    engine = MemoryEngine(ledger, None, Path(tmp) / "index")
                    t0 = time.perf_counter()
                    await engine.view(db)
                    loads.append(time.perf_counter() - t0)
                assert engine is not None
                scope = MemoryScope(engine, "bench", key, db)
                texts = [" ".join(q) for q in queries]
                for text in texts[:20]:
                    await scope.recall(text)
                wall: list[float] = []
                cpu: list[float] = []
                for text in texts:
                    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
                    await scope.recall(text, limit=TOP)
                    w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                    wall.append((w1 - w0) / 1e6)
                    cpu.append((c1 - c0) / 1e6)
                view = await engine.view(db)
                bare = time_queries(lambda q: view.bm25.search(q, TOP), queries)
            finally:
                await ledger.close()
        api = Row(size, "chazbot API (agent.recall path)", note=f"rows written in {write_s:.0f} s")
        fill_latency(api, Timings(wall, cpu, []))
        api.build_s = loads[0]
        api.extra = {"load_build_s": loads[0], "load_snapshot_s": loads[1]}
        api.note += f"; index load: build {loads[0]:.2f} s, from snapshot {loads[1]:.2f} s"
        index_row = Row(size, "chazbot BM25Index of those rows (bare)")
        fill_latency(index_row, bare)
        return [api, index_row]

    return asyncio.run(run())


def run_size(size: int, args: argparse.Namespace, rng: np.random.Generator) -> list[Row]:
    print(f"# {size:,} documents: building corpus", file=sys.stderr, flush=True)
    corpus = make_corpus(size, rng)
    queries = make_queries(corpus, args.queries, rng)
    reference = ExactReference(corpus)
    checked = queries[: args.agree_queries]
    tops = [reference.top(q) for q in checked]
    truth = Truth(reference, checked, [t for t, _ in tops], [kth for _, kth in tops])
    gc.collect()
    gc.freeze()
    rows: list[Row] = []
    print("#   chazbot BM25", file=sys.stderr, flush=True)
    own, index = measure_chazbot_bm25(corpus, queries, truth, args.adds, rng)
    rows += own
    if size in args.hybrid_sizes:
        print("#   vectors and hybrid", file=sys.stderr, flush=True)
        rows += measure_vectors_and_hybrid(index, queries[: args.hybrid_queries], 384, rng)
    del index
    gc.collect()
    print("#   bm25s", file=sys.stderr, flush=True)
    rows.append(measure_bm25s(corpus, queries, truth))
    if size in args.api_sizes:
        print("#   chazbot through the API, from a real ledger", file=sys.stderr, flush=True)
        rows += measure_api(corpus, queries, args)
    if size <= args.rank_bm25_max:
        print("#   rank-bm25", file=sys.stderr, flush=True)
        few = queries[: args.rank_bm25_queries]
        rows.append(measure_rank_bm25(corpus, few, truth))
    else:
        rows.append(Row(size, "rank-bm25 BM25Okapi", note="skipped: too slow at this size"))
    gc.unfreeze()
    return rows


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: Sequence[Row]) -> None:
    head = (
        f"{'docs':>9} {'implementation':<34} {'build s':>8} {'mean ms':>8} {'p50 ms':>7} "
        f"{'p95 ms':>7} {'cpu p50':>7} {'top10 %':>7} {'same %':>6} {'MB':>7} "
        f"{'add µs p50/mean/cpu':>20}  note"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        adds = "-"
        if r.add_p50_us is not None:
            cpu = fmt(r.extra.get("add_cpu_mean_us"), ".1f")
            adds = f"{r.add_p50_us:.1f}/{fmt(r.add_mean_us, '.1f')}/{cpu}"
        print(
            f"{r.size:>9,} {r.impl:<34} {fmt(r.build_s, '.2f'):>8} {fmt(r.mean_ms, '.3f'):>8} "
            f"{fmt(r.p50_ms, '.3f'):>7} {fmt(r.p95_ms, '.3f'):>7} {fmt(r.cpu_p50_ms, '.3f'):>7} "
            f"{fmt(r.agree_pct, '.1f'):>7} {fmt(r.same_pct, '.1f'):>6} "
            f"{fmt(r.memory_mb, '.1f'):>7} {adds:>20}  {r.note}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k and 100k documents only")
    parser.add_argument(
        "--autorecall",
        action="store_true",
        help="instead: auto-recall cost per turn, own + 5 banks of 100k (bench/autorecall.py)",
    )
    parser.add_argument("--sizes", help="comma-separated corpus sizes (default 10k,100k,1M)")
    parser.add_argument("--queries", type=int, default=1000, help="timed queries per size")
    parser.add_argument("--agree-queries", type=int, default=300, help="queries checked exactly")
    parser.add_argument("--adds", type=int, default=20_000, help="incremental adds timed")
    parser.add_argument("--hybrid-sizes", default="100000", help="sizes that time hybrid")
    parser.add_argument("--hybrid-queries", type=int, default=300)
    parser.add_argument(
        "--api-sizes", default="100000,1000000", help="sizes that time recall through the API"
    )
    parser.add_argument("--api-dir", default=None, help="where the API measurement's ledger goes")
    parser.add_argument("--rank-bm25-max", type=int, default=100_000)
    parser.add_argument("--rank-bm25-queries", type=int, default=30)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--json", help="also write the JSON to this file")
    parser.add_argument(
        "--numpy", action="store_true", help="chazbot's numpy search loop only (no numba)"
    )
    args = parser.parse_args()
    with bm25_kernel.numpy_only() if args.numpy else contextlib.nullcontext():
        run_bench(args)


def run_bench(args: argparse.Namespace) -> None:
    if args.autorecall:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import autorecall

        autorecall.run([])
        return
    if args.sizes:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")]
    else:
        sizes = [10_000, 100_000] if args.quick else [10_000, 100_000, 1_000_000]
    args.hybrid_sizes = {int(s) for s in args.hybrid_sizes.split(",") if s}
    args.api_sizes = {int(s) for s in args.api_sizes.split(",") if s}
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    if not args.numpy:
        compiled = bm25_kernel.compile_now() is not None
        took = time.perf_counter() - started
        print(
            f"# BM25 kernel: {'compiled' if compiled else 'numba missing'} in {took:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    rows: list[Row] = []
    for size in sizes:
        rows += run_size(size, args, rng)
    print_table(rows)
    load = os.getloadavg()
    print(
        f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {os.cpu_count()} CPUs"
    )
    result = {
        "bench": "recall",
        "anchors": ANCHOR_NOTE,
        "seconds": round(time.perf_counter() - started, 1),
        "loadavg": [round(x, 2) for x in load],
        "rows": [asdict(r) for r in rows],
    }
    blob = json.dumps(result)
    print(blob)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            out.write(blob + "\n")


if __name__ == "__main__":
    main()
