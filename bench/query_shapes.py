"""How long a search of each hostile query shape holds the event loop (issue 47).

Run: ``.venv/bin/python bench/query_shapes.py [--rows 4999] [--repeat 5]``. Not a timed test.

Fills a bank with ``--rows`` rows of the Zipf-like vocabulary of
``tests/memory/test_query_bounds.py`` (4,999: the biggest bank searched on the loop,
``OFF_LOOP_ROWS`` - 1), then runs ``/memory search self <query>`` for each shape as a member would,
``--repeat`` times, and prints the best and median longest gap of a 2 ms ticker (``longest_gap``)
and the median time per shape, plain words first as the anchor, and one JSON line at the end. The
issue's report: a query of combining marks held the loop 83 ms where every other shape stayed under
12 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import chazbot
from tests.memory.test_query_bounds import VOCAB, fill, longest_gap

SHAPES = {
    "32 words of the bank": " ".join(VOCAB[:32]),
    "8,000 words": " ".join(f"w{i}" for i in range(8000)),
    "dots": "." * 60_000,
    "CJK": "東京" * 20_000,
    "emoji": "🚀" * 15_000,
    "combining marks": "\u0301" * 30_000,
    "letter + mark": "a\u0301" * 20_000,
    "words + mark": " ".join(f"w{i}\u0301" for i in range(8000)),
    "zalgo": ("w1" + "\u0301" * 50 + " ") * 1000,
    "dotted capital I": "İ" * 30_000,
    "Devanagari": "नमस्ते " * 5000,
}


async def measure(rows: int, repeat: int) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as where:
        async with chazbot.open(Path(where) / "s") as peer:
            agent = peer.agent("chaz")
            await fill(peer, agent.memory.db, agent.key, rows)
            await peer.memory.view(agent.memory.db)
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in SHAPES}
            for _ in range(repeat):  # shapes interleaved: a busy moment of the machine is shared
                for name, query in SHAPES.items():
                    began = time.perf_counter()
                    gap, _ = await longest_gap(
                        peer.command(
                            f"/memory search self {query}", session="matrix:!r:x", is_admin=False
                        )
                    )
                    runs[name].append((gap, time.perf_counter() - began))
            for name, got in runs.items():
                gaps = [g for g, _ in got]
                found[name] = {
                    "best_gap_ms": round(min(gaps) * 1000, 1),
                    "median_gap_ms": round(statistics.median(gaps) * 1000, 1),
                    "median_ms": round(statistics.median(t for _, t in got) * 1000, 1),
                }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_999)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    found = asyncio.run(measure(args.rows, args.repeat))
    print(f"{'shape':<22} {'best gap':>9} {'median gap':>11} {'median took':>12}")
    for name, row in found.items():
        print(
            f"{name:<22} {row['best_gap_ms']:>7.1f}ms {row['median_gap_ms']:>9.1f}ms "
            f"{row['median_ms']:>10.1f}ms"
        )
    print(json.dumps({"rows": args.rows, "repeat": args.repeat, "shapes": found}))


if __name__ == "__main__":
    main()
