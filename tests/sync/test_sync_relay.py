"""Issue 47, first finding: a signed sync request names the server it is for.

Three peers on loopback: O owns a bank and grants V read; M holds nothing at O. V's admin
imports a ticket that names M, so M receives V's signed requests (``access``, ``heads``,
``entries``, ``have``, ``push``); M sends each one on to O, unchanged or with the server it
names rewritten, live or later. O refuses every one of them (401, one line, counted) and
M learns nothing of O's bank; V importing from O itself still works. A request in the old
format (``eidetica-sync/1``, naming no server) is a clear refusal.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import aiohttp
import pytest
from aiohttp import web

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import ChazError
from chazbot.ledger import KeyPair, Ledger, Permission
from chazbot.sync import Replicator, SyncClient
from chazbot.sync.protocol import (
    KEY_HEADER,
    NONCE_HEADER,
    SERVER_HEADER,
    SIGNATURE_HEADER,
    TIME_HEADER,
)
from chazbot.sync.tickets import format_ticket, parse_ticket
from chazbot.transports.http import SyncCollector
from tests.support.sync import FAST, Owner, insert, raw_call, serve_on_loopback

READ = Permission.parse("read")


@dataclass
class Relayed:
    """One request M sent on to O, and what O answered."""

    name: str
    status: int
    answer: bytes
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Relay:
    """Peer M: a loopback HTTP server that sends every request it gets on to ``target``
    (O's address), with ``rewrite`` applied to its headers, and answers what O answered.
    ``captured`` keeps the requests as they came (to replay them later)."""

    target: str
    rewrite: dict[str, str] = field(default_factory=dict)
    relayed: list[Relayed] = field(default_factory=list)
    captured: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    @property
    def address(self) -> str:
        return f"http:127.0.0.1:{self.port}"

    async def __aenter__(self) -> Self:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._forward)
        self._runner, self.port = await serve_on_loopback(app)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def replay(self, path: str, headers: dict[str, str], body: bytes) -> Relayed:
        assert self._session is not None
        url = "http://" + self.target.removeprefix("http:") + path
        sent = {**headers, **self.rewrite}
        async with self._session.post(url, data=body, headers=sent) as resp:
            kept = {k: v for k, v in resp.headers.items() if k.lower().startswith("eidetica")}
            done = Relayed(path.rsplit("/", 1)[-1], resp.status, await resp.read(), kept)
        self.relayed.append(done)
        return done

    async def _forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower().startswith("eidetica")}
        headers["Content-Type"] = "application/json"
        self.captured.append((request.raw_path, headers, body))
        done = await self.replay(request.raw_path, headers, body)
        return web.Response(
            body=done.answer,
            status=done.status,
            headers=done.headers,
            content_type="application/json",
        )


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(tmp_path / "o.sqlite3")
    yield opened
    await opened.close()


async def _exercise(client: SyncClient, address: str, db: str) -> None:
    """Every signed exchange a peer makes, sent to ``address`` (errors are expected)."""
    calls = [
        client.access(address, db, "read"),
        client.heads(address, db),
        client.entries(address, db, 0),
        client.missing(address, db, ["sha256:" + "0" * 64]),
        client.push(address, db, []),
    ]
    for call in calls:
        with contextlib.suppress(ChazError):
            await call


@pytest.mark.parametrize(
    "rewrite",
    [{}, {"Host": "o.example"}, {SERVER_HEADER: "O"}],
    ids=["unchanged", "host-rewritten", "server-rewritten"],
)
async def test_requests_relayed_to_another_peer_are_refused(
    owner: Owner, tmp_path: Path, rewrite: dict[str, str]
) -> None:
    v = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, v.public, READ)
    await owner.ledger.write(owner.db, owner.admin, insert("secret"))
    if rewrite.get(SERVER_HEADER) == "O":
        rewrite = {SERVER_HEADER: owner.server.address}  # M claims V meant O
    async with Relay(owner.server.address, rewrite) as m:
        client = SyncClient(v, allow_private_peers=True)
        try:
            await _exercise(client, m.address, owner.db)
            # V's admin imports M's ticket: the import path signs the same way.
            ledger = await Ledger.open(tmp_path / "v.sqlite3")
            replicator = Replicator(ledger, v, **FAST)
            try:
                with pytest.raises(ChazError):
                    await replicator.import_db(format_ticket(owner.db, [m.address]), "read")
                assert not await ledger.exists(owner.db)
            finally:
                await replicator.close()
                await ledger.close()
        finally:
            await client.close()
        names = {r.name for r in m.relayed}
        assert {"access", "heads", "entries", "have", "push"} <= names, names
        assert [r for r in m.relayed if r.status != 401] == [], m.relayed
        assert all(b"secret" not in r.answer for r in m.relayed)
        refused = owner.server.counters
        assert refused.requests_refused == len(m.relayed)
        if SERVER_HEADER in rewrite:  # the signature covers the server it named
            assert all(b"signature does not verify" in r.answer for r in m.relayed)
        else:
            assert refused.misdirected == len(m.relayed)
        # Replayed later (within the time window, nonces never seen by O): still refused.
        before = len(m.relayed)
        for path, headers, body in list(m.captured):
            again = await m.replay(path, headers, body)
            assert again.status == 401, again
        assert len(m.relayed) == 2 * before


async def test_a_refusal_for_another_server_is_one_clear_line(owner: Owner) -> None:
    v = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, v.public, READ)
    async with Relay(owner.server.address) as m:
        client = SyncClient(v, allow_private_peers=True)
        try:
            with pytest.raises(ChazError) as err:
                await client.heads(m.address, owner.db)
        finally:
            await client.close()
    message = str(err.value)
    assert "signed for another server" in message and "\n" not in message, message
    assert message.endswith(f"({m.address}), this one is {owner.server.address}"), message
    assert m.relayed[0].status == 401


async def test_the_honest_path_still_works_beside_a_relay(owner: Owner, tmp_path: Path) -> None:
    v = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, v.public, READ)
    ledger = await Ledger.open(tmp_path / "v.sqlite3")
    replicator = Replicator(ledger, v, **FAST)
    try:
        result = await replicator.import_db(format_ticket(owner.db, [owner.server.address]), "read")
        assert result.status == "done"
        assert len(await ledger.entries(owner.db)) == len(await owner.ledger.entries(owner.db))
        # Addressed as ``localhost`` (this machine), the same server still answers.
        port = owner.server.port
        client = SyncClient(v, allow_private_peers=True)
        try:
            heads = await client.heads(f"http:localhost:{port}", owner.db)
            assert heads.permission == "read"
        finally:
            await client.close()
    finally:
        await replicator.close()
        await ledger.close()
    assert owner.server.counters.misdirected == 0


def _old_format(key: KeyPair, path: str, body: bytes) -> dict[str, str]:
    """Headers of a request signed the way chazbot signed before (``eidetica-sync/1``)."""
    ts_ms = int(time.time() * 1000)
    nonce = secrets.token_hex(16)
    digest = hashlib.sha256(body).hexdigest()
    payload = f"eidetica-sync/1\nPOST\n{path}\n{ts_ms}\n{nonce}\n{digest}".encode()
    return {
        KEY_HEADER: key.public,
        TIME_HEADER: str(ts_ms),
        NONCE_HEADER: nonce,
        SIGNATURE_HEADER: key.sign(payload).hex(),
    }


async def test_an_old_format_request_is_a_clear_refusal(owner: Owner) -> None:
    v = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, v.public, READ)
    url = "http://" + owner.server.address.removeprefix("http:") + owner.path("heads")
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=b"{}", headers=_old_format(v, owner.path("heads"), b"{}")) as resp,
    ):
        status, answer = resp.status, await resp.json()
    assert status == 426, (status, answer)
    error = answer["error"]
    assert "eidetica-sync/1" in error and "eidetica-sync/2" in error and "\n" not in error


async def test_a_request_naming_no_server_is_refused(owner: Owner) -> None:
    v = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, v.public, READ)
    path = owner.path("heads")
    for server in ("", "nowhere", "ftp:x:1"):
        _, _, headers = await raw_call(owner.server.address, path, b"{}", v)
        headers = {**headers, SERVER_HEADER: server}
        if not server:
            del headers[SERVER_HEADER]
        status, answer, _ = await raw_call(owner.server.address, path, b"{}", None, headers=headers)
        assert (status, answer["error"]) == (
            401,
            "request names no server (Eidetica-Server: <address>)",
        ), server


def _peer_config(path: Path, agent: str) -> Config:
    return Config(
        state_dir=path,
        sync_listen="127.0.0.1:0",
        http_listen="",
        sync_allow_private_peers=True,  # the three peers are on loopback
        agents=[AgentConfig(name=agent)],
    )


async def test_the_issue_with_three_running_peers(tmp_path: Path) -> None:
    """As the issue tells it: O grants V's peer key read on its bank; V's admin imports a
    ticket that names M (with O's bank in it); M passes V's requests on to O. O refuses
    them all, V's import fails in one line, and V gets nothing of O's bank; V importing
    O's own ticket still works."""
    o_cfg, v_cfg = _peer_config(tmp_path / "o", "alpha"), _peer_config(tmp_path / "v", "beta")
    async with chazbot.open(tmp_path / "o", o_cfg) as o, chazbot.open(tmp_path / "v", v_cfg) as v:
        await o.sync.start()
        await v.sync.start()
        assert o.sync.server is not None
        await o.command("/memory new notes")
        await o.command("/memory grant notes alpha write")
        await o.agent("alpha").remember("plan", "the secret plan", bank="notes")
        ticket = (await o.command("/memory share notes")).text.split()[-1]
        assert (await o.command(f"/memory grant notes {v.key.public} read")).ok
        db = parse_ticket(ticket).db
        async with Relay(o.sync.server.address) as m:
            reply = await v.command(f"/memory import {format_ticket(db, [m.address])} read")
            assert not reply.ok and "signed for another server" in reply.text, reply.text
            assert "\n" not in reply.text.strip()
        assert m.relayed and all(r.status == 401 for r in m.relayed), m.relayed
        assert all(b"secret plan" not in r.answer for r in m.relayed)
        assert o.sync.server.counters.misdirected == len(m.relayed)
        scraped = {
            s.labels["reason"]: s.value
            for family in SyncCollector(o.sync).collect()
            if family.name == "chazbot_sync_requests_refused"
            for s in family.samples
        }
        assert scraped == {"auth": 0, "misdirected": len(m.relayed)}, scraped
        assert not await v.ledger.exists(db)
        done = await v.command(f"/memory import {ticket} read")
        assert done.ok and "Imported bank notes" in done.text, done.text
        await v.sync.stop()
        await o.sync.stop()
