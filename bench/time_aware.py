"""What time-aware ranking costs a recall: one memory view of N rows, hybrid search of the
same questions with and without a month named (issue 29).

Run: ``.venv/bin/python bench/time_aware.py [--rows 100000] [--queries 300]``. Not a test;
CI does not run it. Rows are dated over two years in their keys (as capture writes them),
values drawn from a Zipf vocabulary, vectors random 384-d (the ranking's cost does not depend
on what the vectors mean). The anchor is the same search without a month, in the same run,
the two alternating: a named month costs a regex over the query, 60 candidates per ranker
instead of 20, and a date read from the keys of the 30 fused rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from datetime import date, timedelta

import numpy as np

from chazbot.memory.rows import MemoryRow
from chazbot.memory.view import MemoryView

MONTHS = "January February March April May June July August September October November December"


def build(rows: int, rng: np.random.Generator) -> MemoryView:
    vocab = [f"w{i}" for i in range(50_000)]
    weights = 1 / np.arange(1, len(vocab) + 1)
    weights /= weights.sum()
    start = date(2023, 1, 1)
    lengths = rng.integers(5, 30, rows)
    tokens = rng.choice(len(vocab), int(lengths.sum()), p=weights)
    days = rng.integers(0, 730, rows)
    docs, at = [], 0
    for i in range(rows):
        words = " ".join(vocab[j] for j in tokens[at : at + lengths[i]])
        at += int(lengths[i])
        key = f"alice/{(start + timedelta(days=int(days[i]))).isoformat()}/{i:08x}"
        docs.append(MemoryRow(i, f"r/{i}", key, words, (), i, (i, "", 0), "bench"))
    vectors = rng.standard_normal((rows, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    view = MemoryView("bench/random")
    view.load(docs, [(d.row_id, vectors[i]) for i, d in enumerate(docs)], 0)
    return view


def timed(view: MemoryView, text: str, vec: np.ndarray) -> float:
    t0 = time.perf_counter()
    view.search(text, (), 10, vec)
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(29)
    t0 = time.perf_counter()
    view = build(args.rows, rng)
    built = time.perf_counter() - t0
    months = MONTHS.split()
    plain, dated = [], []
    for i in range(args.queries):
        words = " ".join(f"w{int(j)}" for j in rng.integers(0, 2_000, 3))
        vec = rng.standard_normal(384).astype(np.float32)
        vec /= np.linalg.norm(vec)
        plain.append((f"what did we say about {words}", vec))
        dated.append((f"what did we say about {words} in {months[i % 12]} 2024", vec))
    for text, vec in plain[:20] + dated[:20]:  # warm-up
        timed(view, text, vec)
    runs: dict[str, list[float]] = {"no month (anchor)": [], "a month named": []}
    for (text, vec), (dated_text, _) in zip(plain, dated, strict=True):  # paired, alternating
        runs["no month (anchor)"].append(timed(view, text, vec))
        runs["a month named"].append(timed(view, dated_text, vec))
    print(f"{args.rows} rows (built in {built:.1f} s), {args.queries} hybrid searches each, top 10")
    print(f"{'query':<20}{'p50 ms':>10}{'p95 ms':>10}")
    summary = {}
    for name, ms in runs.items():
        ms.sort()
        p50, p95 = statistics.median(ms), ms[int(len(ms) * 0.95) - 1]
        summary[name] = {"p50_ms": round(p50, 2), "p95_ms": round(p95, 2)}
        print(f"{name:<20}{p50:>10.2f}{p95:>10.2f}")
    ratio = summary["a month named"]["p50_ms"] / summary["no month (anchor)"]["p50_ms"]
    print(f"ratio of p50s: {ratio:.2f}")
    print(
        json.dumps(
            {"bench": "time-aware", "rows": args.rows, **summary, "p50_ratio": round(ratio, 2)}
        )
    )


if __name__ == "__main__":
    main()
