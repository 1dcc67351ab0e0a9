"""An accepted connection under a ``ConnectionGuard`` (``guard``: the admission decision, its
caps and settings), and the aiohttp site whose connections pass through one.

``GuardedConnection`` follows one connection: admitted or refused at accept, upgraded to TLS
by itself, its request heads and bodies framed (``framing``) against their deadlines;
``GuardedSite`` is ``web.TCPSite`` making one for every connection it accepts.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from chazbot.sync.framing import Phase, RequestFraming
from chazbot.sync.guard import ConnectionGuard, address_network
from chazbot.sync.store import address_group

_NOT_STARTED = asyncio.Protocol()  # ``inner`` until the connection is started: does nothing


class GuardedConnection(asyncio.Protocol):
    """An accepted connection on its way to ``inner`` (aiohttp's protocol, or a stream's):
    admitted or refused by ``guard`` as soon as TCP accepts it, closed if a head or body falls
    behind its deadline.

    With ``tls`` the connection is accepted as plain TCP, counted, and then upgraded
    (``loop.start_tls``): the handshake and the request head share the head deadline, and
    ``inner`` sees the connection only once the handshake is done. (asyncio's own
    ``create_server(ssl=…)`` calls ``connection_made`` after the handshake, so connections
    still in it were not counted: a stranger could hold any number of them.) The guard's
    count is released exactly once, whichever way the connection ends (``connection_lost``).
    ``inner`` is made (``make_inner``) only then: a refused connection costs no aiohttp
    request handler (a flood's refusals run by the thousand a second)."""

    def __init__(
        self,
        guard: ConnectionGuard,
        make_inner: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.guard = guard
        self.make_inner = make_inner
        self.inner: asyncio.Protocol = _NOT_STARTED
        self.tls = tls
        self.group = "?"
        self.network: str | None = None  # its IPv6 /48, bounded as a whole
        self._admitted_at = 0.0  # loop time
        self._read = False  # bytes of it were read (with TLS: after the handshake)
        self.framing = RequestFraming(guard.settings.max_head)
        self.opened = time.monotonic()
        self._admitted = False
        self._started = False  # ``inner`` has the connection (after the handshake, with TLS)
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._transport: asyncio.Transport | None = None
        self._handshake: asyncio.Task[None] | None = None
        self._early: list[bytes] = []  # plaintext that came with the handshake's last flight
        self._body_start = 0.0
        self._body_seen = 0
        self._checked = 0.0

    @property
    def phase(self) -> Phase:
        return self.framing.phase

    @property
    def closing(self) -> bool:
        return self._closed

    @property
    def handshaking(self) -> bool:
        return self._handshake is not None

    @property
    def admitted(self) -> bool:
        return self._admitted

    def stalled(self, now: float) -> bool:
        """In a request it does not finish: a head (or TLS handshake) still coming, once its
        first bytes were read or ``read_grace`` passed, or a body that has come slower than
        ``min_rate`` since it began (no grace: this is whom to close first under pressure,
        not the body deadline)."""
        if self.phase == "head":
            return self._read or now - self._admitted_at >= self.guard.settings.read_grace
        if self.phase != "body" or self._transport is None or not self._transport.is_reading():
            return False
        return self._body_seen < self.guard.settings.min_rate * (now - self._body_start)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        remote = peer[0] if isinstance(peer, tuple) and peer else None
        self.group = address_group(remote) if remote is not None else "local"
        self.network = address_network(remote)
        self._admitted_at = asyncio.get_running_loop().time()
        if not self.guard.admit(self):
            transport.abort()  # the descriptor is freed now, before anything is read
            return
        self._admitted = True
        self._watch()  # with TLS: the handshake too must be done within the head deadline
        if self.tls is None:
            self._start(transport)
        else:
            self._handshake = asyncio.ensure_future(self._upgrade(transport, self.tls))

    def _start(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._started = True
        self.inner = self.make_inner()
        self.inner.connection_made(transport)

    async def _upgrade(self, raw: asyncio.Transport, tls: ssl.SSLContext) -> None:
        """The TLS handshake on ``raw``; then ``inner`` gets the TLS transport. A failed,
        timed-out or reset handshake closes the connection and releases its count here:
        asyncio does not always tell the protocol (a reset mid-handshake reaches only
        ``start_tls``'s caller)."""
        loop = asyncio.get_running_loop()
        secured: asyncio.BaseTransport | None = None
        try:
            secured = await loop.start_tls(
                raw,
                self,
                tls,
                server_side=True,
                ssl_handshake_timeout=self.guard.settings.header_timeout,
            )
        except Exception as exc:  # a bad or cut handshake, its deadline: the client's doing
            if not self._closed:  # (the guard's own closing is noted where it closes)
                self.guard.note(
                    "%s: TLS handshakes failed (%s)", self.guard.name, type(exc).__name__
                )
        finally:  # also when cancelled (the loop shutting down)
            self._handshake = None
            if secured is None or self._closed:  # failed, or gone between the handshake and now
                raw.abort()
                self.connection_lost(None)
        if secured is None or self._closed:
            return
        assert isinstance(secured, asyncio.Transport)
        self._start(secured)
        early, self._early = self._early, []
        for data in early:
            self.data_received(data)

    def _watch(self) -> None:
        """Set the deadline of the phase the connection is in (none between requests)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        loop = asyncio.get_running_loop()
        if self.phase == "head":
            self._timer = loop.call_later(self.guard.settings.header_timeout, self._head_too_slow)
        elif self.phase == "body":
            self._body_start = self._checked = loop.time()
            self._body_seen = 0
            self._timer = loop.call_later(self.guard.settings.body_timeout, self._body_check)

    def _head_too_slow(self) -> None:
        self._timer = None
        if self.phase == "head" and not self._closed:
            self.guard.timed_out += 1
            self.guard.note("%s: connections closed: no complete head in time", self.guard.name)
            self.close()

    def _body_check(self) -> None:
        self._timer = None
        if self.phase != "body" or self._closed or self._transport is None:
            return
        cfg, loop = self.guard.settings, asyncio.get_running_loop()
        now = loop.time()
        if not self._transport.is_reading():  # the server stopped reading: not the client
            self._body_start += now - self._checked
        self._checked = now
        due = cfg.min_rate * (now - self._body_start - cfg.body_timeout)
        if self._body_seen < due:
            self.guard.body_timed_out += 1
            self.guard.note("%s: connections closed: body too slow", self.guard.name)
            self.close()
            return
        later = self._body_start + cfg.body_timeout + (self._body_seen + 1) / cfg.min_rate
        self._timer = loop.call_at(max(later, now + 0.25), self._body_check)

    def close(self) -> None:
        if self._transport is not None and not self._closed:
            self._closed = True
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        if not self._admitted or self._closed:
            return
        if not self._started:  # TLS: app data in the handshake's last read, before _upgrade resumes
            self._early.append(data)
            return
        self._read = True
        framing = self.framing
        phase, requests = framing.phase, framing.requests
        problem = framing.feed(data)
        if problem is not None:
            self.guard.too_large += 1
            self.guard.note("%s: connections closed: %s", self.guard.name, problem)
            self.close()
            return
        if phase == "body" or framing.phase == "body":
            self._body_seen += len(data)
        if framing.phase != phase or framing.requests != requests:
            self._watch()  # a new phase: its deadline from now
            # the request in progress (its number): the same one, or a new one begun
            before = requests + (phase == "head")
            after = framing.requests + (framing.phase == "head")
            self.guard.progressed(self, phase == "idle" or before != after)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        if not self._started:
            return None  # closes the transport (TLS: before the handshake is done)
        return self.inner.eof_received() if self._admitted else None

    def pause_writing(self) -> None:
        if self._admitted and self._started:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self._admitted and self._started:
            self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        """The end of the connection, however it came (with TLS, from asyncio's TLS layer or
        from ``_upgrade``, possibly both): the count is released once, ``inner`` told once
        if it had the connection."""
        self._closed = True
        self._early = []
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._admitted:
            self._admitted = False
            self.guard.release(self)
            if self._started:
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

        tls = self._ssl_context  # set: a TLS handshake comes first, within the header deadline

        def factory() -> asyncio.Protocol:
            return GuardedConnection(guard, server, tls)

        loop = asyncio.get_running_loop()
        # plain TCP: the guard counts a connection at accept, then upgrades it to TLS itself
        self._server = await loop.create_server(
            factory, self._host, self._port, backlog=self._backlog
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port

    async def stop(self) -> None:
        await super().stop()
        self.guard.close_handshakes()  # else each waits for its deadline


__all__ = ["GuardedConnection", "GuardedSite"]
