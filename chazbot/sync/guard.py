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

The decision is here (``ConnectionGuard`` over the connections it counts, ``Held``); one
connection's side of it (its deadlines, the TLS upgrade, the site that makes one per accept)
is ``guarded``; what the listeners log of strangers' bytes, bounded, is ``quiet_logs``.

Refusals, evictions, deadlines and client aborts are counted (``counts``, exported at
``/metrics``) and logged through the owner's ``note`` (``Notes``: one line a minute for each
kind, with how many more there were).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aiohttp.http_exceptions import HttpProcessingError

from chazbot.sync.framing import HEAD_MAX_BYTES, Phase

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


class Held(Protocol):
    """What the guard reads of a connection it counts (``guarded.GuardedConnection``)."""

    group: str
    network: str | None

    @property
    def phase(self) -> Phase: ...

    @property
    def closing(self) -> bool: ...

    @property
    def handshaking(self) -> bool: ...

    @property
    def admitted(self) -> bool: ...

    def stalled(self, now: float) -> bool: ...

    def close(self) -> None: ...


class ConnectionGuard:
    """Counts open connections per address group, per IPv6 /48 and in all; see the module
    doc. ``settings`` may be replaced while the listener runs (new admissions follow it)."""

    def __init__(
        self, name: str, settings: GuardSettings, note: Callable[..., None] | None = None
    ) -> None:
        self.name = name
        self.settings = settings
        self.note = note or Notes(log)
        self._open: dict[str, list[Held]] = {}
        self._networks: dict[str, int] = {}
        # connections in a request (its head, a TLS handshake, its body), oldest request first
        self._unfinished: dict[Held, None] = {}
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

    def admit(self, conn: Held) -> bool:
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

    def _make_room(self, group: str, held: list[Held]) -> bool:
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

    def _stalled(self, now: float) -> Held | None:
        """The connection that has held a slot longest in a request it does not finish."""
        return next((c for c in self._unfinished if not c.closing and c.stalled(now)), None)

    def _busier(self, mine: int, now: float, idle_too: bool) -> Held | None:
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

    def progressed(self, conn: Held, restarted: bool) -> None:
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

    def release(self, conn: Held) -> None:
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
