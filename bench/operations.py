"""Operating a running peer (#26): the service's event-loop lag during a 100k-row import through
its control socket, and the time of a backup of a 1M-row state, against anchors of the same run.

Run: ``.venv/bin/python bench/operations.py [--import-rows 100000] [--backup-rows 1000000]``.
Not a timed test; CI does not run it.

Lag: a peer on a fresh state (real SQLite in a temporary directory, BM25 only) serves its
control socket in this process's event loop, as ``chazbot run`` does; a probe in the same
loop sleeps 5 ms again and again and records how late each wake-up is. ``chazbot import-file``
runs as a subprocess and sends ``--import-rows`` rows through the socket, while a second
client asks ``/memory list`` through the socket every 50 ms (a chat's round trip). Anchor: the
same probe and the same requests for 3 s with nothing else running. Target: p99 lag ≤ 50 ms.

``--embedder default`` (issue 35): the same import with the default (local) embedder. Rows are
written first, at disk speed, and their vectors owed to the background queue: printed are the
import's time (target <= 60 s for 100k rows), a recall right after it returns (the last row
found by BM25 at once), the background vectors' rate and the loop's lag while they are written
(``--vector-seconds``), then, the service closed (what is owed is recorded), a new peer's open
of the bank and its first recall (target <= 1.5 s; the embedder's own first load is made before
the clock starts).

Backup: ``--backup-rows`` rows are written into a bank (entries of 4,000 rows, straight on the
ledger), then the state file is copied three ways, the state at rest: ``chazbot backup``'s own
``write_backup`` (SQLite's online backup in one step, the sha256s, the tar), and the anchors
``sqlite3``'s backup API alone (what ``sqlite3 .backup`` does) and a plain file copy. Prints a
table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from chazbot.config import parse_config
from chazbot.ledger.archive import write_backup
from chazbot.memory.banks import writer_key_for
from chazbot.memory.rows import MEMORY_STORE
from chazbot.peer import STATE_FILE, Peer
from chazbot.transports.control import ControlServer
from chazbot.transports.control_client import send_to_service

LOAD_VIEW = True
EMBEDDER = "none"  # or "default": the local embedder a config without ``embedding`` gets
VECTOR_SECONDS = 20.0


def bench_config(where: Path) -> Any:
    """A peer in ``where/state``: no listeners, BM25 only (no local model) unless
    ``EMBEDDER`` is ``default``."""
    where.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {"state_dir": str(where / "state"), "sync_listen": "", "http_listen": ""}
    if EMBEDDER == "none":
        data["embedding"] = None
    return parse_config(data, "bench")


def pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Probe:
    """Wakes every 5 ms in the loop and records how late each wake-up was (ms)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.rtts: list[float] = []

    async def lag(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            self.lags.append((time.perf_counter() - start - 0.005) * 1000)

    async def chat(self, peer: Peer, stop: asyncio.Event) -> None:
        while not stop.is_set():
            start = time.perf_counter()
            reply = await send_to_service(peer.config, {"op": "cmd", "text": "/memory list"})
            assert reply is not None and reply["ok"], reply
            self.rtts.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(0.05)

    def row(self) -> dict[str, float]:
        return {
            "lag_p50_ms": round(pct(self.lags, 0.5), 2),
            "lag_p99_ms": round(pct(self.lags, 0.99), 2),
            "lag_max_ms": round(max(self.lags, default=0.0), 2),
            "chat_p50_ms": round(pct(self.rtts, 0.5), 2),
            "chat_p99_ms": round(pct(self.rtts, 0.99), 2),
        }


async def import_lag(where: Path, rows: int) -> dict[str, Any]:
    cfg = bench_config(where)
    embedding = "embedding: null\n" if EMBEDDER == "none" else ""
    (where / "config.yaml").write_text(
        f'state_dir: {where / "state"}\nsync_listen: ""\nhttp_listen: ""\n{embedding}'
    )
    lines = [
        json.dumps({"key": f"k{i}", "value": f"row {i} about topic {i % 97} and more", "tags": []})
        for i in range(rows)
    ]
    (where / "rows.jsonl").write_text("\n".join(lines) + "\n")
    peer = await Peer.open(cfg, role="service")
    server = ControlServer(peer)
    await server.start()
    try:
        reply = await send_to_service(cfg, {"op": "cmd", "text": "/memory new notes"})
        assert reply is not None and reply["ok"], reply
        if LOAD_VIEW:  # as after a recall in the bank: each commit updates its index
            await peer.memory.view((await peer.registry.get("bank", "notes")).db)  # type: ignore[union-attr]

        idle, busy = Probe(), Probe()
        stop = asyncio.Event()
        tasks = [asyncio.create_task(idle.lag(stop)), asyncio.create_task(idle.chat(peer, stop))]
        await asyncio.sleep(3.0)
        stop.set()
        await asyncio.gather(*tasks)

        stop = asyncio.Event()
        tasks = [asyncio.create_task(busy.lag(stop)), asyncio.create_task(busy.chat(peer, stop))]
        env = {**os.environ, "CHAZBOT_CONFIG": str(where / "config.yaml")}
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "chazbot.cli", "import-file", "notes", "rows.jsonl"),
            cwd=where,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        out, _ = await proc.communicate()
        seconds = time.perf_counter() - started
        stop.set()
        await asyncio.gather(*tasks)
        assert proc.returncode == 0 and f"imported {rows} rows".encode() in out, out
        db = (await peer.registry.get("bank", "notes")).db  # type: ignore[union-attr]
        extra: dict[str, Any] = {}
        if peer.memory.vectors_later is not None:
            extra = await after_import(peer, db, rows)
    finally:
        await server.stop()
        await peer.close()
    if EMBEDDER != "none":
        extra["open + first recall after the import"] = await first_recall(cfg, db)
        extra["anchor: without the snapshot"] = await first_recall(cfg, db, snapshot=False)
    return {
        "rows": rows,
        "embedder": peer.memory.model or "none",
        "import_s": round(seconds, 2),
        "rows_per_s": round(rows / seconds),
        "during import": busy.row(),
        "anchor: idle": idle.row(),
        **extra,
    }


async def after_import(peer: Peer, db: str, rows: int) -> dict[str, Any]:
    """Right after the import returned: the last row found at once, then the background
    vectors' rate and the loop's lag for ``VECTOR_SECONDS``."""
    started = time.perf_counter()
    found = await peer.memory.recall(db, f"k{rows - 1}", limit=5)
    search_ms = (time.perf_counter() - started) * 1000
    assert any(r.row.key == f"k{rows - 1}" for r in found), [r.row.key for r in found]
    queue = peer.memory.vectors_later
    assert queue is not None
    probe, stop = Probe(), asyncio.Event()
    tasks = [asyncio.create_task(probe.lag(stop)), asyncio.create_task(probe.chat(peer, stop))]
    written, started = queue.written, time.perf_counter()
    await asyncio.sleep(VECTOR_SECONDS)
    stop.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    done = queue.written - written
    return {
        "found at once (ms)": round(search_ms, 1),
        "background vectors/s": round(done / elapsed, 1),
        "vectors written in the window": done,
        "vectors owed after it": queue.owed_in(db),
        "during background vectors": probe.row(),
    }


async def first_recall(cfg: Any, db: str, snapshot: bool = True) -> float:
    """A new peer on the state: its embedder loaded first, then the clock on the bank's open
    (its index, from the snapshot the import left) and first recall. ``snapshot=False``, the
    anchor: the snapshots deleted first, so the index is read from every row (as before the
    import saved one)."""
    if not snapshot:
        shutil.rmtree(Path(cfg.state_dir) / "index", ignore_errors=True)
    peer = await Peer.open(cfg)
    try:
        if peer.memory.embedder is not None:
            await peer.memory.embedder.embed_query("warm the model up")
        started = time.perf_counter()
        found = await peer.memory.recall(db, "row 4242 about topic", limit=10)
        seconds = time.perf_counter() - started
        assert found
        status = peer.memory.load_status(db)
        assert status is not None and status.from_snapshot == snapshot, status
    finally:
        await peer.close()
    return round(seconds, 2)


async def build_state(where: Path, rows: int) -> Path:
    cfg = bench_config(where)
    peer = await Peer.open(cfg)
    try:
        reply = await peer.command("/memory new big")
        assert reply.ok, reply.text
        found = await peer.registry.get("bank", "big")
        assert found is not None
        key = await writer_key_for(peer.ledger, peer.registry, found.db)
        batch = 4000
        for start in range(0, rows, batch):
            ops = [
                {"op": "insert", "row": {"key": f"k{i}", "value": f"row {i} of the big bank"}}
                for i in range(start, min(rows, start + batch))
            ]
            await peer.ledger.write(found.db, key, {MEMORY_STORE: ops})
    finally:
        await peer.close()
    return where / "state"


def backup_times(state: Path, out: Path) -> dict[str, Any]:
    source = state / STATE_FILE
    timings: dict[str, float] = {}
    started = time.perf_counter()
    made = write_backup(state, out / "chazbot.backup")
    timings["chazbot backup (write_backup)"] = time.perf_counter() - started

    started = time.perf_counter()
    src, dst = sqlite3.connect(source), sqlite3.connect(out / "anchor.sqlite3")
    src.backup(dst)
    dst.close()
    src.close()
    timings["anchor: sqlite3 backup API"] = time.perf_counter() - started

    started = time.perf_counter()
    shutil.copyfile(source, out / "anchor.copy")
    timings["anchor: plain file copy"] = time.perf_counter() - started
    return {
        "state_mb": round(source.stat().st_size / 1e6, 1),
        "backup_mb": round(made.size / 1e6, 1),
        "seconds": {k: round(v, 2) for k, v in timings.items()},
    }


async def main(import_rows: int, backup_rows: int) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if import_rows:
            summary["import"] = await import_lag(Path(tmp) / "lag", import_rows)
        if backup_rows:
            started = time.perf_counter()
            state = await build_state(Path(tmp) / "big", backup_rows)
            summary["backup"] = {
                "rows": backup_rows,
                "build_s": round(time.perf_counter() - started, 1),
                **await asyncio.to_thread(backup_times, state, Path(tmp)),
            }
    return summary


def report(summary: dict[str, Any]) -> None:
    if "import" in summary:
        imp = summary["import"]
        print(f"import of {imp['rows']} rows through the service: {imp['import_s']} s")
        print(
            f"{'':24} {'lag p50':>9} {'lag p99':>9} {'lag max':>9} {'chat p50':>9} {'chat p99':>9}"
        )
        for name in ("during import", "anchor: idle"):
            r = imp[name]
            print(
                f"{name:24} {r['lag_p50_ms']:>9} {r['lag_p99_ms']:>9} {r['lag_max_ms']:>9}"
                f" {r['chat_p50_ms']:>9} {r['chat_p99_ms']:>9}"
            )
        ok = imp["during import"]["lag_p99_ms"] <= 50
        print(f"target p99 lag <= 50 ms: {'met' if ok else 'NOT met'}")
        if "background vectors/s" in imp:
            r = imp["during background vectors"]
            print(
                f"{'during background vectors':24} {r['lag_p50_ms']:>9} {r['lag_p99_ms']:>9}"
                f" {r['lag_max_ms']:>9} {r['chat_p50_ms']:>9} {r['chat_p99_ms']:>9}"
            )
            print(
                f"embedder {imp['embedder']}: import {imp['import_s']} s (target <= 60 s),"
                f" last row found at once in {imp['found at once (ms)']} ms; background"
                f" vectors {imp['background vectors/s']}/s"
            )
        if "open + first recall after the import" in imp:
            first = imp["open + first recall after the import"]
            anchor = imp["anchor: without the snapshot"]
            print(
                f"open + first recall of the bank after its import: {first} s (target <= 1.5 s;"
                f" anchor, the snapshot deleted: {anchor} s)"
            )
    if "backup" in summary:
        b = summary["backup"]
        print(f"backup of {b['rows']} rows (state file {b['state_mb']} MB):")
        for name, secs in b["seconds"].items():
            print(f"  {name:34} {secs:>8} s")
    print(json.dumps(summary))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--import-rows", type=int, default=100_000)
    parser.add_argument("--backup-rows", type=int, default=1_000_000)
    parser.add_argument("--no-view", action="store_true", help="the bank's view not loaded")
    parser.add_argument("--embedder", choices=("none", "default"), default="none")
    parser.add_argument("--vector-seconds", type=float, default=VECTOR_SECONDS)
    args = parser.parse_args()
    EMBEDDER, VECTOR_SECONDS = args.embedder, args.vector_seconds
    LOAD_VIEW = not args.no_view
    report(asyncio.run(main(args.import_rows, args.backup_rows)))
