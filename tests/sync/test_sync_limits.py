"""What a few keys that hold read can make a sync server hold (issue #22, item 2).

A real server on loopback, real signed requests. The replay cache used to refuse everyone
(503 for five minutes) once a few keys had filled it: its global cap was five per-key quotas.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from chazbot.ledger import KeyPair, Permission
from tests.support.sync import Owner, raw_call, wait_until

READ = Permission.parse("read")


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(tmp_path / "owner.sqlite3", replay_capacity=100, replay_per_key=20)
    yield opened
    await opened.close()


async def test_a_few_keys_cannot_fill_the_replay_cache(owner: Owner) -> None:
    flooders = [KeyPair.generate() for _ in range(5)]
    honest = KeyPair.generate()
    for key in [*flooders, honest]:
        await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    path = owner.path("heads")
    first: dict[str, dict[str, str]] = {}
    for key in flooders:  # each sends more than its quota: 30 live nonces each
        for n in range(30):
            status, answer, headers = await raw_call(owner.server.address, path, b"{}", key)
            assert status == 200, (n, status, answer)
            first.setdefault(key.public, headers)
    assert len(owner.server.replay) <= 100
    # an honest key is served at once, again and again
    for _ in range(10):
        status, answer, _ = await raw_call(owner.server.address, path, b"{}", honest)
        assert status == 200, answer
    # and no nonce dropped to make room can be replayed: the key's floor refuses it
    for key in flooders:
        status, answer, _ = await raw_call(
            owner.server.address, path, b"{}", None, headers=first[key.public]
        )
        assert status == 401 and "replay" in answer["error"], answer


class Trickler:
    """A connection from ``source`` that sends a request head one line at a time, never
    finishing it (a slowloris); ``closed`` once the server has dropped it."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def run(self, port: int, source: str) -> None:
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, local_addr=(source, 0)
            )
        except OSError:
            self.closed.set()
            return
        try:
            writer.write(b"POST /v1/dbs/x/heads HTTP/1.1\r\nHost: x\r\n")
            for n in range(200):
                await writer.drain()
                try:
                    if await asyncio.wait_for(reader.read(1), 0.2) == b"":
                        return
                except TimeoutError:
                    pass
                writer.write(f"X-Slow-{n}: 1\r\n".encode())
        except (ConnectionError, OSError):
            return
        finally:
            self.closed.set()
            writer.close()


async def trickle(port: int, sources: list[str]) -> list[Trickler]:
    out = []
    for source in sources:
        t = Trickler()
        t.task = asyncio.ensure_future(t.run(port, source))
        out.append(t)
    return out


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(
        tmp_path / "guarded.sqlite3",
        max_connections=40,
        max_connections_per_address=8,
        header_timeout=1.5,
    )
    yield opened
    await opened.close()


async def test_slow_headers_are_capped_per_address_and_dropped_on_time(guarded: Owner) -> None:
    """Issue #22 (1): connections trickling header lines were held open for minutes, with
    no cap per address; enough of them used every descriptor of the process."""
    honest = KeyPair.generate()
    await guarded.ledger.set_auth(guarded.db, guarded.admin, honest.public, READ)
    port = guarded.server.port
    flood = await trickle(port, ["127.0.0.2"] * 30)

    def dropped() -> int:
        return sum(t.closed.is_set() for t in flood)

    await wait_until(lambda: dropped() >= 22, timeout=5, what="the per-address cap")
    assert guarded.server.guard.total <= 8
    status, answer, _ = await raw_call(guarded.server.address, guarded.path("heads"), b"{}", honest)
    assert status == 200, answer
    await wait_until(lambda: dropped() == 30, timeout=10, what="the header deadline")
    assert guarded.server.guard.timed_out >= 8


async def test_a_flood_from_many_addresses_cannot_lock_out_another(guarded: Owner) -> None:
    honest = KeyPair.generate()
    await guarded.ledger.set_auth(guarded.db, guarded.admin, honest.public, READ)
    sources = [f"127.0.0.{10 + n % 10}" for n in range(60)]  # 10 addresses, 6 each
    flood = await trickle(guarded.server.port, sources)
    await wait_until(
        lambda: guarded.server.guard.total + sum(t.closed.is_set() for t in flood) >= 60,
        timeout=5,
        what="the flood to connect",
    )
    assert guarded.server.guard.total <= 40
    for _ in range(3):  # the total is full of slow connections: room is kept for this one
        status, answer, _ = await raw_call(
            guarded.server.address, guarded.path("heads"), b"{}", honest
        )
        assert status == 200, answer
    assert guarded.server.guard.refused + guarded.server.guard.evicted >= 20
    for t in flood:
        if t.task is not None:
            t.task.cancel()
