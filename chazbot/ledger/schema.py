"""The SQLite schema of the ledger's part of a peer's state file, as ordered migrations.

Features' own tables are not here: each feature declares them (``ledger/tables.py``).

Each migration is a function run in its own transaction together with the version row. A
file whose version is newer than the code knows is refused, so an old chazbot never
scribbles on a newer layout.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

from chazbot.errors import ConflictError
from chazbot.ledger.tables import VERSIONS

Migration = Callable[[sqlite3.Connection], None]


def _v1_ledger(conn: sqlite3.Connection) -> None:
    """The ledger (entries and what is derived from them) and its own peer-local tables.

    Up to version 4 this step also made the Matrix login's ``credentials`` table; that table
    is the Matrix transport's now (``LocalTable`` with ``legacy``, ``ledger/tables.py``): an
    old file keeps it and its rows, a new file gets it from the feature."""
    conn.execute(
        """CREATE TABLE entries (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            db TEXT NOT NULL,
            height INTEGER NOT NULL,
            author TEXT NOT NULL,
            ts INTEGER NOT NULL,
            auth_set INTEGER NOT NULL,
            data BLOB NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX entries_db ON entries (db, seq)")
    conn.execute(
        "CREATE TABLE tips (db TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (db, id)) WITHOUT ROWID"
    )
    conn.execute(
        "CREATE TABLE auth_sets (n INTEGER PRIMARY KEY, db TEXT NOT NULL, members TEXT NOT NULL)"
    )
    conn.execute(
        """CREATE TABLE rows (
            n INTEGER PRIMARY KEY,
            db TEXT NOT NULL,
            store TEXT NOT NULL,
            row_id TEXT NOT NULL UNIQUE,
            entry_id TEXT NOT NULL,
            author TEXT NOT NULL,
            ts INTEGER NOT NULL,
            height INTEGER NOT NULL,
            data TEXT NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX rows_db_store ON rows (db, store, n)")
    conn.execute(
        """CREATE TABLE fields (
            db TEXT NOT NULL, store TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL,
            height INTEGER NOT NULL, entry_id TEXT NOT NULL,
            PRIMARY KEY (db, store, field)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """CREATE TABLE auth (
            db TEXT NOT NULL, key TEXT NOT NULL, perm TEXT NOT NULL, prio INTEGER NOT NULL,
            status TEXT NOT NULL, height INTEGER NOT NULL, entry_id TEXT NOT NULL,
            PRIMARY KEY (db, key)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        "CREATE TABLE local_keys "
        "(pubkey TEXT PRIMARY KEY, label TEXT NOT NULL, private BLOB NOT NULL)"
    )
    conn.execute(
        """CREATE TABLE registry (
            kind TEXT NOT NULL, name TEXT NOT NULL, db TEXT NOT NULL,
            data TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (kind, name)
        )"""
    )
    conn.execute("CREATE TABLE local_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def _v2_sync(conn: sqlite3.Connection) -> None:
    """Nothing now. Up to version 4 this step made sync's tables (``sync_shared``,
    ``sync_remotes``, ``sync_requests``); they are sync's own now (``chazbot/sync/tables.py``,
    adopted as they are from an old file). The step stays so versions count as before."""


def _v3_linear_auth_and_soft_fail(conn: sqlite3.Connection) -> None:
    """Auth state by heads, soft-failed writes, and the field sets they may hide.

    - ``auth_heads`` replaces ``auth_sets``: an entry's ``auth_set`` now names the *antichain*
      of auth entries at the top of its ancestry (usually one), not every auth entry in it,
      so the table grows with the number of auth changes, not changes x members. The old
      sets are turned into heads with the same numbers, so ``entries.auth_set`` stays valid.
    - ``entries.parents`` (space-separated ids) lets revocation walk the DAG without
      decoding entries; ``entries.soft_failed`` and ``rows.hidden`` mark the writes of a
      revoked key that its revocation had not seen (SPEC §2).
    - ``field_sets`` records every single-valued ``set``, so a field can be recomputed from
      the entries that are not soft-failed.
    """
    conn.execute(
        "CREATE TABLE auth_heads (n INTEGER PRIMARY KEY, db TEXT NOT NULL, members TEXT NOT NULL)"
    )
    own_set = dict(conn.execute("SELECT id, auth_set FROM entries"))
    sets: dict[int, tuple[str, frozenset[str]]] = {
        int(n): (db, frozenset(json.loads(members)))
        for n, db, members in conn.execute("SELECT n, db, members FROM auth_sets")
    }
    for n, (db, members) in sets.items():
        below: set[str] = set()
        for member in members:
            mine = sets.get(own_set.get(member, -1))
            if mine is not None:
                below |= mine[1] - {member}
        heads = sorted(members - below)
        conn.execute(
            "INSERT INTO auth_heads (n, db, members) VALUES (?, ?, ?)", (n, db, json.dumps(heads))
        )
    conn.execute("DROP TABLE auth_sets")
    conn.execute("ALTER TABLE entries ADD COLUMN parents TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE entries ADD COLUMN soft_failed INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE entries ADD COLUMN is_data INTEGER NOT NULL DEFAULT 1")
    for eid, data in conn.execute("SELECT id, data FROM entries").fetchall():
        body = json.loads(bytes(data))
        ops = body.get("ops", {})
        is_data = any(store != "_auth" for store in ops) or "_auth" not in ops
        conn.execute(
            "UPDATE entries SET parents = ?, is_data = ? WHERE id = ?",
            (" ".join(body.get("parents", [])), int(is_data), eid),
        )
    conn.execute("CREATE INDEX entries_author ON entries (db, author, height)")
    conn.execute("CREATE INDEX entries_height ON entries (db, height)")
    conn.execute("ALTER TABLE rows ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0")
    conn.execute(
        """CREATE TABLE field_sets (
            db TEXT NOT NULL, store TEXT NOT NULL, field TEXT NOT NULL,
            height INTEGER NOT NULL, entry_id TEXT NOT NULL, value TEXT NOT NULL,
            PRIMARY KEY (db, store, field, height, entry_id)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        "INSERT INTO field_sets (db, store, field, height, entry_id, value) "
        "SELECT db, store, field, height, entry_id, value FROM fields"
    )


def _v4_limbo(conn: sqlite3.Connection) -> None:
    """Refused soft-failed entries that may still gain an honest child (``ledger/limbo.py``),
    peer-local: kept across a restart, bounded per author key and in all, oldest out first
    (``seq``). Auth entries' ``soft_failed`` marks and the ``auth`` table are settled by the
    resolution by authority when the file is next opened (``LedgerCore``)."""
    conn.execute(
        """CREATE TABLE limbo (
            seq INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            db TEXT NOT NULL,
            author TEXT NOT NULL,
            size INTEGER NOT NULL,
            data BLOB NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX limbo_author ON limbo (author, seq)")
    conn.execute("CREATE INDEX limbo_db ON limbo (db, author)")


def _v5_local_tables(conn: sqlite3.Connection) -> None:
    """Each feature's version of the tables it owns (``ledger/tables.py``)."""
    conn.execute(
        f"CREATE TABLE {VERSIONS} (name TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID"
    )


MIGRATIONS: list[Migration] = [
    _v1_ledger,
    _v2_sync,
    _v3_linear_auth_and_soft_fail,
    _v4_limbo,
    _v5_local_tables,
]
LEGACY_VERSION = 4
"""The last version whose files hold features' tables made by the ledger itself."""

SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: sqlite3.Connection, migrations: list[Migration] | None = None) -> int:
    """Bring the file up to date; refuse a file newer than ``migrations``. Returns the version."""
    steps = MIGRATIONS if migrations is None else migrations
    version = current_version(conn)
    if version > len(steps):
        raise ConflictError(
            f"the state file has schema version {version}, newer than this chazbot knows "
            f"({len(steps)}); upgrade chazbot or use another state_dir"
        )
    for number in range(version + 1, len(steps) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            steps[number - 1](conn)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(steps)
