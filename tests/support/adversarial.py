"""A hostile writer and real loopback peers to deliver its entries to.

The hostile side signs entries by hand (``forge``), bypassing every check a well-behaved
chazbot makes before it signs, and delivers them the two ways sync moves entries:

- ``push``: a signed ``/push`` to the owner's sync server (as any key holding read may);
- ``serve``: the entries are written straight into a relay peer's SQLite file, so the relay
  serves them when the owner pulls from it (a peer whose file was tampered with).

Each test then asserts what every peer shows: rows, recall, auth state and tips.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chazbot.ledger import KeyPair, Ledger, Permission
from chazbot.ledger.encoding import content_id, encode_checked
from chazbot.ledger.records import DEFAULT_LIMITS, KeptLimits
from chazbot.memory.engine import MemoryEngine
from chazbot.sync import SyncClient
from chazbot.sync.wire import PushAnswer as PushResult
from tests.support.sync import Node, snapshot, wait_until

WRITE = Permission.parse("write", 10)
READ = Permission.parse("read")
YEAR_US = 365 * 24 * 3600 * 1_000_000


def forge(
    key: KeyPair,
    db: str,
    parents: list[str],
    height: int,
    ops: dict[str, list[Any]],
    ts: int | None = None,
) -> bytes:
    """Sign an entry exactly as given: no shape, bound or permission check on our side."""
    body: dict[str, Any] = {
        "v": 1,
        "db": db,
        "parents": sorted(parents),
        "height": height,
        "ops": ops,
        "author": key.public,
        "ts": time.time_ns() // 1000 if ts is None else ts,
    }
    body["sig"] = key.sign(encode_checked(body)).hex()
    return encode_checked(body)


def remember(key: str, value: str, tags: list[str] | None = None) -> dict[str, list[Any]]:
    row: dict[str, Any] = {"key": key, "value": value, "tags": tags or []}
    return {"memory": [{"op": "insert", "row": row}]}


def forget(key: str) -> dict[str, list[Any]]:
    return {"memory": [{"op": "insert", "row": {"key": key, "forget": True}}]}


async def head(ledger: Ledger, db: str) -> tuple[list[str], int]:
    """The current tips of ``db`` and the height an entry on top of them must have."""
    tips = await ledger.tips(db)
    heights = [(await ledger.entry(t)).height for t in tips]
    return tips, max(heights) + 1


@dataclass
class Arena:
    """An owner peer ``a`` serving a shared bank, a relay peer ``b`` that imported it, and a
    hostile key that held write on it."""

    a: Node
    b: Node
    owner: KeyPair
    hostile: KeyPair
    db: str
    memory_a: MemoryEngine
    memory_b: MemoryEngine

    @classmethod
    async def open(cls, tmp: Path, limits: KeptLimits = DEFAULT_LIMITS) -> Arena:
        """Peers a and b sharing one bank; ``limits``: what a's ledger keeps of late writes."""
        a = await Node.open(tmp / "a.sqlite3", limits=limits)
        b = await Node.open(tmp / "b.sqlite3")
        owner, hostile = KeyPair.generate(), KeyPair.generate()
        db = await a.ledger.create_db(owner, {"name": "notes"}, [(hostile.public, WRITE)])
        await a.ledger.set_auth(db, owner, b.key.public, WRITE)
        await a.ledger.set_auth(db, owner, a.key.public, READ)  # a pulls from b as well
        await a.serving.share(db)
        done = await b.replicator.import_db(await a.server.ticket(db), "write")
        assert done.status == "done"
        await b.serving.share(db)
        return cls(a, b, owner, hostile, db, MemoryEngine(a.ledger), MemoryEngine(b.ledger))

    async def close(self) -> None:
        await self.a.close()
        await self.b.close()

    async def push(self, entries: list[bytes], key: KeyPair | None = None) -> PushResult:
        """POST entries to a's sync server, signed by ``key`` (the hostile key by default)."""
        client = SyncClient(key or self.hostile, timeout=10.0, allow_private_peers=True)
        try:
            return await client.push(self.a.address, self.db, entries)
        finally:
            await client.close()

    async def push_to(
        self, node: Node, entries: list[bytes], key: KeyPair | None = None
    ) -> PushResult:
        """POST entries to ``node``'s sync server, signed by ``key`` (the hostile key)."""
        client = SyncClient(key or self.hostile, timeout=30.0, allow_private_peers=True)
        try:
            return await client.push(node.address, self.db, entries)
        finally:
            await client.close()

    async def plant(self, entries: list[bytes]) -> None:
        """Write entries into b's file behind its back, as tips (a tampered relay serves
        them); b is closed meanwhile and opened again on the same port."""
        port = self.b.server.port
        await self.b.close()
        conn = sqlite3.connect(self.b.path, isolation_level=None)
        try:
            for data in entries:
                eid = content_id(data)
                conn.execute(
                    "INSERT INTO entries (id, db, height, author, ts, auth_set, data) "
                    "VALUES (?, ?, 0, '', 0, 0, ?)",
                    (eid, self.db, data),
                )
                conn.execute("INSERT INTO tips (db, id) VALUES (?, ?)", (self.db, eid))
        finally:
            conn.close()
        self.b = await Node.open(self.b.path, self.b.key, port)
        self.memory_b = MemoryEngine(self.b.ledger)

    async def pull_from_b(self, expect_seen: set[str]) -> None:
        """Make a pull from b and wait until a has answered every planted entry (stored or
        refused: ``expect_seen`` are the ids that must be stored)."""
        await self.a.replicator.add_remote(self.db, self.b.address)
        await self.a.replicator.sync_now(self.db)

        async def arrived() -> bool:
            for eid in expect_seen:
                try:
                    await self.a.ledger.entry(eid)
                except Exception:
                    return False
            return True

        await wait_until(arrived, timeout=20, what="a to pull the planted entries")

    async def visible(self, node: Node) -> dict[str, str]:
        """Key -> value of what recall can return on ``node`` (newest per key, not forgotten)."""
        engine = self.memory_a if node is self.a else self.memory_b
        view = await engine.view(self.db)
        return {r.key: r.value for r in view.latest.values() if not r.forgotten}

    async def converged(self) -> bool:
        return await snapshot(self.a.ledger, self.db) == await snapshot(self.b.ledger, self.db)
