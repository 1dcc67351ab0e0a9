"""AuthSettings: the permission lattice, and writes refused whole when the key may not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chazbot.errors import InputError, NotFound, PermissionDenied
from chazbot.ledger import AUTH_STORE, Entry, KeyGrant, KeyPair, Ledger, Level, Permission
from chazbot.ledger.auth import auth_op, check_auth_change, parse_auth_op
from tests.support.ledger import ADMIN0, ADMIN1, READ, WRITE0, key

OWNER, ADMIN, WRITER, READER, STRANGER = key(1), key(2), key(3), key(4), key(5)


def insert(value: Any) -> dict[str, list[Any]]:
    return {"notes": [{"op": "insert", "row": {"value": value}}]}


# ---- the lattice, as plain functions -------------------------------------------------------

permissions = st.one_of(
    st.just(Permission.parse("read")),
    st.builds(Permission.parse, st.sampled_from(["write", "admin"]), st.integers(0, 2**31)),
)


@settings(max_examples=300, deadline=None)
@given(permissions, permissions, permissions)
def test_stronger_than_is_a_strict_total_order(a: Permission, b: Permission, c: Permission) -> None:
    assert not a.stronger_than(a)  # irreflexive
    assert not (a.stronger_than(b) and b.stronger_than(a))  # asymmetric
    if a.stronger_than(b) and b.stronger_than(c):
        assert a.stronger_than(c)  # transitive
    # total: distinct permissions are comparable
    assert a == b or a.stronger_than(b) or b.stronger_than(a)
    assert a.stronger_than(b) == (a.rank() > b.rank())


@settings(max_examples=300, deadline=None)
@given(permissions, permissions)
def test_lattice_levels_and_priorities(a: Permission, b: Permission) -> None:
    if a.level != b.level:  # read < write(p) < admin(p) whatever the priorities
        assert a.stronger_than(b) == (a.level > b.level)
    elif a.level is not Level.READ:  # within a level, a lower p is stronger
        assert a.stronger_than(b) == (a.prio < b.prio)


@settings(max_examples=300, deadline=None)
@given(permissions)
def test_permission_parse_round_trip(p: Permission) -> None:
    assert Permission.parse(str(p)) == p
    assert Permission.parse(p.name, p.prio) == p
    assert Permission.parse(f"  {str(p).upper()} ") == p
    assert parse_auth_op(auth_op(OWNER.public, p))[1] == KeyGrant(p, True)
    assert parse_auth_op(auth_op(OWNER.public, p, active=False))[1] == KeyGrant(p, False)


@pytest.mark.parametrize("text", ["none", "owner", "", "write(-1)", "admin(x)", "(3)"])
def test_permission_parse_refuses(text: str) -> None:
    with pytest.raises(InputError):
        Permission.parse(text)


@pytest.mark.parametrize(
    "op",
    [
        {"op": "set_key", "key": "ed25519:00", "perm": "write", "prio": 0, "status": "active"},
        {"op": "set_key", "key": OWNER.public, "perm": "write(2)", "prio": 0, "status": "active"},
        {"op": "set_key", "key": OWNER.public, "perm": "Write", "prio": 0, "status": "active"},
        {"op": "set_key", "key": OWNER.public, "perm": "none", "prio": 0, "status": "active"},
        {"op": "set_key", "key": OWNER.public, "perm": "write", "prio": True, "status": "active"},
        {"op": "set_key", "key": OWNER.public, "perm": "write", "prio": -1, "status": "active"},
        {"op": "set_key", "key": OWNER.public, "perm": "write", "prio": 0, "status": "gone"},
        {"op": "del_key", "key": OWNER.public},
        ["set_key"],
    ],
)
def test_parse_auth_op_refuses_malformed(op: Any) -> None:
    with pytest.raises(InputError):
        parse_auth_op(op)


@settings(max_examples=300, deadline=None)
@given(permissions, permissions, permissions | st.none(), st.booleans())
def test_check_auth_change_never_lets_an_admin_reach_above_itself(
    mine: Permission, new: Permission, current: Permission | None, active: bool
) -> None:
    state = {ADMIN.public: KeyGrant(mine)}
    if current is not None:
        state[WRITER.public] = KeyGrant(current, active)
    allowed = True
    try:
        check_auth_change(state, ADMIN.public, WRITER.public, KeyGrant(new))
    except PermissionDenied:
        allowed = False
    expected = (
        mine.level is Level.ADMIN
        and not new.stronger_than(mine)
        and not (current is not None and active and current.stronger_than(mine))
    )
    assert allowed == expected


# ---- against a real ledger -----------------------------------------------------------------


@pytest.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    led = await Ledger.open(tmp_path / "state.db")
    yield led
    await led.close()


@pytest.fixture
async def db(ledger: Ledger) -> str:
    return await ledger.create_db(
        OWNER,
        {"name": "bank"},
        [(ADMIN.public, ADMIN1), (WRITER.public, WRITE0), (READER.public, READ)],
    )


async def snapshot(ledger: Ledger, db: str) -> dict[str, Any]:
    tables = ("entries", "rows", "fields", "auth", "tips", "auth_heads", "field_sets")
    return {
        "tables": {t: (await ledger.local(f"SELECT count(*) FROM {t}"))[0][0] for t in tables},
        "tips": await ledger.tips(db),
        "auth": await ledger.auth_state(db),
        "meta": await ledger.fields(db, "meta"),
        "rows": await ledger.rows(db, "notes"),
    }


async def test_creator_is_admin0_and_grants_apply(ledger: Ledger, db: str) -> None:
    assert await ledger.permission(db, OWNER.public) == ADMIN0
    assert await ledger.permission(db, ADMIN.public) == ADMIN1
    assert await ledger.permission(db, WRITER.public) == WRITE0
    assert await ledger.permission(db, READER.public) == READ
    assert (await ledger.permission(db, STRANGER.public)).level is Level.NONE
    assert await ledger.fields(db, "meta") == {"name": "bank"}


@pytest.mark.parametrize(
    ("who", "ops"),
    [
        (STRANGER, insert("x")),
        (STRANGER, {}),  # an empty entry still needs write
        (STRANGER, {"notes": []}),
        (STRANGER, {"meta": [{"op": "set", "field": "name", "value": "mine"}]}),
        (READER, insert("x")),
        (READER, {}),
        (WRITER, {AUTH_STORE: [auth_op(STRANGER.public, WRITE0)]}),
        (WRITER, {AUTH_STORE: [auth_op(WRITER.public, ADMIN1)]}),  # cannot promote itself
        (WRITER, {AUTH_STORE: []}),  # an _auth store needs admin even when empty
        (READER, {AUTH_STORE: []}),
        (STRANGER, {AUTH_STORE: [auth_op(STRANGER.public, ADMIN0)]}),
        (WRITER, {"notes": [{"op": "insert", "row": {}}], AUTH_STORE: []}),
    ],
    ids=lambda v: v.public[8:14] if isinstance(v, KeyPair) else str(sorted(v))[:30],
)
async def test_write_without_permission_refused_and_nothing_stored(
    ledger: Ledger, db: str, who: KeyPair, ops: dict[str, list[Any]]
) -> None:
    before = await snapshot(ledger, db)
    with pytest.raises(PermissionDenied):
        await ledger.write(db, who, ops)
    assert await snapshot(ledger, db) == before
    # the same entry arriving by sync is refused too, and nothing is stored
    height = max([(await ledger.entry(t)).height for t in before["tips"]]) + 1
    entry = Entry.create(who, db, before["tips"], height, ops)
    result = await ledger.ingest([entry])
    assert result.accepted == [] and len(result.rejected) == 1
    assert "may not write" in result.rejected[0][1] or "admin" in result.rejected[0][1]
    assert await snapshot(ledger, db) == before


async def test_writer_may_write_and_reader_may_not(ledger: Ledger, db: str) -> None:
    applied = await ledger.write(db, WRITER, insert("from writer"))
    assert [r.data["value"] for r in applied.rows] == ["from writer"]
    assert [r.author for r in await ledger.rows(db, "notes")] == [WRITER.public]
    with pytest.raises(PermissionDenied, match="may not write"):
        await ledger.write(db, READER, insert("from reader"))
    assert len(await ledger.rows(db, "notes")) == 1


async def test_write_many_is_all_or_nothing(ledger: Ledger, db: str) -> None:
    before = await snapshot(ledger, db)
    with pytest.raises(InputError):
        await ledger.write_many(db, WRITER, [insert(1), insert(2), {"notes": [{"op": "drop"}]}])
    assert await snapshot(ledger, db) == before
    await ledger.write_many(db, WRITER, [insert(1), insert(2)])
    assert [r.data["value"] for r in await ledger.rows(db, "notes")] == [1, 2]


async def test_revoked_key_refused(ledger: Ledger, db: str) -> None:
    await ledger.set_auth(db, OWNER, STRANGER.public, WRITE0)
    await ledger.write(db, STRANGER, insert("while granted"))
    await ledger.set_auth(db, OWNER, STRANGER.public, WRITE0, active=False)
    assert (await ledger.auth_state(db))[STRANGER.public] == KeyGrant(WRITE0, False)
    assert (await ledger.permission(db, STRANGER.public)).level is Level.NONE
    before = await snapshot(ledger, db)
    with pytest.raises(PermissionDenied):
        await ledger.write(db, STRANGER, insert("after revoke"))
    assert await snapshot(ledger, db) == before
    assert [r.data["value"] for r in await ledger.rows(db, "notes")] == ["while granted"]


async def test_revoked_admin_cannot_grant(ledger: Ledger, db: str) -> None:
    await ledger.set_auth(db, OWNER, ADMIN.public, ADMIN1, active=False)
    with pytest.raises(PermissionDenied, match="not an admin"):
        await ledger.set_auth(db, ADMIN, STRANGER.public, WRITE0)
    assert STRANGER.public not in await ledger.auth_state(db)


async def test_admin_cannot_grant_above_itself(ledger: Ledger, db: str) -> None:
    before = await snapshot(ledger, db)
    with pytest.raises(PermissionDenied, match="cannot grant"):
        await ledger.set_auth(db, ADMIN, STRANGER.public, ADMIN0)
    with pytest.raises(PermissionDenied, match="cannot grant"):
        await ledger.set_auth(db, ADMIN, ADMIN.public, ADMIN0)  # nor promote itself
    for perm in (READ, WRITE0, ADMIN1):  # a key holding admin(0) is out of its reach
        with pytest.raises(PermissionDenied, match="cannot change"):
            await ledger.set_auth(db, ADMIN, OWNER.public, perm)
    with pytest.raises(PermissionDenied, match="cannot change"):
        await ledger.set_auth(db, ADMIN, OWNER.public, READ, active=False)
    assert await snapshot(ledger, db) == before
    # but it can grant write, and admin at its own level, and revoke weaker keys
    await ledger.set_auth(db, ADMIN, STRANGER.public, WRITE0)
    await ledger.set_auth(db, ADMIN, READER.public, Permission.parse("admin", 7))
    await ledger.set_auth(db, ADMIN, WRITER.public, WRITE0, active=False)
    state = await ledger.auth_state(db)
    assert state[STRANGER.public] == KeyGrant(WRITE0)
    assert state[READER.public] == KeyGrant(Permission.parse("admin(7)"))
    assert state[WRITER.public] == KeyGrant(WRITE0, False)
    assert state[OWNER.public] == KeyGrant(ADMIN0)
    await ledger.write(db, STRANGER, insert("granted by admin(1)"))
    # admin(7) cannot touch admin(1), but can grant write(0), which is weaker than admin(7)
    with pytest.raises(PermissionDenied, match="cannot change"):
        await ledger.set_auth(db, READER, ADMIN.public, READ, active=False)
    await ledger.set_auth(db, READER, key(9).public, WRITE0)


async def test_one_entry_changing_several_keys_is_checked_op_by_op(ledger: Ledger, db: str) -> None:
    # admin(1) first demotes itself to write, then tries to grant: the second op is refused,
    # and the whole entry with it.
    ops = {AUTH_STORE: [auth_op(ADMIN.public, WRITE0), auth_op(STRANGER.public, WRITE0)]}
    with pytest.raises(PermissionDenied):
        await ledger.write(db, ADMIN, ops)
    assert (await ledger.auth_state(db))[ADMIN.public] == KeyGrant(ADMIN1)


async def test_later_op_in_one_entry_wins(ledger: Ledger, db: str) -> None:
    ops: dict[str, list[Any]] = {
        AUTH_STORE: [auth_op(STRANGER.public, READ), auth_op(STRANGER.public, WRITE0)],
        "meta": [
            {"op": "set", "field": "topic", "value": "first"},
            {"op": "set", "field": "topic", "value": "second"},
        ],
    }
    await ledger.write(db, OWNER, ops)
    assert (await ledger.auth_state(db))[STRANGER.public] == KeyGrant(WRITE0)
    assert (await ledger.fields(db, "meta"))["topic"] == "second"
    # the materialised auth table agrees with the folded state
    row = await ledger.local(
        "SELECT perm, prio FROM auth WHERE db = ? AND key = ?", (db, STRANGER.public)
    )
    assert row == [("write", 0)]


async def test_root_must_make_its_author_admin0(ledger: Ledger) -> None:
    bad = Entry.create(OWNER, None, [], 0, {AUTH_STORE: [auth_op(OWNER.public, ADMIN1)]})
    empty = Entry.create(OWNER, None, [], 0, {"meta": []})
    result = await ledger.ingest([bad, empty])
    assert result.accepted == [] and len(result.rejected) == 2
    assert await ledger.count_entries() == 0
    with pytest.raises(NotFound):
        await ledger.auth_state(bad.id)


async def test_unknown_db_and_foreign_parent_refused(ledger: Ledger, db: str) -> None:
    other = await ledger.create_db(OWNER, {"name": "other"})
    tips = await ledger.tips(other)
    cross = Entry.create(OWNER, db, tips, 1, insert("x"))  # parent from another database
    result = await ledger.ingest([cross])
    assert result.accepted == [] and "another database" in result.rejected[0][1]
    with pytest.raises(NotFound):
        await ledger.write("sha256:" + "0" * 64, OWNER, insert("x"))
