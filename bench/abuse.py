"""A legitimate peer's write-to-visible delay while bogus requests flood the sync port.

Run: ``.venv/bin/python bench/abuse.py [--rate 500] [--seconds 20] [--writes 30]``.
Not a timed test; CI does not run it. Loopback only, bounded in time.

The owner is a real ``chazbot run`` subprocess sharing a bank; the legitimate peer (this
process) imports it, then measures write-to-visible delay (an owner write through the control
socket until the peer's long poll has it committed), first with no load, then while a flood
process sends ``--rate`` bogus requests per second from 127.0.0.2-127.0.0.5: a mix of
unsigned, badly signed under the legitimate key's name, validly signed by keys holding
nothing (a replay-cache flood), fresh-key ``/access`` requests, and oversized bodies.
Target: p95 under the flood <= 1 s. Prints the delays side by side, the flood's achieved rate
and statuses, and the owner's RSS before and peak (VmHWM) under the flood, with the load
average; one JSON line at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from chazbot.ledger import KeyPair
from chazbot.sync.protocol import (
    KEY_HEADER,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
    sign_request,
)


def _bogus(
    kind: int, db: str, legit_key: str, strangers: list[KeyPair]
) -> tuple[str, bytes, dict[str, str]]:
    names = ("heads", "entries", "push", "access")
    name = names[kind % 4]
    path = f"/v1/dbs/{db}/{name}"
    body = b'{"permission": "write"}' if name == "access" else b"{}"
    style = kind % 5
    if style == 0:  # unsigned
        return path, body, {}
    if style == 1:  # badly signed under the legitimate key's name
        return (
            path,
            body,
            {
                KEY_HEADER: legit_key,
                TIME_HEADER: str(int(time.time() * 1000)),
                NONCE_HEADER: secrets.token_hex(16),
                SIGNATURE_HEADER: secrets.token_hex(64),
            },
        )
    if style == 4:  # oversized (announced, refused from the head)
        path = f"/v1/dbs/{db}/heads"
        body = b"x" * 4096
    key = strangers[kind % len(strangers)]
    return path, body, sign_request(key, "POST", path, body, time.time())


async def _flood(
    address: str, db: str, legit_key: str, rate: float, seconds: float
) -> dict[str, Any]:
    strangers = [KeyPair.generate() for _ in range(200)]
    statuses: Counter[str] = Counter()
    sessions = [
        aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(local_addr=(f"127.0.0.{2 + i}", 0), limit=32),
            timeout=aiohttp.ClientTimeout(total=10),
        )
        for i in range(4)
    ]
    inflight: set[asyncio.Task[None]] = set()

    async def one(n: int) -> None:
        path, body, headers = _bogus(n, db, legit_key, strangers)
        try:
            async with sessions[n % 4].post(f"{address}{path}", data=body, headers=headers) as r:
                await r.read()
                statuses[str(r.status)] += 1
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            statuses[type(exc).__name__] += 1

    started = time.monotonic()
    sent = 0
    try:
        while (now := time.monotonic() - started) < seconds:
            due = int(now * rate)
            while sent < due:
                if len(inflight) < 256:
                    task = asyncio.create_task(one(sent))
                    inflight.add(task)
                    task.add_done_callback(inflight.discard)
                else:
                    statuses["skipped (256 in flight)"] += 1
                sent += 1
            await asyncio.sleep(0.005)
        if inflight:
            await asyncio.wait(inflight, timeout=15)
    finally:
        for session in sessions:
            await session.close()
    took = time.monotonic() - started
    answered = sum(n for k, n in statuses.items() if k.isdigit())
    return {
        "sent": sent,
        "seconds": round(took, 1),
        "rate": round(sent / took),
        "answered_rate": round(answered / took),
        "statuses": dict(statuses),
    }


def _flood_main(
    address: str, db: str, legit_key: str, rate: float, seconds: float, out: Any
) -> None:
    out.put(asyncio.run(_flood(address, db, legit_key, rate, seconds)))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from tests.test_abuse_support import legit_peer, start_served, stop_served, visible_delay

    work = Path(tempfile.mkdtemp(prefix="chazbot-abuse-"))
    served = await start_served(work / "owner")
    node = await legit_peer(served, work / "peer.sqlite3")
    try:
        for _ in range(3):  # warm up
            await visible_delay(served, node)
        quiet = [await visible_delay(served, node) for _ in range(args.writes)]
        rss_before = served.rss_kb()
        queue: Any = multiprocessing.get_context("spawn").Queue()
        flood = multiprocessing.get_context("spawn").Process(
            target=_flood_main,
            args=(
                f"http://127.0.0.1:{served.sync_port}",
                served.db,
                node.key.public,
                args.rate,
                args.seconds,
                queue,
            ),
        )
        flood.start()
        await asyncio.sleep(min(2.0, args.seconds / 4))  # the flood is under way
        loaded: list[float] = []
        deadline = time.monotonic() + args.seconds - 3
        while len(loaded) < args.writes and time.monotonic() < deadline:
            loaded.append(await visible_delay(served, node, 30))
        report = await asyncio.to_thread(queue.get, True, args.seconds + 60)
        await asyncio.to_thread(flood.join, 30)
        peak = served.peak_kb()
        after = served.rss_kb()
        alive = served.alive()
    finally:
        await node.close()
        await stop_served(served)
        shutil.rmtree(work, ignore_errors=True)
    return {
        "bench": "abuse",
        "rate_asked": args.rate,
        "flood": report,
        "quiet_ms": {
            "median": round(statistics.median(quiet) * 1000),
            "p95": round(_pct(quiet, 0.95) * 1000),
        },
        "flood_ms": {
            "n": len(loaded),
            "median": round(statistics.median(loaded) * 1000),
            "p95": round(_pct(loaded, 0.95) * 1000),
            "max": round(max(loaded) * 1000),
        },
        "rss_mb": {
            "before": round(rss_before / 1024),
            "peak": round(peak / 1024),
            "after": round(after / 1024),
        },
        "alive": alive,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--writes", type=int, default=30)
    result = asyncio.run(main(parser.parse_args()))
    q, f, r, fl = result["quiet_ms"], result["flood_ms"], result["rss_mb"], result["flood"]
    print(f"load average {result['loadavg']}")
    print(
        f"flood: asked {result['rate_asked']:.0f}/s, due {fl['rate']}/s, answered "
        f"{fl['answered_rate']}/s for {fl['seconds']} s (at most 256 in flight)"
    )
    print(f"flood statuses: {fl['statuses']}")
    print(f"write-to-visible, no load:  median {q['median']} ms, p95 {q['p95']} ms")
    print(
        f"write-to-visible, flooded:  median {f['median']} ms, p95 {f['p95']} ms, "
        f"max {f['max']} ms (n={f['n']})"
    )
    print(
        f"owner RSS: {r['before']} MB before, peak {r['peak']} MB, {r['after']} MB after; "
        f"alive {result['alive']}"
    )
    print(json.dumps(result))
    sys.exit(0 if result["alive"] and f["p95"] <= 1000 else 1)
