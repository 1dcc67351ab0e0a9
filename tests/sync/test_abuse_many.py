"""The connection guard under many addresses (issue #47): one stalled connection from each of
more addresses than the cap, on a real sync server, a real http listener and a TLS sync
listener on loopback (attack connections from 127.0.0.N), and the guard's rules for IPv6
(per /64, bounded per /48) on connections made in memory.

The guard used to give way only when the busiest address held two more connections than the
newcomer: 120 addresses x 1 slow head kept ``/healthz`` at 3 of 30, 560 on the sync port at
2 of 30. Now a newcomer from an address holding nothing closes the connection that has held a
slot longest without finishing its request, and a few slots are kept for such newcomers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from chazbot.ledger import KeyPair, Permission
from chazbot.sync.guard import ConnectionGuard, GuardSettings
from chazbot.sync.guarded import GuardedConnection
from chazbot.transports.http import HttpServer
from tests.support.abuse import (
    Holder,
    bogus_headers,
    get_ok,
    hold,
    signed,
    success_rate,
    web_listener,
)
from tests.support.sync import Owner, raw_call
from tests.support.tls import loopback_tls
from tests.support.waits import wait_until

pytestmark = [pytest.mark.timeout(90)]
READ = Permission.parse("read")
CRLF2 = b"\r\n\r\n"
SMALL = GuardSettings(max_total=40, max_per_address=8, header_timeout=30.0)
"""Scaled down: 40 slots, and a head deadline long past the test (no deadline rescues it)."""


def addresses(n: int, per: int = 1, block: int = 4) -> list[str]:
    """``per`` sources from each of ``n`` loopback addresses (127.0.``block``.x and up)."""
    return [f"127.0.{block + i // 250}.{1 + i % 250}" for i in range(n) for _ in range(per)]


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(
        tmp_path / "owner.sqlite3",
        max_connections=SMALL.max_total,
        max_connections_per_address=SMALL.max_per_address,
        header_timeout=SMALL.header_timeout,
    )
    yield opened
    await opened.close()


@pytest.fixture
async def listener(tmp_path: Path) -> AsyncIterator[HttpServer]:
    async with web_listener(tmp_path / "state", SMALL) as server:
        yield server


async def target(
    where: str, owner: Owner, listener: HttpServer
) -> tuple[ConnectionGuard, int, Callable[[], Awaitable[bool]]]:
    """The guard and port of the sync port or the http listener, and an honest client's
    try there (a signed ``heads`` by a reader; ``GET /metrics``)."""
    if where == "http":
        url = f"http://127.0.0.1:{listener.port}/metrics"
        return listener.guard, listener.port, lambda: get_ok(url)
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)

    async def once() -> bool:
        status, _, _ = await raw_call(owner.server.address, owner.path("heads"), b"{}", key)
        return status == 200

    return owner.server.guard, owner.server.port, once


async def keep_one(port: int) -> asyncio.StreamWriter:
    """A connection from 127.0.0.1 (the honest clients' address) that finished a request and
    stays open (keep-alive), as an honest peer's long poll would: its address holds one."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 ")
    return writer


async def under_flood(
    guard: ConnectionGuard,
    start: Callable[[], list[Holder]],
    call: Any,
    port: int | None = None,
) -> float:
    """The honest success rate while the flood ``start`` starts (reconnecting) holds every
    slot (and, given ``port``, the honest address holds a finished connection there). The
    tries begin once the flood has made room for itself as far as it can: each address that
    found no slot has closed another's, once (its own then cools down)."""
    kept = await keep_one(port) if port is not None else None
    flood = start()
    outside = len({h.source for h in flood}) - guard.settings.max_total
    try:
        await wait_until(lambda: guard.total >= guard.settings.max_total, 10, "the cap to fill")
        await wait_until(lambda: guard.evicted >= outside, 10, "the flood to make room")
        assert kept is None or not kept.is_closing()
        rate = await success_rate(call, 20)
        assert guard.evicted >= 1
        await wait_until(
            lambda: guard.total <= guard.settings.max_total, 5, "the count to settle under the cap"
        )
        return rate
    finally:
        for h in flood:
            h.stop()
        if kept is not None:
            kept.close()


@pytest.mark.parametrize("where", ["sync", "http"])
async def test_one_slow_head_from_each_of_many_addresses(
    where: str, owner: Owner, listener: HttpServer
) -> None:
    """1.5 x the cap in addresses, one CRLF-prefixed slow head each, reconnecting."""
    guard, port, call = await target(where, owner, listener)
    path = owner.path("heads") if where == "sync" else "/ui/login"
    flood = partial(hold, port, addresses(60), path, prefix=CRLF2 * 2, again=True)
    assert await under_flood(guard, flood, call, port) >= 0.95
    assert guard.timed_out == 0  # room was made by eviction, not by the deadline


@pytest.mark.parametrize("where", ["sync", "http"])
async def test_one_slow_body_from_each_of_many_addresses(
    where: str, owner: Owner, listener: HttpServer
) -> None:
    guard, port, call = await target(where, owner, listener)
    path, headers, size = "/ui/login", {}, 60_000
    if where == "sync":  # a reader's name, a signature only the body can refute
        reader = KeyPair.generate()
        await owner.ledger.set_auth(owner.db, owner.admin, reader.public, READ)
        path, headers, size = (
            owner.path("heads"),
            bogus_headers(reader.public, owner.server.address),
            900,
        )
    guard.settings = replace(guard.settings, body_timeout=30.0)  # no deadline rescues it
    flood = partial(hold, port, addresses(60), path, body=size, headers=headers, again=True)
    assert await under_flood(guard, flood, call, port) >= 0.95
    assert guard.body_timed_out == 0


async def test_a_few_busy_addresses_still_give_way(listener: HttpServer) -> None:
    """17 addresses x the per-address cap (as the bench's 17 x 32) still give way."""
    guard = listener.guard
    flood = partial(hold, listener.port, addresses(17, per=8), "/ui/login", CRLF2, again=True)
    url = f"http://127.0.0.1:{listener.port}/metrics"
    assert await under_flood(guard, flood, lambda: get_ok(url)) >= 0.95


async def test_stalled_tls_handshakes_from_many_addresses(tmp_path: Path) -> None:
    tls = loopback_tls(tmp_path / "tls")
    owner = await Owner.open(
        tmp_path / "tls.sqlite3",
        max_connections=SMALL.max_total,
        max_connections_per_address=SMALL.max_per_address,
        header_timeout=SMALL.header_timeout,
        ssl_context=tls.server,
    )
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    url = f"https://127.0.0.1:{owner.server.port}{owner.path('heads')}"

    async def call() -> bool:
        headers = signed(key, owner.path("heads"), b"{}", owner.server.address)
        connector = aiohttp.TCPConnector(ssl=tls.client)
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.post(url, data=b"{}", headers=headers) as resp,
        ):
            await resp.read()
            return resp.status == 200

    flood = partial(hold, owner.server.port, addresses(60), "", tls=True, again=True)
    try:
        assert await under_flood(owner.server.guard, flood, call) >= 0.95
    finally:
        await owner.close()


# ---- the rules themselves, on connections made in memory -------------------------------------


class FakeTransport(asyncio.Transport):
    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host
        self.aborted = False
        self.protocol: GuardedConnection | None = None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.host, 40000) if name == "peername" else default

    def is_reading(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def abort(self) -> None:
        if not self.aborted:
            self.aborted = True
            if self.protocol is not None:  # as asyncio does, a moment later
                asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self.aborted


def connect(guard: ConnectionGuard, host: str) -> FakeTransport:
    transport = FakeTransport(host)
    conn = GuardedConnection(guard, asyncio.Protocol)
    transport.protocol = conn
    conn.connection_made(transport)
    return transport


async def settled() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def v6(n: int, site: int = 0xDB8) -> str:
    """The ``n``th /64 of the /48 2001:``site``::/48."""
    return f"2001:{site:x}:0:{n:x}::1"


async def test_ipv6_counts_per_64_and_is_bounded_per_48() -> None:
    cfg = GuardSettings(max_total=40, max_per_address=4, max_per_network=10)
    guard = ConnectionGuard("test", cfg)
    same_64 = [connect(guard, f"2001:db8:0:1::{n + 1:x}") for n in range(6)]
    assert [t.aborted for t in same_64] == [False] * 4 + [True] * 2  # one /64: one address
    many_64 = [connect(guard, v6(100 + n)) for n in range(20)]  # 65,536 of them in a /48
    assert sum(not t.aborted for t in many_64) == 6  # the /48 holds 10 in all
    other_site = [connect(guard, v6(n, site=0xDB9)) for n in range(3)]
    assert not any(t.aborted for t in other_site)
    assert not connect(guard, "192.0.2.7").aborted
    await settled()
    assert guard.total == 14 and guard.refused == 16


async def test_a_newcomer_closes_the_longest_stalled_whatever_its_address() -> None:
    cfg = GuardSettings(max_total=10, max_per_address=4, reserve=2, read_grace=0.0)
    guard = ConnectionGuard("test", cfg)
    finished = connect(guard, "192.0.2.1")  # the oldest, but its request is done
    assert finished.protocol is not None
    finished.protocol.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    stalled = [connect(guard, f"2001:db8:{n + 1:x}::1") for n in range(9)]  # 9 sites
    assert guard.total == 10
    newcomer = connect(guard, "198.51.100.1")
    assert not newcomer.aborted and stalled[0].aborted and not finished.aborted
    await settled()
    assert guard.total == 10 and guard.evicted == 1
    # an address holding a stalled one: only below the reserve, or for a busier address
    again = connect(guard, "198.51.100.1")
    assert again.aborted and guard.refused == 1
    # one holding only a finished request (an honest peer's long poll) closes the oldest stalled
    assert not connect(guard, "192.0.2.1").aborted and stalled[1].aborted
    await settled()
    # a body that keeps up with the least rate is not stalled; one behind it is
    body = b"POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\n"
    for t in stalled[2:4]:
        assert t.protocol is not None
        t.protocol.data_received(body)
    await asyncio.sleep(0.01)
    guard.settings = replace(cfg, min_rate=1e9)  # everyone's body is behind
    assert not connect(guard, "198.51.100.2").aborted
    assert stalled[2].aborted  # the oldest unfinished request
    guard.settings = replace(cfg, min_rate=1.0)
    await asyncio.sleep(0.01)
    assert stalled[3].protocol is not None
    stalled[3].protocol.data_received(b"x" * 1000)  # well ahead of 1 byte a second
    assert not connect(guard, "198.51.100.3").aborted
    assert not stalled[3].aborted and stalled[4].aborted  # a head, younger than the body
    await settled()
    assert guard.total == 10


async def test_a_new_request_goes_to_the_back_of_the_line() -> None:
    cfg = GuardSettings(max_total=3, max_per_address=4, reserve=1, read_grace=0.0)
    guard = ConnectionGuard("test", cfg)
    first, second, third = (connect(guard, f"192.0.2.{n}") for n in (1, 2, 3))
    assert first.protocol is not None
    first.protocol.data_received(b"GET / HTTP/1.1\r\n\r\nGET /next HTTP/1.1\r\nX: y")  # pipelined
    assert not connect(guard, "192.0.2.9").aborted
    assert second.aborted and not first.aborted  # the second request began after the others
    assert not connect(guard, "192.0.2.10").aborted
    assert third.aborted and not first.aborted
    await settled()
    assert not connect(guard, "192.0.2.11").aborted and first.aborted


async def test_a_closed_address_cools_down_and_a_new_connection_is_read_first() -> None:
    """A victim's address cannot close another's at once (else the flood closes itself round
    and round, and an honest connection could be taken before its head was read); a new
    connection is not closed before its first bytes were read, or ``read_grace``."""
    cfg = GuardSettings(max_total=4, max_per_address=4, reserve=1, cooldown=0.3, read_grace=0.3)
    guard = ConnectionGuard("test", cfg)
    flood = [connect(guard, f"192.0.2.{n}") for n in range(1, 5)]
    assert connect(guard, "198.51.100.1").aborted  # nothing read yet, nothing 0.3 s old
    for t in flood:
        assert t.protocol is not None
        t.protocol.data_received(b"\r\n")  # read: a head begun
    assert not connect(guard, "198.51.100.1").aborted and flood[0].aborted
    await settled()
    assert connect(guard, "192.0.2.1").aborted  # the victim's address, cooling down
    assert not connect(guard, "198.51.100.2").aborted and flood[1].aborted  # another is not
    await asyncio.sleep(0.35)  # cooled down; the newcomers' grace is over too
    await settled()
    assert not connect(guard, "192.0.2.1").aborted and flood[2].aborted
    await settled()
    assert guard.total == 4


def test_settings_derive_a_reserve_and_a_site_bound() -> None:
    small = GuardSettings(max_total=40, max_per_address=8)
    assert small.reserved == 2 and small.network_cap == 10
    big = GuardSettings(max_total=499, max_per_address=32)
    assert big.reserved == 8 and big.network_cap == 124
    assert GuardSettings(max_total=8, max_per_address=8).network_cap == 8
