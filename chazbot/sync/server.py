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

What a stranger can make the server hold is bounded, each step before the next costs
anything: ``admission`` (connections: ``sync.guard``).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

from aiohttp import web

from chazbot.errors import BackendError
from chazbot.ledger.auth import Level
from chazbot.ledger.ledger import Ledger
from chazbot.ledger.records import Applied
from chazbot.ledger.replication import Heads, read_after, read_heads, read_known
from chazbot.sync import wire
from chazbot.sync.admission import Admission, answer
from chazbot.sync.guard import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    KEEPALIVE_TIMEOUT_S,
    ConnectionGuard,
    GuardSettings,
    Notes,
    descriptor_budget,
)
from chazbot.sync.guarded import GuardedSite
from chazbot.sync.protocol import (
    MAX_BATCH_BYTES,
    MAX_BODY_BYTES,
    ReplayCache,
    SyncCounters,
    entry_db,
)
from chazbot.sync.quiet_logs import quiet_failed_accepts
from chazbot.sync.store import Serving, log_id
from chazbot.sync.tickets import (
    canonical_address,
    format_address,
    format_ticket,
    is_loopback,
    is_wildcard,
)

log = logging.getLogger(__name__)


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
        self.max_waiters = max_waiters
        self.counters = SyncCounters()
        self.replay = ReplayCache(replay_capacity, per_key=replay_per_key)
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
        self.admission = Admission(
            ledger,
            self.serving,
            self.counters,
            self.guard,
            self.replay,
            clock=clock,
            max_body=max_body,
            max_active=max_active,
            max_reading_per_address=max_reading_per_address,
            max_reading_bytes=max_reading_bytes,
            max_per_key=max_per_key,
            read_timeout=read_timeout,
            read_rate=read_rate,
            access_rate=access_rate,
            access_rate_per_key=access_rate_per_key,
        )
        self._runner: web.AppRunner | None = None
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._log_id = ""
        self.admission.servers = self.servers()
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
        app = web.Application(
            client_max_size=self.admission.max_body, middlewares=[self.admission.errors]
        )
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
            logger=self.admission.http_logger(),
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
        self.admission.servers = self.servers()
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

    # ---- endpoints ------------------------------------------------------------------------

    async def _read_heads(self, db: str) -> Heads:
        heads = await self.ledger.run(read_heads, db, self._last_heads.get(db))
        self._last_heads[db] = heads
        return heads

    async def _heads(self, request: web.Request) -> web.Response:
        async with self.admission.open(request, "heads", wire.HeadsRequest, Level.READ) as (
            key,
            db,
            _,
        ):
            heads = await self._read_heads(db)
            held = await self.ledger.permission(db, key)
        return answer(
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
        admitted = self.admission.open(request, "entries", wire.EntriesRequest, Level.READ)
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
                    await self.admission.check_serving(db, key, Level.READ)  # it may have changed
                    rows, more = await self.ledger.run(
                        read_after, db, after, limit, MAX_BATCH_BYTES
                    )
            finally:
                if fut is not None:
                    self._waiters.get(db, set()).discard(fut)
        self.counters.sent += len(rows)
        return answer(
            wire.EntriesAnswer(
                entries=[(seq, data) for seq, _, data in rows],
                next=rows[-1][0] if rows else after,
                more=more,
                log=self._log_id,
            )
        )

    async def _have(self, request: web.Request) -> web.Response:
        async with self.admission.open(request, "have", wire.HaveRequest, Level.READ) as (
            _,
            db,
            ask,
        ):
            known = await self.ledger.run(read_known, db, ask.ids)
        return answer(wire.HaveAnswer(missing=[i for i in ask.ids if i not in known]))

    async def _push(self, request: web.Request) -> web.Response:
        async with self.admission.open(request, "push", wire.PushRequest, Level.READ) as (
            key,
            db,
            ask,
        ):
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
        return answer(
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
        async with self.admission.open(request, "access", wire.AccessRequest, None) as (
            key,
            db,
            ask,
        ):
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
        return answer(wire.AccessAnswer(status=decision.status, request=decision.request))
