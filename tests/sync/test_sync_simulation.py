"""A seeded simulation: several writers, entries delivered out of order and more than once.

Writers write and now and then merge each other's logs, so the entries form a real DAG with
concurrent branches, auth changes and competing single-valued fields. The union of their
entries is then delivered to a peer through its sync server in a shuffled order, with
duplicates, in batches of random size; entries refused for a missing parent are delivered
again in a later round, as a retrying sender would. The receiver must end in exactly the
state of a reference ledger that took everything at once, and a third peer pulling from
the receiver must end there too.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chazbot.errors import PermissionDenied
from chazbot.ledger import KeyPair, Ledger, Permission, content_id
from chazbot.sync import Replicator, SyncClient, SyncServer
from tests.support.sync import FAST, insert, set_meta, snapshot

OWNER = KeyPair.from_private_bytes(b"\x01" * 32)
WRITERS = [KeyPair.from_private_bytes(bytes([n]) * 32) for n in (2, 3)]
RECEIVER = KeyPair.from_private_bytes(b"\x09" * 32)
WRITE = Permission.parse("write", 10)

step = st.one_of(
    st.tuples(st.just("insert"), st.integers(0, 2), st.integers(0, 99)),
    st.tuples(st.just("meta"), st.integers(0, 2), st.integers(0, 9)),
    st.tuples(st.just("merge"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("revoke"), st.just(0), st.integers(0, 1)),
)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    steps=st.lists(step, min_size=5, max_size=30),
    rnd=st.randoms(use_true_random=False),
    duplicate_share=st.floats(0.0, 0.5),
)
def test_reordered_duplicated_deliveries_converge(
    steps: list[tuple[str, int, int]], rnd: random.Random, duplicate_share: float
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_simulate(Path(tmp), steps, rnd, duplicate_share))


async def _simulate(
    tmp: Path, steps: list[tuple[str, int, int]], rnd: random.Random, duplicate_share: float
) -> None:
    writers = [await Ledger.open(tmp / f"w{n}.sqlite3") for n in range(3)]
    keys = [OWNER, *WRITERS]
    db = await writers[0].create_db(
        OWNER, {"name": "sim"}, [(k.public, WRITE) for k in WRITERS] + [(RECEIVER.public, WRITE)]
    )
    genesis = [d for _, d in await writers[0].entries(db)]
    for w in writers[1:]:
        await w.ingest(genesis)
    for kind, who, arg in steps:
        try:
            if kind == "insert":
                await writers[who].write(db, keys[who], insert(arg))
            elif kind == "meta":
                await writers[who].write(db, keys[who], set_meta("topic", arg))
            elif kind == "merge" and who != arg:
                await writers[arg].ingest([d for _, d in await writers[who].entries(db)])
            elif kind == "revoke":
                await writers[0].set_auth(db, OWNER, WRITERS[arg].public, WRITE, active=False)
        except PermissionDenied:
            pass  # a revoked writer's write is refused, as it should be
    union: dict[bytes, None] = {}
    for w in writers:
        for _, data in await w.entries(db, 0, 1_000_000):
            union[data] = None
    everything = list(union)

    reference = await Ledger.open(tmp / "reference.sqlite3")
    refused = (await reference.ingest(everything)).rejected  # only soft-failed on arrival
    assert all(why.startswith("soft-failed on arrival") for _, why in refused), refused

    receiver = await Ledger.open(tmp / "receiver.sqlite3")
    await receiver.ingest(genesis)  # it holds the database (as an importer would)
    server = SyncServer(receiver, port=0)
    await server.start()
    await server.serving.share(db)
    client = SyncClient(RECEIVER, allow_private_peers=True)
    far = await Ledger.open(tmp / "far.sqlite3")
    replicator = Replicator(far, KeyPair.generate(), **FAST)
    try:
        pending = everything + rnd.sample(everything, int(len(everything) * duplicate_share))
        for _ in range(len(everything) + 1):
            if not pending:
                break
            rnd.shuffle(pending)
            again: list[bytes] = []
            while pending:
                size = rnd.randint(1, 8)
                chunk, pending = pending[:size], pending[size:]
                result = await client.push(server.address, db, chunk)
                retry = {i for i, why in result.rejected if "not known" in why}
                again += [d for d in chunk if _id(d) in retry]
            pending = list(dict.fromkeys(again))
        assert pending == []
        # Each entry was accepted once at most; every other delivery was a duplicate or
        # refused (for a missing parent, then sent again; or soft-failed on arrival).
        held = await receiver.count_entries(db)
        assert server.counters.received == held - len(genesis)
        assert await snapshot(receiver, db) == await snapshot(reference, db)

        # A third peer pulls it all from the receiver (granted read by the owner's key).
        await receiver.set_auth(db, OWNER, replicator.key.public, Permission.parse("read"))
        ticket = await server.ticket(db)
        assert (await replicator.import_db(ticket, "read")).status == "done"
        assert await snapshot(far, db) == await snapshot(receiver, db)
    finally:
        await replicator.close()
        await client.close()
        await server.stop()
        for ledger in [*writers, reference, receiver, far]:
            await ledger.close()


def _id(data: bytes) -> str:
    return content_id(data)


async def _ids(ledger: Ledger, db: str) -> list[str]:
    rows: list[Any] = await ledger.local("SELECT id FROM entries WHERE db = ?", (db,))
    return [str(r[0]) for r in rows]
