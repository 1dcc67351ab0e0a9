"""The sync server's boundary: signed requests, limits, serving rules, refused entries."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chazbot.errors import ConflictError, NotFound, PermissionDenied
from chazbot.ledger import Entry, KeyPair, Ledger, Permission
from chazbot.ledger.encoding import canonical
from chazbot.sync import SyncClient
from chazbot.sync.protocol import (
    NONCE_HEADER,
    SIGNATURE_HEADER,
    ReplayCache,
    Unauthenticated,
)
from chazbot.sync.wire import decode_entry, encode_entry
from tests.support.sync import Owner, insert, raw_call
from tests.support.waits import wait_until

READ = Permission.parse("read")
WRITE = Permission.parse("write", 10)


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(tmp_path / "owner.sqlite3")
    yield opened
    await opened.close()


async def test_signed_request_is_served_to_a_reader(owner: Owner) -> None:
    reader = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, reader.public, READ)
    status, answer, _ = await raw_call(owner.server.address, owner.path("heads"), b"{}", reader)
    assert status == 200
    assert answer["tips"] == await owner.ledger.tips(owner.db)
    assert answer["count"] == 3 and answer["permission"] == "read"


async def test_bad_requests_are_refused_and_counted(owner: Owner) -> None:
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    addr, path = owner.server.address, owner.path("heads")

    status, answer, _ = await raw_call(addr, path, b"{}", None)
    assert (status, answer["error"]) == (
        401,
        "request is not signed (Eidetica-Key/Time/Nonce/Signature)",
    )

    # Signed for another body: the signature no longer matches.
    _, _, headers = await raw_call(addr, path, b"{}", key)
    status, answer, _ = await raw_call(addr, path, b'{"x":1}', None, headers=headers)
    assert status == 401 and "signature" in answer["error"]

    # A signature by another key under this key's name.
    forged = dict(headers)
    forged[NONCE_HEADER] = "0" * 32
    forged[SIGNATURE_HEADER] = KeyPair.generate().sign(b"whatever").hex()
    status, answer, _ = await raw_call(addr, path, b"{}", None, headers=forged)
    assert status == 401 and "signature" in answer["error"]

    # The exact same request twice: the second is a replay.
    status, _, headers = await raw_call(addr, path, b"{}", key)
    assert status == 200
    status, answer, _ = await raw_call(addr, path, b"{}", None, headers=headers)
    assert status == 401 and "replayed" in answer["error"]

    # Too old and too far in the future.
    for skew in (-400, 400):
        status, answer, _ = await raw_call(addr, path, b"{}", key, now=time.time() + skew)
        assert status == 401 and "5 minutes" in answer["error"]

    assert owner.server.counters.requests_refused == 6


async def test_body_limits_and_validation(owner: Owner) -> None:
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    addr = owner.server.address

    big = b'{"entries": ["' + b"A" * (8 * 1024 * 1024) + b'"]}'
    status, answer, _ = await raw_call(addr, owner.path("push"), big, key)
    assert status == 413 and "error" in answer

    for body in (b"not json", b"[1]", b'{"after": -1}', b'{"limit": 0}', b'{"wait": "x"}'):
        status, answer, _ = await raw_call(addr, owner.path("entries"), body, key)
        assert status == 400, body
        assert answer["error"] and "\n" not in answer["error"]

    for body in (b'{"entries": "x"}', b'{"entries": ["%%%"]}', b'{"entries": [1]}'):
        status, answer, _ = await raw_call(addr, owner.path("push"), body, key)
        assert status == 400, body

    status, answer, _ = await raw_call(addr, owner.path("access"), b'{"permission": "god"}', key)
    assert status == 400 and "permission" in answer["error"]

    status, answer, _ = await raw_call(addr, "/v1/dbs/sha256:xyz/heads", b"{}", key)
    assert status == 400 and "database id" in answer["error"]

    status, answer, _ = await raw_call(addr, owner.path("nope"), b"{}", key)
    assert status == 404 and "error" in answer


async def test_served_only_while_shared_and_only_to_readers(owner: Owner) -> None:
    client = SyncClient(KeyPair.generate(), allow_private_peers=True)
    addr = owner.server.address
    try:
        with pytest.raises(PermissionDenied, match="may not read"):
            await client.heads(addr, owner.db)
        await owner.ledger.set_auth(owner.db, owner.admin, client.key.public, READ)
        assert (await client.heads(addr, owner.db)).count == 3
        batch = await client.entries(addr, owner.db, 0)
        assert Entry.decode(batch.entries[0][1]).id == owner.db  # the root first
        assert batch.next == batch.entries[-1][0] and not batch.more
        held = [Entry.decode(d).id for _, d in batch.entries]
        unknown = "sha256:" + "0" * 64
        assert await client.missing(addr, owner.db, [*held, unknown]) == {unknown}

        assert await owner.server.serving.unshare(owner.db)
        with pytest.raises(NotFound, match="not shared"):
            await client.heads(addr, owner.db)
        with pytest.raises(NotFound, match="not shared"):
            await client.access(addr, owner.db, "read")
        # Unsharing takes back no key.
        assert (await owner.ledger.permission(owner.db, client.key.public)) == READ
        await owner.server.serving.share(owner.db)
        assert (await client.heads(addr, owner.db)).count == 3
    finally:
        await client.close()


async def test_entries_in_batches_and_long_poll(owner: Owner) -> None:
    client = SyncClient(owner.admin, allow_private_peers=True)
    addr = owner.server.address
    try:
        await owner.ledger.write_many(owner.db, owner.admin, [insert(i) for i in range(25)])
        seen: list[int] = []
        after = 0
        while True:
            batch = await client.entries(addr, owner.db, after, limit=10)
            seen += [seq for seq, _ in batch.entries]
            after = batch.next
            if not batch.more:
                break
        assert len(seen) == 27 and seen == sorted(seen)

        # A long poll is answered as soon as something is committed: the write comes only
        # once the server holds the poll (its empty read queued ahead of the write), so the
        # answer is a wake-up, never a plain read of an entry that was there already.
        poll = asyncio.create_task(client.entries(addr, owner.db, after, wait=10.0))
        await wait_until(lambda: owner.server._waiting() == 1, what="the poll to be held")
        assert not poll.done()
        started = time.monotonic()
        await owner.ledger.write(owner.db, owner.admin, insert("late"))
        batch = await poll
        assert len(batch.entries) == 1 and time.monotonic() - started < 5
        # Nothing new: the poll ends at its wait with nothing.
        empty = await client.entries(addr, owner.db, batch.next, wait=0.2)
        assert empty.entries == [] and empty.next == batch.next
    finally:
        await client.close()


async def test_pushed_entries_are_validated_one_by_one(owner: Owner, tmp_path: Path) -> None:
    reader, writer, stranger = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, reader.public, READ)
    await owner.ledger.set_auth(owner.db, owner.admin, writer.public, WRITE)

    # Entries made on a copy of the database, by various keys.
    other = await Ledger.open(tmp_path / "other.sqlite3")
    try:
        await other.ingest([d for _, d in await owner.ledger.entries(owner.db)])
        tips = await other.tips(owner.db)
        height = max([(await other.entry(t)).height for t in tips]) + 1
        good = Entry.create(writer, owner.db, tips, height, insert("by writer"))
        unauthorised = Entry.create(stranger, owner.db, tips, height, insert("by stranger"))
        forged_body = json.loads(good.data)
        forged_body["author"] = writer.public
        forged_body["ops"] = insert("not what the writer wrote")
        unsigned = {k: v for k, v in forged_body.items() if k != "sig"}
        forged_body["sig"] = stranger.sign(canonical(unsigned)).hex()  # signed by another key
        forged = canonical(forged_body)
        tampered = good.data.replace(b"by writer", b"by hacker")
        other_db = await other.create_db(stranger, {"name": "elsewhere"})
        foreign = (await other.entry(other_db)).data

        client = SyncClient(reader, allow_private_peers=True)
        try:
            result = await client.push(
                owner.server.address,
                owner.db,
                [forged, tampered, unauthorised.data, foreign, good.data, good.data],
            )
        finally:
            await client.close()
    finally:
        await other.close()

    assert result.accepted == 1 and result.duplicates == 1
    assert result.refused == 4
    reasons = " | ".join(r for _, r in result.rejected)
    assert "bad signature" in reasons and "may not write" in reasons
    assert "another database" in reasons
    assert owner.server.counters.refused == 4 and owner.server.counters.received == 1
    rows = [r.data["value"] for r in await owner.ledger.rows(owner.db, "notes")]
    assert rows == ["first", "by writer"]
    assert await owner.ledger.verify() == []


async def test_access_requests(owner: Owner) -> None:
    sharing = owner.server.serving
    addr = owner.server.address
    importer = SyncClient(KeyPair.generate(), allow_private_peers=True)
    try:
        first = await importer.access(addr, owner.db, "write")
        assert first.status == "pending" and first.request is not None
        again = await importer.access(addr, owner.db, "write")
        assert again == first
        [req] = await sharing.requests(owner.db)
        assert (req.id, req.key, req.permission) == (first.request, importer.key.public, "write")

        approved = await sharing.approve(req.id, owner.admin)
        assert approved.status == "approved"
        held = await owner.ledger.permission(owner.db, importer.key.public)
        assert held == WRITE
        assert (await importer.access(addr, owner.db, "write")).status == "granted"
        assert (await importer.access(addr, owner.db, "read")).status == "granted"
        with pytest.raises(ConflictError):
            await sharing.approve(req.id, owner.admin)

        admin_req = await importer.access(addr, owner.db, "admin")
        assert admin_req.status == "pending" and admin_req.request != req.id
        assert admin_req.request is not None
        assert (await sharing.reject(admin_req.request)).status == "rejected"
        assert (await importer.access(addr, owner.db, "admin")).status == "rejected"
        assert await sharing.requests(owner.db) == []
        # Approving needs an admin key of the database; a failed grant leaves it pending.
        other = SyncClient(KeyPair.generate(), allow_private_peers=True)
        try:
            ask = await other.access(addr, owner.db, "read")
        finally:
            await other.close()
        assert ask.request is not None
        with pytest.raises(PermissionDenied):
            await sharing.approve(ask.request, importer.key)
        assert (await sharing.request(ask.request)).status == "pending"
        with pytest.raises(NotFound):
            await sharing.approve(9999, owner.admin)
    finally:
        await importer.close()


def test_replay_cache_is_bounded_and_never_full_for_others() -> None:
    cache = ReplayCache(capacity=4, window_s=300, per_key=3)
    now = 1000.0
    for n in range(3):
        cache.add("k", f"{n}", now + n, now)
    with pytest.raises(Unauthenticated):
        cache.add("k", "1", now + 1, now)
    assert cache.seen("k", "1", now) and not cache.seen("k", "9", now, now + 9)
    cache.add("k", "9", now + 9, now)  # the key's quota is spent: its oldest nonce goes
    assert len(cache) == 3 and cache.dropped == 1
    with pytest.raises(Unauthenticated):  # ... and cannot be replayed: under the floor
        cache.add("k", "0", now, now)
    assert cache.seen("k", "0", now, now)
    cache.add("other", "0", now, now)
    cache.add("third", "0", now, now)  # full: the busiest key ("k") makes room
    assert len(cache) == 4 and cache.seen("k", "1", now, now + 1)
    assert not cache.seen("other", "1", now, now) and cache.seen("third", "0", now)
    # Once the first ones leave the window, their room is free again, and the floor goes.
    cache.add("k", "late", now + 400, now + 320)
    assert len(cache) == 1 and not cache.seen("k", "x", now + 320, now + 400)


def test_entry_encoding_round_trips() -> None:
    data = bytes(range(256))
    assert decode_entry(encode_entry(data)) == data
