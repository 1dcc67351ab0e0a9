"""Issue 47, second finding: a ticket cannot turn an import into a probe.

- A failed import says one thing whatever answered: a closed port, a service that is not
  HTTP (an SSH banner), an HTTP service that is not a chazbot peer (an error page, a JSON
  answer shaped like ours, a redirect) all read ``peer not reachable, or not a chazbot
  peer …``, nothing of what they said.
- Link-local and cloud metadata addresses are refused before connecting, written as IPs or
  as names that resolve there; loopback and private ones too unless the operator allows
  them (``sync_allow_private_peers``). "Before connecting" is checked with a loopback
  listener that counts connections (``0.0.0.0`` and names that resolve to it reach it).
- A ticket names at most four addresses (``tests/sync/test_tickets.py``).
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import BackendError, ChazError, InputError
from chazbot.ledger import KeyPair, Ledger, Permission
from chazbot.sync import Replicator, SyncClient
from chazbot.sync.tickets import format_ticket
from tests.support.sync import FAST, Owner, serve_on_loopback

READ = Permission.parse("read")
DB = "sha256:" + "cd" * 32
SAID = ("SSH", "OpenSSH", "secret", "HTTP", "404", "302", "refused", "Connect", "granted")


class Counting:
    """A loopback TCP listener that counts the connections it accepts and runs ``speak``
    on each (default: close at once)."""

    def __init__(
        self,
        speak: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
        | None = None,
    ) -> None:
        self.speak = speak
        self.accepted = 0
        self.port = 0

    async def _on(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            if self.speak is not None:
                await self.speak(reader, writer)
        finally:
            writer.close()

    @asynccontextmanager
    async def running(self, host: str = "127.0.0.1") -> AsyncIterator[Counting]:
        server = await asyncio.start_server(self._on, host, 0)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            server.close()
            await server.wait_closed()


async def ssh(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
    await writer.drain()
    await reader.read(1024)


async def binary(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1024)
    writer.write(b"\x00\x01\x02secret binary protocol\r\n\r\n")
    await writer.drain()


def http_service(status: int, text: str, **headers: str) -> web.Application:
    """An HTTP service that is not a chazbot peer: every POST gets ``status`` and ``text``."""

    async def answer(_: web.Request) -> web.Response:
        return web.Response(
            status=status, text=text, content_type="application/json", headers=headers
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    return app


@asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[int]:
    runner, port = await serve_on_loopback(app)
    try:
        yield port
    finally:
        await runner.cleanup()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def import_error(replicator: Replicator, address: str) -> ChazError:
    with pytest.raises(ChazError) as err:
        await replicator.import_db(format_ticket(DB, [address]), "read")
    return err.value


@pytest.fixture
async def importer(tmp_path: Path) -> AsyncIterator[Replicator]:
    ledger = await Ledger.open(tmp_path / "v.sqlite3")
    replicator = Replicator(ledger, KeyPair.generate(), **{**FAST, "timeout": 3.0})
    yield replicator
    await replicator.close()
    await ledger.close()


async def test_a_failed_import_says_the_same_whatever_answered(importer: Replicator) -> None:
    seen: dict[str, str] = {}
    seen["closed port"] = str(await import_error(importer, f"http:127.0.0.1:{closed_port()}"))
    async with Counting(ssh).running() as banner:
        seen["ssh"] = str(await import_error(importer, f"http:127.0.0.1:{banner.port}"))
    async with Counting(binary).running() as other:
        seen["not http"] = str(await import_error(importer, f"http:127.0.0.1:{other.port}"))
    services = {
        "http 404": http_service(404, '{"error": "secret internal page"}'),
        "http 200 shaped like ours": http_service(200, '{"status": "granted"}'),
        "http redirect": http_service(302, "", Location="http://127.0.0.1:1/secret"),
        "http 500 text": http_service(500, "secret stack trace"),
        "http, a made-up protocol": http_service(
            403, '{"error": "secret"}', **{"Eidetica-Protocol": "secret words here"}
        ),
    }
    for name, app in services.items():
        async with serving(app) as port:
            seen[name] = str(await import_error(importer, f"http:127.0.0.1:{port}"))
    shapes = {re.sub(r":\d+\b", ":PORT", message) for message in seen.values()}
    assert len(shapes) == 1, seen
    (only,) = shapes
    assert "peer not reachable" in only and "not a chazbot peer" in only, only
    assert "\n" not in only
    assert not [w for w in SAID if w in only], only


class Names(AbstractResolver):
    """A stand-in for DNS (a service the operator brings): each name resolves to the IPs
    given, and ``asked`` counts lookups."""

    def __init__(self, names: dict[str, list[str]]) -> None:
        self.names = names
        self.asked = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked += 1
        found = self.names.get(host.rstrip("."))
        if not found:
            raise OSError(f"no such name {host}")
        return [
            {
                "hostname": host,
                "host": ip,
                "port": port,
                "family": socket.AF_INET6 if ":" in ip else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for ip in found
        ]

    async def close(self) -> None:
        pass


NEVER = [
    "http:169.254.169.254:80",
    "http:169.254.0.1:8765",
    "https:[fe80::1]:443",
    "http:[fd00:ec2::254]:80",
    "http:[::ffff:169.254.169.254]:80",
    "http:[64:ff9b::a9fe:a9fe]:80",
    "http:100.100.100.200:80",
    "http:224.0.0.1:80",
    "https:metadata.google.internal:443",
]


@pytest.mark.parametrize("allow_private", [False, True])
async def test_link_local_and_metadata_addresses_are_never_connected_to(
    allow_private: bool,
) -> None:
    async with Counting().running() as listener:
        names = Names(
            {
                "sneaky.example.org": ["169.254.169.254"],
                "metadata.google.internal": ["169.254.169.254"],
                "mixed.example.org": ["fe80::1", "169.254.169.254"],
                "zero.example.org": ["0.0.0.0"],
            }
        )
        client = SyncClient(
            KeyPair.generate(), timeout=3.0, allow_private_peers=allow_private, resolver=names
        )
        addresses = [
            *NEVER,
            f"http:0.0.0.0:{listener.port}",  # on Linux this reaches the loopback listener
            f"http:[::]:{listener.port}",
            f"https:sneaky.example.org:{listener.port}",
            f"https:mixed.example.org:{listener.port}",
            f"https:zero.example.org:{listener.port}",
        ]
        try:
            for address in addresses:
                started = time.monotonic()
                with pytest.raises(InputError) as err:
                    await client.heads(address, DB)
                message = str(err.value)
                assert message.startswith(f"peer not reachable: {address} is"), message
                assert "link-local, cloud metadata" in message and "\n" not in message
                assert time.monotonic() - started < 1.0, address
        finally:
            await client.close()
        assert listener.accepted == 0
        assert names.asked >= 3  # the names were judged by what they resolve to


async def test_loopback_and_private_peers_only_when_the_operator_allows(tmp_path: Path) -> None:
    async with Counting().running() as listener:
        names = Names({"box.example.org": ["127.0.0.1"], "lan.example.org": ["10.1.2.3"]})
        private = [
            f"http:127.0.0.1:{listener.port}",
            f"http:127.0.0.2:{listener.port}",
            f"http:localhost:{listener.port}",
            f"http:[::1]:{listener.port}",
            f"http:[::ffff:127.0.0.1]:{listener.port}",
            f"https:box.example.org:{listener.port}",
            "https:10.1.2.3:8765",
            "https:192.168.1.9:8765",
            "https:[fd12:3456::1]:8765",
            "https:lan.example.org:8765",
            "https:100.64.0.1:8765",
        ]
        refusing = SyncClient(KeyPair.generate(), timeout=3.0, resolver=names)
        try:
            for address in private:
                with pytest.raises(InputError, match="sync_allow_private_peers") as err:
                    await refusing.heads(address, DB)
                assert str(err.value).startswith(f"peer not reachable: {address} is"), err.value
        finally:
            await refusing.close()
        assert listener.accepted == 0
        # Allowed, the same addresses are tried (and this listener is no chazbot peer).
        allowing = SyncClient(
            KeyPair.generate(), timeout=3.0, resolver=names, allow_private_peers=True
        )
        try:
            for address in private[:6]:
                before = listener.accepted
                with pytest.raises(BackendError, match="not a chazbot peer"):
                    await allowing.heads(address, DB)
                if address.startswith(("http:127.0.0.1:", "https:box.")):  # the listener's
                    assert listener.accepted == before + 1, address
        finally:
            await allowing.close()


def _config(path: Path, **more: Any) -> Config:
    return Config(
        state_dir=path,
        sync_listen="127.0.0.1:0",
        http_listen="",
        agents=[AgentConfig(name="a")],
        **more,
    )


async def test_the_import_command_refuses_a_probe_in_one_line(tmp_path: Path) -> None:
    """Through ``/memory import`` with the default config: a loopback ticket is refused
    (naming the setting), a metadata one too, a ticket of many addresses at once; and with
    the setting on, a non-peer port reads as the one line."""
    async with Counting(ssh).running() as banner:
        async with chazbot.open(tmp_path / "p", _config(tmp_path / "p")) as peer:
            await peer.sync.start()
            for address, said in (
                (f"http:127.0.0.1:{banner.port}", "sync_allow_private_peers"),
                ("http:169.254.169.254:80", "link-local, cloud metadata"),
            ):
                reply = await peer.command(f"/memory import {format_ticket(DB, [address])}")
                assert not reply.ok and said in reply.text, reply.text
                assert "\n" not in reply.text.strip()
            many = f"eidetica:?db={DB}&" + "&".join(f"pr=http:p{n}:1" for n in range(160))
            reply = await peer.command(f"/memory import {many}")
            assert not reply.ok and "at most 4 peer addresses" in reply.text, reply.text
            await peer.sync.stop()
        assert banner.accepted == 0
        allowed = _config(tmp_path / "q", sync_allow_private_peers=True)
        async with chazbot.open(tmp_path / "q", allowed) as peer:
            await peer.sync.start()
            ticket = format_ticket(DB, [f"http:127.0.0.1:{banner.port}"])
            reply = await peer.command(f"/memory import {ticket}")
            assert not reply.ok and "not a chazbot peer" in reply.text, reply.text
            assert "SSH" not in reply.text and "\n" not in reply.text.strip()
            await peer.sync.stop()
        assert banner.accepted == 1


async def test_a_refused_address_is_skipped_for_the_tickets_next_one(
    importer: Replicator, tmp_path: Path
) -> None:
    """Refused before connecting (as written, or once resolved), an address costs nothing
    and the import goes on to the ticket's next one."""
    owner = await Owner.open(tmp_path / "o.sqlite3")
    try:
        await owner.ledger.set_auth(owner.db, owner.admin, importer.key.public, READ)
        names = Names({"sneaky.example.org": ["169.254.169.254"]})
        importer.client.resolver = names
        ticket = format_ticket(
            owner.db,
            ["http:169.254.169.254:80", "https:sneaky.example.org:443", owner.server.address],
        )
        result = await importer.import_db(ticket, "read")
        assert (result.status, result.address) == ("done", owner.server.address)
        assert names.asked == 1
        with pytest.raises(InputError, match="link-local, cloud metadata"):
            await importer.import_db(format_ticket(owner.db, ["http:[fe80::1]:80"]), "read")
    finally:
        await owner.close()
