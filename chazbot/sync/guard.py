"""Connection caps, head and body deadlines for the listeners that face strangers.

aiohttp bounds a request once its headers are in (body size, read deadline: see
``server``), but not the connections themselves: 1,100 connections that trickle header
lines used every descriptor of a process under ``ulimit -n 1024``, so honest peers, the
control socket and even the log (asyncio's "socket.accept() out of system resource", millions
of lines) went down with it (issue #22). A ``ConnectionGuard`` wraps each connection accepted
by a ``GuardedSite`` (aiohttp's listeners: sync and http; the control socket has its own cap)
and:

- caps connections per address (an IPv4 address, an IPv6 /64), per IPv6 /48 (a site: one
  holds 65,536 /64s) and in all, the total below the descriptor limit (``descriptor_budget``
  reads ``RLIMIT_NOFILE``), so the process never runs out of descriptors and asyncio never
  logs a failed accept;
- keeps the last ``reserve`` slots for addresses that hold no connection, and when the total
  is reached lets a newcomer from an address with no stalled connection in (none at all, or
  only finished requests: an honest peer's long poll) by closing the connection that has
  held a slot longest without finishing its request (a head still coming, a TLS handshake,
  or a body behind ``min_rate`` bytes a second), whatever its address (issue #47: one slow
  connection from each of more addresses than the cap locked everyone out). The victim's
  address then cools down (``cooldown``): it may take a free slot but close no other, so a
  flood cannot close itself round and round; and a new connection is not taken for stalled
  before its first bytes were read (or ``read_grace``), so an honest head already sent is
  never lost to a burst. A newcomer from an address that holds a stalled connection or
  cools down only takes the place of a stalled connection of an address holding two more
  than its own (a newcomer with neither: else one not read yet, in its body or between
  requests), so a flood from a few addresses cannot lock out anyone else either;
- follows each connection's requests (``sync.framing``: the request line and header lines
  up to the empty line that ends them, skipping empty lines before a request line as HTTP
  allows, then ``Content-Length`` or chunked body bytes; issue #34: two leading CRLFs used to
  pass for a finished head) and closes a connection whose head is not complete within
  ``header_timeout`` (from the connection's start, or a later request's first byte) or
  larger than ``max_head`` bytes, and one whose body falls behind: after ``body_timeout``,
  it must keep up ``min_rate`` bytes a second on average (time the server itself stopped
  reading does not count). Between requests, aiohttp's keep-alive timeout closes an idle
  connection.
- counts a TLS connection (the sync listener with ``sync_tls_cert``) from TCP accept, not
  from the end of its handshake: the guard upgrades it itself (``loop.start_tls``) within the
  head deadline, so stalled handshakes count against the caps and can be evicted like
  stalled heads (asyncio's ``create_server(ssl=…)`` tells the protocol only after the
  handshake: any number of connections in their handshake went uncounted).

Refusals, evictions, deadlines and client aborts are counted (``counts``, exported at
``/metrics``) and logged through the owner's ``note`` (``Notes``: one line a minute for each
kind, with how many more there were).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from chazbot.sync.framing import HEAD_MAX_BYTES, Phase, RequestFraming
from chazbot.sync.store import address_group

log = logging.getLogger(__name__)

RESERVED_FDS = 192  # the state file, logs, outgoing sync and Matrix connections, models
HEADER_TIMEOUT_S = 10.0
KEEPALIVE_TIMEOUT_S = 15.0
BODY_TIMEOUT_S = 10.0
BODY_MIN_RATE = 4 * 1024.0  # bytes a second: 32 kbit/s, below any real uplink
NOTES_WINDOW_S = 60.0
COOLDOWN_S = 10.0
READ_GRACE_S = 0.25

CLIENT_GONE: tuple[type[BaseException], ...] = (
    ConnectionError,
    HttpProcessingError,  # a malformed request, a body cut short
    asyncio.IncompleteReadError,
)
"""What a request's handling raises when its client sent garbage or went away."""


def descriptor_limit() -> int:
    """This process's soft limit on open descriptors (65,536 when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 65536 if soft == resource.RLIM_INFINITY else int(soft)


def descriptor_budget(share: float, floor: int = 8) -> int:
    """``share`` of the descriptors left once ``RESERVED_FDS`` are set aside."""
    return max(floor, int((descriptor_limit() - RESERVED_FDS) * share))


class Notes:
    """A log that says each kind of event (its message format) once a window at most: the
    first at once, the next after the window with how many were left out meanwhile."""

    def __init__(
        self,
        logger: logging.Logger,
        window: float = NOTES_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.window = window
        self.clock = clock
        self._kinds: dict[str, list[float]] = {}  # format -> [logged at, left out since]

    def __call__(self, message: str, *args: object) -> None:
        now = self.clock()
        seen = self._kinds.get(message)
        if seen is not None and now - seen[0] < self.window:
            seen[1] += 1
            return
        text = message
        if seen is not None and seen[1]:
            text += f" ({int(seen[1])} more in the last {now - seen[0]:.0f} s)"
        self._kinds[message] = [now, 0]
        self.logger.info(text, *args)


def address_network(remote: str | None) -> str | None:
    """The IPv6 /48 (a site) an address is in, bounded as a whole; None for anything else
    (an IPv4 address, an IPv4-mapped IPv6 one, a Unix socket) whose address is the bound."""
    if not remote or ":" not in remote:
        return None
    try:
        ip = ipaddress.ip_address(remote)
    except ValueError:
        return None
    if not isinstance(ip, ipaddress.IPv6Address) or ip.ipv4_mapped is not None:
        return None
    return str(ipaddress.IPv6Network((int(ip) >> 80 << 80, 48)))


@dataclass(frozen=True)
class GuardSettings:
    """A listener's connection caps and deadlines (see the module doc)."""

    max_total: int
    max_per_address: int
    """Per IPv4 address or IPv6 /64."""
    max_per_network: int | None = None
    """Per IPv6 /48; None: a quarter of ``max_total`` (at least ``max_per_address``)."""
    reserve: int | None = None
    """Slots only a newcomer from an address holding nothing may take; None: a sixteenth
    of ``max_total``, at most 8."""
    header_timeout: float = HEADER_TIMEOUT_S
    max_head: int = HEAD_MAX_BYTES
    body_timeout: float = BODY_TIMEOUT_S
    min_rate: float = BODY_MIN_RATE
    cooldown: float = COOLDOWN_S
    """How long an address whose connection was closed to make room may not close another's
    (it may still take a free slot)."""
    read_grace: float = READ_GRACE_S
    """A new connection is not closed to make room before its first bytes were read, or this
    long: an honest head that has arrived is read before it can be taken for a stalled one."""

    @property
    def network_cap(self) -> int:
        if self.max_per_network is not None:
            return self.max_per_network
        return max(self.max_per_address, self.max_total // 4)

    @property
    def reserved(self) -> int:
        if self.reserve is not None:
            return self.reserve
        return min(8, self.max_total // 16)


class ConnectionGuard:
    """Counts open connections per address group, per IPv6 /48 and in all; see the module
    doc. ``settings`` may be replaced while the listener runs (new admissions follow it)."""

    def __init__(
        self, name: str, settings: GuardSettings, note: Callable[..., None] | None = None
    ) -> None:
        self.name = name
        self.settings = settings
        self.note = note or Notes(log)
        self._open: dict[str, list[GuardedConnection]] = {}
        self._networks: dict[str, int] = {}
        # connections in a request (its head, a TLS handshake, its body), oldest request first
        self._unfinished: dict[GuardedConnection, None] = {}
        # addresses whose connection was closed to make room, until when (oldest first)
        self._cooling: dict[str, float] = {}
        self.total = 0
        self.refused = 0
        self.evicted = 0
        self.timed_out = 0
        self.body_timed_out = 0
        self.too_large = 0
        self.aborted = 0

    def counts(self) -> dict[str, int]:
        return {
            "open": self.total,
            "refused": self.refused,
            "evicted": self.evicted,
            "timed_out": self.timed_out,
            "body_timed_out": self.body_timed_out,
            "too_large": self.too_large,
            "aborted": self.aborted,
        }

    def client_gone(self, exc: BaseException) -> None:
        """A client went away in the middle of a request: counted, one line a minute."""
        self.aborted += 1
        self.note("%s: a client went away mid-request (%s)", self.name, type(exc).__name__)

    def admit(self, conn: GuardedConnection) -> bool:
        """Take ``conn`` in, making room if the module doc allows; False to refuse it."""
        cfg = self.settings
        held = self._open.get(conn.group, [])
        mine = len(held)
        if mine >= cfg.max_per_address:
            return self._refuse("%s: connections refused (per-address cap)")
        if conn.network is not None and self._networks.get(conn.network, 0) >= cfg.network_cap:
            return self._refuse("%s: connections refused (per-/48 cap)")
        limit = cfg.max_total if mine == 0 else cfg.max_total - cfg.reserved
        if self.total >= limit and not self._make_room(conn.group, held):
            return self._refuse("%s: connections refused (all slots held)")
        self._open.setdefault(conn.group, []).append(conn)
        if conn.network is not None:
            self._networks[conn.network] = self._networks.get(conn.network, 0) + 1
        self._unfinished[conn] = None
        self.total += 1
        return True

    def _refuse(self, message: str) -> bool:
        self.refused += 1
        self.note(message, self.name)
        return False

    def _make_room(self, group: str, held: list[GuardedConnection]) -> bool:
        """Close one connection for a newcomer from ``group``, which holds ``held``: the
        longest stalled anywhere when none of ``held`` is stalled (an honest peer's long poll
        does not count against its next request) and ``group`` is not cooling down, else one
        of a busier address. The victim's address cools down: without that, each victim would
        come back and close another at once, round and round as fast as the loop turns, and
        an honest connection could be taken before its head, already sent, was read."""
        now = asyncio.get_running_loop().time()
        stuck = any(c.stalled(now) for c in held if not c.closing)
        cooling = self._cooling.get(group, 0.0) > now
        victim = None if stuck or cooling else self._stalled(now)
        if victim is None:
            victim = self._busier(len(held), now, idle_too=not (stuck or cooling))
        if victim is None:
            return False
        self._cooling.pop(victim.group, None)
        self._cooling[victim.group] = now + self.settings.cooldown
        while len(self._cooling) > max(1024, 4 * self.settings.max_total):
            del self._cooling[next(iter(self._cooling))]
        self.evicted += 1
        self.note("%s: connections closed to make room for another address", self.name)
        victim.close()
        return True

    def _stalled(self, now: float) -> GuardedConnection | None:
        """The connection that has held a slot longest in a request it does not finish."""
        return next((c for c in self._unfinished if not c.closing and c.stalled(now)), None)

    def _busier(self, mine: int, now: float, idle_too: bool) -> GuardedConnection | None:
        """A connection of the address holding the most, if it holds more than ``mine + 1``:
        its oldest stalled one, else (``idle_too``: for a newcomer that neither holds a
        stalled connection nor cools down) its oldest in a head not read yet, in a body, or
        between requests."""
        busiest = max(self._open.values(), key=len, default=[])
        if len(busiest) <= mine + 1:
            return None
        victim = next((c for c in busiest if not c.closing and c.stalled(now)), None)
        if victim is not None or not idle_too:
            return victim
        for phase in ("head", "body", "idle"):  # a head not read yet, too
            victim = next((c for c in busiest if c.phase == phase and not c.closing), None)
            if victim is not None:
                return victim
        return None

    def progressed(self, conn: GuardedConnection, restarted: bool) -> None:
        """``conn`` moved on: finished its request (idle now), into its body (keeps its
        place), or began another (``restarted``: last in line)."""
        if conn.phase == "idle":
            self._unfinished.pop(conn, None)
        elif conn.admitted and (restarted or conn not in self._unfinished):
            self._unfinished.pop(conn, None)
            self._unfinished[conn] = None

    def close_handshakes(self) -> None:
        """Close the connections still in their TLS handshake (the listener is stopping)."""
        for conn in [c for group in self._open.values() for c in group if c.handshaking]:
            conn.close()

    def release(self, conn: GuardedConnection) -> None:
        self._unfinished.pop(conn, None)
        group = self._open.get(conn.group)
        if group is not None and conn in group:
            group.remove(conn)
            self.total -= 1
            if not group:
                del self._open[conn.group]
            if conn.network is not None:
                left = self._networks.get(conn.network, 0) - 1
                if left > 0:
                    self._networks[conn.network] = left
                else:
                    self._networks.pop(conn.network, None)


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


class OneLineLogger(logging.Logger):
    """aiohttp's server logger for a listener: what a stranger's bad bytes provoke there (a
    malformed request line, a connection lost mid-way) is one line, no traceback, through
    the listener's rate-limited ``note``. Errors that are not of the ``only`` types (a bug in
    a handler) are logged as usual, with their traceback."""

    def __init__(
        self,
        name: str,
        note: Callable[..., None],
        only: tuple[type[BaseException], ...] = (BaseException,),
    ) -> None:
        super().__init__(name)
        self.note = note
        self.only = only

    def _log(  # type: ignore[override]
        self,
        level: int,
        msg: object,
        args: Any,
        exc_info: Any = None,
        extra: Any = None,
        stack_info: bool = False,
        stacklevel: int = 1,
    ) -> None:
        if not exc_info and level < logging.WARNING:
            super()._log(level, msg, args, None, extra, stack_info, stacklevel)
            return
        exc = exc_info[1] if isinstance(exc_info, tuple) else exc_info
        if not isinstance(exc, BaseException):
            exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, self.only):
            super()._log(level, msg, args, exc_info, extra, stack_info, stacklevel)
            return
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = str(msg)
        if exc is not None:
            text += f": {type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        self.note("%s", text)


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
