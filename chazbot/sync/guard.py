"""Connection caps and a header deadline for the listeners that face strangers.

aiohttp bounds a request once its headers are in (body size, read deadline: see
``server``), but not the connections themselves: 1,100 connections that trickle header
lines used every descriptor of a process under ``ulimit -n 1024``, so honest peers, the
control socket and even the log (asyncio's "socket.accept() out of system resource", millions
of lines) went down with it (issue #22). A ``ConnectionGuard`` wraps each accepted connection
(``GuardedSite`` for aiohttp, ``ConnectionGuard.admit`` for the control socket) and:

- caps connections per address (an IPv6 /64 counts as one) and in all, the total below the
  descriptor limit (``descriptor_budget`` reads ``RLIMIT_NOFILE``), so the process never runs
  out of descriptors and asyncio never logs a failed accept;
- when the total is reached, makes room by closing the oldest connection still waiting for
  its headers from the address holding the most, if that is busier than the newcomer's: a
  flood from a few addresses cannot lock out anyone else;
- closes a connection whose first request's headers are not complete within
  ``header_timeout`` (later requests on a kept-alive connection are bounded by aiohttp's
  keep-alive timeout, which closes a connection idle or trickling since its last answer).

Refusals are counted and logged through the owner's rate-limited ``note``.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from chazbot.sync.store import address_group

log = logging.getLogger(__name__)

RESERVED_FDS = 192  # the state file, logs, outgoing sync and Matrix connections, models
HEADER_TIMEOUT_S = 10.0
KEEPALIVE_TIMEOUT_S = 15.0
_CRLF2 = b"\r\n\r\n"


def descriptor_limit() -> int:
    """This process's soft limit on open descriptors (65,536 when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 65536 if soft == resource.RLIM_INFINITY else int(soft)


def descriptor_budget(share: float, floor: int = 8) -> int:
    """``share`` of the descriptors left once ``RESERVED_FDS`` are set aside."""
    return max(floor, int((descriptor_limit() - RESERVED_FDS) * share))


class ConnectionGuard:
    """Counts open connections per address group and in all; see the module doc."""

    def __init__(
        self,
        name: str,
        *,
        max_total: int,
        max_per_address: int,
        header_timeout: float = HEADER_TIMEOUT_S,
        note: Callable[..., None] | None = None,
    ) -> None:
        self.name = name
        self.max_total = max_total
        self.max_per_address = max_per_address
        self.header_timeout = header_timeout
        self.note = note or log.info
        self._open: dict[str, list[GuardedConnection]] = {}
        self.total = 0
        self.refused = 0
        self.evicted = 0
        self.timed_out = 0

    def counts(self) -> dict[str, int]:
        return {
            "open": self.total,
            "refused": self.refused,
            "evicted": self.evicted,
            "timed_out": self.timed_out,
        }

    def admit(self, conn: GuardedConnection) -> bool:
        """Take ``conn`` in, making room if the class doc allows; False to refuse it."""
        mine = self._open.get(conn.group, [])
        if len(mine) >= self.max_per_address:
            self.refused += 1
            self.note("%s: connection from %s refused (per-address cap)", self.name, conn.group)
            return False
        if self.total >= self.max_total and not self._make_room(len(mine)):
            self.refused += 1
            self.note("%s: connection from %s refused (%d open)", self.name, conn.group, self.total)
            return False
        self._open.setdefault(conn.group, []).append(conn)
        self.total += 1
        return True

    def _make_room(self, mine: int) -> bool:
        busiest = max(self._open.values(), key=len, default=[])
        if len(busiest) <= mine + 1:
            return False
        waiting = next((c for c in busiest if not c.headers_done), None)
        if waiting is None:
            return False
        self.evicted += 1
        waiting.close()
        return True

    def release(self, conn: GuardedConnection) -> None:
        group = self._open.get(conn.group)
        if group is not None and conn in group:
            group.remove(conn)
            self.total -= 1
            if not group:
                del self._open[conn.group]


class GuardedConnection(asyncio.Protocol):
    """An accepted connection on its way to ``inner`` (aiohttp's protocol, or a stream's):
    admitted or refused by ``guard``, closed if its headers are not in on time."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.group = "?"
        self.headers_done = False
        self.opened = time.monotonic()
        self._admitted = False
        self._closed = False
        self._tail = b""
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self.group = address_group(peer[0]) if isinstance(peer, tuple) and peer else "local"
        if not self.guard.admit(self):
            transport.abort()  # the descriptor is freed now, before anything is read
            return
        self._admitted = True
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self.guard.header_timeout, self._too_slow)
        self.inner.connection_made(transport)

    def _too_slow(self) -> None:
        self._timer = None
        if not self.headers_done and not self._closed:
            self.guard.timed_out += 1
            self.guard.note("%s: connection from %s sent no headers in time", *self._who())
            self.close()

    def _who(self) -> tuple[str, str]:
        return self.guard.name, self.group

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._closed = True
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if not self._admitted:
            return
        if not self.headers_done:
            seen = self._tail + data
            if _CRLF2 in seen:
                self.headers_done = True
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
            self._tail = seen[-3:]
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self._admitted else None

    def pause_writing(self) -> None:
        if self._admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self._admitted:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._admitted:
            self._admitted = False
            self.guard.release(self)
            self.inner.connection_lost(exc)


class GuardedSite(web.TCPSite):
    """``web.TCPSite`` whose accepted connections pass through ``guard`` first."""

    def __init__(
        self, runner: web.BaseRunner, host: str, port: int, guard: ConnectionGuard, **options: Any
    ) -> None:
        super().__init__(runner, host, port, **options)
        self.guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        guard = self.guard

        def factory() -> asyncio.Protocol:
            return GuardedConnection(guard, server())

        loop = asyncio.get_running_loop()
        tls = self._ssl_context  # set: a TLS handshake comes first, within the header deadline
        self._server = await loop.create_server(
            factory,
            self._host,
            self._port,
            backlog=self._backlog,
            ssl=tls,
            ssl_handshake_timeout=self.guard.header_timeout if tls is not None else None,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


class _AcceptNotes(logging.Filter):
    """asyncio logs every failed accept (EMFILE: out of descriptors); one line a minute."""

    def __init__(self) -> None:
        super().__init__()
        self.since = 0.0
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "socket.accept() out of system resource" not in str(record.msg):
            return True
        now = time.monotonic()
        if now - self.since < 60.0:
            self.dropped += 1
            return False
        if self.dropped:
            record.msg = f"{record.msg} ({self.dropped} more in the last minute)"
        self.since, self.dropped = now, 0
        return True


_ACCEPT_NOTES = _AcceptNotes()


def quiet_failed_accepts() -> None:
    """Let asyncio log a failed accept once a minute at most (idempotent)."""
    logger = logging.getLogger("asyncio")
    if _ACCEPT_NOTES not in logger.filters:
        logger.addFilter(_ACCEPT_NOTES)
