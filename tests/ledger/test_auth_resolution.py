"""Auth changes are resolved by authority, and revocation wins for them too (SPEC §2, #33).

The findings first, on real peers over loopback (a chain of self-grants on a branch from
before a demotion; a fully revoked key's branch relayed by an ordinary reader; a refused
parent whose honest child comes after a restart), then a property test over random auth
histories with concurrent branches, demotions and revocations, relayed by third parties.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chazbot import operations
from chazbot.errors import ChazError
from chazbot.ledger import AUTH_STORE, Entry, KeyGrant, KeyPair, Ledger, Permission
from chazbot.ledger.auth import Level, auth_op, permission_of
from chazbot.ledger.encoding import content_id
from chazbot.memory.engine import MemoryEngine
from chazbot.sync import SyncClient
from chazbot.transports.tables import FEATURE_TABLES
from tests.ledger.test_ledger_merge import resolve_auth
from tests.support.adversarial import READ, Arena, forge, head, remember
from tests.support.ledger import key
from tests.support.sync import Node, snapshot, wait_until

ADMIN5 = Permission.parse("admin", 5)
WRITE10 = Permission.parse("write", 10)


def grant(target: str, perm: Permission, active: bool = True) -> dict[str, list[Any]]:
    return {AUTH_STORE: [auth_op(target, perm, active)]}


def attack(
    signer: KeyPair, db: str, parents: list[str], height: int, chain: int = 9
) -> tuple[KeyPair, list[bytes]]:
    """On ``parents`` (a point from before the signer lost its power): mint a write key, have
    it overwrite the ``plan`` row, then a chain of ``chain`` self-grants to admin(5)."""
    minted = KeyPair.generate()
    out = [forge(signer, db, parents, height, grant(minted.public, WRITE10))]
    out.append(forge(minted, db, [content_id(out[-1])], height + 1, remember("plan", "planted")))
    for i in range(chain):
        out.append(
            forge(signer, db, [content_id(out[-1])], height + 2 + i, grant(signer.public, ADMIN5))
        )
    return minted, out


@pytest.fixture
async def arena(tmp_path: Path) -> AsyncIterator[Arena]:
    opened = await Arena.open(tmp_path)
    yield opened
    await opened.close()


async def settle(arena: Arena, *nodes: Node) -> None:
    """Both ways between a and each of ``nodes`` until they agree."""
    for node in nodes:
        await node.replicator.add_remote(arena.db, arena.a.address)
        await arena.a.replicator.add_remote(arena.db, node.address)

    async def agreed() -> bool:
        try:
            for node in nodes:
                await node.replicator.sync_now(arena.db)
                await arena.a.replicator.sync_now(arena.db)
        except ChazError:
            return False
        first = await snapshot(arena.a.ledger, arena.db)
        return all([await snapshot(n.ledger, arena.db) == first for n in nodes])

    await wait_until(agreed, timeout=30, what="the peers to agree")


async def test_a_chain_of_self_grants_cannot_out_height_a_demotion(arena: Arena) -> None:
    """The owner demotes an admin(5) on peer b while peer a, not yet told, takes the admin's
    branch from before the demotion: a minted write key that overwrites the owner's plan,
    then 9 self-grants, higher than the demotion. Once they meet, the demotion wins on both,
    the minted key never held write, and both peers' soft-failed auth entries are listed."""
    a, b, db, owner, hostile = arena.a, arena.b, arena.db, arena.owner, arena.hostile
    await a.ledger.set_auth(db, owner, hostile.public, ADMIN5)
    await a.ledger.write(db, owner, remember("plan", "the owner's plan"))
    await wait_until(arena.converged, what="b to hear of the grant")
    await b.replicator.remove_remote(db)
    await a.replicator.remove_remote(db)
    parents, height = await head(a.ledger, db)
    await b.ledger.set_auth(db, owner, hostile.public, WRITE10)  # the demotion, on b
    minted, entries = attack(hostile, db, parents, height)
    pushed = await arena.push(entries)  # to a, which has not heard of the demotion
    assert pushed.accepted == len(entries), pushed
    assert (await arena.visible(a))["plan"] == "planted"  # nothing wrong, as far as a knows

    await settle(arena, b)
    for node in (a, b):
        state = await node.ledger.auth_state(db)
        assert state[hostile.public] == KeyGrant(WRITE10), node.path.name
        assert minted.public not in state
        assert (await arena.visible(node))["plan"] == "the owner's plan"
        assert await node.ledger.verify() == []
    # a holds the branch (it took it in before): its ten auth entries are soft-failed, listed
    held = {content_id(d) for d in entries if content_id(d) != content_id(entries[1])}
    flagged = dict(await a.ledger.soft_failed_auth())
    assert set(flagged) == held
    assert all("soft-failed in the resolved auth state" in why for why in flagged.values())
    # ... and ``chazbot verify`` names them (not a failure: the file is sound)
    sink = Lines()
    state_dir = a.path.parent / "state"
    state_dir.mkdir()
    (state_dir / "chazbot.sqlite3").symlink_to(a.path)
    assert await operations.verify(a.ledger, state_dir, sink, FEATURE_TABLES) == 0
    assert sum(line.startswith("SOFT-FAILED ") for line in sink.lines) == len(held)
    assert "10 auth entries soft-failed" in "\n".join(sink.lines)


class Lines:
    """A ``Sink`` that keeps what a job prints."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def progress(self, what: str, done: int, total: int) -> None:
        pass

    async def data(self, lines: list[str]) -> None:
        self.lines += lines

    def out(self, text: str) -> None:
        self.lines.append(text)

    def err(self, text: str) -> None:
        self.lines.append(text)


async def test_a_revoked_keys_branch_relayed_by_a_reader_gains_nothing(
    arena: Arena, tmp_path: Path
) -> None:
    """A fully revoked admin(5) pushes its old branch to an ordinary reader that has not
    heard of the revocation; the owner pulls from the reader. Both keep the branch's auth
    entries soft-failed (within what one key may make a peer keep: whether an auth entry is
    soft-failed can change with what builds on it) and list them; the minted key's row is
    refused at the owner, hidden at the reader."""
    a, db, owner, hostile = arena.a, arena.db, arena.owner, arena.hostile
    await a.ledger.set_auth(db, owner, hostile.public, ADMIN5)
    await a.ledger.write(db, owner, remember("plan", "the owner's plan"))
    reader = await Node.open(tmp_path / "reader.sqlite3")
    try:
        await a.ledger.set_auth(db, owner, reader.key.public, READ)
        assert (await reader.replicator.import_db(await a.server.ticket(db), "read")).status == (
            "done"
        )
        await reader.serving.share(db)
        await reader.replicator.remove_remote(db)
        parents, height = await head(a.ledger, db)
        await a.ledger.set_auth(db, owner, hostile.public, ADMIN5, active=False)
        minted, entries = attack(hostile, db, parents, height)
        client = SyncClient(hostile, timeout=10.0, allow_private_peers=True)
        try:  # the revoked key may not push to a; the reader still takes it as admin(5)
            relayed = await client.push(reader.address, db, entries)
        finally:
            await client.close()
        assert relayed.accepted == len(entries), relayed
        assert permission_of(await reader.ledger.auth_state(db), hostile.public) == ADMIN5

        await arena.a.replicator.add_remote(db, reader.address)
        await arena.a.replicator.sync_now(db)
        await settle(arena, reader)
        for ledger in (a.ledger, reader.ledger):
            state = await ledger.auth_state(db)
            assert not state[hostile.public].active and minted.public not in state
            assert await ledger.verify() == []
        assert (await arena.visible(a))["plan"] == "the owner's plan"
        auth_entries = {content_id(d) for d in entries} - {content_id(entries[1])}
        for ledger in (a.ledger, reader.ledger):
            assert {eid for eid, _ in await ledger.soft_failed_auth()} == auth_entries
            rows = await ledger.rows(db, "memory")
            assert "planted" not in {r.data.get("value") for r in rows}
    finally:
        await reader.close()


async def test_limbo_survives_a_restart_between_a_refused_parent_and_its_child(
    arena: Arena,
) -> None:
    """Peer b built on the hostile key's late entry before it heard of the downgrade; b pushes
    the late entry to a (refused: it waits in limbo), a restarts, then b pushes its child and
    its next entry. Both come in with the parent, and the hostile draft stays hidden."""
    a, b, db = arena.a, arena.b, arena.db
    await b.replicator.remove_remote(db)
    await a.replicator.remove_remote(db)
    old_parents, old_height = await head(a.ledger, db)
    await a.ledger.set_auth(db, arena.owner, arena.hostile.public, READ)
    late = forge(arena.hostile, db, old_parents, old_height, remember("draft", "hostile"))
    assert (await b.ledger.ingest([late])).accepted == [content_id(late)]
    child = (await b.ledger.write(db, b.key, remember("reply", "honest"))).entries[0]
    after = (await b.ledger.write(db, b.key, remember("next", "honest too"))).entries[0]
    assert content_id(late) in child.parents
    client = SyncClient(b.key, timeout=10.0, allow_private_peers=True)
    try:
        first = await client.push(a.address, db, [late])
        assert first.accepted == 0 and "soft-failed on arrival" in first.rejected[0][1]
        arena.a = await a.reopen()  # the same file, a new process's worth of state
        arena.memory_a = MemoryEngine(arena.a.ledger)
        second = await client.push(arena.a.address, db, [child.data, after.data])
    finally:
        await client.close()
    assert second.accepted == 3 and second.refused == 0, second
    shown = await arena.visible(arena.a)
    assert shown["reply"] == "honest" and shown["next"] == "honest too"
    assert "draft" not in shown
    assert await arena.a.ledger.run(lambda core: len(core.arrivals.limbo)) == 0
    assert await arena.a.ledger.verify() == []


async def test_limbo_on_disk_keeps_its_bounds_and_drops_the_oldest(tmp_path: Path) -> None:
    """Per author key and in all, oldest first out, across a reopen; only what arrived
    soft-failed (or builds on such) waits there, never an entry refused as invalid."""
    from chazbot.ledger import core as core_module
    from chazbot.ledger.limbo import Limbo

    ledger = await Ledger.open(tmp_path / "state.sqlite3")
    owner, revoked = key(1), key(2)
    try:
        db = await ledger.create_db(owner, {"name": "bank"}, [(revoked.public, WRITE10)])
        parents, height = await head(ledger, db)
        await ledger.set_auth(db, owner, revoked.public, READ)
        blob = "x" * 900
        lates = [
            forge(revoked, db, parents, height, remember(f"k{i}", blob + str(i))) for i in range(8)
        ]
        bogus = forge(key(3), db, parents, height, remember("nobody", "x"))  # no grant at all
        for data in [*lates, bogus]:
            assert (await ledger.ingest([data])).accepted == []

        def shrink(core: core_module.LedgerCore) -> tuple[int, list[str]]:
            core.arrivals.limbo = Limbo(core.conn, 3 * len(lates[0]) + 50, 100_000)
            core.arrivals.limbo.put(Entry.decode(lates[-1]))  # already there: changes nothing
            found = core.conn.execute("SELECT id FROM limbo ORDER BY seq").fetchall()
            return len(found), [str(r[0]) for r in found]

        count, ids = await ledger.run(shrink)
        assert count == 8 and content_id(bogus) not in ids
    finally:
        await ledger.close()
    extra_data = forge(revoked, db, parents, height, remember("k9", blob + "9"))
    ledger = await Ledger.open(tmp_path / "state.sqlite3")
    try:

        def put_one(core: core_module.LedgerCore) -> list[str]:
            core.arrivals.limbo = Limbo(core.conn, 3 * len(lates[0]) + 50, 100_000)
            core.arrivals.limbo.put(Entry.decode(extra_data))
            return [str(r[0]) for r in core.conn.execute("SELECT id FROM limbo ORDER BY seq")]

        kept = await ledger.run(put_one)
        # one key's share is three entries of ~1 KB: the oldest went first
        assert kept == [content_id(lates[6]), content_id(lates[7]), Entry.decode(extra_data).id]
    finally:
        await ledger.close()


# ---- the property: random auth histories, concurrent branches, third-party relays ---------

OWNER = key(0x61)
KEYS = [key(0x62 + i) for i in range(4)]
START = [Permission.parse("admin", 2), ADMIN5, Permission.parse("write", 5), READ]
LEVELS = [READ, Permission.parse("write", 5), ADMIN5, Permission.parse("admin", 2)]

who = st.integers(0, 4)  # 4: the owner
step = st.one_of(
    st.tuples(st.just("grant"), st.integers(0, 2), who, st.integers(0, 3), st.integers(0, 3)),
    st.tuples(st.just("revoke"), st.integers(0, 2), who, st.integers(0, 3), st.just(0)),
    st.tuples(st.just("write"), st.integers(0, 2), who, st.just(0), st.integers(0, 3)),
    st.tuples(st.just("relay"), st.integers(0, 2), st.integers(0, 2), st.just(0), st.just(0)),
    st.tuples(st.just("forge"), st.integers(0, 2), who, st.integers(0, 3), st.integers(0, 6)),
    st.tuples(st.just("chain"), st.integers(0, 2), who, st.just(0), st.integers(1, 9)),
    st.tuples(st.just("fwrite"), st.integers(0, 2), who, st.just(0), st.integers(0, 3)),
)


def actor(choice: int) -> KeyPair:
    return OWNER if choice == 4 else KEYS[choice]


async def held(ledger: Ledger, db: str) -> tuple[Entry, ...]:
    return tuple(Entry.decode(d) for _, d in await ledger.entries(db, 0, 1_000_000))


async def relay(src: Ledger, dst: Ledger, db: str) -> None:
    await dst.ingest([d for _, d in await src.entries(db, 0, 1_000_000)])


def ancestors_of(entries: tuple[Entry, ...]) -> dict[str, set[str]]:
    by_id = {e.id: e for e in entries}
    memo: dict[str, set[str]] = {}
    for entry in sorted(entries, key=Entry.sort_key):
        found: set[str] = set()
        for parent in entry.parents:
            found |= {parent} | memo[parent]
        memo[entry.id] = found
    assert memo.keys() == by_id.keys()
    return memo


def check_revocation_wins(entries: tuple[Entry, ...], state: dict[str, KeyGrant]) -> None:
    """SPEC §2 on one peer's entries and resolved state, from the entries alone: an applied
    (not soft-failed) auth entry's author holds, in the resolved state, the authority for it,
    or the entry is an ancestor of the one that took that authority away. So a key revoked
    or demoted in the resolved state regained nothing by itself or by what it granted."""
    below = ancestors_of(entries)
    _, decider, flagged = resolve_auth(entries)
    for entry in entries:
        if AUTH_STORE not in entry.ops or not entry.parents or entry.id in flagged:
            continue
        mine = state.get(entry.author)
        lowered_after = entry.id in below.get(decider.get(entry.author, ""), set())
        needs = [Permission.parse(op["perm"], op.get("prio", 0)) for op in entry.ops[AUTH_STORE]]
        holds = (
            mine is not None
            and mine.active
            and mine.perm.level is Level.ADMIN
            and not any(p.stronger_than(mine.perm) for p in needs)
        )
        assert holds or lowered_after or decider.get(entry.author) == entry.id, entry.id


async def play(tmp: Path, steps: list[tuple[str, int, int, int, int]], rnd: random.Random) -> None:
    replicas = [await Ledger.open(tmp / f"r{i}.sqlite3") for i in range(3)]
    fresh = [await Ledger.open(tmp / f"f{i}.sqlite3") for i in range(2)]
    try:
        db = await replicas[0].create_db(
            OWNER, {"name": "bank"}, [(k.public, p) for k, p in zip(KEYS, START, strict=True)]
        )
        for r in replicas[1:]:
            await relay(replicas[0], r, db)
        points: list[list[tuple[list[str], int]]] = [[] for _ in replicas]
        forged: list[tuple[str, int]] = []  # (id, height) of each stored forged entry
        for kind, where, a, b, c in steps:
            ledger = replicas[where]
            tips = await ledger.tips(db)
            points[where].append((tips, 1 + max([(await ledger.entry(t)).height for t in tips])))
            try:
                if kind == "grant":
                    await ledger.set_auth(db, actor(a), KEYS[b].public, LEVELS[c])
                elif kind == "revoke":
                    await ledger.set_auth(db, actor(a), KEYS[b].public, LEVELS[1], active=False)
                elif kind == "write":
                    await ledger.write(db, actor(a), remember(f"k{c}", f"{where}{a}{c}"))
                elif kind == "relay":
                    await relay(replicas[where], replicas[a], db)
                else:
                    if kind == "forge":  # on an older point of this replica's history
                        parents, height = points[where][max(0, len(points[where]) - 1 - c)]
                    elif forged:
                        parents, height = [forged[-1][0]], forged[-1][1] + 1
                    else:
                        continue
                    todo = []
                    for _ in range(c if kind == "chain" else 1):
                        if kind == "fwrite":
                            ops = remember("plan", f"forged {a}")
                        else:
                            target = actor(a) if kind == "chain" else KEYS[b]
                            ops = grant(target.public, ADMIN5 if kind == "chain" else LEVELS[c % 4])
                        data = forge(actor(a), db, parents, height, ops)
                        todo.append(data)
                        parents, height = [content_id(data)], height + 1
                    result = await ledger.ingest(todo)
                    taken = set(result.accepted)
                    forged += [(e.id, e.height) for e in map(Entry.decode, todo) if e.id in taken]
            except ChazError:
                pass  # this key may not do that here now
        for _ in range(2):  # third parties relay everything, both ways
            for src in replicas:
                for dst in replicas:
                    if src is not dst:
                        await relay(src, dst, db)
        union: dict[bytes, None] = {}
        for r in replicas:
            for _, data in await r.entries(db, 0, 1_000_000):
                union[data] = None
        everything = list(union)
        for ledger in fresh:
            pending = rnd.sample(everything, len(everything))
            pending += rnd.sample(everything, min(3, len(everything)))
            chunk = rnd.choice([1, 3, len(pending)])
            while pending:
                retry: set[str] = set()
                for start in range(0, len(pending), chunk):
                    result = await ledger.ingest(pending[start : start + chunk])
                    retry |= {
                        i for i, why in result.rejected if "not known" in why or "unknown" in why
                    }
                again = [d for d in dict.fromkeys(pending) if content_id(d) in retry]
                assert len(again) < len(pending), "no progress"
                pending = again

        model, _, _ = resolve_auth(tuple(Entry.decode(d) for d in everything))
        views = []
        for ledger in replicas + fresh:
            entries = await held(ledger, db)
            state = await ledger.auth_state(db)
            mine, _, failed = resolve_auth(entries)
            assert state == mine == model  # every peer, whatever it got and in what order
            check_revocation_wins(entries, state)
            assert {eid for eid, _ in await ledger.soft_failed_auth()} == failed
            # what was built step by step (extended, or a failing entry placed) is what one
            # resolution from scratch gives
            fresh_pass = await ledger.run(
                lambda core: core.graphs[db].resolution() == core.graphs[db]._resolve()
            )
            assert fresh_pass
            assert await ledger.verify() == []
            rows = await ledger.rows(db, "memory")
            views.append(
                (
                    (await snapshot(ledger, db))["auth_table"],
                    sorted((r.row_id, r.data) for r in rows),
                )
            )
        assert all(v == views[0] for v in views[1:])
    finally:
        for ledger in replicas + fresh:
            await ledger.close()


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=4, max_size=22), seed=st.integers(0, 2**16))
def test_random_auth_histories_resolve_by_authority_everywhere(
    steps: list[tuple[str, int, int, int, int]], seed: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(play(Path(tmp), steps, random.Random(seed)))


async def test_a_file_folded_by_height_is_caught_by_verify_and_settled_at_open(
    tmp_path: Path,
) -> None:
    """A file whose auth table and marks say what the old rule said (the chain out-heights
    the demotion: admin(5), every entry applied), as a file written before #33 holds: the
    entry check of ``verify`` fails on it, and opening it settles it to the resolution."""
    import sqlite3

    from chazbot.ledger.backup import verify_file

    path = tmp_path / "state.sqlite3"
    owner, demoted = key(0x51), key(0x52)
    ledger = await Ledger.open(path)
    try:
        db = await ledger.create_db(owner, {"name": "bank"}, [(demoted.public, ADMIN5)])
        await ledger.write(db, owner, remember("plan", "the owner's plan"))
        parents, height = await head(ledger, db)
        await ledger.set_auth(db, owner, demoted.public, WRITE10)
        minted, entries = attack(demoted, db, parents, height)
        owners_ingest = await ledger.ingest(entries)
        assert owners_ingest.soft_failed == len(entries)  # kept soft-failed, within the bound
        assert (await ledger.auth_state(db))[demoted.public] == KeyGrant(WRITE10)
        other = await Ledger.open(tmp_path / "other.sqlite3")
        try:  # another peer takes it in before it hears of the demotion, then hears
            await other.ingest([d for _, d in await ledger.entries(db, 0, 100)][:2])
            assert len((await other.ingest(entries)).accepted) == len(entries)
            await other.ingest([d for _, d in await ledger.entries(db, 0, 100)])
            assert (await other.auth_state(db))[demoted.public] == KeyGrant(WRITE10)
        finally:
            await other.close()
    finally:
        await ledger.close()
    other_path = tmp_path / "other.sqlite3"
    conn = sqlite3.connect(other_path, isolation_level=None)
    try:  # what the old rule derived: the last self-grant by height decides
        last = content_id(entries[-1])
        conn.execute(
            "UPDATE auth SET perm = 'admin', prio = 5, entry_id = ? WHERE key = ?",
            (last, demoted.public),
        )
        conn.execute(
            "INSERT INTO auth VALUES (?, ?, 'write', 10, 'active', ?, ?)",
            (db, minted.public, Entry.decode(entries[0]).height, content_id(entries[0])),
        )
        conn.execute("UPDATE entries SET soft_failed = 0")
        conn.execute("UPDATE rows SET hidden = 0")
    finally:
        conn.close()
    checked = verify_file(other_path)
    assert any("soft_failed not what its signed entry makes" in why for _, why in checked.failures)
    assert any(what.startswith("auth ") for what, _ in checked.failures), checked.failures
    reopened = await Ledger.open(other_path)
    try:
        assert (await reopened.auth_state(db))[demoted.public] == KeyGrant(WRITE10)
        assert minted.public not in await reopened.auth_state(db)
        values = {r.data.get("value") for r in await reopened.rows(db, "memory")}
        assert values == {"the owner's plan"}
        assert len(await reopened.soft_failed_auth()) == len(entries) - 1
        assert await reopened.verify() == []
    finally:
        await reopened.close()


async def test_an_honest_writer_is_not_blocked_by_a_soft_failed_revocation_below_it(
    tmp_path: Path,
) -> None:
    """Peer p took a demoted admin's revocation of a writer before it heard of the demotion,
    and the owner wrote on top of it there. Once p hears, the revocation is soft-failed, and
    the writer may write on p's tips again: an entry is checked against the state resolved
    from its ancestry, not against the highest change in it."""
    owner, demoted, writer = key(0x31), key(0x32), key(0x33)
    p = await Ledger.open(tmp_path / "p.sqlite3")
    q = await Ledger.open(tmp_path / "q.sqlite3")
    try:
        db = await p.create_db(
            owner, {"name": "bank"}, [(demoted.public, ADMIN5), (writer.public, WRITE10)]
        )
        await relay(p, q, db)
        await q.set_auth(db, owner, demoted.public, WRITE10)  # the demotion, on q
        await p.set_auth(db, demoted, writer.public, WRITE10, active=False)  # p: not told yet
        await p.write(db, owner, remember("plan", "the owner's, on top of it"))
        await relay(q, p, db)
        await relay(p, q, db)
        for ledger in (p, q):
            state = await ledger.auth_state(db)
            assert state[writer.public] == KeyGrant(WRITE10) and state[demoted.public].active
            assert len(await ledger.soft_failed_auth()) == 1
        done = await p.write(db, writer, remember("note", "the writer's"))  # refused before
        assert len(done.entries) == 1
        await relay(p, q, db)
        assert (await snapshot(p, db)) == (await snapshot(q, db))
    finally:
        await p.close()
        await q.close()
