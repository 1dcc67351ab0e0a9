"""The connection guard under the tricks of issue #34: a real sync server and a real http
listener (with the memory page) on loopback, attack connections from 127.0.0.2 and up.

- Empty lines before a request line (HTTP lets a server skip them) made the guard think the
  head was complete: its deadline stopped and the connection could not be evicted, so a few
  addresses kept everyone out of the sync port and the http listener.
- The http listener had no deadline on bodies: slow ``POST /ui/login`` bodies from two
  addresses kept everyone out.
- Every refused connection on the http listener logged a line; every aborted POST logged a
  traceback.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import aiohttp
import pytest

from chazbot.ledger import KeyPair, Permission
from chazbot.sync.framing import Phase, RequestFraming
from chazbot.sync.guard import ConnectionGuard, GuardSettings, Notes
from chazbot.transports.http import HttpServer
from tests.support.abuse import Holder, get_ok, hold, signed, success_rate, web_listener
from tests.support.sync import Owner, raw_call
from tests.support.waits import wait_until

pytestmark = [pytest.mark.timeout(120)]
READ = Permission.parse("read")
CRLF2 = b"\r\n\r\n"
SMALL = GuardSettings(max_total=40, max_per_address=8, header_timeout=1.5)


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(
        tmp_path / "owner.sqlite3",
        max_connections=40,
        max_connections_per_address=8,
        header_timeout=1.5,
    )
    yield opened
    await opened.close()


@pytest.fixture
async def listener(tmp_path: Path) -> AsyncIterator[HttpServer]:
    """The http listener with the memory page, its guard scaled down (40 in all, 8 an
    address, 1.5 s for a head)."""
    async with web_listener(tmp_path / "state", SMALL) as server:
        yield server


def closed(flood: list[Holder]) -> int:
    return sum(h.closed.is_set() for h in flood)


async def test_empty_lines_before_the_head_do_not_stop_its_deadline_on_the_sync_port(
    owner: Owner,
) -> None:
    honest = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, honest.public, READ)
    guard = owner.server.guard
    sources = [f"127.0.0.{10 + n % 10}" for n in range(60)]  # 10 addresses, 6 each
    flood = hold(owner.server.port, sources, owner.path("heads"), prefix=CRLF2 * 2)
    try:
        await wait_until(lambda: guard.total + closed(flood) >= 60, 5, "the flood to connect")
        assert guard.total <= 40
        for _ in range(3):  # the cap is full of unfinished heads: room is made
            status, answer, _ = await raw_call(
                owner.server.address, owner.path("heads"), b"{}", honest
            )
            assert status == 200, answer
        assert guard.refused + guard.evicted >= 20  # the flood met the cap
        await wait_until(lambda: closed(flood) == 60, 10, "the header deadline")
        assert guard.timed_out >= 20
    finally:
        for h in flood:
            h.stop()


async def test_empty_lines_before_the_head_on_the_http_listener(listener: HttpServer) -> None:
    guard = listener.guard
    sources = [f"127.0.0.{10 + n % 10}" for n in range(60)]
    flood = hold(listener.port, sources, "/ui/login", prefix=CRLF2 * 2)
    url = f"http://127.0.0.1:{listener.port}/metrics"
    try:
        await wait_until(lambda: guard.total + closed(flood) >= 60, 5, "the flood to connect")
        assert await success_rate(lambda: get_ok(url), 10) == 1.0
        assert guard.refused + guard.evicted >= 20  # the flood met the cap
        await wait_until(lambda: closed(flood) == 60, 10, "the header deadline")
    finally:
        for h in flood:
            h.stop()


async def test_slow_bodies_give_way_to_other_addresses(listener: HttpServer) -> None:
    guard = listener.guard
    guard.settings = replace(guard.settings, max_per_address=25)  # two addresses fill the 40
    sources = ["127.0.0.2", "127.0.0.3"] * 25
    flood = hold(listener.port, sources, "/ui/login", body=60_000, gap=0.2)
    url = f"http://127.0.0.1:{listener.port}/metrics"
    try:
        await wait_until(
            lambda: guard.total + closed(flood) >= 50 and guard.total >= 40 - SMALL.reserved,
            5,
            "the flood to connect",
        )
        assert await success_rate(lambda: get_ok(url), 20) >= 0.95
        assert guard.refused + guard.evicted >= 10  # the flood met the cap
    finally:
        for h in flood:
            h.stop()


@pytest.mark.parametrize("where", ["sync", "http"])
async def test_slow_bodies_are_dropped_on_their_deadline(
    where: str, owner: Owner, listener: HttpServer
) -> None:
    guard: ConnectionGuard = owner.server.guard if where == "sync" else listener.guard
    port = owner.server.port if where == "sync" else listener.port
    path = owner.path("heads") if where == "sync" else "/ui/login"
    guard.settings = replace(guard.settings, body_timeout=1.0, min_rate=100.0)
    headers: dict[str, str] = {}
    if where == "sync":  # signed by a reader: the server reads the body (its deadline: 10 s)
        reader = KeyPair.generate()
        await owner.ledger.set_auth(owner.db, owner.admin, reader.public, READ)
        headers = signed(reader, path, b"x" * 900, owner.server.address)
    # 5 bytes a second, 20 times less than the least rate: dropped after about a second
    flood = hold(port, ["127.0.0.2"] * 5, path, body=900, gap=0.2, headers=headers)
    try:
        await wait_until(lambda: closed(flood) == 5, 6, "the body deadline")
        assert guard.body_timed_out == 5
    finally:
        for h in flood:
            h.stop()


async def test_refusals_are_counted_and_logged_once_a_minute(
    listener: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    guard = listener.guard
    held = hold(listener.port, ["127.0.0.2"] * 8, "/ui/login")
    await wait_until(lambda: guard.total == 8, 5, "the address's 8 connections")
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection(
                "127.0.0.1", listener.port, local_addr=("127.0.0.2", 0)
            )
            writer.close()
        except OSError:
            pass
    await wait_until(lambda: guard.refused >= 200, 5, "200 refusals")
    refused = guard.refused
    lines = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) <= 1, [r.getMessage() for r in lines[:5]]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{listener.port}/metrics") as resp,
    ):
        text = await resp.text()
    want = f'chazbot_connections_total{{listener="http",outcome="refused"}} {float(refused)}'
    assert want in text, [line for line in text.splitlines() if "connections" in line]
    for h in held:
        h.stop()


async def test_an_aborted_post_costs_no_traceback(
    listener: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(5):
        _, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(
            b"POST /ui/login HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nt=ab"
        )
        await writer.drain()
        await wait_until(lambda: listener.guard.total >= 1, 5, "the POST to be taken")
        writer.close()
    await wait_until(lambda: listener.guard.aborted >= 5, 5, "the aborts to be counted")
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    assert "Traceback" not in caplog.text
    aborts = [r for r in caplog.records if "went away" in r.getMessage()]
    assert len(aborts) == 1, [r.getMessage() for r in caplog.records if r.levelno >= 20][-5:]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{listener.port}/metrics") as resp,
    ):
        text = await resp.text()
    assert 'chazbot_connections_total{listener="http",outcome="aborted"} 5.0' in text


def test_request_framing_follows_heads_and_bodies() -> None:
    f = RequestFraming(max_head=200)

    def phase() -> Phase:  # read afresh: mypy would keep f.phase narrowed across feed()
        return f.phase

    assert phase() == "head"
    # empty lines before the request line are skipped, but the head is not done
    assert f.feed(b"\r\n\r\n\r\n") is None and phase() == "head"
    f.feed(b"POST /x HTTP/1.1\r\nContent-Len")
    assert phase() == "head"
    f.feed(b"gth: 5\r\n\r\nab")
    assert phase() == "body"
    f.feed(b"cdeGET / HTTP/1.1\n\n")  # the body ends, a pipelined request with bare LFs
    assert phase() == "idle" and f.requests == 2
    f.feed(b"POST /y HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n")
    assert phase() == "body"
    f.feed(b"0\r\nX-Trailer: 1\r\n\r\n")
    assert phase() == "idle" and f.requests == 3
    assert f.feed(b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 40) == "head too large"
    lines = RequestFraming(max_head=1 << 16)
    assert lines.feed(CRLF2 * 20000) == "head too large"  # empty lines count too


def test_notes_say_each_kind_once_a_window_with_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test.notes")
    now = [0.0]
    notes = Notes(logging.getLogger("test.notes"), window=60.0, clock=lambda: now[0])
    for n in range(500):
        now[0] = n * 0.1  # 500 refusals in 50 s, and another kind once
        notes("%s: connections refused (per-address cap)", "http")
    notes("%s: connections closed: body too slow", "http")
    now[0] = 61.0
    notes("%s: connections refused (per-address cap)", "http")
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        "http: connections refused (per-address cap)",
        "http: connections closed: body too slow",
        "http: connections refused (per-address cap) (499 more in the last 61 s)",
    ], said
