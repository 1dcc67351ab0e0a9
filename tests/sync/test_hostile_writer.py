"""A hostile or careless writer against real peers on loopback (SPEC §2, issue #11).

Each test signs entries by hand, delivers them by push to the owner's sync server or by pull
from a tampered relay, and then checks what every peer shows, not just a status code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chazbot.ledger import KeyPair
from chazbot.ledger.encoding import content_id
from chazbot.ledger.entry import MAX_INT
from chazbot.ledger.records import DEFAULT_LIMITS, KeptLimits
from chazbot.memory.rows import MAX_EXTRA_BYTES, MAX_TAGS, MAX_VALUE_BYTES
from tests.support.adversarial import (
    READ,
    YEAR_US,
    Arena,
    forge,
    head,
    remember,
)
from tests.support.sync import wait_until


def disk(path: Path) -> int:
    """Bytes of a state file and its write-ahead log."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@pytest.fixture
async def arena(tmp_path: Path) -> AsyncIterator[Arena]:
    opened = await Arena.open(tmp_path)
    yield opened
    await opened.close()


async def test_revoked_key_on_old_parents_is_soft_failed_everywhere(arena: Arena) -> None:
    a, db = arena.a, arena.db
    await a.ledger.write(db, arena.hostile, remember("plan", "before revocation"))
    old_parents, old_height = await head(a.ledger, db)
    # the owner demotes the hostile key to read (it may still push, as any reader may)
    await a.ledger.set_auth(db, arena.owner, arena.hostile.public, READ)
    await wait_until(arena.converged, what="b to learn the revocation")
    # ... which builds on the parents it saw before the revocation
    late = forge(arena.hostile, db, old_parents, old_height, remember("plan", "planted"))
    result = await arena.push([late])
    # soft-failed on arrival and built on by nobody: refused, so neither stored nor relayed
    assert result.accepted == 0 and result.refused == 1
    assert "soft-failed on arrival" in result.rejected[0][1], result.rejected
    for node in (a, arena.b):
        assert (await arena.visible(node))["plan"] == "before revocation"
        with pytest.raises(Exception, match="no entry"):
            await node.ledger.entry(content_id(late))
        assert await node.ledger.verify() == []
    # the owner's next write builds on what it holds
    after = (await a.ledger.write(db, arena.owner, remember("next", "owner"))).entries[0]
    assert content_id(late) not in after.parents
    hits = await arena.memory_a.recall(db, "planted")
    assert hits == []
    await wait_until(arena.converged, what="b to converge")


async def test_a_downgraded_writer_cannot_flood_the_peers_disks(arena: Arena) -> None:
    """Issue #22 (3): a writer turned down to read keeps pushing large entries built on the
    parents it saw before; every peer stored them (hidden) and relayed them, forever."""
    a, b, db = arena.a, arena.b, arena.db
    old_parents, old_height = await head(a.ledger, db)
    await a.ledger.set_auth(db, arena.owner, arena.hostile.public, READ)
    await wait_until(arena.converged, what="b to learn the downgrade")
    sizes = {node.path: disk(node.path) for node in (a, b)}
    counts = {node.path: await node.ledger.count_entries(db) for node in (a, b)}
    blob = "x" * (15 * 1024)
    for round_ in range(4):
        batch = [
            forge(
                arena.hostile,
                db,
                old_parents,
                old_height,
                {
                    "memory": [
                        {"op": "insert", "row": {"key": f"j{round_}.{i}.{n}", "value": blob}}
                        for n in range(8)
                    ]
                },
            )
            for i in range(20)
        ]
        for target in (a, b):
            client_result = await arena.push_to(target, batch)
            assert client_result.accepted == 0 and client_result.refused == 20, client_result
    await arena.a.replicator.sync_now(db)
    await arena.b.replicator.sync_now(db)
    for node in (a, b):
        assert await node.ledger.count_entries(db) == counts[node.path]
        # 9.6 MB pushed: nothing stored but what waits in limbo (on disk since issue #33,
        # in case an honest child comes), within its bound for one key; the write-ahead
        # log is folded back first (it holds what was written and dropped meanwhile)
        await node.ledger.run(lambda core: core.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
        per_key = DEFAULT_LIMITS.limbo_bytes_per_key
        assert disk(node.path) - sizes[node.path] < per_key + 512 * 1024
        assert (await node.ledger.run(lambda core: core.arrivals.limbo.size)) <= per_key
    await wait_until(arena.converged, what="a and b to agree")


async def test_an_entry_a_writer_built_on_before_the_revocation_still_arrives(
    arena: Arena,
) -> None:
    """The refusal must not lose an honest writer's entry: peer b built on the hostile
    key's entry before it heard of the downgrade; a hears of it first, then gets the
    entry alone (refused, kept in limbo), then b's entry on top of it in another batch."""
    a, b, db = arena.a, arena.b, arena.db
    await b.replicator.remove_remote(db)  # b hears nothing more from a for now
    old_parents, old_height = await head(a.ledger, db)
    await a.ledger.set_auth(db, arena.owner, arena.hostile.public, READ)
    late = forge(arena.hostile, db, old_parents, old_height, remember("draft", "hostile"))
    assert (await b.ledger.ingest([late])).accepted == [content_id(late)]
    child = (await b.ledger.write(db, b.key, remember("reply", "honest"))).entries[0]
    assert content_id(late) in child.parents
    first = await a.ledger.ingest([late])
    assert first.accepted == [] and "soft-failed on arrival" in first.rejected[0][1]
    second = await a.ledger.ingest([child.data])
    assert set(second.accepted) == {content_id(late), child.id}, second
    shown = await arena.visible(a)
    assert shown["reply"] == "honest" and "draft" not in shown
    assert await a.ledger.verify() == []


async def test_what_one_key_makes_a_peer_keep_is_bounded(tmp_path: Path) -> None:
    """Entries soft-failed on arrival that a writer builds on are kept, counted per key,
    and refused past the bound (here 3; ``KeptLimits.soft_failed``)."""
    arena = await Arena.open(tmp_path, KeptLimits(soft_failed=3))
    try:
        await _kept_within_three(arena)
    finally:
        await arena.close()


async def _kept_within_three(arena: Arena) -> None:
    a, db = arena.a, arena.db
    old_parents, old_height = await head(a.ledger, db)
    await a.ledger.set_auth(db, arena.owner, arena.hostile.public, READ)
    lates = [
        forge(arena.hostile, db, old_parents, old_height, remember(f"l{i}", "x")) for i in range(5)
    ]
    tips = [content_id(d) for d in lates]
    parents, _height = await head(a.ledger, db)
    on_top = forge(arena.owner, db, sorted({*parents, *tips}), old_height + 1, remember("o", "k"))
    result = await a.ledger.ingest([*lates, on_top])
    assert len(result.accepted) == 3 and len(result.rejected) == 3, result
    assert sum("1000" not in r and "such entries" in r for _, r in result.rejected) == 2


async def test_revocation_arriving_after_the_late_write_hides_it_too(arena: Arena) -> None:
    """Arrival order does not matter: b sees the late write first, then the revocation."""
    a, b, db = arena.a, arena.b, arena.db
    old_parents, old_height = await head(a.ledger, db)
    await b.replicator.remove_remote(db)  # cut b off so it learns things in our order
    await a.ledger.set_auth(db, arena.owner, arena.hostile.public, READ)
    late = forge(arena.hostile, db, old_parents, old_height, remember("salary", "planted"))
    assert (await b.ledger.ingest([late])).accepted == [content_id(late)]
    assert (await arena.visible(b)).get("salary") == "planted"  # not revoked here yet
    raw = [data for _, data in await a.ledger.entries(db, 0, 10_000)]
    await b.ledger.ingest(raw)
    assert "salary" not in await arena.visible(b)
    assert await a.ledger.ingest([late])  # a gets it last
    assert "salary" not in await arena.visible(a)
    assert await arena.converged()


async def test_far_future_row_cannot_pin_a_key(arena: Arena) -> None:
    a, db = arena.a, arena.db
    parents, height = await head(a.ledger, db)
    future = time.time_ns() // 1000 + 100 * YEAR_US
    pinned = forge(arena.hostile, db, parents, height, remember("lunch", "pinned"), future)
    pinned2 = forge(arena.hostile, db, parents, height, remember("door", "code 1234"), future)
    assert (await arena.push([pinned, pinned2])).accepted == 2
    assert (await arena.visible(a))["lunch"] == "pinned"
    # the owner, having seen them, overwrites one and forgets the other: both win
    await arena.memory_a.remember(db, arena.owner, "lunch", "noon")
    await arena.memory_a.forget(db, arena.owner, "door")
    await wait_until(arena.converged, what="b to converge")
    for node in (a, arena.b):
        shown = await arena.visible(node)
        assert shown["lunch"] == "noon" and "door" not in shown


@pytest.mark.parametrize("ts", [2**63, MAX_INT, -1])
async def test_out_of_range_timestamp_is_refused_alone_by_push(arena: Arena, ts: int) -> None:
    a, db = arena.a, arena.db
    parents, height = await head(a.ledger, db)
    good1 = forge(arena.hostile, db, parents, height, remember("g1", "one"))
    poison = forge(arena.hostile, db, [content_id(good1)], height + 1, remember("p", "x"), ts)
    good2 = forge(arena.hostile, db, parents, height, remember("g2", "two"))
    result = await arena.push([good1, poison, good2])
    assert (result.accepted, result.refused) == (2, 1)
    reason = result.rejected[0][1]
    assert "ts" in reason and "2^53" in reason and "malformed" not in reason, reason
    shown = await arena.visible(a)
    assert shown["g1"] == "one" and shown["g2"] == "two" and "p" not in shown
    await wait_until(arena.converged, what="b to receive the good entries")


def forge_raw(key: KeyPair, body: dict[str, object]) -> bytes:
    """Sign ``body`` (every field but ``sig``) as given, whatever its shape."""
    from chazbot.ledger.encoding import encode_checked

    signed = dict(body)
    signed["sig"] = key.sign(encode_checked(body)).hex()
    return encode_checked(signed)


async def test_a_malformed_entry_is_refused_with_the_field_and_bound_named(arena: Arena) -> None:
    """SPEC §2/§9: a refused synced entry says which field is wrong and which bound it broke
    (issue #22, item 10), not just "entry is malformed"."""
    a, db = arena.a, arena.db
    parents, height = await head(a.ledger, db)
    base: dict[str, object] = {
        "v": 1,
        "db": db,
        "parents": parents,
        "height": height,
        "ops": remember("k", "v"),
        "author": arena.hostile.public,
        "ts": 1,
    }
    many = sorted(f"sha256:{i:064x}" for i in range(65))
    cases: list[tuple[dict[str, object], list[str]]] = [
        ({"v": 2}, ["v", "version 1"]),
        ({"parents": "nope"}, ["parents", "list"]),
        ({"parents": many}, ["parents", "64"]),
        ({"parents": [*parents, "sha256:bad"]}, ["parents", "entry ids"]),
        ({"parents": [parents[0], parents[0]]}, ["parents", "sorted"]),
        ({"height": -1}, ["height", "2^53"]),
        ({"height": "3"}, ["height", "integer"]),
        ({"ops": []}, ["ops", "object"]),
        ({"ops": {"bad name!": []}}, ["store name", "bad name!"]),
        ({"ops": {"memory": {}}}, ["store memory", "list"]),
        ({"author": 5}, ["author", "string"]),
        ({"ts": 2**53}, ["ts", "2^53"]),
        ({"ts": True}, ["ts", "integer"]),
    ]
    entries = [forge_raw(arena.hostile, {**base, **change}) for change, _ in cases]
    badsig = forge_raw(arena.hostile, base).replace(b'"sig":"', b'"sig":"AB', 1)
    entries.append(badsig)
    cases.append(({}, ["sig", "128"]))
    result = await arena.push(entries)
    assert (result.accepted, result.refused) == (0, len(cases)), result
    for (change, words), (_, reason) in zip(cases, result.rejected, strict=True):
        assert "malformed" not in reason and "\n" not in reason, (change, reason)
        for word in words:
            assert word in reason, (change, reason, word)


def over_limit_rows() -> list[dict[str, object]]:
    return [
        {"key": "big", "value": "x" * (MAX_VALUE_BYTES + 1), "tags": []},
        {"key": "tags", "value": "v", "tags": [f"t{i}" for i in range(MAX_TAGS + 68)]},
        {"key": "k" * 257, "value": "v", "tags": []},
        {"key": "", "value": "v", "tags": []},
        {"key": "t", "value": "v", "tags": ["x" * 65]},
        {"key": "f", "forget": True, "value": "hidden payload"},
        {"key": "n", "value": 5, "tags": []},
        {"key": "e", "value": "v", "tags": [], "extra": "y" * (MAX_EXTRA_BYTES + 100)},
    ]


async def test_over_limit_rows_are_refused_alone_by_pull(arena: Arena) -> None:
    """A tampered relay serves over-limit rows, wrong heights and bad timestamps between good
    entries; the owner pulls from it: the good ones arrive, every bad one is refused alone,
    and replication goes on (the cursor does not stick)."""
    a, db = arena.a, arena.db
    parents, height = await head(a.ledger, db)
    bad = [
        forge(arena.hostile, db, parents, height, {"memory": [{"op": "insert", "row": row}]})
        for row in over_limit_rows()
    ]
    bad.append(forge(arena.hostile, db, parents, height + 5, remember("h", "wrong height")))
    bad.append(forge(arena.hostile, db, parents, height, remember("ts", "x"), 2**63))
    good = [
        forge(arena.hostile, db, parents, height, remember(f"good{i}", f"value {i}"))
        for i in range(3)
    ]
    await arena.plant([good[0], *bad[:4], good[1], *bad[4:], good[2]])
    await arena.pull_from_b({content_id(g) for g in good})
    shown = await arena.visible(a)
    assert {shown[f"good{i}"] for i in range(3)} == {"value 0", "value 1", "value 2"}
    for data in bad:
        with pytest.raises(Exception, match="no entry"):
            await a.ledger.entry(content_id(data))
    # replication goes on after the bad batch: the next entry the relay serves arrives too
    later = forge(arena.hostile, db, [content_id(good[2])], height + 1, remember("later", "ok"))
    await arena.plant([later])
    await arena.pull_from_b({content_id(later)})
    assert (await arena.visible(a))["later"] == "ok"
    assert await a.ledger.verify() == []


async def test_over_limit_rows_written_locally_are_refused_at_the_ledger(arena: Arena) -> None:
    a, db = arena.a, arena.db
    before = await a.ledger.count_entries(db)
    for row in over_limit_rows():
        with pytest.raises(Exception) as caught:
            await a.ledger.write(db, arena.owner, {"memory": [{"op": "insert", "row": row}]})
        assert type(caught.value).__name__ == "InputError", row
    assert await a.ledger.count_entries(db) == before


async def test_burst_of_refused_entries_is_time_bounded(arena: Arena) -> None:
    """A read-only key pushes 1,000 entries it may not write; the owner's writes go on."""
    a, db = arena.a, arena.db
    reader = KeyPair.generate()
    await a.ledger.set_auth(db, arena.owner, reader.public, READ)
    parents, height = await head(a.ledger, db)
    burst = [forge(reader, db, parents, height, remember(f"spam{i}", "spam")) for i in range(1000)]
    started = time.perf_counter()
    push = asyncio.ensure_future(arena.push(burst, reader))
    latencies = []
    while not push.done():
        t0 = time.perf_counter()
        await a.ledger.write(db, arena.owner, remember("tick", str(t0)))
        latencies.append(time.perf_counter() - t0)
    result = await push
    took = time.perf_counter() - started
    assert (result.accepted, result.refused) == (0, 1000)
    assert took < 10.0, took  # decode + refuse 1,000 entries, loaded CI included
    assert max(latencies) < 5.0
    assert not any(k.startswith("spam") for k in await arena.visible(a))
