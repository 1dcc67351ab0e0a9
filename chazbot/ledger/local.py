"""Peer-local stores: what one peer keeps for itself in its state file, never synced.

Each store is a small typed API over one peer-local table; their SQL lives here, in the
ledger layer, and nowhere above it. Every method is one step on the ledger's worker thread
(one transaction), reached as ``ledger.kv``, ``ledger.credentials``, ``ledger.keys``,
``ledger.hosted``, and for sync ``ledger.shared``, ``ledger.cursors`` and ``ledger.requests``
(the access-request queue's policy stays in ``sync/store.py``).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from chazbot.errors import ConflictError
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.keys import KeyPair

T = TypeVar("T")


class _Runs(Protocol):
    async def run(self, fn: Callable[..., T], *args: Any) -> T: ...


def _prefix_range(prefix: str) -> tuple[str, str]:
    """``lo <= key < hi`` holds exactly for the keys starting with ``prefix`` (non-empty)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


class KeyValue:
    """``local_kv``: text values under text keys (the sync token, handled ids, log id…)."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def get(self, key: str) -> str | None:
        def read(core: LedgerCore) -> str | None:
            row = core.conn.execute("SELECT value FROM local_kv WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        return await self._ledger.run(read)

    async def set(self, key: str, value: str) -> None:
        await self.set_many([(key, value)])

    async def set_many(self, items: Iterable[tuple[str, str]]) -> None:
        """Set every ``(key, value)`` in one transaction (all or none)."""
        pairs = [(str(k), str(v)) for k, v in items]

        def write(core: LedgerCore) -> None:
            with _transaction(core.conn):
                core.conn.executemany(
                    "INSERT OR REPLACE INTO local_kv (key, value) VALUES (?, ?)", pairs
                )

        if pairs:
            await self._ledger.run(write)

    async def setdefault(self, key: str, value: str) -> str:
        """The value under ``key``, storing ``value`` first if there is none (one step)."""

        def write(core: LedgerCore) -> str:
            core.conn.execute(
                "INSERT OR IGNORE INTO local_kv (key, value) VALUES (?, ?)", (key, value)
            )
            row = core.conn.execute("SELECT value FROM local_kv WHERE key = ?", (key,))
            return str(row.fetchone()[0])

        return await self._ledger.run(write)

    async def delete(self, key: str) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute("DELETE FROM local_kv WHERE key = ?", (key,))
        )

    async def with_prefix(self, prefix: str, newest: int | None = None) -> list[tuple[str, str]]:
        """``(key, value)`` pairs whose key starts with ``prefix``, by key; with ``newest``,
        only that many with the greatest values, greatest first."""
        lo, hi = _prefix_range(prefix)
        params: tuple[Any, ...] = (lo, hi)
        sql = "ORDER BY key"
        if newest is not None:
            sql, params = "ORDER BY value DESC LIMIT ?", (lo, hi, newest)

        def read(core: LedgerCore) -> list[tuple[str, str]]:
            cur = core.conn.execute(
                f"SELECT key, value FROM local_kv WHERE key >= ? AND key < ? {sql}", params
            )
            return [(str(k), str(v)) for k, v in cur]

        return await self._ledger.run(read)

    async def delete_prefix(self, prefix: str, keep_newest: int = 0) -> int:
        """Delete the keys starting with ``prefix`` except the ``keep_newest`` with the
        greatest values; return how many went."""
        lo, hi = _prefix_range(prefix)

        def write(core: LedgerCore) -> int:
            cur = core.conn.execute(
                "DELETE FROM local_kv WHERE key >= ? AND key < ? AND key NOT IN (SELECT key"
                " FROM local_kv WHERE key >= ? AND key < ? ORDER BY value DESC LIMIT ?)",
                (lo, hi, lo, hi, keep_newest),
            )
            return int(cur.rowcount)

        return await self._ledger.run(write)


class Credentials:
    """``credentials``: secrets by name (a Matrix login, the e2e store's key…)."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def get(self, name: str) -> str | None:
        def read(core: LedgerCore) -> str | None:
            cur = core.conn.execute("SELECT value FROM credentials WHERE name = ?", (name,))
            row = cur.fetchone()
            return None if row is None else str(row[0])

        return await self._ledger.run(read)

    async def set(self, name: str, value: str) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute(
                "INSERT OR REPLACE INTO credentials (name, value) VALUES (?, ?)", (name, value)
            )
        )

    async def delete(self, name: str) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute("DELETE FROM credentials WHERE name = ?", (name,))
        )


class LocalKeys:
    """``local_keys``: the private keys this peer holds, each with a label (oldest first)."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def add(self, key: KeyPair, label: str) -> None:
        """Keep ``key`` under ``label`` (a key kept already stays as it is)."""
        await self._ledger.run(
            lambda core: core.conn.execute(
                "INSERT OR IGNORE INTO local_keys (pubkey, label, private) VALUES (?, ?, ?)",
                (key.public, label, key.private_bytes()),
            )
        )

    async def first(self, label: str) -> KeyPair | None:
        """The oldest key under ``label``."""

        def read(core: LedgerCore) -> bytes | None:
            cur = core.conn.execute(
                "SELECT private FROM local_keys WHERE label = ? ORDER BY rowid LIMIT 1", (label,)
            )
            row = cur.fetchone()
            return None if row is None else bytes(row[0])

        raw = await self._ledger.run(read)
        return None if raw is None else KeyPair.from_private_bytes(raw)

    async def all(self) -> list[tuple[str, KeyPair]]:
        """Every key with its label, oldest first."""

        def read(core: LedgerCore) -> list[tuple[str, bytes]]:
            cur = core.conn.execute("SELECT label, private FROM local_keys ORDER BY rowid")
            return [(str(label), bytes(private)) for label, private in cur]

        found = await self._ledger.run(read)
        return [(label, KeyPair.from_private_bytes(raw)) for label, raw in found]


@dataclass(frozen=True)
class Hosted:
    """A database this peer hosts: a bank or an agent DB."""

    kind: str  # "bank" or "agent"
    name: str
    db: str
    data: dict[str, Any]


class HostedIndex:
    """``registry``: the databases this peer hosts by kind and name (names case-insensitive)."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def get(self, kind: str, name: str) -> Hosted | None:
        def read(core: LedgerCore) -> Hosted | None:
            row = core.conn.execute(
                "SELECT name, db, data FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE",
                (kind, name),
            ).fetchone()
            return None if row is None else Hosted(kind, row[0], row[1], json.loads(row[2]))

        return await self._ledger.run(read)

    async def by_db(self, db: str, kinds: tuple[str, ...] = ("bank", "agent")) -> Hosted | None:
        def read(core: LedgerCore) -> Hosted | None:
            for kind, name, data in core.conn.execute(
                "SELECT kind, name, data FROM registry WHERE db = ?", (db,)
            ):
                if kind in kinds:
                    return Hosted(kind, name, db, json.loads(data))
            return None

        return await self._ledger.run(read)

    async def all(self, kind: str) -> list[Hosted]:
        def read(core: LedgerCore) -> list[Hosted]:
            cur = core.conn.execute(
                "SELECT name, db, data FROM registry WHERE kind = ? ORDER BY name", (kind,)
            )
            return [Hosted(kind, n, d, json.loads(x)) for n, d, x in cur]

        return await self._ledger.run(read)

    async def add(self, kind: str, name: str, db: str, data: dict[str, Any] | None = None) -> None:
        """Register ``name``; ``ConflictError`` if the kind has it already (in any case)."""
        text = json.dumps(data or {})

        def write(core: LedgerCore) -> None:
            with _transaction(core.conn):
                taken = core.conn.execute(
                    "SELECT 1 FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE",
                    (kind, name),
                ).fetchone()
                if taken is None:
                    try:
                        core.conn.execute(
                            "INSERT INTO registry (kind, name, db, data) VALUES (?, ?, ?, ?)",
                            (kind, name, db, text),
                        )
                        return
                    except sqlite3.IntegrityError:
                        pass
            raise ConflictError(f"a {kind} named {name!r} exists already on this peer")

        await self._ledger.run(write)

    async def remove(self, kind: str, name: str) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute(
                "DELETE FROM registry WHERE kind = ? AND name = ? COLLATE NOCASE", (kind, name)
            )
        )


class SharedDbs:
    """``sync_shared``: the databases this peer serves to other peers."""

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def add(self, db: str, since: int) -> None:
        """Serve ``db`` (a database served already keeps its ``since``)."""
        await self._ledger.run(
            lambda core: core.conn.execute(
                "INSERT OR IGNORE INTO sync_shared (db, since) VALUES (?, ?)", (db, since)
            )
        )

    async def remove(self, db: str) -> bool:
        """Stop serving ``db``; True if it was served."""

        def write(core: LedgerCore) -> bool:
            cur = core.conn.execute("DELETE FROM sync_shared WHERE db = ?", (db,))
            return cur.rowcount > 0

        return await self._ledger.run(write)

    async def all(self) -> list[str]:
        """The served databases, oldest share first."""

        def read(core: LedgerCore) -> list[str]:
            cur = core.conn.execute("SELECT db FROM sync_shared ORDER BY since, db")
            return [str(row[0]) for row in cur]

        return await self._ledger.run(read)


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

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def list(self, db: str | None = None) -> list[Cursor]:
        def read(core: LedgerCore) -> list[Cursor]:
            cur = core.conn.execute(
                "SELECT db, address, pulled, pushed, log FROM sync_remotes"
                " WHERE ? IS NULL OR db = ? ORDER BY added, db, address",
                (db, db),
            )
            return [Cursor(str(d), str(a), int(p), int(q), str(g)) for d, a, p, q, g in cur]

        return await self._ledger.run(read)

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

        return await self._ledger.run(write)

    async def remove(self, db: str, address: str | None = None) -> int:
        """Forget the pairs of ``db`` (all, or the one at ``address``); return how many."""

        def write(core: LedgerCore) -> int:
            cur = core.conn.execute(
                "DELETE FROM sync_remotes WHERE db = ? AND (? IS NULL OR address = ?)",
                (db, address, address),
            )
            return int(cur.rowcount)

        return await self._ledger.run(write)

    async def save(self, cursor: Cursor) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute(
                "UPDATE sync_remotes SET pulled = ?, pushed = ?, log = ?"
                " WHERE db = ? AND address = ?",
                (cursor.pulled, cursor.pushed, cursor.log, cursor.db, cursor.address),
            )
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

    The ``*_on`` functions take the ledger's core and run inside one ``Ledger.run`` step, so a
    policy (sync's bounded queue) can read and write them as one atomic decision.
    """

    def __init__(self, ledger: _Runs) -> None:
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

        return await self._ledger.run(read)

    async def pending_counts(self) -> dict[str, int]:
        """How many requests are pending, per database."""

        def read(core: LedgerCore) -> dict[str, int]:
            cur = core.conn.execute(
                "SELECT db, count(*) FROM sync_requests WHERE status = 'pending' GROUP BY db"
            )
            return {str(db): int(n) for db, n in cur}

        return await self._ledger.run(read)

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

        return await self._ledger.run(read)

    async def get(self, request_id: int) -> AccessRequest | None:
        def read(core: LedgerCore) -> AccessRequest | None:
            row = core.conn.execute(
                f"SELECT {_REQUEST_COLUMNS} FROM sync_requests WHERE id = ?", (request_id,)
            ).fetchone()
            return None if row is None else _request(row)

        return await self._ledger.run(read)

    async def set_status(self, request_id: int, status: str, decided: int) -> None:
        await self._ledger.run(AccessRequests.set_status_on, request_id, status, decided)


@dataclass(frozen=True)
class WebGrant:
    """Who a web sign-in link or session is for: ``person`` (an MXID, or ``operator``),
    whether it was issued as an admin's, when it ends (Unix seconds), and for a session the
    token its forms carry (CSRF)."""

    person: str
    admin: bool
    expires: int
    csrf: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {"person": self.person, "admin": self.admin, "expires": self.expires, "csrf": self.csrf}
        )

    @classmethod
    def from_json(cls, text: str) -> WebGrant | None:
        try:
            data = json.loads(text)
            return cls(
                str(data["person"]), bool(data["admin"]), int(data["expires"]), str(data["csrf"])
            )
        except (ValueError, KeyError, TypeError):
            return None


class WebSignIns:
    """The memory page's sign-in state in ``local_kv``: one-time links and sessions, each
    stored under the sha256 of its secret (the secret itself is never stored), and per
    person the times links were issued (the rate limit).

    Keys: ``web-link/<sha256>``, ``web-session/<sha256>``, ``web-issued/<person>``. Every
    method is one transaction, so a link is taken once even by two requests at once.
    """

    LINK, SESSION, ISSUED = "web-link/", "web-session/", "web-issued/"

    def __init__(self, ledger: _Runs) -> None:
        self._ledger = ledger

    async def add_link(
        self, digest: str, grant: WebGrant, now: int, window: int, per_window: int
    ) -> bool:
        """Store a link unless ``grant.person`` had ``per_window`` links issued in the last
        ``window`` seconds (then False, nothing stored). Expired links go meanwhile."""

        def write(core: LedgerCore) -> bool:
            with _transaction(core.conn):
                _delete_expired(core, self.LINK, now)
                key = self.ISSUED + grant.person
                row = core.conn.execute("SELECT value FROM local_kv WHERE key = ?", (key,))
                found = row.fetchone()
                times = [int(t) for t in json.loads(found[0])] if found is not None else []
                times = [t for t in times if t > now - window]
                if len(times) >= per_window:
                    return False
                core.conn.executemany(
                    "INSERT OR REPLACE INTO local_kv (key, value) VALUES (?, ?)",
                    [(key, json.dumps([*times, now])), (self.LINK + digest, grant.to_json())],
                )
                return True

        return await self._ledger.run(write)

    async def take_link(self, digest: str, now: int) -> WebGrant | None:
        """The link's grant, removing it (single use); None if unknown, used or expired."""
        return await self._take(self.LINK + digest, now, remove=True)

    async def add_session(self, digest: str, grant: WebGrant, now: int) -> None:
        def write(core: LedgerCore) -> None:
            with _transaction(core.conn):
                _delete_expired(core, self.SESSION, now)
                core.conn.execute(
                    "INSERT OR REPLACE INTO local_kv (key, value) VALUES (?, ?)",
                    (self.SESSION + digest, grant.to_json()),
                )

        await self._ledger.run(write)

    async def session(self, digest: str, now: int) -> WebGrant | None:
        """The live session under ``digest`` (None when unknown or expired)."""
        return await self._take(self.SESSION + digest, now, remove=False)

    async def end_session(self, digest: str) -> None:
        await self._ledger.run(
            lambda core: core.conn.execute(
                "DELETE FROM local_kv WHERE key = ?", (self.SESSION + digest,)
            )
        )

    async def _take(self, key: str, now: int, remove: bool) -> WebGrant | None:
        def step(core: LedgerCore) -> WebGrant | None:
            if remove:
                row = core.conn.execute(
                    "DELETE FROM local_kv WHERE key = ? RETURNING value", (key,)
                ).fetchone()
            else:
                row = core.conn.execute(
                    "SELECT value FROM local_kv WHERE key = ?", (key,)
                ).fetchone()
            if row is None:
                return None
            grant = WebGrant.from_json(str(row[0]))
            if grant is None or grant.expires <= now:
                core.conn.execute("DELETE FROM local_kv WHERE key = ?", (key,))
                return None
            return grant

        return await self._ledger.run(step)


def _delete_expired(core: LedgerCore, prefix: str, now: int) -> None:
    lo, hi = _prefix_range(prefix)
    rows = core.conn.execute(
        "SELECT key, value FROM local_kv WHERE key >= ? AND key < ?", (lo, hi)
    ).fetchall()
    stale = [(k,) for k, v in rows if (g := WebGrant.from_json(v)) is None or g.expires <= now]
    core.conn.executemany("DELETE FROM local_kv WHERE key = ?", stale)


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on any error (autocommit connection)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


__all__ = [
    "AccessRequest",
    "AccessRequests",
    "Credentials",
    "Cursor",
    "Hosted",
    "HostedIndex",
    "KeyValue",
    "LocalKeys",
    "SharedDbs",
    "SyncCursors",
    "WebGrant",
    "WebSignIns",
]
