"""Sync's state in the peer's SQLite file, and the ledger reads sync needs.

Peer-local tables (schema migration 2; never synced):

- ``sync_shared``: the databases this peer serves (``/memory share``, ``/memory unshare``).
- ``sync_requests``: access requests received from importing peers, with their decision.
- ``sync_remotes``: the (database, remote address) pairs this peer syncs, with the cursors:
  ``pulled`` is the remote's seq up to which we hold its log, ``pushed`` our seq up to which
  the remote holds ours, ``log`` the remote's log id the cursors belong to.

The ``read_*`` functions run on the ledger's connection thread via ``Ledger.run``, so each is
one consistent snapshot (for example tips and the highest seq read together).
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass

from chazbot.errors import ConflictError, InputError, NotFound
from chazbot.ledger.auth import Level, Permission
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.encoding import is_content_id
from chazbot.ledger.keys import KeyPair, parse_public_key
from chazbot.ledger.ledger import Ledger

PERMISSIONS = ("read", "write", "admin")
DEFAULT_GRANT_PRIO = 10
MAX_PENDING_PER_DB = 1000
LOG_ID_KEY = "sync.log_id"


def check_db_id(db: str) -> str:
    if not is_content_id(db):
        raise InputError(f"not a database id (sha256:<64 hex digits>): {str(db)[:80]!r}")
    return db


def parse_permission(text: str) -> Level:
    """``read``, ``write`` or ``admin`` (what an importer may ask for) as a Level."""
    if text not in PERMISSIONS:
        raise InputError(f"permission must be read, write or admin, not {str(text)[:20]!r}")
    return Level[text.upper()]


# ---- reads on the ledger thread ---------------------------------------------------------


@dataclass(frozen=True)
class Heads:
    """A database's tips, entry count and highest local seq, read in one snapshot."""

    db: str
    tips: list[str]
    count: int
    max_seq: int


def read_heads(core: LedgerCore, db: str, before: Heads | None = None) -> Heads:
    """The heads of ``db``; with ``before`` (an earlier answer) only newer entries are counted."""
    tips = sorted(core.tips(db))
    if not tips:
        raise NotFound(f"no database {db}")
    since, base = (before.max_seq, before.count) if before is not None else (0, 0)
    count, max_seq = core.conn.execute(
        "SELECT count(*), coalesce(max(seq), ?) FROM entries WHERE db = ? AND seq > ?",
        (since, db, since),
    ).fetchone()
    return Heads(db, tips, base + int(count), int(max_seq))


def read_max_seq(core: LedgerCore, db: str) -> int:
    row = core.conn.execute("SELECT coalesce(max(seq), 0) FROM entries WHERE db = ?", (db,))
    return int(row.fetchone()[0])


def read_after(
    core: LedgerCore, db: str, after: int, limit: int, max_bytes: int
) -> tuple[list[tuple[int, str, bytes]], bool]:
    """Entries (seq, id, data) of ``db`` with ``seq > after`` in seq order, and whether more.

    Stops at ``limit`` entries or once ``max_bytes`` of data are taken (at least one entry).
    Local seq order is topological: an entry is stored only after its parents.
    """
    cur = core.conn.execute(
        "SELECT seq, id, data FROM entries WHERE db = ? AND seq > ? ORDER BY seq LIMIT ?",
        (db, after, limit + 1),
    )
    out: list[tuple[int, str, bytes]] = []
    size = 0
    for seq, eid, data in cur:
        if len(out) >= limit or (out and size + len(data) > max_bytes):
            return out, True
        out.append((int(seq), str(eid), bytes(data)))
        size += len(data)
    return out, False


def read_ids_after(core: LedgerCore, db: str, after: int, limit: int) -> list[tuple[int, str]]:
    cur = core.conn.execute(
        "SELECT seq, id FROM entries WHERE db = ? AND seq > ? ORDER BY seq LIMIT ?",
        (db, after, limit),
    )
    return [(int(seq), str(eid)) for seq, eid in cur]


def read_known(core: LedgerCore, db: str, ids: list[str]) -> set[str]:
    """Which of ``ids`` are stored entries of ``db``."""
    cur = core.conn.execute(
        "SELECT id FROM entries WHERE db = ? AND id IN (SELECT value FROM json_each(?))",
        (db, json.dumps(ids)),
    )
    return {str(row[0]) for row in cur}


async def log_id(ledger: Ledger) -> str:
    """This peer's log id: random, made once per state file.

    Seqs are local to a state file; a client keeps its cursor only while the log id it
    pulled from stays the same, so a server rebuilt from scratch is read from the start.
    """
    await ledger.local(
        "INSERT OR IGNORE INTO local_kv (key, value) VALUES (?, ?)",
        (LOG_ID_KEY, secrets.token_hex(16)),
    )
    rows = await ledger.local("SELECT value FROM local_kv WHERE key = ?", (LOG_ID_KEY,))
    return str(rows[0][0])


# ---- what this peer serves, and who asked -------------------------------------------------


@dataclass(frozen=True)
class AccessRequest:
    """An importing peer's request for a permission on a database this peer shares."""

    id: int
    db: str
    key: str
    permission: str
    created: int
    status: str  # pending | approved | rejected
    decided: int | None = None


@dataclass(frozen=True)
class AccessDecision:
    status: str  # granted | pending | rejected
    request: int | None = None


_REQUEST_COLUMNS = "id, db, key, permission, created, status, decided"


def _request(row: tuple[object, ...]) -> AccessRequest:
    rid, db, key, perm, created, status, decided = row
    return AccessRequest(
        int(str(rid)),
        str(db),
        str(key),
        str(perm),
        int(str(created)),
        str(status),
        None if decided is None else int(str(decided)),
    )


class Sharing:
    """The owner side of sharing: which databases are served, and access requests.

    Serving needs both: the database is shared here, and the requesting key holds read or
    better in the database's AuthSettings. ``unshare`` stops serving; it takes back no key.
    """

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def share(self, db: str) -> None:
        """Serve ``db`` to peers whose keys may read it (idempotent)."""
        check_db_id(db)
        if not await self.ledger.exists(db):
            raise NotFound(f"no database {db} on this peer")
        await self.ledger.local(
            "INSERT OR IGNORE INTO sync_shared (db, since) VALUES (?, ?)", (db, int(time.time()))
        )

    async def unshare(self, db: str) -> bool:
        """Stop serving ``db``; True if it was shared. Keys already granted stay granted."""
        check_db_id(db)
        was = await self.is_shared(db)
        await self.ledger.local("DELETE FROM sync_shared WHERE db = ?", (db,))
        return was

    async def is_shared(self, db: str) -> bool:
        rows = await self.ledger.local("SELECT 1 FROM sync_shared WHERE db = ?", (db,))
        return bool(rows)

    async def shared(self) -> list[str]:
        rows = await self.ledger.local("SELECT db FROM sync_shared ORDER BY since, db")
        return [str(r[0]) for r in rows]

    async def request_access(self, db: str, key: str, permission: str) -> AccessDecision:
        """An importer asks for ``permission``: granted, pending (a request id) or rejected.

        Granted when ``key`` already holds that level or better. Otherwise the latest request
        of ``key`` for that permission decides: pending stays pending (same id), rejected
        stays rejected; with none (or one approved earlier and since revoked) a new pending
        request is recorded for the owner to approve or reject.
        """
        level = parse_permission(permission)
        parse_public_key(key)
        held = await self.ledger.permission(db, key)
        if held.level >= level:
            return AccessDecision("granted")

        def decide(core: LedgerCore) -> AccessDecision:
            row = core.conn.execute(
                "SELECT id, status FROM sync_requests WHERE db = ? AND key = ? AND permission = ?"
                " ORDER BY id DESC LIMIT 1",
                (db, key, permission),
            ).fetchone()
            if row is not None and row[1] == "pending":
                return AccessDecision("pending", int(row[0]))
            if row is not None and row[1] == "rejected":
                return AccessDecision("rejected", int(row[0]))
            (pending,) = core.conn.execute(
                "SELECT count(*) FROM sync_requests WHERE db = ? AND status = 'pending'", (db,)
            ).fetchone()
            if pending >= MAX_PENDING_PER_DB:
                raise ConflictError("too many pending access requests for this database")
            (rid,) = core.conn.execute(
                "INSERT INTO sync_requests (db, key, permission, created, status)"
                " VALUES (?, ?, ?, ?, 'pending') RETURNING id",
                (db, key, permission, int(time.time())),
            ).fetchone()
            return AccessDecision("pending", int(rid))

        return await self.ledger.run(decide)

    async def requests(
        self, db: str | None = None, status: str | None = "pending"
    ) -> list[AccessRequest]:
        """Access requests, oldest first (``status=None``: all of them)."""
        sql = f"SELECT {_REQUEST_COLUMNS} FROM sync_requests WHERE 1 = 1"
        params: list[object] = []
        if db is not None:
            sql += " AND db = ?"
            params.append(db)
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        rows = await self.ledger.local(sql + " ORDER BY id", tuple(params))
        return [_request(r) for r in rows]

    async def request(self, request_id: int) -> AccessRequest:
        rows = await self.ledger.local(
            f"SELECT {_REQUEST_COLUMNS} FROM sync_requests WHERE id = ?", (request_id,)
        )
        if not rows:
            raise NotFound(f"no access request {request_id}")
        return _request(rows[0])

    async def approve(
        self, request_id: int, admin: KeyPair, prio: int | None = None
    ) -> AccessRequest:
        """Grant the requested permission (signed by ``admin``), then mark the request approved.

        The grant is ``set_key`` with the requested level at priority ``prio`` (default 10,
        and never stronger than ``admin``'s own); a key that already holds that level or
        better is left as it is. A failed grant (``admin`` may not) leaves it pending.
        """
        req = await self.request(request_id)
        if req.status == "approved":
            raise ConflictError(f"access request {request_id} is already approved")
        level = parse_permission(req.permission)
        held = await self.ledger.permission(req.db, req.key)
        if held.level < level:
            if prio is None:
                mine = await self.ledger.permission(req.db, admin.public)
                prio = max(DEFAULT_GRANT_PRIO, mine.prio)
            perm = Permission(level, 0 if level is Level.READ else prio)
            await self.ledger.set_auth(req.db, admin, req.key, perm)
        return await self._decide(request_id, "approved")

    async def reject(self, request_id: int) -> AccessRequest:
        """Refuse a pending request; the importer's next try answers rejected."""
        req = await self.request(request_id)
        if req.status != "pending":
            raise ConflictError(f"access request {request_id} is already {req.status}")
        return await self._decide(request_id, "rejected")

    async def _decide(self, request_id: int, status: str) -> AccessRequest:
        await self.ledger.local(
            "UPDATE sync_requests SET status = ?, decided = ? WHERE id = ?",
            (status, int(time.time()), request_id),
        )
        return await self.request(request_id)


# ---- whom this peer syncs with --------------------------------------------------------------


@dataclass
class RemoteRow:
    db: str
    address: str
    pulled: int = 0
    pushed: int = 0
    log: str = ""


class Remotes:
    """The ``sync_remotes`` rows: (database, address) pairs and their cursors."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    async def list(self, db: str | None = None) -> list[RemoteRow]:
        sql = "SELECT db, address, pulled, pushed, log FROM sync_remotes"
        params: tuple[object, ...] = ()
        if db is not None:
            sql += " WHERE db = ?"
            params = (db,)
        rows = await self.ledger.local(sql + " ORDER BY added, db, address", params)
        return [RemoteRow(str(d), str(a), int(p), int(q), str(g)) for d, a, p, q, g in rows]

    async def add(self, db: str, address: str) -> RemoteRow:
        await self.ledger.local(
            "INSERT OR IGNORE INTO sync_remotes (db, address, added) VALUES (?, ?, ?)",
            (db, address, time.time_ns()),
        )
        rows = [r for r in await self.list(db) if r.address == address]
        return rows[0]

    async def remove(self, db: str, address: str | None = None) -> int:
        """Forget pairs of ``db`` (all, or the one at ``address``); return how many."""
        before = len(await self.list(db))
        if address is None:
            await self.ledger.local("DELETE FROM sync_remotes WHERE db = ?", (db,))
        else:
            await self.ledger.local(
                "DELETE FROM sync_remotes WHERE db = ? AND address = ?", (db, address)
            )
        return before - len(await self.list(db))

    async def save(self, row: RemoteRow) -> None:
        await self.ledger.local(
            "UPDATE sync_remotes SET pulled = ?, pushed = ?, log = ? WHERE db = ? AND address = ?",
            (row.pulled, row.pushed, row.log, row.db, row.address),
        )
