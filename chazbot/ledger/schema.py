"""The SQLite schema of a peer's state file, as ordered migrations.

Each migration runs in its own transaction together with the version row. A file whose
version is newer than the code knows is refused, so an old chazbot never scribbles on a
newer layout.
"""

from __future__ import annotations

import sqlite3

from chazbot.errors import ConflictError

MIGRATIONS: list[str] = [
    # 1: the ledger (entries and what is derived from them) and the peer-local tables.
    """
    CREATE TABLE entries (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        db TEXT NOT NULL,
        height INTEGER NOT NULL,
        author TEXT NOT NULL,
        ts INTEGER NOT NULL,
        auth_set INTEGER NOT NULL,
        data BLOB NOT NULL
    );
    CREATE INDEX entries_db ON entries (db, seq);
    CREATE TABLE tips (db TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY (db, id)) WITHOUT ROWID;
    CREATE TABLE auth_sets (n INTEGER PRIMARY KEY, db TEXT NOT NULL, members TEXT NOT NULL);
    CREATE TABLE rows (
        n INTEGER PRIMARY KEY,
        db TEXT NOT NULL,
        store TEXT NOT NULL,
        row_id TEXT NOT NULL UNIQUE,
        entry_id TEXT NOT NULL,
        author TEXT NOT NULL,
        ts INTEGER NOT NULL,
        height INTEGER NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX rows_db_store ON rows (db, store, n);
    CREATE TABLE fields (
        db TEXT NOT NULL, store TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL,
        height INTEGER NOT NULL, entry_id TEXT NOT NULL,
        PRIMARY KEY (db, store, field)
    ) WITHOUT ROWID;
    CREATE TABLE auth (
        db TEXT NOT NULL, key TEXT NOT NULL, perm TEXT NOT NULL, prio INTEGER NOT NULL,
        status TEXT NOT NULL, height INTEGER NOT NULL, entry_id TEXT NOT NULL,
        PRIMARY KEY (db, key)
    ) WITHOUT ROWID;
    CREATE TABLE local_keys (pubkey TEXT PRIMARY KEY, label TEXT NOT NULL, private BLOB NOT NULL);
    CREATE TABLE registry (
        kind TEXT NOT NULL, name TEXT NOT NULL, db TEXT NOT NULL, data TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (kind, name)
    );
    CREATE TABLE credentials (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE local_kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    """,
    # 2: peer-to-peer sync (peer-local, never synced): what this peer serves, whom it syncs
    # with and how far (cursors: the remote's seq pulled, our seq the remote is known to
    # hold), and the access requests it has received.
    """
    CREATE TABLE sync_shared (db TEXT PRIMARY KEY, since INTEGER NOT NULL);
    CREATE TABLE sync_remotes (
        db TEXT NOT NULL, address TEXT NOT NULL,
        pulled INTEGER NOT NULL DEFAULT 0, pushed INTEGER NOT NULL DEFAULT 0,
        log TEXT NOT NULL DEFAULT '', added INTEGER NOT NULL,
        PRIMARY KEY (db, address)
    ) WITHOUT ROWID;
    CREATE TABLE sync_requests (
        id INTEGER PRIMARY KEY, db TEXT NOT NULL, key TEXT NOT NULL, permission TEXT NOT NULL,
        created INTEGER NOT NULL, status TEXT NOT NULL, decided INTEGER
    );
    CREATE INDEX sync_requests_db_key ON sync_requests (db, key)
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: sqlite3.Connection) -> int:
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def migrate(conn: sqlite3.Connection, migrations: list[str] | None = None) -> int:
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
            for statement in steps[number - 1].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (number,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(steps)
