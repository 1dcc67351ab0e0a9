"""Auto-recall cost per turn: own memory + 5 attached banks of N entries each.

Run: .venv/bin/python bench/autorecall.py [--entries 100000] [--turns 200]

Builds a peer in a temp dir (real SQLite, real ledger), fills the agent's own memory and five
banks with synthetic rows (Zipf vocabulary) through batched imports, attaches the banks to a
session, then times `auto_recall` (the whole step a turn runs before its LLM call: settings,
refs, attachments, query building, six BM25 searches, block formatting) over many turns with
realistic chat messages. Prints a table and a JSON line. Target: p50 <= 25 ms at 100k per store.
The anchor beside it is one bare BM25Index.search on one 100k store with the same queries.

With --audience (SPEC §5c), own memory's rows are said in 20 rooms of 2-6 of 12 people (each
row records its room and audience), and the turn runs in one person's DM: audience filtering
is on for own memory (banks are explicit sharing and unfiltered).
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
from chazbot.memory.audience import Provenance, room_audience
from chazbot.memory.banks import writer_key_for
from chazbot.memory.rows import MEMORY_STORE
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


async def said_in_rooms(
    peer: chazbot.Peer,
    db: str,
    key: object,
    lines: list[str],
    rooms: list[Provenance],
    rng: np.random.Generator,
) -> None:
    """Write ``lines`` as rows said in ``rooms`` (each with its room's provenance and scope)."""
    for start in range(0, len(lines), 2000):
        ops = []
        for line in lines[start : start + 2000]:
            row = json.loads(line)
            origin = rooms[int(rng.integers(len(rooms)))]
            row |= {"tags": [], "from": origin.to_data(), "scope": origin.room}
            ops.append({"op": "insert", "row": row})
        await peer.ledger.write(db, key, {MEMORY_STORE: ops})  # type: ignore[arg-type]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--audience", action="store_true", help="rows said in rooms (SPEC §5c)")
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
                    await peer.hosting.create_bank(name)
                    await peer.command(f"/memory grant {name} chaz read")
                hosted = await peer.registry.get("bank", name)
                assert hosted is not None
                targets.append((name, hosted.db))
            for name in banks[2:]:
                await peer.command(f"/memory attach {name}", session="bench")
            people = [f"@p{i}:example.org" for i in range(12)]
            rooms = [
                Provenance.of(
                    f"room-{i}", people[i % 12], rng.choice(people, int(rng.integers(2, 7)))
                )
                for i in range(20)
            ]
            for name, db in targets:
                key = await writer_key_for(peer.ledger, peer.registry, db)
                lines = rows(rng, vocab, args.entries, name)
                if args.audience and db == agent.db:
                    await said_in_rooms(peer, db, key, lines, rooms, rng)
                    continue
                await import_lines(peer.memory, db, key, lines, batch_size=2000)
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
            reader = people[0]
            memory = agent.memory
            if args.audience:
                dm = room_audience("dm", [reader], lambda u: False)
                memory = agent.memory.within(peer.hearing(agent, reader, dm))
            for t in range(args.turns):
                t0 = time.perf_counter()
                _block, n = await auto_recall(peer, agent, session, convo[t : t + 5], memory)
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
        "audience_filtering": args.audience,
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
    print(
        f"stores: own + {BANKS} banks x {args.entries} entries; audience filtering {args.audience}"
    )
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
