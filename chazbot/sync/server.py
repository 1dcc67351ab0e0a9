"""The sync server: serves shared databases to peers over HTTP (aiohttp).

Every endpoint is ``POST /v1/dbs/{db}/<name>`` with a signed JSON body (``sync_protocol``)
and answers JSON; an error is ``{"error": "<one line>"}`` with its status: 400 bad input,
401 bad signature/time/nonce, 403 key not allowed, 404 not shared (or no such route),
409 conflict, 413 body too large, 503 busy.

- ``heads`` (read): ``{db, tips, count, max_seq, log, permission}``.
- ``entries`` (read), body ``{after, limit, wait}``: raw entries with ``seq > after`` in this
  peer's seq order (topological: parents first), ``{entries: [[seq, base64]], next, more}``.
  With ``wait`` seconds and nothing new, the answer is held until something is committed
  to the database or the wait ends (a long poll: writes reach pulling peers at once).
- ``have`` (read), body ``{ids}``: ``{missing}``, the ids this peer does not hold, so a
  pusher sends only those (after a restart it cannot tell what the remote already has).
- ``push`` (read), body ``{entries: [base64]}``: each entry is validated by
  ``Ledger.ingest`` on its own signature and its author's permission at its parents, so any
  key that may read may relay entries (a read-only peer can carry writers' entries along);
  what it cannot do is make an entry the ledger accepts without a writer's key. Answers
  ``{accepted, duplicates, rejected: [{id, reason}], tips, max_seq, log}``.
- ``access`` (shared only), body ``{permission}``: ``{status: granted|pending|rejected,
  request}`` (see ``Sharing.request_access``).

A database is served only while it is shared here and only to keys holding read or better
in its current AuthSettings.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from chazbot.errors import (
    BackendError,
    ChazError,
    ConflictError,
    InputError,
    IntegrityError,
    NotFound,
    PermissionDenied,
)
from chazbot.ledger.auth import Level
from chazbot.ledger.core import Applied
from chazbot.ledger.encoding import is_content_id
from chazbot.ledger.ledger import Ledger
from chazbot.sync.protocol import (
    MAX_BATCH_BYTES,
    MAX_BATCH_ENTRIES,
    MAX_BODY_BYTES,
    MAX_WAIT_S,
    Busy,
    ReplayCache,
    SyncCounters,
    Unauthenticated,
    encode_entry,
    entry_db,
    get_entries,
    get_int,
    get_seconds,
    get_str,
    parse_body,
    verify_request,
)
from chazbot.sync.store import (
    PERMISSIONS,
    Heads,
    Sharing,
    check_db_id,
    log_id,
    read_after,
    read_heads,
    read_known,
)
from chazbot.sync.tickets import format_address, format_ticket

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_STATUS: list[tuple[type[Exception], int]] = [
    (Unauthenticated, 401),
    (Busy, 503),
    (InputError, 400),
    (PermissionDenied, 403),
    (NotFound, 404),
    (ConflictError, 409),
    (IntegrityError, 422),
    (BackendError, 502),
]
MAX_REJECTS_SHOWN = 100


def _error(status: int, message: str) -> web.Response:
    text = " ".join(message.split())[:500] or "error"
    return web.json_response({"error": text}, status=status)


class SyncServer:
    """Serves this peer's shared databases to other peers.

    ``make_app()`` builds the aiohttp application (to mount or test on its own);
    ``start()``/``stop()`` run it on ``host:port`` (port 0 picks a free port, exposed as
    ``port`` once started). ``sharing`` holds what is shared and the access requests.
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        sharing: Sharing | None = None,
        max_body: int = MAX_BODY_BYTES,
        replay_capacity: int = 100_000,
        max_waiters: int = 256,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.host = host
        self.port = port
        self.sharing = sharing or Sharing(ledger)
        self.max_body = max_body
        self.max_waiters = max_waiters
        self.clock = clock
        self.counters = SyncCounters()
        self.replay = ReplayCache(replay_capacity)
        self._runner: web.AppRunner | None = None
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._log_id = ""
        self._last_heads: dict[str, Heads] = {}  # last heads per database: counts grow from there
        ledger.add_listener(self._on_commit)

    # ---- lifecycle ------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """This server's peer address, ``http:<host>:<port>`` (the bound port once started)."""
        return format_address(self.host, self.port)

    @property
    def running(self) -> bool:
        return self._runner is not None

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body, middlewares=[self._errors])
        app.router.add_post("/v1/dbs/{db}/heads", self._heads)
        app.router.add_post("/v1/dbs/{db}/entries", self._entries)
        app.router.add_post("/v1/dbs/{db}/have", self._have)
        app.router.add_post("/v1/dbs/{db}/push", self._push)
        app.router.add_post("/v1/dbs/{db}/access", self._access)
        return app

    async def start(self) -> None:
        """Listen on ``host:port``; BackendError if the address cannot be bound."""
        if self._runner is not None:
            return
        self._log_id = await log_id(self.ledger)
        runner = web.AppRunner(
            self.make_app(), access_log=None, handle_signals=False, shutdown_timeout=2.0
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise BackendError(f"sync cannot listen on {self.host}:{self.port}: {exc}") from exc
        self._runner = runner
        for sockname in runner.addresses:
            if isinstance(sockname, tuple):
                self.port = int(sockname[1])
                break
        log.info("sync server listening on %s", self.address)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._wake_all()
        await runner.cleanup()
        log.info("sync server on %s stopped", self.address)

    async def ticket(self, db: str, addresses: list[str] | None = None) -> str:
        """A ticket for ``db`` at ``addresses`` (default: this server's address); shares it."""
        await self.sharing.share(db)
        return format_ticket(db, addresses or [self.address])

    # ---- long-poll wake-ups ---------------------------------------------------------------

    def _on_commit(self, applied: Applied) -> None:
        for db in {entry.db_id for entry in applied.entries}:
            for fut in self._waiters.pop(db, set()):
                if not fut.done():
                    fut.set_result(None)

    def _wake_all(self) -> None:
        for futures in self._waiters.values():
            for fut in futures:
                if not fut.done():
                    fut.set_result(None)
        self._waiters.clear()

    def _waiting(self) -> int:
        return sum(len(f) for f in self._waiters.values())

    # ---- request plumbing -------------------------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException as exc:  # aiohttp's own: unknown route, method, 413
            if exc.status < 400:
                raise
            self.counters.errors += 1
            return _error(exc.status, exc.text or exc.reason)
        except (ChazError, Busy) as exc:
            status = next((s for t, s in _STATUS if isinstance(exc, t)), 500)
            if status == 401:
                self.counters.requests_refused += 1
                log.info("sync request refused from %s: %s", request.remote, exc)
            self.counters.errors += 1
            return _error(status, str(exc))
        except Exception:
            log.exception("sync request %s %s failed", request.method, request.path)
            self.counters.errors += 1
            return _error(500, "internal error")

    async def _open(
        self, request: web.Request, need: Level | None
    ) -> tuple[str, str, dict[str, Any]]:
        """Authenticate ``request``; check the database is served to its key at ``need``."""
        length = request.content_length
        if length is not None and length > self.max_body:
            raise web.HTTPRequestEntityTooLarge(max_size=self.max_body, actual_size=length)
        body = await request.read()
        key = verify_request(
            request.headers, request.method, request.raw_path, body, self.clock(), self.replay
        )
        db = check_db_id(request.match_info["db"])
        data = parse_body(body)
        await self._check_serving(db, key, need)
        return key, db, data

    async def _check_serving(self, db: str, key: str, need: Level | None) -> None:
        if not await self.sharing.is_shared(db):
            raise NotFound(f"database {db} is not shared here")
        if need is not None:
            held = await self.ledger.permission(db, key)
            if not held.allows(need):
                raise PermissionDenied(
                    f"key {key[:24]}… may not {need.name.lower()} database {db[:19]}…"
                )

    # ---- endpoints ------------------------------------------------------------------------

    async def _read_heads(self, db: str) -> Heads:
        heads = await self.ledger.run(read_heads, db, self._last_heads.get(db))
        self._last_heads[db] = heads
        return heads

    async def _heads(self, request: web.Request) -> web.Response:
        key, db, _ = await self._open(request, Level.READ)
        heads = await self._read_heads(db)
        held = await self.ledger.permission(db, key)
        return web.json_response(
            {
                "db": db,
                "tips": heads.tips,
                "count": heads.count,
                "max_seq": heads.max_seq,
                "log": self._log_id,
                "permission": str(held),
            }
        )

    async def _entries(self, request: web.Request) -> web.Response:
        key, db, body = await self._open(request, Level.READ)
        after = get_int(body, "after", 0, 0, 2**62)
        limit = get_int(body, "limit", MAX_BATCH_ENTRIES, 1, MAX_BATCH_ENTRIES)
        wait = get_seconds(body, "wait", 0.0, MAX_WAIT_S)
        fut: asyncio.Future[None] | None = None
        if wait > 0 and self._runner is not None and self._waiting() < self.max_waiters:
            fut = asyncio.get_running_loop().create_future()
            self._waiters[db].add(fut)  # before reading, so no commit slips between
        try:
            rows, more = await self.ledger.run(read_after, db, after, limit, MAX_BATCH_BYTES)
            if not rows and fut is not None:
                await asyncio.wait({fut}, timeout=wait)
                await self._check_serving(db, key, Level.READ)  # it may have changed meanwhile
                rows, more = await self.ledger.run(read_after, db, after, limit, MAX_BATCH_BYTES)
        finally:
            if fut is not None:
                self._waiters.get(db, set()).discard(fut)
        self.counters.sent += len(rows)
        return web.json_response(
            {
                "entries": [[seq, encode_entry(data)] for seq, _, data in rows],
                "next": rows[-1][0] if rows else after,
                "more": more,
                "log": self._log_id,
            }
        )

    async def _have(self, request: web.Request) -> web.Response:
        _, db, body = await self._open(request, Level.READ)
        ids = body.get("ids")
        if (
            not isinstance(ids, list)
            or len(ids) > MAX_BATCH_ENTRIES
            or not all(is_content_id(i) for i in ids)
        ):
            raise InputError(f"ids must be a list of at most {MAX_BATCH_ENTRIES} entry ids")
        known = await self.ledger.run(read_known, db, ids)
        return web.json_response({"missing": [i for i in ids if i not in known]})

    async def _push(self, request: web.Request) -> web.Response:
        key, db, body = await self._open(request, Level.READ)
        entries = get_entries(body)
        ours = [data for data in entries if entry_db(data) == db]
        result = await self.ledger.ingest(ours)
        rejected = [("?", "entry belongs to another database")] * (len(entries) - len(ours))
        rejected += result.rejected
        self.counters.received += len(result.accepted)
        self.counters.duplicates += result.duplicates
        self.counters.refused += len(rejected)
        for eid, reason in rejected[:5]:
            log.warning("sync push from %s… refused entry %s: %s", key[:24], eid[:19], reason)
        heads = await self._read_heads(db)
        return web.json_response(
            {
                "accepted": len(result.accepted),
                "duplicates": result.duplicates,
                "rejected": [{"id": i, "reason": r} for i, r in rejected[:MAX_REJECTS_SHOWN]],
                "refused": len(rejected),
                "tips": heads.tips,
                "max_seq": heads.max_seq,
                "log": self._log_id,
            }
        )

    async def _access(self, request: web.Request) -> web.Response:
        key, db, body = await self._open(request, None)
        permission = get_str(body, "permission", PERMISSIONS)
        decision = await self.sharing.request_access(db, key, permission)
        if decision.status == "pending":
            log.info(
                "sync access request %s: key %s… asks for %s on %s",
                decision.request,
                key[:24],
                permission,
                db,
            )
        return web.json_response({"status": decision.status, "request": decision.request})
