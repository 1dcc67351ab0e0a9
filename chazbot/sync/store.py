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

import ipaddress
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

from chazbot.errors import ConflictError, InputError, NotFound
from chazbot.ledger.auth import Level, Permission
from chazbot.ledger.core import LedgerCore
from chazbot.ledger.encoding import is_content_id
from chazbot.ledger.keys import KeyPair, parse_public_key
from chazbot.ledger.ledger import Ledger

PERMISSIONS = ("read", "write", "admin")
DEFAULT_GRANT_PRIO = 10
MAX_PENDING_PER_DB = 100
MAX_PENDING_PER_ADDRESS = 3  # per database, per address (an IPv6 /64 counts as one)
PENDING_TTL_S = 24 * 3600  # a pending request nobody decided expires (the importer may ask again)
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
    status: str  # pending | approved | rejected | expired
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


def address_group(remote: str | None) -> str:
    """The unit per-address caps count in: an IPv4 address, an IPv6 /64, else the text."""
    if not remote:
        return "?"
    try:
        ip = ipaddress.ip_address(remote)
    except ValueError:
        return remote[:100]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


class Sharing:
    """The owner side of sharing: which databases are served, and access requests.

    Serving needs both: the database is shared here, and the requesting key holds read or
    better in the database's AuthSettings. ``unshare`` stops serving; it takes back no key.

    Pending access requests are a bounded queue per database that strangers cannot fill
    for long: at most ``max_pending_per_address`` from one address (an IPv6 /64), at most
    ``max_pending`` in all, and each expires after ``pending_ttl_s``. When the queue is
    full, a request from an address holding fewer pending requests than the busiest one
    takes the place of that address's oldest, so a flood from a few addresses can neither
    evict nor block a request from anywhere else. (Which address made a request is kept in
    memory only; after a restart older requests count as from one unknown address.)
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        max_pending: int = MAX_PENDING_PER_DB,
        max_pending_per_address: int = MAX_PENDING_PER_ADDRESS,
        pending_ttl_s: float = PENDING_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.max_pending = max_pending
        self.max_pending_per_address = max_pending_per_address
        self.pending_ttl_s = pending_ttl_s
        self.clock = clock
        self._shared: frozenset[str] | None = None
        self._origin: dict[int, str] = {}  # pending request id -> address group

    async def share(self, db: str) -> None:
        """Serve ``db`` to peers whose keys may read it (idempotent)."""
        check_db_id(db)
        if not await self.ledger.exists(db):
            raise NotFound(f"no database {db} on this peer")
        await self.ledger.local(
            "INSERT OR IGNORE INTO sync_shared (db, since) VALUES (?, ?)", (db, int(time.time()))
        )
        self._shared = None

    async def unshare(self, db: str) -> bool:
        """Stop serving ``db``; True if it was shared. Keys already granted stay granted."""
        check_db_id(db)
        was = await self.is_shared(db)
        await self.ledger.local("DELETE FROM sync_shared WHERE db = ?", (db,))
        self._shared = None
        return was

    async def is_shared(self, db: str) -> bool:
        """Whether ``db`` is served here (kept in memory: asked on every sync request)."""
        shared = self._shared
        if shared is None:
            rows = await self.ledger.local("SELECT db FROM sync_shared")
            shared = frozenset(str(r[0]) for r in rows)
            self._shared = shared
        return db in shared

    async def shared(self) -> list[str]:
        rows = await self.ledger.local("SELECT db FROM sync_shared ORDER BY since, db")
        return [str(r[0]) for r in rows]

    async def has_request(self, db: str, key: str) -> bool:
        """Whether ``key`` has a pending request on ``db``."""
        rows = await self.ledger.local(
            "SELECT 1 FROM sync_requests WHERE db = ? AND key = ? AND status = 'pending' LIMIT 1",
            (db, key),
        )
        return bool(rows)

    async def request_access(
        self, db: str, key: str, permission: str, address: str | None = None
    ) -> AccessDecision:
        """An importer asks for ``permission``: granted, pending (a request id) or rejected.

        Granted when ``key`` already holds that level or better. Otherwise the latest request
        of ``key`` for that permission decides: pending stays pending (same id), rejected
        stays rejected; with none (or one approved earlier and since revoked, or expired) a
        new pending request is recorded for the owner to approve or reject, within the
        queue's bounds (see the class doc): past them, a ConflictError.
        """
        level = parse_permission(permission)
        parse_public_key(key)
        held = await self.ledger.permission(db, key)
        if held.level >= level:
            return AccessDecision("granted")
        group = address_group(address)
        now = int(self.clock())
        origin = self._origin
        cap_total, cap_address = self.max_pending, self.max_pending_per_address
        expire_before = now - int(self.pending_ttl_s)

        def decide(core: LedgerCore) -> tuple[AccessDecision, list[int]]:
            conn = core.conn
            gone = [
                int(r[0])
                for r in conn.execute(
                    "UPDATE sync_requests SET status = 'expired', decided = ?"
                    " WHERE db = ? AND status = 'pending' AND created < ? RETURNING id",
                    (now, db, expire_before),
                )
            ]
            row = conn.execute(
                "SELECT id, status FROM sync_requests WHERE db = ? AND key = ? AND permission = ?"
                " ORDER BY id DESC LIMIT 1",
                (db, key, permission),
            ).fetchone()
            if row is not None and row[1] == "pending":
                return AccessDecision("pending", int(row[0])), gone
            if row is not None and row[1] == "rejected":
                return AccessDecision("rejected", int(row[0])), gone
            pending = [
                int(r[0])
                for r in conn.execute(
                    "SELECT id FROM sync_requests WHERE db = ? AND status = 'pending' ORDER BY id",
                    (db,),
                )
            ]
            by_group: dict[str, list[int]] = {}
            for rid in pending:
                by_group.setdefault(origin.get(rid, "?"), []).append(rid)
            mine = len(by_group.get(group, []))
            if mine >= cap_address:
                raise ConflictError(
                    "too many pending access requests from this address; ask the owner to "
                    "decide them, or wait for them to expire"
                )
            if len(pending) >= cap_total:
                busiest = max(by_group.values(), key=len)
                if len(busiest) <= mine + 1:
                    raise ConflictError("too many pending access requests for this database")
                evicted = busiest[0]
                conn.execute(
                    "UPDATE sync_requests SET status = 'expired', decided = ? WHERE id = ?",
                    (now, evicted),
                )
                gone.append(evicted)
            (rid,) = conn.execute(
                "INSERT INTO sync_requests (db, key, permission, created, status)"
                " VALUES (?, ?, ?, ?, 'pending') RETURNING id",
                (db, key, permission, now),
            ).fetchone()
            return AccessDecision("pending", int(rid)), gone

        decision, gone = await self.ledger.run(decide)
        for rid in gone:
            self._origin.pop(rid, None)
        if decision.status == "pending" and decision.request is not None:
            self._origin.setdefault(decision.request, group)
        return decision

    async def pending_counts(self) -> dict[str, int]:
        """How many requests are pending, per database."""
        rows = await self.ledger.local(
            "SELECT db, count(*) FROM sync_requests WHERE status = 'pending' GROUP BY db"
        )
        return {str(db): int(n) for db, n in rows}

    async def requests(
        self,
        db: str | None = None,
        status: str | None = "pending",
        newest: int | None = None,
    ) -> list[AccessRequest]:
        """Access requests, oldest first (``status=None``: all of them; ``newest``: only
        the last that many)."""
        sql = f"SELECT {_REQUEST_COLUMNS} FROM sync_requests WHERE 1 = 1"
        params: list[object] = []
        if db is not None:
            sql += " AND db = ?"
            params.append(db)
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        if newest is not None:
            sql += " ORDER BY id DESC LIMIT ?"
            params.append(max(0, newest))
            rows = await self.ledger.local(sql, tuple(params))
            return [_request(r) for r in reversed(rows)]
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
        self._origin.pop(request_id, None)
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
