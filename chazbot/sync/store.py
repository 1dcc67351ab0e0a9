"""Sync's policy over its peer-local state (the typed stores of ``tables``, no SQL here).

Sync's own tables (never synced; ``tables.SYNC``, brought up to date by the ledger):
``sync_shared`` (what this peer serves), ``sync_requests`` (access requests received, with
their decision) and ``sync_remotes`` (whom it syncs each database with, and the cursors).

The ``read_*`` functions (``chazbot.ledger.replication``, re-exported here) run on the
ledger's thread via ``Ledger.run``, so each is one consistent snapshot.
"""

from __future__ import annotations

import ipaddress
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
from chazbot.sync.tables import SYNC, AccessRequest, AccessRequests, Cursor, SharedDbs, SyncCursors

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


async def log_id(ledger: Ledger) -> str:
    """This peer's log id: random, made once per state file.

    Seqs are local to a state file; a client keeps its cursor only while the log id it
    pulled from stays the same, so a server rebuilt from scratch is read from the start.
    """
    return await ledger.kv.setdefault(LOG_ID_KEY, secrets.token_hex(16))


# ---- what this peer serves, and who asked -------------------------------------------------


@dataclass(frozen=True)
class AccessDecision:
    status: str  # granted | pending | rejected
    request: int | None = None


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


class Serving:
    """The owner side of sharing: which databases are served, and access requests
    (``peer_sharing.Sharing``, the peer's part that commands reach, is built on it).

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
        self._served = SharedDbs(ledger)
        self._requests = AccessRequests(ledger)
        self._shared: frozenset[str] | None = None
        self._origin: dict[int, str] = {}  # pending request id -> address group

    async def share(self, db: str) -> None:
        """Serve ``db`` to peers whose keys may read it (idempotent)."""
        check_db_id(db)
        if not await self.ledger.exists(db):
            raise NotFound(f"no database {db} on this peer")
        await self._served.add(db, int(time.time()))
        self._shared = None

    async def unshare(self, db: str) -> bool:
        """Stop serving ``db``; True if it was shared. Keys already granted stay granted."""
        check_db_id(db)
        was = await self._served.remove(db)
        self._shared = None
        return was

    async def is_shared(self, db: str) -> bool:
        """Whether ``db`` is served here (kept in memory: asked on every sync request)."""
        shared = self._shared
        if shared is None:
            shared = frozenset(await self._served.all())
            self._shared = shared
        return db in shared

    async def shared(self) -> list[str]:
        return await self._served.all()

    async def has_request(self, db: str, key: str) -> bool:
        """Whether ``key`` has a pending request on ``db``."""
        return await self._requests.has_pending(db, key)

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
            table = AccessRequests
            gone = table.expire_pending_on(core, db, expire_before, now)
            latest = table.latest_on(core, db, key, permission)
            if latest is not None and latest.status in ("pending", "rejected"):
                return AccessDecision(latest.status, latest.id), gone
            pending = table.pending_ids_on(core, db)
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
                table.set_status_on(core, evicted, "expired", now)
                gone.append(evicted)
            return AccessDecision("pending", table.add_on(core, db, key, permission, now)), gone

        decision, gone = await self.ledger.run_in(SYNC, decide)
        for rid in gone:
            self._origin.pop(rid, None)
        if decision.status == "pending" and decision.request is not None:
            self._origin.setdefault(decision.request, group)
        return decision

    async def pending_counts(self) -> dict[str, int]:
        """How many requests are pending, per database."""
        return await self._requests.pending_counts()

    async def requests(
        self,
        db: str | None = None,
        status: str | None = "pending",
        newest: int | None = None,
    ) -> list[AccessRequest]:
        """Access requests, oldest first (``status=None``: all of them; ``newest``: only
        the last that many)."""
        return await self._requests.list(db, status, newest)

    async def request(self, request_id: int) -> AccessRequest:
        found = await self._requests.get(request_id)
        if found is None:
            raise NotFound(f"no access request {request_id}")
        return found

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
        await self._requests.set_status(request_id, status, int(time.time()))
        self._origin.pop(request_id, None)
        return await self.request(request_id)


# ---- whom this peer syncs with --------------------------------------------------------------


RemoteRow = Cursor  # a (database, remote address) pair and its cursors


class Remotes:
    """The (database, address) pairs this peer syncs, and their cursors."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._cursors = SyncCursors(ledger)

    async def list(self, db: str | None = None) -> list[RemoteRow]:
        return await self._cursors.list(db)

    async def add(self, db: str, address: str) -> RemoteRow:
        return await self._cursors.add(db, address, time.time_ns())

    async def remove(self, db: str, address: str | None = None) -> int:
        """Forget pairs of ``db`` (all, or the one at ``address``); return how many."""
        return await self._cursors.remove(db, address)

    async def save(self, row: RemoteRow) -> None:
        await self._cursors.save(row)
