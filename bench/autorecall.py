"""Auto-recall cost per turn: own memory + 5 attached banks of N entries each.

Run: .venv/bin/python bench/autorecall.py [--entries 100000] [--turns 200]

Builds a peer in a temp dir (real SQLite, real ledger), fills the agent's own memory and five
banks with synthetic rows (Zipf vocabulary) through batched imports, attaches the banks to a
session, then times `auto_recall` (the whole step a turn runs before its LLM call: settings,
refs, attachments, query building, six BM25 searches, block formatting) over many turns with
realistic chat messages. Prints a table and a JSON line. Target: p50 <= 25 ms at 100k per store.
The anchor beside it is one bare BM25Index.search on one 100k store with the same queries.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import chazbot
from chazbot.agent.turn import auto_recall
from chazbot.config import AgentConfig, Config
from chazbot.memory.banks import writer_key_for
from chazbot.memory.tokenize import auto_recall_query, tokenize
from chazbot.memory.transfer import import_lines

BANKS = 5


def vocabulary(rng: np.random.Generator, size: int = 50_000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, size=rng.integers(3, 9))) for _ in range(size)]


def rows(rng: np.random.Generator, vocab: list[str], n: int, prefix: str) -> list[str]:
    ranks = np.minimum(rng.zipf(1.3, size=n * 20), len(vocab)) - 1
    out, at = [], 0
    for i in range(n):
        length = int(rng.integers(5, 20))
        words = [vocab[r] for r in ranks[at : at + length]]
        at += length
        out.append(json.dumps({"key": f"{prefix}.{i}", "value": " ".join(words)}))
    return out


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    vocab = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        banks = [f"bank{i}" for i in range(BANKS)]
        cfg = Config(
            state_dir=Path(tmp), agents=[AgentConfig(name="chaz", default_memory_banks=banks[:2])]
        )
        async with chazbot.open(tmp, cfg) as peer:
            agent = peer.agent("chaz")
            started = time.perf_counter()
            targets = [("own", agent.db)]
            for name in banks:
                if await peer.registry.get("bank", name) is None:
                    await peer.create_bank(name)
                    await peer.command(f"/memory grant {name} chaz read")
                hosted = await peer.registry.get("bank", name)
                assert hosted is not None
                targets.append((name, hosted.db))
            for name in banks[2:]:
                await peer.command(f"/memory attach {name}", session="bench")
            for name, db in targets:
                key = await writer_key_for(peer.ledger, peer.registry, db)
                await import_lines(
                    peer.memory, db, key, rows(rng, vocab, args.entries, name), batch_size=2000
                )
            build = time.perf_counter() - started
            session = await peer.session("bench")
            loaded = time.perf_counter()
            for _, db in targets:
                await peer.memory.view(db)
            load = time.perf_counter() - loaded
            # conversations: 5 messages of 8-15 words drawn like the documents
            convo = [
                " ".join(vocab[r] for r in np.minimum(rng.zipf(1.3, 12), len(vocab)) - 1)
                for _ in range(args.turns + 5)
            ]
            times, hits = [], []
            for t in range(args.turns):
                t0 = time.perf_counter()
                _block, n = await auto_recall(peer, agent, session, convo[t : t + 5])
                times.append((time.perf_counter() - t0) * 1000)
                hits.append(n)
            own = await peer.memory.view(agent.db)
            bare = []
            for t in range(args.turns):
                q = auto_recall_query(convo[t : t + 5])
                t0 = time.perf_counter()
                own.bm25.search(tokenize(" ".join(q)), 3)
                bare.append((time.perf_counter() - t0) * 1000)
    result = {
        "entries_per_store": args.entries,
        "stores": 1 + BANKS,
        "build_s": round(build, 1),
        "load_views_s": round(load, 2),
        "auto_recall_ms": {
            "p50": round(pct(times, 50), 2),
            "p95": round(pct(times, 95), 2),
            "mean": round(statistics.mean(times), 2),
        },
        "anchor_one_bm25_search_ms": {
            "p50": round(pct(bare, 50), 3),
            "p95": round(pct(bare, 95), 3),
        },
        "mean_hits": round(statistics.mean(hits), 1),
        "target_p50_ms": 25,
    }
    ar, anchor = result["auto_recall_ms"], result["anchor_one_bm25_search_ms"]
    print(f"stores: own + {BANKS} banks x {args.entries} entries")
    print(f"(built in {build:.0f} s, views loaded in {load:.1f} s)")
    print(f"{'measure':40} {'p50 ms':>8} {'p95 ms':>8}")
    print(f"{'auto-recall per turn (whole step)':40} {ar['p50']:8} {ar['p95']:8}")
    print(f"{'anchor: one BM25 search, one store':40} {anchor['p50']:8} {anchor['p95']:8}")
    print(json.dumps(result))


def run(argv: list[str] | None = None) -> None:
    import sys

    if argv is not None:
        sys.argv = [sys.argv[0], *argv]
    asyncio.run(main())


if __name__ == "__main__":
    run()
