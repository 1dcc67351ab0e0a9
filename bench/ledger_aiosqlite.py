"""The ledger's own thread against an aiosqlite port of the same SQL, measured in the same run.

Run: ``.venv/bin/python bench/ledger_aiosqlite.py [--reps 5] [--entries 1000] [--tasks 16]
[--writes 16] [--dir DIR]``. Needs the ``bench`` extra (``pip install -e '.[bench]'``, which
brings aiosqlite). Not a timed test; CI does not run it.

Why it exists: the design card names aiosqlite, but the ledger runs each whole step (validate,
store, commit) as one function on its own thread (``chazbot/ledger/worker.py``). aiosqlite's
public API takes one statement per await, so a straightforward port pays a hop from the event
loop to aiosqlite's thread and back for every statement of a step. This bench puts a figure
on that, for the ledger's real workloads, each on a fresh copy of the same starting file
(medians over ``--reps``):

- ``write_many``: ``Ledger.write_many`` of ``--entries`` signed memory-row entries (one call,
  one transaction);
- ``ingest``: ``Ledger.ingest`` of those entries (and their database's root) by a ledger that
  has never seen them: another peer's batch (decode and signature checks on a worker thread,
  then validation and storage on the ledger's).

For each, the SQL statements the ledger runs are recorded (on a separate run, through a
recording connection) and replayed on copies of the starting file twice: through plain
``sqlite3`` in one go (the SQL's own cost, no hops: the anchor) and through aiosqlite's public
API, one await per statement (``execute`` for writes, ``execute_fetchall`` for reads). The
port's time is the ledger's with its SQL's own cost replaced by the aiosqlite replay's:
``port = ledger - sql + aiosqlite``; the other work (signing, checks, JSON) is the same either
way. The ratio is ``port / ledger``.

Beside them, what group commit adds (``LedgerCore.write_group``): ``--tasks`` tasks each doing
``--writes`` single-entry ``Ledger.write`` calls at once, against the same writes one at a
time (one transaction and one fsync each, what a port that locks per transaction gets).
Prints a table and one JSON line.
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ledger import row_ops

from chazbot.ledger import KeyPair, Ledger
from chazbot.ledger.core import LedgerCore

KEY = KeyPair.from_private_bytes(bytes(range(32)))
PRAGMAS = (  # as ``ledger._open_file`` opens the state file
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=10000",
)
Trace = list[tuple[str, tuple[Any, ...]]]


class Recorder:
    """A sqlite3 connection that notes every statement (and its parameters) it runs."""

    def __init__(self, conn: sqlite3.Connection, trace: Trace) -> None:
        self._conn = conn
        self._trace = trace

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self._trace.append((sql, tuple(params)))
        return self._conn.execute(sql, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _reads(sql: str) -> bool:
    return sql.lstrip().upper().startswith(("SELECT", "WITH", "PRAGMA"))


async def timed_step(
    path: Path, step: Callable[[Ledger], Awaitable[Any]], trace: Trace | None = None
) -> float:
    """Seconds ``step(ledger)`` takes on the file at ``path``; with ``trace``, its SQL is noted."""
    ledger = await Ledger.open(path)
    try:
        if trace is not None:

            def record(core: LedgerCore) -> None:
                core.conn = Recorder(core.conn, trace)  # type: ignore[assignment]

            await ledger.run(record)
        start = time.perf_counter()
        await step(ledger)
        return time.perf_counter() - start
    finally:
        await ledger.close()


def replay_sqlite(path: Path, trace: Trace) -> float:
    """The recorded statements through plain sqlite3, one after another on this thread."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in PRAGMAS:
            conn.execute(pragma)
        start = time.perf_counter()
        for sql, params in trace:
            cur = conn.execute(sql, params)
            if _reads(sql):
                cur.fetchall()
        return time.perf_counter() - start
    finally:
        conn.close()


async def replay_aiosqlite(path: Path, trace: Trace) -> float:
    """The recorded statements through aiosqlite's public API: one await per statement."""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        for pragma in PRAGMAS:
            await conn.execute(pragma)
        start = time.perf_counter()
        for sql, params in trace:
            if _reads(sql):
                await conn.execute_fetchall(sql, params)
            else:
                await conn.execute(sql, params)
        return time.perf_counter() - start


async def make_bases(workdir: Path, entries: int) -> tuple[Path, Path, str, list[bytes]]:
    """The starting files: one holding a database (for write_many) and an empty one (for
    ingest); the database's id, and a batch of ``entries`` of it from another peer."""
    writer_base, reader_base = workdir / "writer-base.db", workdir / "reader-base.db"
    ledger = await Ledger.open(writer_base)
    try:
        db = await ledger.create_db(KEY, {"name": "bench"})
    finally:
        await ledger.close()
    await (await Ledger.open(reader_base)).close()
    source = workdir / "source.db"
    shutil.copyfile(writer_base, source)
    ledger = await Ledger.open(source)
    try:
        await ledger.write_many(db, KEY, [row_ops(i) for i in range(entries)])
        batch = [data for _, data in await ledger.entries(db, 0, entries + 10)]
    finally:
        await ledger.close()
    return writer_base, reader_base, db, batch


def compare(
    workdir: Path, base: Path, step: Callable[[Ledger], Awaitable[Any]]
) -> dict[str, float]:
    """One rep of one workload: the ledger's time, the SQL it ran, and that SQL's replays."""
    counter = len(list(workdir.iterdir()))

    def copy() -> Path:
        nonlocal counter
        counter += 1
        target = workdir / f"run-{counter}.db"
        shutil.copyfile(base, target)
        return target

    ledger_s = asyncio.run(timed_step(copy(), step))
    trace: Trace = []
    asyncio.run(timed_step(copy(), step, trace))
    sql_s = replay_sqlite(copy(), trace)
    aio_s = asyncio.run(replay_aiosqlite(copy(), trace))
    return {
        "ledger_s": ledger_s,
        "sql_s": sql_s,
        "aiosqlite_s": aio_s,
        "port_s": ledger_s - sql_s + aio_s,
        "statements": float(len(trace)),
    }


async def concurrent_writes(path: Path, db: str, tasks: int, writes: int, together: bool) -> Any:
    """``tasks`` x ``writes`` single-entry writes, all at once or one at a time: seconds and
    the transactions committed."""
    ledger = await Ledger.open(path)
    try:
        before = await ledger.run(lambda core: core.commits)

        async def task(t: int) -> None:
            for i in range(writes):
                await ledger.write(db, KEY, row_ops(t * writes + i))

        start = time.perf_counter()
        if together:
            await asyncio.gather(*(task(t) for t in range(tasks)))
        else:
            for t in range(tasks):
                await task(t)
        seconds = time.perf_counter() - start
        commits = await ledger.run(lambda core: core.commits) - before
    finally:
        await ledger.close()
    return seconds, commits


def median_of(reps: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in reps) for k in reps[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--entries", type=int, default=1000, help="entries per workload")
    parser.add_argument("--tasks", type=int, default=16, help="concurrent writers (group)")
    parser.add_argument("--writes", type=int, default=16, help="writes per writer (group)")
    parser.add_argument("--dir", type=Path, default=None, help="where to put the files")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="chaz-bench-", dir=args.dir))
    n = args.entries
    try:
        writer_base, reader_base, db, batch = asyncio.run(make_bases(workdir, n))

        async def write_many(ledger: Ledger) -> None:
            await ledger.write_many(db, KEY, [row_ops(i) for i in range(n)])

        async def ingest(ledger: Ledger) -> None:
            result = await ledger.ingest(batch)
            assert len(result.accepted) == len(batch), result.rejected[:3]

        results = {
            "write_many": median_of(
                [compare(workdir, writer_base, write_many) for _ in range(args.reps)]
            ),
            "ingest": median_of([compare(workdir, reader_base, ingest) for _ in range(args.reps)]),
        }
        group: dict[str, list[tuple[float, int]]] = {"together": [], "one_at_a_time": []}
        for rep in range(args.reps):
            for mode in group:
                target = workdir / f"group-{rep}-{mode}.db"
                shutil.copyfile(writer_base, target)
                group[mode].append(
                    asyncio.run(
                        concurrent_writes(target, db, args.tasks, args.writes, mode == "together")
                    )
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"chazbot ledger vs aiosqlite: {os.cpu_count()} CPUs (load {load:.1f}), python "
        f"{sys.version.split()[0]}, sqlite {sqlite3.sqlite_version}, aiosqlite "
        f"{aiosqlite.__version__}, {n} entries, medians of {args.reps}"
    )
    print(
        f"{'workload':<12}{'stmts':>7}{'ledger ms':>11}{'its SQL ms':>12}{'aiosqlite ms':>14}"
        f"{'port ms':>10}{'port/ledger':>13}{'hop us':>8}"
    )
    out: dict[str, Any] = {"bench": "ledger_aiosqlite", "reps": args.reps, "entries": n}
    for name, r in results.items():
        ratio = r["port_s"] / r["ledger_s"]
        hop_us = (r["aiosqlite_s"] - r["sql_s"]) / r["statements"] * 1e6
        print(
            f"{name:<12}{r['statements']:>7.0f}{r['ledger_s'] * 1e3:>11.1f}"
            f"{r['sql_s'] * 1e3:>12.1f}{r['aiosqlite_s'] * 1e3:>14.1f}{r['port_s'] * 1e3:>10.1f}"
            f"{ratio:>12.2f}x{hop_us:>8.1f}"
        )
        out[name] = {
            "statements": int(r["statements"]),
            **{f"{k[:-2]}_ms": round(v * 1e3, 2) for k, v in r.items() if k.endswith("_s")},
            "port_over_ledger": round(ratio, 2),
            "hop_us": round(hop_us, 1),
        }
    writes = args.tasks * args.writes
    print(f"group commit: {writes} single-entry writes by {args.tasks} tasks")
    for mode, runs in group.items():
        seconds = statistics.median(s for s, _ in runs)
        commits = statistics.median(c for _, c in runs)
        print(f"  {mode:<14}{writes / seconds:>10,.0f} writes/s{commits:>8.0f} commits")
        out[f"group_{mode}"] = {
            "writes_per_s": round(writes / seconds, 1),
            "commits": commits,
        }
    out["load"] = round(load, 2)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
