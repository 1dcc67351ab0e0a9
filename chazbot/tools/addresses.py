"""Which addresses ``web_fetch`` may reach (SPEC §12): never loopback, private, link-local,
shared (CGNAT), metadata, multicast or reserved ones unless the operator allows them.

The check is on the address a name resolves to, not on how the URL spells it: a host is
resolved here (numeric IPv4 in every form ``inet_aton`` reads, decimal ``2130706433``,
octal ``0177.0.0.1``, hex ``0x7f.1``, included), every answer is checked, and the connection
goes to exactly the answers checked (``GuardedResolver``), so a DNS answer that changes
between a check and the connection cannot slip a private address in. IPv6 forms that carry
an IPv4 address (mapped ``::ffff:a.b.c.d``, 6to4, NAT64) are judged by it too: the rule is
the sync client's (``sync.reach``), which keeps this peer from calling such addresses as
peers.

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
from chazbot.sync.reach import METADATA_NAMES, NEVER, PRIVATE, carried, refusal

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
WHY = {
    NEVER: "a link-local, cloud metadata or other special address",
    PRIVATE: "a loopback or private address",
}


def why_private(ip: IPAddress) -> str | None:
    """Why ``ip`` is no public address (a few words), or None when it is one: the sync
    client's rule (``sync.reach.refusal``, IPv4 inside IPv6 judged as itself), one place for
    whom this peer never calls."""
    kind = refusal(ip, allow_private=False)
    return None if kind is None else WHY[kind]


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
        if self.allow_private or any(ip in n or carried(ip) in n for n in self.allowed):
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
        if host.rstrip(".").lower() in METADATA_NAMES:
            self.refused.append(f"{host[:120]} is {WHY[NEVER]}; web_fetch does not go there")
            raise OSError(self.refused[-1])
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
    "networks",
    "numeric_host",
    "system_lookup",
    "why_private",
]
