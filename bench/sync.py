"""Sync over loopback HTTP against the anchors of the same machine, measured in the same run.

Run: ``.venv/bin/python bench/sync.py [--entries 100000] [--writes 50] [--dir DIR]``.
Not a timed test; CI does not run it.

The owner peer runs in a child process (its own interpreter, ledger and ``SyncServer``), the
importing peer in this one, so the two do not share a GIL or an event loop. Measures:

- **import**: a new peer imports a bank of ``--entries`` entries (built with
  ``Ledger.write_many`` in batches of 1000) with ``Replicator.import_db`` over HTTP:
  access request, then every entry pulled in batches, validated and stored. Target <= 20 s.
- **write-to-visible delay**, both directions, ``--writes`` writes each (median, p95): a
  write on one peer until a listener on the other sees it committed. Importer to owner is a
  push on commit; owner to importer is the importer's long poll. Target <= 1 s.

Anchors: the same entries ingested from bytes in-process without HTTP (``Ledger.ingest`` in
batches of 1000, the floor of any import), an ed25519 verify of one entry, a bare aiohttp
loopback round trip and a signed sync request round trip (``heads``). Prints a table and
one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from chazbot.ledger import Applied, Entry, KeyPair, Ledger, Permission
from chazbot.sync import Replicator, SyncClient, SyncServer

TARGET_IMPORT_S = 20.0
TARGET_DELAY_S = 1.0
OWNER = KeyPair.from_private_bytes(bytes(range(32)))
IMPORTER = KeyPair.from_private_bytes(bytes(range(1, 33)))
WRITE = Permission.parse("write", 10)


def row(i: int) -> dict[str, list[Any]]:
    return {
        "memory": [
            {
                "op": "insert",
                "row": {
                    "key": f"bench.note.{i}",
                    "value": f"note {i}: the quick brown fox jumps over the lazy dog " * 3,
                    "tags": ["bench", f"t{i % 17}"],
                },
            }
        ]
    }


# ---- the owner, in a child process ------------------------------------------------------


async def serve(path: str, db: str) -> None:
    """Child: serve ``db``; write on ``write <n>``; report rows it sees arrive."""
    ledger = await Ledger.open(path)
    server = SyncServer(ledger, port=0)
    await server.start()
    await server.sharing.share(db)

    def seen(applied: Applied) -> None:
        now = time.time()
        for r in applied.rows:
            value = str(r.data.get("value", ""))
            if value.startswith("to-owner "):
                print(f"seen {value.split()[1]} {now:.6f}", flush=True)

    ledger.add_listener(seen)

    async def hello(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    bare = web.Application()
    bare.router.add_get("/", hello)
    runner = web.AppRunner(bare, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    bare_port = runner.addresses[0][1]
    print(f"ready {server.port} {bare_port}", flush=True)

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        cmd, _, arg = line.partition(" ")
        if cmd == "write":
            now = time.time()
            await ledger.write(
                db, OWNER, {"memory": [{"op": "insert", "row": {"value": f"to-importer {arg}"}}]}
            )
            print(f"wrote {arg} {now:.6f}", flush=True)
        elif cmd == "quit":
            break
    await runner.cleanup()
    await server.stop()
    await ledger.close()


class Child:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: asyncio.Queue[str] = asyncio.Queue()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            await self.lines.put(line.decode().strip())

    async def expect(self, prefix: str, timeout: float = 60.0) -> list[str]:
        while True:
            line = await asyncio.wait_for(self.lines.get(), timeout)
            if line.startswith(prefix):
                return line.split()[1:]

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()


# ---- measurements -------------------------------------------------------------------------


async def build_bank(path: Path, n: int) -> tuple[str, float]:
    ledger = await Ledger.open(path)
    started = time.perf_counter()
    db = await ledger.create_db(OWNER, {"name": "bench"}, [(IMPORTER.public, WRITE)])
    for start in range(0, n - 1, 1000):
        await ledger.write_many(db, OWNER, [row(i) for i in range(start, min(n - 1, start + 1000))])
    took = time.perf_counter() - started
    await ledger.close()
    return db, took


async def anchor_ingest(bank: Path, tmp: Path, db: str) -> tuple[float, float, int, int]:
    source = await Ledger.open(bank)
    raw = [data for _, data in await source.entries(db, 0, 10_000_000)]
    await source.close()
    fresh = await Ledger.open(tmp / "anchor.sqlite3")
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(0, len(raw), 1000):
        result = await fresh.ingest(raw[i : i + 1000])
        assert not result.rejected, result.rejected[:1]
    took, cpu = time.perf_counter() - started, time.process_time() - cpu
    await fresh.close()
    return took, cpu, len(raw), sum(map(len, raw))


def anchor_verify(bank_entry: bytes, reps: int = 2000) -> float:
    started = time.perf_counter()
    for _ in range(reps):
        Entry.decode(bank_entry)
    return (time.perf_counter() - started) / reps


async def anchor_round_trips(
    bare_port: int, address: str, db: str, reps: int = 200
) -> tuple[float, float]:
    bare: list[float] = []
    async with aiohttp.ClientSession() as session:
        for _ in range(reps):
            t = time.perf_counter()
            async with session.get(f"http://127.0.0.1:{bare_port}/") as resp:
                await resp.read()
            bare.append(time.perf_counter() - t)
    client = SyncClient(IMPORTER, allow_private_peers=True)  # on loopback
    signed: list[float] = []
    for _ in range(reps):
        t = time.perf_counter()
        await client.heads(address, db)
        signed.append(time.perf_counter() - t)
    await client.close()
    return statistics.median(bare), statistics.median(signed)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="chazbot-bench-sync-"))
    tmp.mkdir(parents=True, exist_ok=True)
    bank = tmp / "owner.sqlite3"
    for p in tmp.glob("*.sqlite3*"):
        p.unlink()
    try:
        print(f"building a bank of {args.entries} entries …", file=sys.stderr)
        db, build_s = await build_bank(bank, args.entries)
        print("anchor: in-process ingest …", file=sys.stderr)
        ingest_s, ingest_cpu_s, count, size = await anchor_ingest(bank, tmp, db)
        probe = await Ledger.open(bank)
        one = (await probe.entries(db, 5, 1))[0][1]
        await probe.close()
        verify_s = anchor_verify(one)

        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--serve",
            str(bank),
            db,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        child = Child(proc)
        port, bare_port = map(int, await child.expect("ready"))
        address = f"http:127.0.0.1:{port}"
        bare_rtt, signed_rtt = await anchor_round_trips(bare_port, address, db)

        print("import over HTTP …", file=sys.stderr)
        ledger = await Ledger.open(tmp / "importer.sqlite3")
        replicator = Replicator(ledger, IMPORTER, allow_private_peers=True)  # else defaults
        started, cpu = time.perf_counter(), time.process_time()
        result = await replicator.import_db(f"eidetica:?db={db}&pr={address}", "write")
        import_s = time.perf_counter() - started
        import_cpu_s = time.process_time() - cpu
        assert result.status == "done", result
        imported = await ledger.count_entries(db)
        assert imported == count, (imported, count)

        print("write-to-visible delays …", file=sys.stderr)
        arrived: dict[str, float] = {}
        event = asyncio.Event()

        def seen(applied: Applied) -> None:
            now = time.time()
            for r in applied.rows:
                value = str(r.data.get("value", ""))
                if value.startswith("to-importer "):
                    arrived[value.split()[1]] = now
                    event.set()

        ledger.add_listener(seen)
        await replicator.start()
        await asyncio.sleep(0.5)  # let the long poll settle
        to_owner: list[float] = []
        for i in range(args.writes):
            t = time.time()
            await ledger.write(
                db, IMPORTER, {"memory": [{"op": "insert", "row": {"value": f"to-owner {i}"}}]}
            )
            _, ts = await child.expect("seen")
            to_owner.append(float(ts) - t)
        to_importer: list[float] = []
        for i in range(args.writes):
            event.clear()
            await child.send(f"write {i}")
            _, ts = await child.expect("wrote")
            while str(i) not in arrived:
                await asyncio.wait_for(event.wait(), 30)
                event.clear()
            to_importer.append(arrived[str(i)] - float(ts))
        counters = replicator.counters.as_dict()
        await replicator.close()
        await ledger.close()
        await child.send("quit")
        await proc.wait()
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)

    return {
        "entries": count,
        "bank_bytes": size,
        "build_s": build_s,
        "import_s": import_s,
        "import_entries_per_s": count / import_s,
        "import_cpu_s": import_cpu_s,
        "anchor_ingest_s": ingest_s,
        "anchor_ingest_cpu_s": ingest_cpu_s,
        "anchor_verify_us": verify_s * 1e6,
        "anchor_bare_rtt_ms": bare_rtt * 1e3,
        "anchor_signed_rtt_ms": signed_rtt * 1e3,
        "delay_to_owner_median_ms": statistics.median(to_owner) * 1e3,
        "delay_to_owner_p95_ms": p95(to_owner) * 1e3,
        "delay_to_importer_median_ms": statistics.median(to_importer) * 1e3,
        "delay_to_importer_p95_ms": p95(to_importer) * 1e3,
        "writes": args.writes,
        "counters": counters,
        "cpus": os.cpu_count(),
        "load": os.getloadavg()[0],
    }


def table(r: dict[str, Any]) -> str:
    def ok(value: float, target: float) -> str:
        return "ok" if value <= target else "MISSED"

    lines = [
        f"{'measure':44} {'value':>12}  target",
        f"{'import ' + str(r['entries']) + ' entries over HTTP (s)':44} {r['import_s']:12.2f}  "
        f"<= {TARGET_IMPORT_S:g} {ok(r['import_s'], TARGET_IMPORT_S)}",
        f"{'  entries per second':44} {r['import_entries_per_s']:12.0f}",
        f"{'  CPU time of the importing process (s)':44} {r['import_cpu_s']:12.2f}",
        f"{'  anchor: in-process ingest, no HTTP (s)':44} {r['anchor_ingest_s']:12.2f}",
        f"{'  anchor: its CPU time (s)':44} {r['anchor_ingest_cpu_s']:12.2f}",
        f"{'  anchor: decode+verify one entry (us)':44} {r['anchor_verify_us']:12.1f}",
        f"{'  (building the bank took, s)':44} {r['build_s']:12.2f}",
        f"{'delay importer -> owner, median (ms)':44} {r['delay_to_owner_median_ms']:12.1f}  "
        f"<= {TARGET_DELAY_S * 1000:g} {ok(r['delay_to_owner_median_ms'] / 1000, TARGET_DELAY_S)}",
        f"{'delay importer -> owner, p95 (ms)':44} {r['delay_to_owner_p95_ms']:12.1f}",
        f"{'delay owner -> importer, median (ms)':44} {r['delay_to_importer_median_ms']:12.1f}  "
        f"<= {TARGET_DELAY_S * 1000:g} "
        f"{ok(r['delay_to_importer_median_ms'] / 1000, TARGET_DELAY_S)}",
        f"{'delay owner -> importer, p95 (ms)':44} {r['delay_to_importer_p95_ms']:12.1f}",
        f"{'  anchor: bare aiohttp round trip (ms)':44} {r['anchor_bare_rtt_ms']:12.2f}",
        f"{'  anchor: signed heads round trip (ms)':44} {r['anchor_signed_rtt_ms']:12.2f}",
        f"cpus {r['cpus']}, load {r['load']:.2f}, bank {r['bank_bytes'] / 1e6:.1f} MB",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=50)
    parser.add_argument("--dir", help="work directory (default: a temporary one)")
    parser.add_argument("--serve", nargs=2, metavar=("STATE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(*args.serve))
        return
    result = asyncio.run(run(args))
    print(table(result))
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
