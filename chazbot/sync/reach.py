"""Which peer addresses this peer may connect to, checked before connecting (issue #47).

A ticket names any host and port, so importing one must not turn this peer into a probe of
what it can reach and others cannot. Before a single byte is sent:

- **never**: link-local addresses (``169.254.0.0/16``, ``fe80::/10``), the cloud metadata
  services (``169.254.169.254``, ``fd00:ec2::254``, ``100.100.100.200`` and their names,
  such as ``metadata.google.internal``), and addresses no peer has (unspecified, multicast,
  reserved);
- **only when the operator allows it** (``sync_allow_private_peers``): loopback and private
  addresses (``127.0.0.0/8``, ``10/8``, ``192.168/16``, ``fc00::/7``, anything not global).

An IP address in the ticket is judged as written (an IPv4 address inside IPv6, ``::ffff:…``
or ``64:ff9b::…``, as the IPv4 address it carries); a name is judged by every address it
resolves to (``PeerResolver``, the client's resolver), and the connection goes only to the
addresses judged, so a name that resolves elsewhere a moment later changes nothing. A
refusal is a ``Refusal`` (an ``OSError``, so the HTTP library passes it up as a failed
connection); the client turns it into an ``AddressRefused`` (an InputError) of one line
naming the peer, and an import goes on to the ticket's next address.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from chazbot.errors import InputError
from chazbot.sync.tickets import is_loopback, split_address

PRIVATE_KEY = "sync_allow_private_peers"
IP = ipaddress.IPv4Address | ipaddress.IPv6Address
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


NEVER = "never"
PRIVATE = "private"


class AddressRefused(InputError):
    """A peer address this peer does not call (a setting may allow it): nothing was sent.
    An import goes on to the ticket's next address."""


class Refusal(InputError, OSError):
    """A peer address this peer does not connect to: ``kind`` is NEVER or PRIVATE. An
    ``OSError`` too, as aiohttp's resolver must raise for a connection to fail there."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind

    def line(self, address: str) -> str:
        """The one line an import or a sync pair shows for ``address``."""
        if self.kind == NEVER:
            return (
                f"peer not reachable: {address} is a link-local, cloud metadata or other "
                "special address, never synced with"
            )
        return (
            f"peer not reachable: {address} is a loopback or private address, synced with "
            f"only when {PRIVATE_KEY} is true in the config"
        )


def carried(ip: IP) -> IP:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4, compatible), else ``ip``."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (int(ip) >> 32 == 0 and int(ip) > 1):  # 64:ff9b::/96, ::a.b.c.d
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def refusal(ip: IP, allow_private: bool) -> str | None:
    """NEVER, PRIVATE or None (allowed): how this peer treats a connection to ``ip``."""
    target = carried(ip)
    if (
        ip in METADATA
        or target in METADATA
        or ip.is_link_local
        or target.is_link_local
        or target.is_multicast
        or target.is_unspecified
        or (isinstance(target, ipaddress.IPv4Address) and target.is_reserved)  # 240/4
    ):
        return NEVER
    site_local = isinstance(target, ipaddress.IPv6Address) and target.is_site_local
    if not allow_private and (not target.is_global or site_local):
        return PRIVATE
    return None


def _ip(host: str) -> IP | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def check_reachable(address: str, allow_private: bool) -> None:
    """Refusal if ``address``'s host, as written, is refused (see the module doc);
    a DNS name is judged again by what it resolves to (``PeerResolver``)."""
    _, host, _ = split_address(address)
    bare = host.strip("[]").lower()
    if bare in METADATA_NAMES:
        raise Refusal(NEVER)
    if is_loopback(bare) and not allow_private:
        raise Refusal(PRIVATE)
    ip = _ip(bare)
    kind = refusal(ip, allow_private) if ip is not None else None
    if kind is not None:
        raise Refusal(kind)


class PeerResolver(AbstractResolver):
    """Resolves a peer's name with ``inner`` (the system's resolver by default) and keeps
    only the addresses ``refusal`` allows: the connection goes to those alone. None left:
    a Refusal (NEVER if any address was one of those, else PRIVATE)."""

    def __init__(self, allow_private: bool, inner: AbstractResolver | None = None) -> None:
        self.allow_private = allow_private
        self._owned = inner is None
        self.inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host.rstrip(".").lower() in METADATA_NAMES:
            raise Refusal(NEVER)
        found = await self.inner.resolve(host, port, family)
        kept: list[ResolveResult] = []
        kinds: set[str] = set()
        for result in found:
            ip = _ip(str(result["host"]))
            kind = NEVER if ip is None else refusal(ip, self.allow_private)
            if kind is None:
                kept.append(result)
            else:
                kinds.add(kind)
        if not kept:
            raise Refusal(NEVER if NEVER in kinds or not kinds else PRIVATE)
        return kept

    async def close(self) -> None:
        if self._owned:
            await self.inner.close()


def refused_by(exc: BaseException) -> Refusal | None:
    """The Refusal behind a failed connection, if that is why it failed."""
    seen: Any = exc
    for _ in range(4):
        if isinstance(seen, Refusal):
            return seen
        nxt = getattr(seen, "os_error", None) or seen.__cause__
        if nxt is None:
            return None
        seen = nxt
    return None
