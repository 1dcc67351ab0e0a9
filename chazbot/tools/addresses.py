"""Which addresses ``web_fetch`` may reach (SPEC §12): never loopback, private, link-local,
shared (CGNAT), metadata, multicast or reserved ones unless the operator allows them.

The check is on the address a name resolves to, not on how the URL spells it: a host is
resolved here (numeric IPv4 in every form ``inet_aton`` reads, decimal ``2130706433``,
octal ``0177.0.0.1``, hex ``0x7f.1``, included), every answer is checked, and the connection
goes to exactly the answers checked (``GuardedResolver``), so a DNS answer that changes
between a check and the connection cannot slip a private address in. IPv6 forms that carry
an IPv4 address (mapped ``::ffff:a.b.c.d``, 6to4, Teredo, NAT64) are judged by it too.

Pure apart from ``GuardedResolver.resolve``; no module globals are changed by anyone.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from aiohttp.abc import AbstractResolver, ResolveResult

from chazbot.errors import PermissionDenied

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
METADATA = (
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack…
    ipaddress.ip_address("100.100.100.200"),  # Alibaba
    ipaddress.ip_address("192.0.0.192"),  # Oracle
    ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def embedded_v4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, Teredo, NAT64), if any."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def why_private(ip: IPAddress) -> str | None:
    """Why ``ip`` is no public address (a few words), or None when it is one."""
    inner = embedded_v4(ip)
    if inner is not None:
        found = why_private(inner)
        return f"{found} (inside {ip})" if found else None
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved or shared address"
    return None


def numeric_host(host: str) -> IPAddress | None:
    """``host`` as an address when it is one in any spelling resolvers accept: IPv6
    (bracketed or not, with a zone), dotted IPv4, and the decimal, octal and hex forms
    ``inet_aton`` reads. None: a name."""
    bare = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(bare))
    except OSError:
        return None


@dataclass(frozen=True)
class AddressPolicy:
    """What ``web_fetch`` may reach: public addresses, plus every address when
    ``allow_private``, plus the operator's ``allowed`` networks."""

    allow_private: bool = False
    allowed: tuple[Network, ...] = ()

    def check(self, ip: IPAddress, host: str) -> None:
        """PermissionDenied unless ``ip`` (what ``host`` resolved to) may be reached."""
        if self.allow_private or any(ip in net for net in self.allowed):
            return
        inner = embedded_v4(ip)
        if inner is not None and any(inner in net for net in self.allowed):
            return
        why = why_private(ip)
        if why is not None:
            shown = host if str(ip) == host.strip("[]") else f"{host} ({ip})"
            raise PermissionDenied(f"{shown[:120]} is {why}; web_fetch does not go there")


Lookup = Callable[[str, int], Awaitable[Sequence[str]]]
"""A name's addresses (the system resolver; tests give a stand-in whose answers change)."""


async def system_lookup(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass
class GuardedResolver(AbstractResolver):
    """aiohttp's resolver for ``web_fetch``: every answer checked, and only checked answers
    returned (aiohttp connects to what it returns). One refused answer refuses the name."""

    policy: AddressPolicy
    lookup: Lookup = system_lookup
    refused: list[str] = field(default_factory=list)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        ip = numeric_host(host)
        answers = [str(ip)] if ip is not None else list(await self.lookup(host, port))
        if not answers:
            raise OSError(f"{host[:120]} has no address")
        results: list[ResolveResult] = []
        for answer in answers:
            addr = ipaddress.ip_address(answer.split("%", 1)[0])
            try:
                self.policy.check(addr, host)
            except PermissionDenied as exc:
                self.refused.append(str(exc))
                raise OSError(str(exc)) from exc
            v6 = isinstance(addr, ipaddress.IPv6Address)
            results.append(
                {
                    "hostname": host,
                    "host": str(addr),
                    "port": port,
                    "family": socket.AF_INET6 if v6 else socket.AF_INET,
                    "proto": 0,
                    "flags": socket.AI_NUMERICHOST,
                }
            )
        return results

    async def close(self) -> None:
        return None


def networks(specs: Sequence[str]) -> tuple[Network, ...]:
    """CIDRs (``10.0.0.0/24``, ``fd00::/8``, one address) as networks; ValueError names one
    that is not."""
    return tuple(ipaddress.ip_network(s, strict=False) for s in specs)


__all__ = [
    "AddressPolicy",
    "GuardedResolver",
    "embedded_v4",
    "networks",
    "numeric_host",
    "system_lookup",
    "why_private",
]
