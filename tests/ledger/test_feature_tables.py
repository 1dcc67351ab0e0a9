"""Features own their peer-local tables (issue #38): declared by the feature, migrated by the
ledger on its one connection, each step whole or not at all, recorded per feature.

On real state files: a file of the layout before (schema version 4, the features' tables
made by the ledger, the memory page's sign-ins in ``local_kv``) opens with every row kept
(Matrix login, sessions and links, shares, cursors, access requests) and passes ``verify``;
a fresh file gets every feature's tables; a step that fails, or a process killed inside a
step, leaves nothing of that step behind; a newer or unknown feature version is refused.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chazbot.commands.web_signins import WEB_SIGNINS, WebGrant, WebSignIns
from chazbot.errors import ConflictError, InputError
from chazbot.ledger import KeyPair, Ledger
from chazbot.ledger.backup import bring_up_to_date, verify_file
from chazbot.ledger.schema import LEGACY_VERSION, MIGRATIONS, migrate
from chazbot.ledger.tables import LocalTable, recorded
from chazbot.sync.store import Remotes, Serving
from chazbot.sync.tables import SYNC, SharedDbs
from chazbot.transports.matrix.credentials import CREDENTIALS
from chazbot.transports.matrix.login import Credentials
from chazbot.transports.tables import FEATURE_TABLES
from tests.support.paths import ROOT

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
BOT = "@bot:example.org"
NOW = 2_000_000_000  # the grants below end after it

# What chazbot's schema migrations 1 and 2 made up to version 4, copied verbatim from them:
# the tables features own now. (The rest of version 4 is the ledger's, unchanged.)
OLD_FEATURE_TABLES = (
    "CREATE TABLE credentials (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE sync_shared (db TEXT PRIMARY KEY, since INTEGER NOT NULL)",
    """CREATE TABLE sync_remotes (
            db TEXT NOT NULL, address TEXT NOT NULL,
            pulled INTEGER NOT NULL DEFAULT 0, pushed INTEGER NOT NULL DEFAULT 0,
            log TEXT NOT NULL DEFAULT '', added INTEGER NOT NULL,
            PRIMARY KEY (db, address)
        ) WITHOUT ROWID""",
    """CREATE TABLE sync_requests (
            id INTEGER PRIMARY KEY, db TEXT NOT NULL, key TEXT NOT NULL,
            permission TEXT NOT NULL, created INTEGER NOT NULL, status TEXT NOT NULL,
            decided INTEGER
        )""",
    "CREATE INDEX sync_requests_db_key ON sync_requests (db, key)",
)


def old_grant(person: str, admin: bool, expires: int, csrf: str = "") -> str:
    return json.dumps({"person": person, "admin": admin, "expires": expires, "csrf": csrf})


def old_state_file(path: Path) -> None:
    """A state file as chazbot wrote it before features owned their tables, with a row of
    each kind a running peer keeps."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrate(conn, MIGRATIONS[:LEGACY_VERSION])
        for sql in OLD_FEATURE_TABLES:
            conn.execute(sql)
        session = json.dumps({"device_id": "DEV1", "access_token": "tok-1"})
        conn.executemany(
            "INSERT INTO credentials (name, value) VALUES (?, ?)",
            [(f"matrix:{BOT}", session), (f"matrix:{BOT}:pickle_key", "pickle-1")],
        )
        conn.executemany("INSERT INTO sync_shared (db, since) VALUES (?, ?)", [(B, 10), (A, 20)])
        conn.executemany(
            "INSERT INTO sync_remotes (db, address, pulled, pushed, log, added)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(A, "http:one:1", 7, 5, "log-1", 1), (B, "http:two:2", 3, 0, "log-2", 2)],
        )
        key = KeyPair.generate().public
        conn.executemany(
            "INSERT INTO sync_requests (db, key, permission, created, status, decided)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(A, key, "read", 100, "approved", 150), (A, key, "write", 200, "pending", None)],
        )
        conn.executemany(
            "INSERT INTO local_kv (key, value) VALUES (?, ?)",
            [
                ("web-session/" + "s" * 64, old_grant("@alice:x", False, NOW + 3600, "csrf-1")),
                ("web-link/" + "l" * 64, old_grant("@bob:x", True, NOW + 600)),
                ("web-link/" + "e" * 64, old_grant("@bob:x", False, NOW - 1)),  # expired
                ("web-link/" + "x" * 64, "not json"),  # unusable before, and gone after
                ("web-issued/@bob:x", json.dumps([NOW - 30, NOW - 20])),
                ("sync.log_id", "abc"),  # the ledger's own: stays
            ],
        )
    finally:
        conn.close()


def names(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


async def test_an_old_state_file_opens_with_every_row_kept(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    old_state_file(path)
    checked = verify_file(path, FEATURE_TABLES)
    assert checked.ok, checked.failures  # the old layout is chazbot's, as it was
    ledger = await Ledger.open(path, FEATURE_TABLES)
    try:
        creds = Credentials(ledger, BOT)
        assert await creds.session() == {"device_id": "DEV1", "access_token": "tok-1"}
        assert await creds.pickle_key() == "pickle-1"  # the e2e store stays readable
        sharing = Serving(ledger)
        assert await sharing.shared() == [B, A]
        pairs = await Remotes(ledger).list()
        assert [(c.db, c.address, c.pulled, c.pushed, c.log) for c in pairs] == [
            (A, "http:one:1", 7, 5, "log-1"),
            (B, "http:two:2", 3, 0, "log-2"),
        ]
        requests = await sharing.requests(A, status=None)
        assert [(r.permission, r.status, r.decided) for r in requests] == [
            ("read", "approved", 150),
            ("write", "pending", None),
        ]
        signins = WebSignIns(ledger)
        alice = WebGrant("@alice:x", False, NOW + 3600, "csrf-1")
        assert await signins.session("s" * 64, NOW) == alice
        assert await signins.take_link("l" * 64, NOW) == WebGrant("@bob:x", True, NOW + 600)
        assert await signins.take_link("l" * 64, NOW) is None  # still taken once
        assert await signins.take_link("e" * 64, NOW) is None  # still expired
        # the two links issued before the upgrade still count against bob's limit
        link = WebGrant("@bob:x", False, NOW + 600)
        assert await signins.add_link("n" * 64, link, NOW, 600, 3) is True
        assert await signins.add_link("m" * 64, link, NOW, 600, 3) is False
        assert await ledger.kv.get("sync.log_id") == "abc"
        assert await ledger.kv.with_prefix("web-") == []  # moved, not copied
        assert await ledger.local("SELECT name, version FROM local_tables ORDER BY name") == [
            ("matrix.credentials", 1),
            ("matrix.state", 6),
            ("memory.vectors", 5),
            ("sync", 4),
            ("web.signins", 6),  # 6: the room a link was sent in
        ]
    finally:
        await ledger.close()
    checked = verify_file(path, FEATURE_TABLES)
    assert checked.ok, checked.failures
    ledger = await Ledger.open(path, FEATURE_TABLES)  # opening again changes nothing
    try:
        assert await Credentials(ledger, BOT).pickle_key() == "pickle-1"
        assert await Serving(ledger).shared() == [B, A]
    finally:
        await ledger.close()


async def test_an_old_file_adopts_a_features_table_on_first_use(tmp_path: Path) -> None:
    """A ledger opened without the features' tables (a tool, ``chazbot cmd``) brings each up
    to date when the feature first uses it; the file meanwhile still verifies."""
    path = tmp_path / "state.sqlite3"
    old_state_file(path)
    ledger = await Ledger.open(path)
    try:
        assert ledger.tables() == []
        assert await SharedDbs(ledger).all() == [B, A]
        assert [t.name for t in ledger.tables()] == ["sync"]
    finally:
        await ledger.close()
    checked = verify_file(path, FEATURE_TABLES)  # credentials: not adopted yet, still fine
    assert checked.ok, checked.failures
    ledger = await Ledger.open(path)
    try:
        assert (await Credentials(ledger, BOT).session())["device_id"] == "DEV1"
    finally:
        await ledger.close()


async def test_a_fresh_state_file_gets_every_features_tables(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    ledger = await Ledger.open(path, FEATURE_TABLES)
    try:
        assert {t.name for t in ledger.tables()} == {
            "sync",
            "web.signins",
            "matrix.credentials",
            "matrix.state",
            "memory.vectors",
        }
        versions = dict(await ledger.local("SELECT name, version FROM local_tables"))
        assert versions == {t.name: t.version for t in FEATURE_TABLES}
        # once brought up to date here, ``local`` may write them (tests and tools)
        await ledger.local("INSERT INTO sync_shared (db, since) VALUES (?, 1)", (A,))
        with pytest.raises(InputError):
            await ledger.local("INSERT INTO entries (id) VALUES ('x')")
    finally:
        await ledger.close()
    made = names(path)
    for table in FEATURE_TABLES:
        assert set(table.tables) <= made, table.name
    checked = verify_file(path, FEATURE_TABLES)
    assert checked.ok, checked.failures
    # the same file judged by a chazbot that knows no such feature: not its schema
    unknown = verify_file(path, [t for t in FEATURE_TABLES if t is not WEB_SIGNINS])
    assert ("local tables web.signins", "no feature of this chazbot owns them") in unknown.foreign


async def test_chazbot_run_makes_every_features_tables_at_start(tmp_path: Path) -> None:
    """``chazbot run`` (``Service.start``) brings every feature's tables up to date, even
    those of a transport that is off (the Matrix login here)."""
    from chazbot.config import Config
    from chazbot.peer import STATE_FILE
    from chazbot.service import Service

    state = tmp_path / "state"
    service = Service(Config(state_dir=state, embedding=None, sync_listen="", http_listen=""))
    await service.start()
    await service.stop()
    conn = sqlite3.connect(state / STATE_FILE)
    try:
        assert recorded(conn) == {t.name: t.version for t in FEATURE_TABLES}
    finally:
        conn.close()
    assert verify_file(state / STATE_FILE, FEATURE_TABLES).ok


async def test_every_feature_table_is_in_the_catalogue_and_claims_its_own_names() -> None:
    assert {SYNC, WEB_SIGNINS, CREDENTIALS} <= set(FEATURE_TABLES)
    owned = [n for t in FEATURE_TABLES for n in t.tables]
    assert len(owned) == len(set(owned))
    ledger_tables = {n for _, n in _ledger_objects() if not n.startswith("sqlite_")}
    assert not set(owned) & ledger_tables  # the ledger's schema names no feature's table


def _ledger_objects() -> set[tuple[str, str]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(conn)
        return {(str(k), str(n)) for k, n in conn.execute("SELECT type, name FROM sqlite_master")}
    finally:
        conn.close()


def boom(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE half_b (x INTEGER)")
    conn.execute("INSERT INTO half_a (x) VALUES (1)")
    raise RuntimeError("the step fails half way")


async def test_a_failing_step_leaves_nothing_of_itself_and_runs_again(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    first = "CREATE TABLE half_a (x INTEGER)"
    broken = LocalTable("test.half", ("half_a", "half_b"), (first, boom))
    ledger = await Ledger.open(path)
    try:
        with pytest.raises(RuntimeError, match="half way"):
            await ledger.table(broken)
        assert await ledger.local("SELECT version FROM local_tables") == [(1,)]  # step 1 held
        assert await ledger.local("SELECT count(*) FROM half_a") == [(0,)]  # step 2: undone
        assert "half_b" not in names(path)
        fixed = LocalTable(
            "test.half", ("half_a", "half_b"), (first, "CREATE TABLE half_b (x INTEGER)")
        )
        await ledger.table(fixed)  # a later start runs the step again, whole
        assert await ledger.local("SELECT version FROM local_tables") == [(2,)]
        with pytest.raises(ConflictError, match="two different"):
            await ledger.table(broken)  # one name, one declaration per open ledger
    finally:
        await ledger.close()


CRASH = textwrap.dedent(
    """
    import asyncio, os, sys
    from chazbot.ledger import Ledger
    from chazbot.ledger.tables import LocalTable

    def die(conn):
        conn.execute("CREATE TABLE crash_b (x INTEGER)")
        conn.execute("INSERT INTO crash_a (x) VALUES (1)")
        os._exit(7)  # killed inside the step's transaction

    async def main():
        table = LocalTable("test.crash", ("crash_a", "crash_b"),
                           ("CREATE TABLE crash_a (x INTEGER)", die))
        await Ledger.open(sys.argv[1], [table])

    asyncio.run(main())
    """
)


async def test_a_process_killed_inside_a_step_leaves_nothing_of_it(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    done = subprocess.run(
        [sys.executable, "-c", CRASH, str(path)], cwd=ROOT, timeout=120, check=False
    )
    assert done.returncode == 7
    ledger = await Ledger.open(path)
    try:
        assert await ledger.local("SELECT name, version FROM local_tables") == [("test.crash", 1)]
        assert await ledger.local("SELECT count(*) FROM crash_a") == [(0,)]
        assert "crash_b" not in names(path)
    finally:
        await ledger.close()


async def test_steps_run_once_however_often_the_file_opens(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    runs: list[int] = []
    table = LocalTable(
        "test.once", ("once",), ("CREATE TABLE once (x INTEGER)", lambda conn: runs.append(1))
    )
    for _ in range(3):
        ledger = await Ledger.open(path, [table, table])
        await ledger.table(table)
        await ledger.close()
    assert runs == [1]


async def test_a_newer_feature_version_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    ledger = await Ledger.open(path, [CREDENTIALS])
    with pytest.raises(InputError):  # the versions are the ledger's: ``local`` may not
        await ledger.local("UPDATE local_tables SET version = 9")
    await ledger.close()
    conn = sqlite3.connect(path, isolation_level=None)  # as a newer chazbot would leave it
    conn.execute("UPDATE local_tables SET version = 9 WHERE name = 'matrix.credentials'")
    conn.close()
    with pytest.raises(ConflictError, match="newer than this chazbot knows"):
        await Ledger.open(path, [CREDENTIALS])
    checked = verify_file(path, FEATURE_TABLES)
    assert any("newer than this chazbot knows" in why for _, why in checked.foreign)
    ledger = await Ledger.open(path)  # without the feature it opens; the feature is refused
    try:
        with pytest.raises(ConflictError):
            await ledger.table(CREDENTIALS)
        assert await ledger.local("SELECT version FROM local_tables") == [(9,)]
    finally:
        await ledger.close()


async def test_verify_and_restore_refuse_a_changed_feature_table(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite3"
    old_state_file(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TABLE credentials")  # an old table, unrecorded, now with another shape
    conn.execute("CREATE TABLE credentials (name TEXT, value TEXT, stolen TEXT)")
    conn.execute("CREATE TRIGGER t AFTER INSERT ON sync_shared BEGIN SELECT 1; END")
    conn.close()
    found = dict(verify_file(path, FEATURE_TABLES).foreign)
    assert found["table credentials"] == "its definition is not chazbot's schema"
    assert found["trigger t"].startswith("not chazbot's schema")
    refused = bring_up_to_date(path, FEATURE_TABLES)  # nothing runs on such a file
    assert refused is not None and refused.foreign
    conn = sqlite3.connect(path)
    try:
        assert recorded(conn) == {}
        version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        assert version == LEGACY_VERSION
    finally:
        conn.close()


def test_a_local_table_is_declared_plainly() -> None:
    with pytest.raises(InputError):
        LocalTable("Bad Name", ("t",), ("CREATE TABLE t (x)",))
    with pytest.raises(InputError):
        LocalTable("empty", ("t",), ())
    with pytest.raises(InputError):
        LocalTable("legacy", ("t",), ("CREATE TABLE t (x)",), legacy=2)


async def test_two_features_may_not_claim_one_table(tmp_path: Path) -> None:
    thief = LocalTable("test.thief", ("credentials",), ("CREATE TABLE stolen (x)",))
    entries = LocalTable("test.entries", ("entries",), ("CREATE TABLE other (x)",))
    ledger = await Ledger.open(tmp_path / "state.sqlite3", [CREDENTIALS])
    try:
        with pytest.raises(ConflictError, match="claimed"):
            await ledger.table(thief)
        with pytest.raises(ConflictError, match="the ledger's entries"):
            await ledger.table(entries)  # ``local`` would let it write signed tables
        with pytest.raises(InputError):
            await ledger.local("INSERT INTO entries (id) VALUES ('x')")
    finally:
        await ledger.close()
    with pytest.raises(ConflictError, match="the ledger's entries"):
        await Ledger.open(tmp_path / "other.sqlite3", [entries])
