"""The memory page with 10,000 rows: how long a page takes, against anchors of the same run.

Run: ``.venv/bin/python bench/web.py [--rows 10000] [--reps 20]``. Not a timed test; CI does
not run it.

On a fresh state (real SQLite, in a temporary directory) one person has said ``--rows`` rows
to an agent and a bank holds ``--rows`` rows; the page is served on a loopback port and
fetched with a signed-in session. Each page's time is the whole HTTP round trip over
loopback (so the server's time is at most that): a person's first page, their last page,
a search of their rows, a bank's first page, and a bank search ranked as recall ranks. The
target (SPEC §10, issue #23) is at most 300 ms per page, paginated.

Anchors, measured in the same run on the same rows: ``/healthz`` over the same listener (the
HTTP floor) and ``/memory mine`` through the command layer (the chat's read of the same rows,
no HTTP, no HTML). Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from chazbot.commands.web_cmds import issue_link
from chazbot.config import parse_config
from chazbot.memory.audience import Provenance, room_audience
from chazbot.memory.rows import MEMORY_STORE, remember_ops
from chazbot.peer import Peer
from chazbot.transports.http import HttpServer
from chazbot.transports.web import WebUI

TARGET_MS = 300.0
PER_ENTRY = 1_000  # rows per signed entry (an entry holds at most 4,096 operations)
ALICE, BOB, ADMIN = "@alice:example.org", "@bob:example.org", "@admin:example.org"
ROOM = "matrix:!room:example.org"
WORDS = [
    "apple",
    "river",
    "stone",
    "garden",
    "window",
    "coffee",
    "music",
    "winter",
    "paper",
    "light",
    "forest",
    "honey",
]


def value_of(i: int) -> str:
    w = WORDS
    return f"{w[i % 12]} {w[(i // 12) % 12]} {w[(i // 144) % 12]} note number {i}"


async def fill(peer: Peer, rows: int) -> None:
    """``rows`` rows said by Alice (in a room with Bob) to chaz, and ``rows`` in bank team."""
    agent = peer.agent("chaz")
    origin = Provenance.of(ROOM, ALICE, [ALICE, BOB])
    await peer.command("/memory new team")
    hosted = await peer.registry.get("bank", "team")
    assert hosted is not None
    bank_key = await peer.registry.key("bank:team")
    assert bank_key is not None
    for start in range(0, rows, PER_ENTRY):
        mine: list[Any] = []
        bank: list[Any] = []
        for i in range(start, min(start + PER_ENTRY, rows)):
            mine += remember_ops(f"k{i}", value_of(i), [], None, None, None, origin, ROOM)[
                MEMORY_STORE
            ]
            bank += remember_ops(f"b{i}", value_of(i), [], None, None)[MEMORY_STORE]
        await peer.ledger.write(agent.db, agent.key, {MEMORY_STORE: mine})
        await peer.ledger.write(hosted.db, bank_key, {MEMORY_STORE: bank})


async def signed_in(base: str, peer: Peer, person: str) -> aiohttp.ClientSession:
    client = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    url = await issue_link(peer.ledger, peer.config, person, person == ADMIN)
    async with client.get(url) as page:
        token = re.search(r'name="t" value="([^"]+)"', await page.text())
    assert token is not None
    async with client.post(f"{base}/ui/login", data={"t": token.group(1)}) as done:
        assert done.status == 200, done.status
    return client


async def timed(reps: int, call: Callable[[], Awaitable[None]]) -> list[float]:
    await call()  # warm: the view loads on first use
    found = []
    for _ in range(reps):
        started = time.perf_counter()
        await call()
        found.append((time.perf_counter() - started) * 1000)
    return found


def fetch(client: aiohttp.ClientSession, url: str, expect: str) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        async with client.get(url) as page:
            text = await page.text()
            assert page.status == 200 and expect in text, (url, page.status, text[:300])

    return call


async def main(rows: int, reps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="chazbot-bench-web-") as tmp:
        cfg = parse_config(
            {
                "state_dir": tmp,
                "sync_listen": "",
                "http_listen": "127.0.0.1:0",
                "embedding": None,
                "matrix": {
                    "homeserver_url": "http://127.0.0.1:9",
                    "user_id": "@chazbot:example.org",
                    "allow_list": [ALICE, BOB],
                    "admins": [ADMIN],
                },
                "web": {"enabled": True, "public_url": "http://127.0.0.1:9"},
            }
        )
        peer = await Peer.open(cfg)
        server = HttpServer(peer, "127.0.0.1:0", None, WebUI(peer).mount)
        try:
            started = time.perf_counter()
            await fill(peer, rows)
            filled = time.perf_counter() - started
            await server.start()
            base = f"http://127.0.0.1:{server.port}"
            peer.hosting.config = cfg.model_copy(
                update={"web": cfg.web.model_copy(update={"public_url": base})}
            )
            alice = await signed_in(base, peer, ALICE)
            admin = await signed_in(base, peer, ADMIN)
            last = (rows - 1) // 50
            dm = room_audience("dm-alice", {ALICE}, lambda u: False)

            async def mine() -> None:
                reply = await peer.command(
                    "/memory mine", session="dm-alice", sender=ALICE, audience=dm
                )
                assert reply.ok and f"{rows} rows" in reply.text, reply.text[:200]

            cases: dict[str, Callable[[], Awaitable[None]]] = {
                "anchor: /healthz": fetch(alice, f"{base}/healthz", "ok"),
                "anchor: /memory mine (command)": mine,
                "person, first page": fetch(alice, f"{base}/ui/me", f"{rows} rows"),
                "person, last page": fetch(alice, f"{base}/ui/me?page={last}", "rows"),
                "person, search": fetch(alice, f"{base}/ui/me?q=river+stone", "matching"),
                "bank, first page": fetch(admin, f"{base}/ui/admin/banks/team", "newest first"),
                "bank, recall search": fetch(
                    admin, f"{base}/ui/admin/banks/team?q=river+stone", "best match"
                ),
            }
            results = {name: await timed(reps, call) for name, call in cases.items()}
            await alice.close()
            await admin.close()
        finally:
            await server.stop()
            await peer.close()
    width = max(len(n) for n in results)
    print(f"{rows} rows said by one person and {rows} in a bank; filled in {filled:.1f} s")
    print(f"{'page':<{width}}  {'p50 ms':>8}  {'p95 ms':>8}  {'max ms':>8}")
    summary: dict[str, Any] = {"rows": rows, "reps": reps, "target_ms": TARGET_MS, "pages": {}}
    for name, times in results.items():
        ordered = sorted(times)
        p50, p95 = statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]
        print(f"{name:<{width}}  {p50:8.1f}  {p95:8.1f}  {ordered[-1]:8.1f}")
        summary["pages"][name] = {
            "p50_ms": round(p50, 2),
            "p95_ms": round(p95, 2),
            "max_ms": round(ordered[-1], 2),
        }
    pages = [v for k, v in summary["pages"].items() if not k.startswith("anchor")]
    summary["within_target"] = all(p["max_ms"] <= TARGET_MS for p in pages)
    print(f"every page within {TARGET_MS:g} ms: {summary['within_target']}")
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    outcome = asyncio.run(main(args.rows, args.reps))
    sys.exit(0 if outcome["within_target"] else 1)
