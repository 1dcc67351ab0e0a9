"""The sync server: serves shared databases to peers over HTTP (aiohttp).

Every endpoint is ``POST /v1/dbs/{db}/<name>`` with a signed JSON body (``sync_protocol``)
and answers JSON; every body is declared once, in ``chazbot.sync.wire``, which the server
validates requests and builds answers with. An error is ``{"error": "<one line>"}`` with
its status: 400 bad input, 401 bad signature/time/nonce or signed for another server, 403
key not allowed, 404 not shared (or no such route), 409 conflict, 413 body too large, 426
another protocol version, 503 busy. Every answer names the protocol (``Eidetica-Protocol``).

- ``heads`` (read): ``HeadsAnswer``, the tips, count and highest seq, and the key's
  permission.
- ``entries`` (read), ``EntriesRequest``: raw entries with ``seq > after`` in this peer's
  seq order (topological: parents first), ``EntriesAnswer``. With ``wait`` seconds and
  nothing new, the answer is held until something is committed to the database or the wait
  ends (a long poll: writes reach pulling peers at once).
- ``have`` (read), ``HaveRequest``: ``HaveAnswer``, the ids this peer does not hold, so a
  pusher sends only those (after a restart it cannot tell what the remote already has).
- ``push`` (read), ``PushRequest``: each entry is validated by ``Ledger.ingest`` on its own
  signature and its author's permission at its parents, so any key that may read may relay
  entries (a read-only peer can carry writers' entries along); what it cannot do is make an
  entry the ledger accepts without a writer's key. ``PushAnswer``: counts, the first
  refused entries with their reasons, and the heads after.
- ``access`` (shared only), ``AccessRequest``: ``AccessAnswer``, granted, pending (with
  the request id) or rejected (see ``Serving.request_access``).

A database is served only while it is shared here and only to keys holding read or better
in its current AuthSettings.

What a stranger can make the server hold is bounded, and checked in this order, each step
before the next costs anything: connections per address and in all, below the descriptor
limit, a complete head within ``header_timeout`` and a body that keeps a least rate
(``sync.guard``); the number of requests in progress (503); a ``Content-Length`` (411
without one) within the endpoint's limit (413, ``BODY_LIMITS``); the signature headers' form,
the protocol (426), the server the request was signed for (401: one of ``servers()``, so
a peer cannot pass on requests another peer sent it, issue #47) and the time (401); the
database is shared (404) and the key may read it (403), or for ``access`` the address and
key are within their rate (429); then the body is read, with at
most ``max_reading_per_address`` bodies per address and ``max_reading_bytes`` of large
bodies (over ``SMALL_BODY`` bytes; small ones are bounded by the requests in progress) in
all being read at once (503) and a read deadline (408); then the signature (401); then the
nonce is recorded in the replay cache, which only keys holding a grant or an access request
here ever reach, and where room is made from the busiest key (``ReplayCache``), so a few
keys cannot fill it for the others. Handling (long polls, ingest) holds at most
``max_per_key`` requests per key. A client that goes away or is refused costs one log line,
never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

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
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.records import Applied
from chazbot.ledger.replication import Heads, read_after, read_heads, read_known
from chazbot.sync import wire
from chazbot.sync.guard import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    KEEPALIVE_TIMEOUT_S,
    ConnectionGuard,
    GuardedSite,
    GuardSettings,
    Notes,
    OneLineLogger,
    descriptor_budget,
    quiet_failed_accepts,
)
from chazbot.sync.protocol import (
    BODY_LIMITS,
    MAX_BATCH_BYTES,
    MAX_BODY_BYTES,
    PROTOCOL,
    PROTOCOL_HEADER,
    Busy,
    Misdirected,
    ProtocolMismatch,
    RateLimited,
    RateLimiter,
    ReplayCache,
    SignedHeaders,
    SyncCounters,
    Unauthenticated,
    check_headers,
    check_signature,
    entry_db,
)
from chazbot.sync.store import Serving, address_group, check_db_id, log_id
from chazbot.sync.tickets import (
    canonical_address,
    format_address,
    format_ticket,
    is_loopback,
    is_wildcard,
)

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Body = TypeVar("Body", bound=wire.WireModel)
_STATUS: list[tuple[type[Exception], int]] = [
    (Unauthenticated, 401),
    (RateLimited, 429),
    (Busy, 503),
    (ProtocolMismatch, 426),
    (InputError, 400),
    (PermissionDenied, 403),
    (NotFound, 404),
    (ConflictError, 409),
    (IntegrityError, 422),
    (BackendError, 502),
]
NOTES_PER_WINDOW = 20
SMALL_BODY = 128 * 1024
NOTES_WINDOW_S = 60.0


class _ReadTimeout(InputError):
    """The body did not arrive within its deadline (HTTP 408)."""


class _Slots:
    """Counts in use per name, each up to ``limit`` (empty names are dropped)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used: dict[str, int] = {}

    def take(self, name: str) -> bool:
        n = self.used.get(name, 0)
        if n >= self.limit:
            return False
        self.used[name] = n + 1
        return True

    def give(self, name: str) -> None:
        n = self.used.get(name, 0) - 1
        if n > 0:
            self.used[name] = n
        else:
            self.used.pop(name, None)


def _answer(body: wire.WireModel, status: int = 200) -> web.Response:
    headers = {PROTOCOL_HEADER: PROTOCOL}  # what tells a chazbot peer from other services
    return web.json_response(text=body.model_dump_json(), status=status, headers=headers)


def _error(status: int, message: str) -> web.Response:
    return _answer(wire.ErrorAnswer(error=message), status)


class SyncServer:
    """Serves this peer's shared databases to other peers.

    ``make_app()`` builds the aiohttp application (to mount or test on its own);
    ``start()``/``stop()`` run it on ``host:port`` (port 0 picks a free port, exposed as
    ``port`` once started). ``serving`` holds what is shared and the access requests.
    ``public_addresses``: the addresses other peers reach it at besides ``host:port`` (the
    ``sync_public_url``); a request signed for any other address is refused (``servers``).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        serving: Serving | None = None,
        max_body: int = MAX_BODY_BYTES,
        replay_capacity: int = 100_000,
        replay_per_key: int = 2_000,
        max_waiters: int = 256,
        max_active: int = 512,
        max_reading_per_address: int = 16,
        max_reading_bytes: int = 64 * 1024 * 1024,
        max_per_key: int = 128,
        read_timeout: float = 10.0,
        read_rate: float = 256 * 1024,
        access_rate: tuple[float, float] = (1.0, 20.0),
        access_rate_per_key: tuple[float, float] = (0.5, 10.0),
        max_connections: int | None = None,
        max_connections_per_address: int = 32,
        header_timeout: float = HEADER_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
        ssl_context: ssl.SSLContext | None = None,
        public_addresses: Sequence[str] = (),
    ) -> None:
        self.ledger = ledger
        self.public_addresses = [canonical_address(a) for a in public_addresses]
        self.ssl_context = ssl_context  # set: the listener serves https (``sync.tls``)
        self.host = host
        self.port = port
        self.serving = serving or Serving(ledger)
        self.max_body = max_body
        self.max_waiters = max_waiters
        self.max_active = max_active
        self.max_reading_bytes = max_reading_bytes
        self.read_timeout = read_timeout
        self.read_rate = read_rate
        self.clock = clock
        self.counters = SyncCounters()
        self.replay = ReplayCache(replay_capacity, per_key=replay_per_key)
        self._active = 0
        self._reading = _Slots(max_reading_per_address)
        self._reading_bytes = 0
        self._handling = _Slots(max_per_key)
        self._access_by_address = RateLimiter(*access_rate)
        self._access_by_key = RateLimiter(*access_rate_per_key)
        self._notes_since = time.monotonic()
        self._notes = 0
        self._notes_dropped = 0
        self.guard = ConnectionGuard(
            "sync",
            GuardSettings(
                max_total=max_connections or descriptor_budget(0.6),
                max_per_address=max_connections_per_address,
                header_timeout=header_timeout,
                body_timeout=max(BODY_TIMEOUT_S, read_timeout + 5.0),  # the server's 408 first
            ),
            Notes(log),
        )
        self._runner: web.AppRunner | None = None
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._log_id = ""
        self._servers = self.servers()
        self._last_heads: dict[str, Heads] = {}  # last heads per database: counts grow from there
        ledger.add_listener(self._on_commit)

    # ---- lifecycle ------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """This server's peer address, ``https:<host>:<port>`` when it serves TLS, else
        ``http:…`` (the bound port once started)."""
        return format_address(self.host, self.port, "https" if self.ssl_context else "http")

    @property
    def running(self) -> bool:
        return self._runner is not None

    def servers(self) -> tuple[str, ...]:
        """The addresses a request may be signed for here (canonical), the one tickets
        advertise first: ``public_addresses``, then the listen address, on loopback also as
        ``localhost`` (a wildcard one: this machine's loopback names). Anything else is
        another server (``Misdirected``)."""
        found = list(self.public_addresses)
        if self.port:
            host = self.host.strip("[]").lower()
            hosts = [host]
            if is_wildcard(host) or host == "localhost":
                hosts = ["localhost", "127.0.0.1", "::1"]
            elif is_loopback(host):
                hosts.append("localhost")
            scheme = "https" if self.ssl_context else "http"
            found += [canonical_address(format_address(h, self.port, scheme)) for h in hosts]
        return tuple(dict.fromkeys(found))

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
            self.make_app(),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=2.0,
            lingering_time=2.0,  # an unread body refused early is drained this long at most
            keepalive_timeout=KEEPALIVE_TIMEOUT_S,  # also bounds a trickle after an answer
            logger=self._http_logger(),
        )
        await runner.setup()
        quiet_failed_accepts()
        site = GuardedSite(runner, self.host, self.port, self.guard, ssl_context=self.ssl_context)
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
        self._servers = self.servers()
        log.info("sync server listening on %s", self.address)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        self._wake_all()
        await runner.cleanup()
        log.info("sync server on %s stopped", self.address)

    def close(self) -> None:
        """Stop listening to the ledger's commits (after ``stop``, when the server is done)."""
        self.ledger.remove_listener(self._on_commit)

    async def ticket(self, db: str, addresses: list[str] | None = None) -> str:
        """A ticket for ``db`` at ``addresses`` (default: this server's address); shares it."""
        await self.serving.share(db)
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

    def _http_logger(self) -> logging.Logger:
        logger = OneLineLogger("chazbot.sync.http", self._note)
        logger.parent = log
        return logger

    def _note(self, message: str, *args: object) -> None:
        """Log a refused or aborted request: one line each, at most ``NOTES_PER_WINDOW`` per
        ``NOTES_WINDOW_S`` (a flood must not fill the disk); then one line says how many more."""
        now = time.monotonic()
        if now - self._notes_since >= NOTES_WINDOW_S:
            if self._notes_dropped:
                log.info(
                    "%d more sync requests refused or aborted in the last %.0f s",
                    self._notes_dropped,
                    now - self._notes_since,
                )
            self._notes_since, self._notes, self._notes_dropped = now, 0, 0
        if self._notes < NOTES_PER_WINDOW:
            self._notes += 1
            log.info(message, *args)
        else:
            self._notes_dropped += 1

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self._active >= self.max_active:
            self.counters.errors += 1
            return _error(503, "server busy; try again later")
        self._active += 1
        try:
            return await handler(request)
        except web.HTTPException as exc:  # aiohttp's own: unknown route, method, 411, 413
            if exc.status < 400:
                raise
            self.counters.errors += 1
            return _error(exc.status, exc.text or exc.reason)
        except _ReadTimeout:
            self.counters.errors += 1
            self._note("sync request from %s: body too slow, dropped", request.remote)
            return _error(408, "request body did not arrive in time")
        except (ChazError, Busy) as exc:
            status = next((s for t, s in _STATUS if isinstance(exc, t)), 500)
            if status == 401:
                self.counters.requests_refused += 1
                self.counters.misdirected += isinstance(exc, Misdirected)
                self._note("sync request refused from %s: %s", request.remote, exc)
            self.counters.errors += 1
            return _error(status, str(exc))
        except (ConnectionError, HttpProcessingError, asyncio.IncompleteReadError) as exc:
            self.counters.errors += 1
            self.guard.aborted += 1
            self._note("sync request from %s aborted: %s", request.remote, type(exc).__name__)
            return _error(400, "request aborted")
        except Exception:
            log.exception("sync request %s %s failed", request.method, request.path)
            self.counters.errors += 1
            return _error(500, "internal error")
        finally:
            self._active -= 1

    @contextlib.asynccontextmanager
    async def _open(
        self, request: web.Request, name: str, model: type[Body], need: Level | None
    ) -> AsyncIterator[tuple[str, str, Body]]:
        """Admit ``request`` step by step (see the module doc); yield (key, db, its body
        read into ``model``).

        While the caller handles it, the request holds one of its key's handling slots.
        """
        length = request.content_length
        if length is None:
            raise web.HTTPLengthRequired(text="Content-Length is required")
        limit = min(BODY_LIMITS.get(name, 1024), self.max_body)
        if length > limit:
            raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=length)
        signed = check_headers(request.headers, self.clock(), self.replay.window_s, self._servers)
        db = check_db_id(request.match_info["db"])
        key = signed.key
        if need is not None:
            await self._check_serving(db, key, need)
        else:
            if not await self.serving.is_shared(db):
                raise NotFound(f"database {db} is not shared here")
            now = time.monotonic()
            if not self._access_by_address.allow(address_group(request.remote), now):
                raise RateLimited("too many access requests from this address; try later")
            if not self._access_by_key.allow(key, now):
                raise RateLimited("too many access requests from this key; try later")
        body = await self._read_body(request, length)
        check_signature(signed, request.method, request.raw_path, body)
        if need is not None:
            self._record_nonce(signed)
        elif self.replay.seen(key, signed.nonce, self.clock(), signed.ts_ms / 1000):
            raise Unauthenticated("request replayed (nonce already used)")
        data = wire.parse(model, body)
        del body
        if not self._handling.take(key):
            raise Busy("too many requests from this key in progress; try again later")
        try:
            yield key, db, data
            if need is None:
                await self._record_access_nonce(db, signed)
        finally:
            self._handling.give(key)

    def _record_nonce(self, signed: SignedHeaders) -> None:
        self.replay.add(signed.key, signed.nonce, signed.ts_ms / 1000, self.clock())

    async def _record_access_nonce(self, db: str, signed: SignedHeaders) -> None:
        """After an access request: the nonce is kept if the key now holds something here."""
        held = await self.ledger.permission(db, signed.key)
        if held.allows(Level.READ) or await self.serving.has_request(db, signed.key):
            self._record_nonce(signed)

    async def _read_body(self, request: web.Request, length: int) -> bytes:
        """The body, within the per-address and total reading bounds and its deadline."""
        group = address_group(request.remote)
        large = length if length > SMALL_BODY else 0  # small ones never wait on large ones
        if large and self._reading_bytes + large > self.max_reading_bytes:
            raise Busy("server busy reading other requests; try again later")
        if not self._reading.take(group):
            raise Busy("too many requests from this address in progress; try again later")
        self._reading_bytes += large
        try:
            deadline = self.read_timeout + length / self.read_rate
            try:
                async with asyncio.timeout(deadline):
                    body = await request.read()
            except TimeoutError:
                raise _ReadTimeout from None
        finally:
            self._reading_bytes -= large
            self._reading.give(group)
        if len(body) != length:
            raise InputError("request body is shorter than its Content-Length")
        return body

    async def _check_serving(self, db: str, key: str, need: Level | None) -> None:
        if not await self.serving.is_shared(db):
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
        async with self._open(request, "heads", wire.HeadsRequest, Level.READ) as (key, db, _):
            heads = await self._read_heads(db)
            held = await self.ledger.permission(db, key)
        return _answer(
            wire.HeadsAnswer(
                db=db,
                tips=heads.tips,
                count=heads.count,
                max_seq=heads.max_seq,
                log=self._log_id,
                permission=str(held),
            )
        )

    async def _entries(self, request: web.Request) -> web.Response:
        admitted = self._open(request, "entries", wire.EntriesRequest, Level.READ)
        async with admitted as (key, db, ask):
            after, limit, wait = ask.after, ask.limit, ask.wait
            fut: asyncio.Future[None] | None = None
            if wait > 0 and self._runner is not None and self._waiting() < self.max_waiters:
                fut = asyncio.get_running_loop().create_future()
                self._waiters[db].add(fut)  # before reading, so no commit slips between
            try:
                rows, more = await self.ledger.run(read_after, db, after, limit, MAX_BATCH_BYTES)
                if not rows and fut is not None:
                    await asyncio.wait({fut}, timeout=wait)
                    await self._check_serving(db, key, Level.READ)  # it may have changed
                    rows, more = await self.ledger.run(
                        read_after, db, after, limit, MAX_BATCH_BYTES
                    )
            finally:
                if fut is not None:
                    self._waiters.get(db, set()).discard(fut)
        self.counters.sent += len(rows)
        return _answer(
            wire.EntriesAnswer(
                entries=[(seq, data) for seq, _, data in rows],
                next=rows[-1][0] if rows else after,
                more=more,
                log=self._log_id,
            )
        )

    async def _have(self, request: web.Request) -> web.Response:
        async with self._open(request, "have", wire.HaveRequest, Level.READ) as (_, db, ask):
            known = await self.ledger.run(read_known, db, ask.ids)
        return _answer(wire.HaveAnswer(missing=[i for i in ask.ids if i not in known]))

    async def _push(self, request: web.Request) -> web.Response:
        async with self._open(request, "push", wire.PushRequest, Level.READ) as (key, db, ask):
            entries = ask.entries
            del ask
            ours = [data for data in entries if entry_db(data) == db]
            result = await self.ledger.ingest(ours)
            heads = await self._read_heads(db)
        rejected = [("?", "entry belongs to another database")] * (len(entries) - len(ours))
        rejected += result.rejected
        self.counters.received += len(result.accepted)
        self.counters.duplicates += result.duplicates
        self.counters.refused += len(rejected)
        for eid, reason in rejected[:5]:
            log.warning("sync push from %s… refused entry %s: %s", key[:24], eid[:19], reason)
        return _answer(
            wire.PushAnswer(
                accepted=len(result.accepted),
                duplicates=result.duplicates,
                rejected=rejected[: wire.MAX_REJECTS_SHOWN],
                refused=len(rejected),
                tips=heads.tips,
                max_seq=heads.max_seq,
                log=self._log_id,
            )
        )

    async def _access(self, request: web.Request) -> web.Response:
        async with self._open(request, "access", wire.AccessRequest, None) as (key, db, ask):
            permission = ask.permission
            decision = await self.serving.request_access(db, key, permission, request.remote)
        if decision.status == "pending":
            log.info(
                "sync access request %s: key %s… asks for %s on %s",
                decision.request,
                key[:24],
                permission,
                db,
            )
        return _answer(wire.AccessAnswer(status=decision.status, request=decision.request))
