"""Sync over TLS (issue 34): two real peers share, import and write both ways over https on
loopback, with a certificate made in the test: the sync listener serving TLS itself
(``sync_tls_cert``), and a peer behind a TLS-ending reverse proxy (``sync_public_url:
https://…``). The client checks certificates (a peer that does not trust the CA is refused,
saying ``sync_ca_file``), and plain http to another machine is refused unless the operator
opts in (``sync_allow_plain_http``)."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import ConfigError, InputError
from chazbot.ledger import KeyPair, Ledger
from chazbot.peer import Peer
from chazbot.sync import SyncClient, SyncServer
from tests.support.tls import LoopbackTLS, loopback_tls
from tests.support.waits import wait_until

DB = "sha256:" + "ab" * 32


def cfg(path: Path, agent: str, **more: Any) -> Config:
    return Config(
        state_dir=path,
        sync_listen="127.0.0.1:0",
        sync_allow_private_peers=True,  # the peers are on loopback
        agents=[AgentConfig(name=agent)],
        **more,
    )


async def keys(peer: Peer, agent: str, bank: str) -> list[str]:
    return sorted(h.key for h in await peer.agent(agent).recall("", bank=bank, limit=50))


async def share_import_and_write_both_ways(a: Peer, b: Peer, scheme: str) -> str:
    """A shares ``notes``; B imports it (approved on A); both write; both see both rows."""
    await a.command("/memory new notes")
    await a.command("/memory grant notes alpha write")
    await a.agent("alpha").remember("first", "written on A", bank="notes")
    shared = await a.command("/memory share notes")
    assert shared.ok, shared.text
    found = re.search(r"eidetica:\S+", shared.text)
    assert found is not None, shared.text
    ticket = found.group(0)
    assert f"pr={scheme}:127.0.0.1:" in ticket, ticket
    asked = await b.command(f"/memory import {ticket}")
    assert asked.ok and "request" in asked.text, asked.text
    request_id = re.search(r"request (\d+)", (await a.command("/sharing requests")).text)
    assert request_id is not None
    assert (await a.command(f"/sharing approve {request_id.group(1)}")).ok
    done = await b.command(f"/memory import {ticket}")
    assert done.ok and "Imported bank notes" in done.text, done.text
    assert (await b.command("/memory grant notes gamma write")).ok
    await b.agent("gamma").remember("second", "written on B", bank="notes")
    await a.agent("alpha").remember("third", "written on A later", bank="notes")
    expected = ["first", "second", "third"]

    async def both() -> bool:
        return (
            await keys(a, "alpha", "notes") == expected
            and await keys(b, "gamma", "notes") == expected
        )

    await wait_until(both)
    return ticket


async def test_a_sync_round_trip_between_two_peers_over_tls(tmp_path: Path) -> None:
    tls = loopback_tls(tmp_path / "tls")
    a_cfg = cfg(
        tmp_path / "a",
        "alpha",
        sync_tls_cert=tls.cert_file,
        sync_tls_key=tls.cert_file.with_suffix(".key"),
    )
    b_cfg = cfg(tmp_path / "b", "gamma", sync_ca_file=tls.cert_file)
    async with chazbot.open(tmp_path / "a", a_cfg) as a, chazbot.open(tmp_path / "b", b_cfg) as b:
        await a.sync.start()
        await b.sync.start()
        assert a.sync.server is not None and a.sync.server.address.startswith("https:")
        ticket = await share_import_and_write_both_ways(a, b, "https")
        # the listener speaks TLS only: a plain request gets no answer
        async with aiohttp.ClientSession() as client:
            with pytest.raises(aiohttp.ClientError):
                async with client.get(f"http://127.0.0.1:{a.sync.server.port}/") as answer:
                    await answer.read()
        # a third peer that does not trust the certificate is refused, told what to set
        c_cfg = cfg(tmp_path / "c", "delta")
        async with chazbot.open(tmp_path / "c", c_cfg) as c:
            reply = await c.command(f"/memory import {ticket}")
            assert not reply.ok and "sync_ca_file" in reply.text, reply.text
            assert "certificate" in reply.text and "\n" not in reply.text.strip()
            assert await c.registry.get("bank", "notes") is None


class _TlsProxy:
    """A reverse proxy that ends TLS and forwards to a peer's plain sync port, as Caddy or
    nginx does in front of one (docs/operations.md)."""

    def __init__(self, tls: LoopbackTLS) -> None:
        self.tls = tls
        self.upstream = 0
        self.forwarded = 0
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host",)}
        url = f"http://127.0.0.1:{self.upstream}{request.raw_path}"
        async with (
            aiohttp.ClientSession() as session,
            session.request(request.method, url, data=body, headers=headers) as answer,
        ):
            self.forwarded += 1
            return web.Response(
                status=answer.status,
                body=await answer.read(),
                content_type=answer.content_type,
                headers={k: v for k, v in answer.headers.items() if k.startswith("Eidetica")},
            )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[_TlsProxy]:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=self.tls.server)
        await site.start()
        self.port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
        try:
            yield self
        finally:
            await runner.cleanup()


async def test_a_peer_behind_a_tls_reverse_proxy_is_reachable(tmp_path: Path) -> None:
    tls = loopback_tls(tmp_path / "tls")
    async with _TlsProxy(tls).running() as proxy:
        a_cfg = cfg(tmp_path / "a", "alpha", sync_public_url=f"https://127.0.0.1:{proxy.port}")
        b_cfg = cfg(tmp_path / "b", "gamma", sync_ca_file=tls.cert_file)
        async with (
            chazbot.open(tmp_path / "a", a_cfg) as a,
            chazbot.open(tmp_path / "b", b_cfg) as b,
        ):
            await a.sync.start()
            await b.sync.start()
            assert a.sync.server is not None
            proxy.upstream = a.sync.server.port
            ticket = await share_import_and_write_both_ways(a, b, "https")
            assert f"pr=https:127.0.0.1:{proxy.port}" in ticket
            assert proxy.forwarded > 0  # B reached A through the proxy only
            tracked = await b.sync.replicator.tracked() if b.sync.replicator else []
            assert [r.address for r in tracked] == [f"https:127.0.0.1:{proxy.port}"]


async def test_plain_http_to_another_machine_is_refused_unless_allowed(tmp_path: Path) -> None:
    client = SyncClient(KeyPair.generate(), timeout=1.0, allow_private_peers=True)
    with pytest.raises(InputError, match="sync_allow_plain_http: true") as err:
        await client.heads("http:10.0.0.2:8765", DB)
    assert "\n" not in str(err.value)
    SyncClient(KeyPair.generate(), allow_plain_http=True, allow_private_peers=True).check_address(
        "http:10.0.0.2:8765"
    )
    client.check_address("http:127.0.0.1:8765")  # this machine: plain is fine
    client.check_address("https:10.0.0.2:8765")
    await client.close()
    async with chazbot.open(tmp_path / "b", cfg(tmp_path / "b", "gamma")) as b:
        await b.sync.start()
        reply = await b.command(f"/memory import eidetica:?db={DB}&pr=http:peer.example.org:8765")
        assert not reply.ok and "sync_allow_plain_http" in reply.text, reply.text
        assert b.sync.replicator is not None and await b.sync.replicator.tracked() == []


async def test_tls_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sync_tls_cert and sync_tls_key"):
        from chazbot.config import parse_config

        parse_config({"state_dir": str(tmp_path), "sync_tls_cert": "x.pem"})
    bad = cfg(
        tmp_path / "a", "alpha", sync_tls_cert=tmp_path / "no.pem", sync_tls_key=tmp_path / "k"
    )
    async with chazbot.open(tmp_path / "a", bad) as a:
        with pytest.raises(ConfigError, match="sync_tls_cert"):
            await a.sync.start()
    bad_ca = cfg(tmp_path / "b", "gamma", sync_ca_file=tmp_path / "none.pem")
    async with chazbot.open(tmp_path / "b", bad_ca) as b:
        with pytest.raises(ConfigError, match="sync_ca_file"):
            await b.sync.start()


async def test_a_stalled_tls_handshake_is_closed_within_the_header_deadline(
    tmp_path: Path,
) -> None:
    import asyncio
    import time

    from chazbot.ledger import Ledger
    from chazbot.sync import SyncServer

    tls = loopback_tls(tmp_path / "tls")
    ledger = await Ledger.open(tmp_path / "state.sqlite3")
    server = SyncServer(
        ledger, host="127.0.0.1", port=0, header_timeout=0.5, ssl_context=tls.server
    )
    await server.start()
    try:
        assert server.address.startswith("https:127.0.0.1:")
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        started = time.monotonic()
        writer.write(b"\x16\x03\x01")  # the start of a ClientHello, and then nothing
        async with asyncio.timeout(10):
            assert await reader.read() == b""  # closed by the server
        assert time.monotonic() - started < 5
        writer.close()
    finally:
        await server.stop()
        await ledger.close()


# ---- the connection guard in front of TLS (issue #34 follow-up) -------------------------------
#
# asyncio's ``create_server(ssl=…)`` calls a protocol's ``connection_made`` only once the TLS
# handshake is done, so a guard counting there did not see connections still in their handshake:
# a stranger could hold any number of them, each bounded only by the handshake deadline.

HALF_HELLO = (
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"  # a record header, a ClientHello's start
)


class Raw:
    """A plain TCP connection from ``source`` that sends ``first`` and then nothing;
    ``closed`` is set once the server drops it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.closed = asyncio.Event()
        self.task = asyncio.ensure_future(self._watch())

    @classmethod
    async def open(cls, port: int, source: str, first: bytes = b"") -> Raw:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        if first:
            writer.write(first)
        return cls(reader, writer)

    async def _watch(self) -> None:
        try:
            while await self.reader.read(4096):
                pass
        except OSError:
            pass
        self.closed.set()

    def reset(self) -> None:
        """Close with a TCP reset (SO_LINGER 0), as a client that vanishes does."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    def close(self) -> None:
        self.task.cancel()
        self.writer.transport.abort()


@asynccontextmanager
async def sync_server(
    tmp_path: Path, tls: LoopbackTLS | None, **options: Any
) -> AsyncIterator[SyncServer]:
    ledger = await Ledger.open(tmp_path / "state.sqlite3")
    server = SyncServer(
        ledger,
        host="127.0.0.1",
        port=0,
        ssl_context=tls.server if tls is not None else None,
        **options,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
        await ledger.close()


async def answered(port: int, context: ssl.SSLContext | None, source: str = "127.0.0.1") -> bytes:
    """What the listener answers a complete request on a fresh connection (over TLS when
    ``context`` is given)."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, local_addr=(source, 0)
    )
    try:
        writer.write(b"GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        async with asyncio.timeout(10):
            return await reader.read()
    finally:
        writer.close()


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_connections_in_their_handshake_count_against_the_per_address_cap(
    tmp_path: Path, scheme: str
) -> None:
    """Ten connections from one address against a cap of four: six are refused at once,
    whether the listener speaks plain HTTP (they send nothing) or TLS (they send half a
    ClientHello); another address is still served."""
    tls = loopback_tls(tmp_path / "tls") if scheme == "https" else None
    async with sync_server(
        tmp_path, tls, max_connections_per_address=4, header_timeout=30.0
    ) as server:
        guard = server.guard
        flood = [
            await Raw.open(server.port, "127.0.0.3", HALF_HELLO if tls else b"") for _ in range(10)
        ]
        try:
            await wait_until(lambda: sum(c.closed.is_set() for c in flood) >= 6, 5, "six refusals")
            await wait_until(lambda: guard.total == 4, 5, "four connections counted")
            assert guard.refused == 6 and guard.counts()["open"] == 4
            assert sum(not c.closed.is_set() for c in flood) == 4  # held, not yet timed out
            context = tls.client if tls else None
            assert (await answered(server.port, context)).startswith(b"HTTP/1.1 ")
        finally:
            for c in flood:
                c.close()
        await wait_until(lambda: guard.total == 0, 5, "every count released")


async def test_a_connection_in_tls_is_counted_from_accept_and_released_once_however_it_ends(
    tmp_path: Path,
) -> None:
    """Each way a TLS connection can end gives its count back exactly once: a handshake that
    succeeds (and a request answered), one the server fails (plain HTTP on the TLS port), one
    the client fails (it does not trust the certificate), one that times out, a reset in the
    handshake, and a reset after it."""
    tls = loopback_tls(tmp_path / "tls")
    async with sync_server(
        tmp_path, tls, max_connections_per_address=4, header_timeout=1.0
    ) as server:
        guard = server.guard
        released: list[object] = []
        release = guard.release

        def counted(conn: Any) -> None:
            if conn in guard._open.get(conn.group, []):
                released.append(conn)
            release(conn)

        guard.release = counted  # type: ignore[method-assign]

        async def ends_counted(what: str, admitted: int) -> None:
            await wait_until(lambda: guard.total == 0 and not guard._open, 5, f"{what}: released")
            assert len(released) == admitted and len(set(map(id, released))) == admitted, what
            released.clear()

        # a handshake that succeeds: counted while open, released once closed
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=tls.client)
        assert guard.total == 1
        writer.write(b"GET /v1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 ")
        assert guard.total == 1  # kept alive
        writer.close()
        await ends_counted("handshake ok", 1)
        assert (await answered(server.port, tls.client)).startswith(b"HTTP/1.1 ")
        await ends_counted("handshake ok, closed by the server", 1)

        # the server fails the handshake: plain http on the TLS port
        plain = await Raw.open(server.port, "127.0.0.3", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await asyncio.wait_for(plain.closed.wait(), 5)
        plain.close()
        await ends_counted("handshake failed by the server", 1)

        # the client fails it: it does not trust the certificate
        with pytest.raises(ssl.SSLCertVerificationError):
            await asyncio.open_connection(
                "127.0.0.1", server.port, ssl=ssl.create_default_context()
            )
        await ends_counted("handshake failed by the client", 1)

        # half a ClientHello and then nothing: closed on the deadline
        timed_out = guard.timed_out
        stalled = await Raw.open(server.port, "127.0.0.3", HALF_HELLO)
        await wait_until(lambda: guard.total == 1, 5, "the stalled handshake counted")
        await asyncio.wait_for(stalled.closed.wait(), 5)
        assert guard.timed_out == timed_out + 1
        stalled.close()
        await ends_counted("handshake timed out", 1)

        # a client that resets in the middle of its handshake
        vanished = await Raw.open(server.port, "127.0.0.3", HALF_HELLO)
        await wait_until(lambda: guard.total == 1, 5, "the handshake counted")
        vanished.reset()
        await ends_counted("reset in the handshake", 1)

        # a client that resets after its handshake
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=tls.client)
        assert guard.total == 1
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        await ends_counted("reset after the handshake", 1)
        assert guard.counts()["open"] == 0 and guard.refused == 0


async def test_handshakes_from_a_busy_address_give_way_to_another_address(tmp_path: Path) -> None:
    """With the listener full of stalled handshakes (six in all, four from one address), an
    honest client from another address gets in: the busiest address's oldest is closed."""
    tls = loopback_tls(tmp_path / "tls")
    async with sync_server(
        tmp_path, tls, max_connections=6, max_connections_per_address=4, header_timeout=30.0
    ) as server:
        guard = server.guard
        flood = [await Raw.open(server.port, "127.0.0.3", HALF_HELLO) for _ in range(4)]
        flood += [await Raw.open(server.port, "127.0.0.4", HALF_HELLO) for _ in range(2)]
        try:
            await wait_until(lambda: guard.total == 6, 5, "six handshakes counted")
            assert (await answered(server.port, tls.client)).startswith(b"HTTP/1.1 ")
            assert guard.evicted == 1 and guard.refused == 0
            await wait_until(lambda: flood[0].closed.is_set(), 5, "the oldest of .3 closed")
            assert sum(c.closed.is_set() for c in flood) == 1
        finally:
            for c in flood:
                c.close()
        await wait_until(lambda: guard.total == 0, 5, "every count released")


async def test_stopping_the_listener_closes_the_handshakes_in_progress(tmp_path: Path) -> None:
    tls = loopback_tls(tmp_path / "tls")
    async with sync_server(tmp_path, tls, header_timeout=30.0) as server:
        guard = server.guard
        stalled = [await Raw.open(server.port, "127.0.0.3", HALF_HELLO) for _ in range(3)]
        await wait_until(lambda: guard.total == 3, 5, "three handshakes counted")
    for c in stalled:  # closed by the stop, not by their 30 s deadline
        await asyncio.wait_for(c.closed.wait(), 5)
        c.close()
    await wait_until(lambda: guard.total == 0 and not guard._open, 5, "every count released")
