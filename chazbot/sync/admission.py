"""How a sync request is admitted before its endpoint runs (``server``), and what every answer
looks like.

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

The steps are ``Admission.open`` (an async context around an endpoint's handling) and its
middleware ``Admission.errors`` (requests in progress, every error as ``{"error": …}`` with
its status, one log line per refusal through ``note``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
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
from chazbot.sync import wire
from chazbot.sync.guard import ConnectionGuard
from chazbot.sync.protocol import (
    BODY_LIMITS,
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
)
from chazbot.sync.quiet_logs import OneLineLogger
from chazbot.sync.store import Serving, address_group, check_db_id

log = logging.getLogger("chazbot.sync.server")

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


def answer(body: wire.WireModel, status: int = 200) -> web.Response:
    headers = {PROTOCOL_HEADER: PROTOCOL}  # what tells a chazbot peer from other services
    return web.json_response(text=body.model_dump_json(), status=status, headers=headers)


def error_answer(status: int, message: str) -> web.Response:
    return answer(wire.ErrorAnswer(error=message), status)


class Admission:
    """The request path of one sync server up to its endpoint (see the module doc): bounds,
    rates, body reading, signature and nonces. ``servers``: the addresses a request may be
    signed for (the server sets them when it knows its port)."""

    def __init__(
        self,
        ledger: Ledger,
        serving: Serving,
        counters: SyncCounters,
        guard: ConnectionGuard,
        replay: ReplayCache,
        *,
        clock: Callable[[], float],
        max_body: int,
        max_active: int,
        max_reading_per_address: int,
        max_reading_bytes: int,
        max_per_key: int,
        read_timeout: float,
        read_rate: float,
        access_rate: tuple[float, float],
        access_rate_per_key: tuple[float, float],
    ) -> None:
        self.ledger = ledger
        self.serving = serving
        self.counters = counters
        self.guard = guard
        self.replay = replay
        self.clock = clock
        self.max_body = max_body
        self.max_active = max_active
        self.max_reading_bytes = max_reading_bytes
        self.read_timeout = read_timeout
        self.read_rate = read_rate
        self.servers: tuple[str, ...] = ()
        self._active = 0
        self._reading = _Slots(max_reading_per_address)
        self._reading_bytes = 0
        self._handling = _Slots(max_per_key)
        self._access_by_address = RateLimiter(*access_rate)
        self._access_by_key = RateLimiter(*access_rate_per_key)
        self._notes_since = time.monotonic()
        self._notes = 0
        self._notes_dropped = 0

    def http_logger(self) -> logging.Logger:
        logger = OneLineLogger("chazbot.sync.http", self.note)
        logger.parent = log
        return logger

    def note(self, message: str, *args: object) -> None:
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
    async def errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self._active >= self.max_active:
            self.counters.errors += 1
            return error_answer(503, "server busy; try again later")
        self._active += 1
        try:
            return await handler(request)
        except web.HTTPException as exc:  # aiohttp's own: unknown route, method, 411, 413
            if exc.status < 400:
                raise
            self.counters.errors += 1
            return error_answer(exc.status, exc.text or exc.reason)
        except _ReadTimeout:
            self.counters.errors += 1
            self.note("sync request from %s: body too slow, dropped", request.remote)
            return error_answer(408, "request body did not arrive in time")
        except (ChazError, Busy) as exc:
            status = next((s for t, s in _STATUS if isinstance(exc, t)), 500)
            if status == 401:
                self.counters.requests_refused += 1
                self.counters.misdirected += isinstance(exc, Misdirected)
                self.note("sync request refused from %s: %s", request.remote, exc)
            self.counters.errors += 1
            return error_answer(status, str(exc))
        except (ConnectionError, HttpProcessingError, asyncio.IncompleteReadError) as exc:
            self.counters.errors += 1
            self.guard.aborted += 1
            self.note("sync request from %s aborted: %s", request.remote, type(exc).__name__)
            return error_answer(400, "request aborted")
        except Exception:
            log.exception("sync request %s %s failed", request.method, request.path)
            self.counters.errors += 1
            return error_answer(500, "internal error")
        finally:
            self._active -= 1

    @contextlib.asynccontextmanager
    async def open(
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
        signed = check_headers(request.headers, self.clock(), self.replay.window_s, self.servers)
        db = check_db_id(request.match_info["db"])
        key = signed.key
        if need is not None:
            await self.check_serving(db, key, need)
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

    async def check_serving(self, db: str, key: str, need: Level | None) -> None:
        if not await self.serving.is_shared(db):
            raise NotFound(f"database {db} is not shared here")
        if need is not None:
            held = await self.ledger.permission(db, key)
            if not held.allows(need):
                raise PermissionDenied(
                    f"key {key[:24]}… may not {need.name.lower()} database {db[:19]}…"
                )


__all__ = ["Admission", "Body", "answer", "error_answer"]
