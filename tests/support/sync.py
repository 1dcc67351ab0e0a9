"""Helpers for the sync tests: real peers (ledger + server + replicator) on loopback, and
stand-in peers that answer what a test scripts (``FakePeer``, ``EndlessPeer``), their
bodies built from the wire's declarations (``chazbot.sync.wire``) like the real server's.

``wait_until`` is the shared one of ``tests/support/waits.py`` (re-exported for the sync tests).

No test lives here; the sync test modules import these.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import aiohttp
from aiohttp import web

from chazbot.ledger import KeyPair, Ledger
from chazbot.ledger.records import DEFAULT_LIMITS, KeptLimits
from chazbot.sync import Replicator, Serving, SyncServer, wire
from chazbot.sync.protocol import PROTOCOL, PROTOCOL_HEADER, sign_request
from tests.support.waits import wait_until as wait_until

FAST: dict[str, Any] = {
    "pull_interval": 2.0,
    "watch": 5.0,
    "push_debounce": 0.02,
    "retry_initial": 0.05,
    "retry_max": 0.5,
    "timeout": 5.0,
    "allow_private_peers": True,  # every peer of these tests is on loopback
}


def insert(value: Any) -> dict[str, list[Any]]:
    return {"notes": [{"op": "insert", "row": {"value": value}}]}


def set_meta(name: str, value: Any) -> dict[str, list[Any]]:
    return {"meta": [{"op": "set", "field": name, "value": value}]}


@dataclass
class Node:
    """One peer: its state file, ledger, peer key, sync server and replicator."""

    path: Path
    key: KeyPair
    ledger: Ledger
    server: SyncServer
    replicator: Replicator
    options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    async def open(
        cls,
        path: Path,
        key: KeyPair | None = None,
        port: int = 0,
        limits: KeptLimits = DEFAULT_LIMITS,
        **options: Any,
    ) -> Node:
        key = key or KeyPair.generate()
        ledger = await Ledger.open(path, limits=limits)
        server = SyncServer(ledger, host="127.0.0.1", port=port)
        await server.start()
        replicator = Replicator(ledger, key, **{**FAST, **options})
        await replicator.start()
        return cls(path, key, ledger, server, replicator, options)

    @property
    def serving(self) -> Serving:
        return self.server.serving

    @property
    def address(self) -> str:
        return self.server.address

    async def close(self) -> None:
        await self.replicator.close()
        await self.server.stop()
        await self.ledger.close()

    async def reopen(self) -> Node:
        """Close everything and open the same state file again (same key, same port)."""
        port = self.server.port
        await self.close()
        return await Node.open(self.path, self.key, port, **self.options)


async def live_entries(ledger: Ledger, db: str) -> list[str]:
    """Ids of the entries of ``db`` that are not soft-failed.

    Soft-failed entries can differ between converged peers: one that arrives already
    soft-failed, with nothing built on it, is refused (issue #22), so a peer that got it
    before the revocation holds it (hidden) and one that got it after does not. Nothing
    visible differs, and no live entry builds on one.
    """
    found = await ledger.local("SELECT id FROM entries WHERE db = ? AND soft_failed = 0", (db,))
    return sorted(str(r[0]) for r in found)


async def snapshot(ledger: Ledger, db: str) -> dict[str, Any]:
    """Everything two converged peers must agree on."""
    auth_rows = await ledger.local(
        "SELECT key, perm, prio, status FROM auth WHERE db = ? ORDER BY key", (db,)
    )
    return {
        "live": await live_entries(ledger, db),
        "meta": await ledger.fields(db, "meta"),
        "auth": await ledger.auth_state(db),
        "auth_table": [tuple(r) for r in auth_rows],
        "rows": sorted(
            (r.row_id, r.author, json.dumps(r.data)) for r in await ledger.rows(db, "notes")
        ),
    }


async def converged(nodes: list[Node], db: str) -> bool:
    """Every node holds the same live entries and agrees on all derived from them."""
    for node in nodes:
        if not await node.ledger.exists(db):
            return False
    states = [await snapshot(node.ledger, db) for node in nodes]
    return all(s == states[0] for s in states[1:])


async def raw_call(
    address: str,
    path: str,
    body: bytes,
    key: KeyPair | None,
    *,
    headers: dict[str, str] | None = None,
    now: float | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One HTTP POST, signed by ``key`` (unless None) unless ``headers`` are given."""
    url = "http://" + address.removeprefix("http:") + path
    if headers is None:
        headers = {}
        if key is not None:
            now = time.time() if now is None else now
            headers = sign_request(key, "POST", path, body, now, server=address)
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers) as resp,
    ):
        answer = await resp.json(content_type=None)
        return resp.status, answer, headers


async def serve_on_loopback(app: web.Application) -> tuple[web.AppRunner, int]:
    """Run ``app`` on 127.0.0.1 at a free port; its runner (to clean up) and the port."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, next(a[1] for a in runner.addresses if isinstance(a, tuple))


@dataclass
class Owner:
    """A bank on one ledger, shared by a sync server: what a remote peer talks to."""

    ledger: Ledger
    server: SyncServer
    admin: KeyPair
    db: str

    def path(self, name: str) -> str:
        return f"/v1/dbs/{self.db}/{name}"

    @classmethod
    async def open(cls, path: Path, **server_options: Any) -> Owner:
        ledger = await Ledger.open(path)
        admin = KeyPair.generate()
        db = await ledger.create_db(admin, {"name": "bank"})
        await ledger.write(db, admin, insert("first"))
        server = SyncServer(ledger, port=0, **server_options)
        await server.start()
        await server.serving.share(db)
        return cls(ledger, server, admin, db)

    async def close(self) -> None:
        await self.server.stop()
        self.server.close()
        await self.ledger.close()


class FakePeer:
    """A stand-in for another peer's sync server, on loopback, answering what the test
    scripts: each endpoint reads its request with the wire's model (so what the real client
    sends is checked too) and answers what the method of its name returns. By default
    ``access`` grants and every other endpoint answers 500 ``gone``; subclass to script more.
    A hostile answer the models forbid is built with ``model_construct`` (no validation).
    ``asked`` lists the endpoints called, in order.
    """

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def address(self) -> str:
        return f"http:127.0.0.1:{self.port}"

    def ticket(self, db: str) -> str:
        return f"eidetica:?db={db}&pr={self.address}"

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post("/v1/dbs/{db}/{name}", self._answer)
        self._runner, self.port = await serve_on_loopback(app)
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _answer(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.asked.append(name)
        body = await request.read()
        answer: wire.WireModel
        if name == "heads":
            answer = await self.heads(wire.parse(wire.HeadsRequest, body))
        elif name == "entries":
            answer = await self.entries(wire.parse(wire.EntriesRequest, body))
        elif name == "have":
            answer = await self.have(wire.parse(wire.HaveRequest, body))
        elif name == "push":
            answer = await self.push(wire.parse(wire.PushRequest, body))
        elif name == "access":
            answer = await self.access(wire.parse(wire.AccessRequest, body))
        else:
            answer = wire.ErrorAnswer(error=f"no endpoint {name}")
        status = 500 if isinstance(answer, wire.ErrorAnswer) else 200
        headers = {PROTOCOL_HEADER: PROTOCOL}  # it passes for a chazbot peer
        return web.json_response(text=answer.model_dump_json(), status=status, headers=headers)

    async def access(self, ask: wire.AccessRequest) -> wire.WireModel:
        return wire.AccessAnswer(status="granted")

    async def heads(self, ask: wire.HeadsRequest) -> wire.WireModel:
        return GONE

    async def entries(self, ask: wire.EntriesRequest) -> wire.WireModel:
        return GONE

    async def have(self, ask: wire.HaveRequest) -> wire.WireModel:
        return GONE

    async def push(self, ask: wire.PushRequest) -> wire.WireModel:
        return GONE


GONE = wire.ErrorAnswer(error="gone")


class EndlessPeer(FakePeer):
    """Grants access, names a tip nobody holds, and answers every entries request with one
    more junk entry and "more": an import from it never ends by itself (its deadline must
    end it). ``served`` counts the entries answers given."""

    def __init__(self, db: str) -> None:
        super().__init__()
        self.db = db
        self.served = 0

    async def heads(self, ask: wire.HeadsRequest) -> wire.WireModel:
        tip = "sha256:" + "ab" * 32
        return wire.HeadsAnswer(
            db=self.db, tips=[tip], count=1, max_seq=2**40, log="x", permission="read"
        )

    async def entries(self, ask: wire.EntriesRequest) -> wire.WireModel:
        self.served += 1
        seq = ask.after + 1
        junk = json.dumps({"junk": self.served}).encode()
        return wire.EntriesAnswer(entries=[(seq, junk)], next=seq, more=True, log="x")
