"""Ledger throughput against the anchors of the same machine, measured in the same run.

Run: ``.venv/bin/python bench/ledger.py [--reps 5] [--single 500] [--batch 1000] [--calls 5]
[--dir DIR]``. Not a timed test; CI does not run it.

Measures, each on a fresh state file in a temporary directory (medians over ``--reps``):

- durable single-entry commits per second: ``Ledger.write`` of one signed entry per
  transaction (WAL, ``synchronous=FULL``, as the ledger opens its file);
- batched entries per second: ``Ledger.write_many`` with ``--batch`` entries per call;
- ingest entries per second: the batched entries fed to a fresh ledger (decode, signature
  check, authorisation, store);

and beside them the anchors: raw ``sqlite3`` single-row INSERT+COMMIT per second with the
same pragmas in the same directory, raw batched INSERTs, and raw ed25519 sign / verify per
second on a message of an entry's size (``cryptography``, OpenSSL), with the verify the
ledger uses (``keys.verify``: libsodium through PyNaCl, chosen for being faster). Prints a
table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chazbot.ledger import Entry, KeyPair, Ledger

TARGET_SINGLE = 1_000.0
TARGET_BATCH = 10_000.0
KEY = KeyPair.from_private_bytes(bytes(range(32)))


class Timer:
    """Wall-clock and process CPU time (all threads) of a block; ``rates(n)`` per second."""

    def __enter__(self) -> Timer:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def rates(self, n: int) -> Rate:
        return Rate(n / self.wall, n / max(self.cpu, 1e-9))


@dataclass(frozen=True)
class Rate:
    wall: float  # what a user sees, on this machine under its current load
    cpu: float  # what one core of CPU time allows (less sensitive to other load)


def row_ops(i: int) -> dict[str, list[Any]]:
    """A memory-row-sized insert (about 200 bytes of payload)."""
    row = {
        "key": f"fact-{i}",
        "value": f"the user said that their favourite colour is number {i} of the palette",
        "tags": ["preference", "colour"],
        "source": "!room:example.org",
    }
    return {"memory": [{"op": "insert", "row": row}]}


async def single_commits(path: Path, n: int) -> Rate:
    ledger = await Ledger.open(path)
    try:
        db = await ledger.create_db(KEY, {"name": "bench"})
        with Timer() as timer:
            for i in range(n):
                await ledger.write(db, KEY, row_ops(i))
    finally:
        await ledger.close()
    return timer.rates(n)


async def batched(path: Path, batch: int, calls: int) -> tuple[Rate, list[bytes]]:
    ledger = await Ledger.open(path)
    try:
        db = await ledger.create_db(KEY, {"name": "bench"})
        ops = [[row_ops(c * batch + i) for i in range(batch)] for c in range(calls)]
        with Timer() as timer:
            for chunk in ops:
                await ledger.write_many(db, KEY, chunk)
        raw = [data for _, data in await ledger.entries(db, 0, batch * calls + 10)]
    finally:
        await ledger.close()
    return timer.rates(batch * calls), raw


async def ingest(path: Path, raw: list[bytes], chunk: int) -> Rate:
    ledger = await Ledger.open(path)
    try:
        accepted = 0
        with Timer() as timer:
            for at in range(0, len(raw), chunk):
                result = await ledger.ingest(raw[at : at + chunk])
                accepted += len(result.accepted)
    finally:
        await ledger.close()
    assert accepted == len(raw), (accepted, len(raw))
    return timer.rates(len(raw))


def raw_sqlite(path: Path, n: int, per_commit: int, payload: bytes) -> Rate:
    """The same pragmas as the ledger (``ledger._open_file``): WAL, synchronous=FULL."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, id TEXT UNIQUE, data BLOB)")
    i = 0
    with Timer() as timer:
        while i < n:
            conn.execute("BEGIN IMMEDIATE")
            for _ in range(per_commit):
                conn.execute(
                    "INSERT INTO t (id, data) VALUES (?, ?)", (f"sha256:{i:064x}", payload)
                )
                i += 1
            conn.execute("COMMIT")
    conn.close()
    return timer.rates(i)


def ed25519_rates(n: int, message: bytes) -> tuple[Rate, Rate, Rate]:
    """Sign and verify with OpenSSL through ``cryptography``, and verify with ``keys.verify``
    (libsodium through PyNaCl, what the ledger uses: it decides the cost of ingesting)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from chazbot.ledger.keys import verify

    private = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    public = private.public_key()
    messages = [message + i.to_bytes(4, "big") for i in range(n)]
    with Timer() as signing:
        sigs = [private.sign(m) for m in messages]
    with Timer() as verifying:
        for m, sig in zip(messages, sigs, strict=True):
            public.verify(sig, m)
    with Timer() as nacl:
        assert all(verify(KEY.public, sig, m) for m, sig in zip(messages, sigs, strict=True))
    return signing.rates(n), verifying.rates(n), nacl.rates(n)


def median_rate(rates: Iterable[Rate]) -> Rate:
    got = list(rates)
    return Rate(statistics.median(r.wall for r in got), statistics.median(r.cpu for r in got))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--single", type=int, default=500, help="entries, one per commit")
    parser.add_argument("--batch", type=int, default=1000, help="entries per write_many call")
    parser.add_argument("--calls", type=int, default=5, help="write_many calls per rep")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the files")
    args = parser.parse_args()

    sample = Entry.create(KEY, None, [], 0, row_ops(0), ts=0).data
    workdir = Path(tempfile.mkdtemp(prefix="chaz-bench-", dir=args.dir))
    reps = range(args.reps)
    try:
        counter = iter(range(10**9))

        def fresh() -> Path:
            return workdir / f"f{next(counter)}.db"

        def batched_rep() -> Rate:
            rate, raw = asyncio.run(batched(fresh(), args.batch, args.calls))
            raw_entries[:] = raw
            return rate

        raw_entries: list[bytes] = []
        results = {
            "ledger_single_commit_per_s": median_rate(
                asyncio.run(single_commits(fresh(), args.single)) for _ in reps
            ),
            "ledger_batched_entries_per_s": median_rate(batched_rep() for _ in reps),
            "ledger_ingest_entries_per_s": median_rate(
                asyncio.run(ingest(fresh(), raw_entries, args.batch)) for _ in reps
            ),
            "sqlite_single_insert_commit_per_s": median_rate(
                raw_sqlite(fresh(), args.single, 1, sample) for _ in reps
            ),
            "sqlite_batched_insert_per_s": median_rate(
                raw_sqlite(fresh(), args.batch * args.calls, args.batch, sample) for _ in reps
            ),
        }
        crypto = [ed25519_rates(5000, sample) for _ in reps]
        results["ed25519_sign_per_s"] = median_rate(s for s, _, _ in crypto)
        results["ed25519_verify_per_s"] = median_rate(v for _, v, _ in crypto)
        results["ed25519_verify_nacl_per_s"] = median_rate(v for _, _, v in crypto)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    rows = [
        ("ledger: durable single-entry commits/s", "ledger_single_commit_per_s", TARGET_SINGLE),
        ("ledger: batched entries/s (write_many)", "ledger_batched_entries_per_s", TARGET_BATCH),
        ("ledger: ingest entries/s (verify+store)", "ledger_ingest_entries_per_s", None),
        ("anchor: sqlite3 INSERT+COMMIT/s", "sqlite_single_insert_commit_per_s", None),
        ("anchor: sqlite3 batched INSERT/s", "sqlite_batched_insert_per_s", None),
        ("anchor: ed25519 sign/s", "ed25519_sign_per_s", None),
        ("anchor: ed25519 verify/s", "ed25519_verify_per_s", None),
        ("ledger: ed25519 verify/s (keys.verify)", "ed25519_verify_nacl_per_s", None),
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"chazbot ledger bench: {os.cpu_count()} CPUs (load {load:.1f}), python "
        f"{sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, entry {len(sample)} B, "
        f"medians of {args.reps}; 'cpu' = per second of process CPU time"
    )
    print(f"{'measure':<42}{'wall/s':>10}{'cpu/s':>10}  target (wall)")
    ok = True
    for label, name, target in rows:
        rate = results[name]
        mark = ""
        if target is not None:
            met = rate.wall >= target
            ok = ok and met
            mark = f">= {target:,.0f} {'ok' if met else 'MISSED'}"
        print(f"{label:<42}{rate.wall:>10,.0f}{rate.cpu:>10,.0f}  {mark}")
    print(
        json.dumps(
            {
                "bench": "ledger",
                "reps": args.reps,
                "entry_bytes": len(sample),
                "load": round(load, 2),
                **{k: round(v.wall, 1) for k, v in results.items()},
                **{k.replace("_per_s", "_cpu_per_s"): round(v.cpu, 1) for k, v in results.items()},
                "targets_met": ok,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
