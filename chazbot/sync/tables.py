"""Sync's own peer-local tables (never synced) and their typed stores; the policy over them
is in ``store``.

- ``sync_shared``: the databases this peer serves (``/memory share``, ``/memory unshare``).
- ``sync_remotes``: the (database, remote address) pairs this peer syncs, with the cursors:
  ``pulled`` is the remote's seq up to which we hold its log, ``pushed`` our seq up to which
  the remote holds ours, ``log`` the remote's log id the cursors belong to.
- ``sync_requests``: access requests received from importing peers, with their decision.

They are declared here as one ``LocalTable`` (``SYNC``), which the ledger brings up to date
on its connection and thread; every method is one step there. State files made before
features owned their tables (schema version 4 and older) hold these tables from the
ledger's migration 2: the steps below make exactly those, ``IF NOT EXISTS``, so such a file
keeps them and every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chazbot.ledger.core import LedgerCore
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.tables import LocalTable

SYNC = LocalTable(
    "sync",
    ("sync_shared", "sync_remotes", "sync_requests"),
    (
        "CREATE TABLE IF NOT EXISTS sync_shared (db TEXT PRIMARY KEY, since INTEGER NOT NULL)",
        """CREATE TABLE IF NOT EXISTS sync_remotes (
            db TEXT NOT NULL, address TEXT NOT NULL,
            pulled INTEGER NOT NULL DEFAULT 0, pushed INTEGER NOT NULL DEFAULT 0,
            log TEXT NOT NULL DEFAULT '', added INTEGER NOT NULL,
            PRIMARY KEY (db, address)
        ) WITHOUT ROWID""",
        """CREATE TABLE IF NOT EXISTS sync_requests (
            id INTEGER PRIMARY KEY, db TEXT NOT NULL, key TEXT NOT NULL,
            permission TEXT NOT NULL, created INTEGER NOT NULL, status TEXT NOT NULL,
            decided INTEGER
        )""",
        "CREATE INDEX IF NOT EXISTS sync_requests_db_key ON sync_requests (db, key)",
    ),
    legacy=4,
)


class SharedDbs:
    """``sync_shared``: the databases this peer serves to other peers."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    async def add(self, db: str, since: int) -> None:
        """Serve ``db`` (a database served already keeps its ``since``)."""
        await self._ledger.run_in(
            SYNC,
            lambda core: core.conn.execute(
                "INSERT OR IGNORE INTO sync_shared (db, since) VALUES (?, ?)", (db, since)
            ),
        )

    async def remove(self, db: str) -> bool:
        """Stop serving ``db``; True if it was served."""

        def write(core: LedgerCore) -> bool:
            cur = core.conn.execute("DELETE FROM sync_shared WHERE db = ?", (db,))
            return cur.rowcount > 0

        return await self._ledger.run_in(SYNC, write)

    async def all(self) -> list[str]:
        """The served databases, oldest share first."""

        def read(core: LedgerCore) -> list[str]:
            cur = core.conn.execute("SELECT db FROM sync_shared ORDER BY since, db")
            return [str(row[0]) for row in cur]

        return await self._ledger.run_in(SYNC, read)


@dataclass
class Cursor:
    """How far this peer and a remote hold each other's log of one database."""

    db: str
    address: str
    pulled: int = 0  # the remote's seq up to which we hold its log
    pushed: int = 0  # our seq up to which the remote holds ours
    log: str = ""  # the remote's log id the cursors belong to


class SyncCursors:
    """``sync_remotes``: the (database, remote address) pairs this peer syncs, in the order
    they were added, with their cursors."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    async def list(self, db: str | None = None) -> list[Cursor]:
        def read(core: LedgerCore) -> list[Cursor]:
            cur = core.conn.execute(
                "SELECT db, address, pulled, pushed, log FROM sync_remotes"
                " WHERE ? IS NULL OR db = ? ORDER BY added, db, address",
                (db, db),
            )
            return [Cursor(str(d), str(a), int(p), int(q), str(g)) for d, a, p, q, g in cur]

        return await self._ledger.run_in(SYNC, read)

    async def add(self, db: str, address: str, added: int) -> Cursor:
        """The pair's cursor, made (at zero) if the pair is new."""

        def write(core: LedgerCore) -> Cursor:
            core.conn.execute(
                "INSERT OR IGNORE INTO sync_remotes (db, address, added) VALUES (?, ?, ?)",
                (db, address, added),
            )
            d, a, p, q, g = core.conn.execute(
                "SELECT db, address, pulled, pushed, log FROM sync_remotes"
                " WHERE db = ? AND address = ?",
                (db, address),
            ).fetchone()
            return Cursor(str(d), str(a), int(p), int(q), str(g))

        return await self._ledger.run_in(SYNC, write)

    async def remove(self, db: str, address: str | None = None) -> int:
        """Forget the pairs of ``db`` (all, or the one at ``address``); return how many."""

        def write(core: LedgerCore) -> int:
            cur = core.conn.execute(
                "DELETE FROM sync_remotes WHERE db = ? AND (? IS NULL OR address = ?)",
                (db, address, address),
            )
            return int(cur.rowcount)

        return await self._ledger.run_in(SYNC, write)

    async def save(self, cursor: Cursor) -> None:
        await self._ledger.run_in(
            SYNC,
            lambda core: core.conn.execute(
                "UPDATE sync_remotes SET pulled = ?, pushed = ?, log = ?"
                " WHERE db = ? AND address = ?",
                (cursor.pulled, cursor.pushed, cursor.log, cursor.db, cursor.address),
            ),
        )


@dataclass(frozen=True)
class AccessRequest:
    """An importing peer's request for a permission on a database this peer shares."""

    id: int
    db: str
    key: str
    permission: str
    created: int
    status: str  # pending | approved | rejected | expired
    decided: int | None = None


_REQUEST_COLUMNS = "id, db, key, permission, created, status, decided"


def _request(row: tuple[Any, ...]) -> AccessRequest:
    rid, db, key, perm, created, status, decided = row
    return AccessRequest(
        int(rid),
        str(db),
        str(key),
        str(perm),
        int(created),
        str(status),
        None if decided is None else int(decided),
    )


class AccessRequests:
    """``sync_requests``: access requests received from importing peers, with decisions.

    The ``*_on`` functions take the ledger's core and run inside one
    ``Ledger.run_in(SYNC, …)`` step, so a policy (sync's bounded queue) can read and write
    them as one atomic decision.
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @staticmethod
    def expire_pending_on(core: LedgerCore, db: str, created_before: int, now: int) -> list[int]:
        """Mark ``db``'s pending requests made before ``created_before`` expired; their ids."""
        cur = core.conn.execute(
            "UPDATE sync_requests SET status = 'expired', decided = ?"
            " WHERE db = ? AND status = 'pending' AND created < ? RETURNING id",
            (now, db, created_before),
        )
        return [int(r[0]) for r in cur]

    @staticmethod
    def latest_on(core: LedgerCore, db: str, key: str, permission: str) -> AccessRequest | None:
        """The newest request of ``key`` for ``permission`` on ``db``."""
        row = core.conn.execute(
            f"SELECT {_REQUEST_COLUMNS} FROM sync_requests"
            " WHERE db = ? AND key = ? AND permission = ? ORDER BY id DESC LIMIT 1",
            (db, key, permission),
        ).fetchone()
        return None if row is None else _request(row)

    @staticmethod
    def pending_ids_on(core: LedgerCore, db: str) -> list[int]:
        cur = core.conn.execute(
            "SELECT id FROM sync_requests WHERE db = ? AND status = 'pending' ORDER BY id", (db,)
        )
        return [int(r[0]) for r in cur]

    @staticmethod
    def set_status_on(core: LedgerCore, request_id: int, status: str, decided: int) -> None:
        core.conn.execute(
            "UPDATE sync_requests SET status = ?, decided = ? WHERE id = ?",
            (status, decided, request_id),
        )

    @staticmethod
    def add_on(core: LedgerCore, db: str, key: str, permission: str, created: int) -> int:
        """Record a new pending request; its id."""
        (rid,) = core.conn.execute(
            "INSERT INTO sync_requests (db, key, permission, created, status)"
            " VALUES (?, ?, ?, ?, 'pending') RETURNING id",
            (db, key, permission, created),
        ).fetchone()
        return int(rid)

    async def has_pending(self, db: str, key: str) -> bool:
        def read(core: LedgerCore) -> bool:
            row = core.conn.execute(
                "SELECT 1 FROM sync_requests WHERE db = ? AND key = ? AND status = 'pending'"
                " LIMIT 1",
                (db, key),
            ).fetchone()
            return row is not None

        return await self._ledger.run_in(SYNC, read)

    async def pending_counts(self) -> dict[str, int]:
        """How many requests are pending, per database."""

        def read(core: LedgerCore) -> dict[str, int]:
            cur = core.conn.execute(
                "SELECT db, count(*) FROM sync_requests WHERE status = 'pending' GROUP BY db"
            )
            return {str(db): int(n) for db, n in cur}

        return await self._ledger.run_in(SYNC, read)

    async def list(
        self, db: str | None = None, status: str | None = None, newest: int | None = None
    ) -> list[AccessRequest]:
        """Requests oldest first, filtered by ``db`` and ``status``; ``newest``: the last N."""

        def read(core: LedgerCore) -> list[AccessRequest]:
            cur = core.conn.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM sync_requests"
                " WHERE (? IS NULL OR db = ?) AND (? IS NULL OR status = ?)"
                " ORDER BY id DESC LIMIT ?",
                (db, db, status, status, -1 if newest is None else max(0, newest)),
            )
            return [_request(r) for r in cur][::-1]

        return await self._ledger.run_in(SYNC, read)

    async def get(self, request_id: int) -> AccessRequest | None:
        def read(core: LedgerCore) -> AccessRequest | None:
            row = core.conn.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM sync_requests WHERE id = ?", (request_id,)
            ).fetchone()
            return None if row is None else _request(row)

        return await self._ledger.run_in(SYNC, read)

    async def set_status(self, request_id: int, status: str, decided: int) -> None:
        await self._ledger.run_in(SYNC, AccessRequests.set_status_on, request_id, status, decided)


__all__ = ["SYNC", "AccessRequest", "AccessRequests", "Cursor", "SharedDbs", "SyncCursors"]
