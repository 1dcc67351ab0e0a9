"""The sync server's bounds, one finding at a time, on a real server on loopback.

Each test reproduces what an attacker did against the unbounded server (a body read before
anything was checked, nonces recorded for any key, an /access queue anyone could fill, an
import that never ended, listeners left behind) and asserts the bound that replaced it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

import pytest

from chazbot.config import Config
from chazbot.errors import BackendError, ConflictError, InputError
from chazbot.ledger import KeyPair, Ledger, Permission
from chazbot.peer import Peer
from chazbot.sync import Replicator, Serving, SyncClient, wire
from chazbot.sync.protocol import RateLimiter
from chazbot.sync.store import address_group
from chazbot.sync.tickets import address_from_url
from tests.support.abuse import attacker, head, post, raw_request, signed
from tests.support.sync import EndlessPeer, FakePeer, Owner, raw_call
from tests.support.waits import wait_until

READ = Permission.parse("read")


@pytest.fixture
async def owner(tmp_path: Path) -> AsyncIterator[Owner]:
    opened = await Owner.open(tmp_path / "owner.sqlite3", read_timeout=0.5, read_rate=1e9)
    yield opened
    await opened.close()


async def answer_of(
    owner: Owner, text: str, parts: Sequence[bytes] = (), gap: float = 0.0
) -> bytes:
    return await raw_request("127.0.0.1", owner.server.port, text, list(parts), gap, "127.0.0.1")


async def test_content_length_is_required_and_capped_before_reading(owner: Owner) -> None:
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    path = owner.path("heads")
    # No Content-Length (chunked): refused at once.
    chunked = head(path, None, signed(key, path, b"{}", owner.server.address)).replace(
        "\r\n\r\n", "\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    started = time.monotonic()
    assert b" 411 " in (await answer_of(owner, chunked)).split(b"\r\n")[0]
    # More than heads takes (1 KiB), announced but never sent: refused from the head alone.
    assert b" 413 " in (await answer_of(owner, head(path, 4096, {}))).split(b"\r\n")[0]
    push = owner.path("push")
    assert b" 413 " in (await answer_of(owner, head(push, 100 << 20, {}))).split(b"\r\n")[0]
    assert time.monotonic() - started < 2.0


async def test_headers_and_standing_are_checked_before_the_body(owner: Owner) -> None:
    path = owner.path("heads")
    stranger = KeyPair.generate()
    cases = {
        "401": head(path, 100, {}),  # unsigned
        "403": head(
            path, 100, signed(stranger, path, b"x" * 100, owner.server.address)
        ),  # no grant
    }
    for status, text in cases.items():
        started = time.monotonic()
        answer = await answer_of(owner, text)  # the body is never sent
        assert f" {status} ".encode() in answer.split(b"\r\n")[0], answer[:200]
        assert time.monotonic() - started < 0.4  # before the 0.5 s read deadline
    unshared = "sha256:" + "0" * 64
    answer = await answer_of(
        owner,
        head(f"/v1/dbs/{unshared}/heads", 10, signed(stranger, "/", b"", owner.server.address)),
    )
    assert b" 404 " in answer.split(b"\r\n")[0]


async def test_slow_and_aborted_bodies_cost_one_line(
    owner: Owner, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chazbot.sync")  # the abort's line is INFO
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    path = owner.path("entries")
    body = b'{"after": 0}'
    slow = await answer_of(
        owner,
        head(path, len(body), signed(key, path, body, owner.server.address)),
        [body[:3]] * 3,
        0.4,
    )
    assert b" 408 " in slow.split(b"\r\n")[0], slow[:200]
    # aborted half way: the client goes away; the server logs one line and keeps serving
    _, writer = await asyncio.open_connection("127.0.0.1", owner.server.port)
    writer.write(
        head(path, 500, signed(key, path, b"y" * 500, owner.server.address)).encode() + b"y" * 10
    )
    await writer.drain()
    writer.close()
    await wait_until(lambda: " aborted: " in caplog.text, 10, "the aborted request's log line")
    status, _, _ = await raw_call(owner.server.address, path, body, key)
    assert status == 200
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def test_reading_is_capped_per_address(owner: Owner) -> None:
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    owner.server.admission.read_timeout = 3.0
    path = owner.path("push")
    body = b'{"entries": []}'
    hdrs = signed(key, path, b"z" * 1000, owner.server.address)
    slow = [
        asyncio.create_task(
            raw_request(
                "127.0.0.1",
                owner.server.port,
                head(path, 1000, hdrs),
                [b"z"] * 30,
                0.1,
                "127.0.0.2",
            )
        )
        for _ in range(20)
    ]
    reading = owner.server.admission._reading.used
    await wait_until(lambda: reading.get("127.0.0.2", 0) >= 16, 10, "16 slow bodies being read")
    # the 17th and later from that address are turned away; another address still gets in
    status, _, _ = await raw_call(owner.server.address, path, body, key)
    assert status == 200
    answers = await asyncio.gather(*slow)
    firsts = [a.split(b"\r\n")[0] for a in answers]
    assert sum(b" 503 " in f for f in firsts) >= 4, firsts


async def test_nonces_are_kept_only_for_keys_holding_something(owner: Owner) -> None:
    server = owner.server
    server.replay.capacity = 50
    async with attacker("127.0.0.2") as session:
        for n in range(200):
            stranger = KeyPair.generate()
            name = ("heads", "entries", "push")[n % 3]
            body = b"{}"
            status = await post(
                session,
                server.address,
                owner.path(name),
                body,
                signed(stranger, owner.path(name), body, owner.server.address),
            )
            assert status == 403
    assert len(server.replay) == 0
    reader = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, reader.public, READ)
    for _ in range(3):
        status, _, _ = await raw_call(server.address, owner.path("heads"), b"{}", reader)
        assert status == 200
    assert len(server.replay) == 3
    # a badly signed request under the reader's name records nothing either
    status, _, headers = await raw_call(server.address, owner.path("heads"), b"{}", reader)
    forged = {**headers, "Eidetica-Nonce": secrets.token_hex(16)}
    status, _, _ = await raw_call(server.address, owner.path("heads"), b"{}", None, headers=forged)
    assert status == 401 and len(server.replay) == 4


async def test_access_is_rate_limited_and_the_queue_fair(owner: Owner) -> None:
    server, path = owner.server, owner.path("access")
    body = b'{"permission": "write"}'
    statuses = []
    async with attacker("127.0.0.2") as session:
        for _ in range(60):
            key = KeyPair.generate()
            statuses.append(
                await post(
                    session,
                    server.address,
                    path,
                    body,
                    signed(key, path, body, owner.server.address),
                )
            )
    assert statuses.count(429) >= 35, statuses
    pending = await server.serving.requests(owner.db)
    assert len(pending) == 3  # one address holds at most 3 pending requests
    assert len(server.replay) == 3  # and only those keys' nonces were kept
    importer = SyncClient(KeyPair.generate(), allow_private_peers=True)
    try:
        decision = await importer.access(server.address, owner.db, "write")
        assert decision.status == "pending"
    finally:
        await importer.close()


async def test_pending_queue_evicts_the_busiest_address_and_expires(tmp_path: Path) -> None:
    ledger = await Ledger.open(tmp_path / "q.sqlite3")
    now = [1_000_000.0]
    try:
        admin = KeyPair.generate()
        db = await ledger.create_db(admin, {"name": "bank"})
        sharing = Serving(
            ledger, max_pending=6, max_pending_per_address=3, pending_ttl_s=60, clock=lambda: now[0]
        )
        await sharing.share(db)
        for host in ("10.0.0.1", "10.0.0.2"):
            for _ in range(3):
                d = await sharing.request_access(db, KeyPair.generate().public, "write", host)
                assert d.status == "pending"
        with pytest.raises(ConflictError):  # that address holds its share
            await sharing.request_access(db, KeyPair.generate().public, "write", "10.0.0.1")
        oldest = (await sharing.requests(db))[0]
        real = await sharing.request_access(db, KeyPair.generate().public, "write", "192.0.2.7")
        assert real.status == "pending"  # a newcomer takes the busiest address's oldest place
        assert (await sharing.request(oldest.id)).status == "expired"
        assert len(await sharing.requests(db)) == 6
        assert len(await sharing.requests(db, newest=2)) == 2
        assert (await sharing.pending_counts()) == {db: 6}
        now[0] += 61
        late = await sharing.request_access(db, KeyPair.generate().public, "read", "10.0.0.1")
        assert late.status == "pending" and len(await sharing.requests(db)) == 1
    finally:
        await ledger.close()


def test_rate_limiter_and_address_groups() -> None:
    limiter = RateLimiter(rate=1.0, burst=2, max_names=3)
    assert limiter.allow("a", 0.0) and limiter.allow("a", 0.0) and not limiter.allow("a", 0.0)
    assert limiter.allow("a", 1.0)
    for name in "bcdef":
        limiter.allow(name, 1.0)
    assert len(limiter) == 3
    assert address_group("2001:db8::1") == address_group("2001:db8::ffff") == "2001:db8::/64"
    assert address_group("::ffff:10.1.2.3") == "10.1.2.3" and address_group(None) == "?"


async def test_import_deadline_and_cleanup(tmp_path: Path) -> None:
    db = "sha256:" + secrets.token_hex(32)
    ledger = await Ledger.open(tmp_path / "importer.sqlite3")
    listeners = len(ledger._listeners)
    try:
        async with EndlessPeer(db) as fake:
            replicator = Replicator(
                ledger,
                KeyPair.generate(),
                import_timeout=1.0,
                timeout=5.0,
                allow_private_peers=True,
            )
            started = time.monotonic()
            with pytest.raises(BackendError, match="did not finish within 1 s"):
                await replicator.import_db(fake.ticket(db))
            assert time.monotonic() - started < 3.0 and fake.served >= 1
            assert await replicator.tracked(db) == [] and replicator.status() == []
            await replicator.close()
            assert len(ledger._listeners) == listeners
        # "more" with nothing in it is a bad answer, not a loop
        async with _MoreOfNothing() as nothing:
            client = SyncClient(KeyPair.generate(), allow_private_peers=True)
            try:
                with pytest.raises(BackendError, match=r"answered badly: .*none sent"):
                    await client.entries(nothing.address, db, 0)
            finally:
                await client.close()
    finally:
        await ledger.close()


class _MoreOfNothing(FakePeer):
    async def entries(self, ask: wire.EntriesRequest) -> wire.WireModel:
        return wire.EntriesAnswer.model_construct(entries=[], next=ask.after, more=True, log="x")


async def test_tickets_advertise_the_public_url(tmp_path: Path) -> None:
    assert address_from_url("http://sync.example.org:8765/") == "http:sync.example.org:8765"
    with pytest.raises(InputError):
        address_from_url("http://0.0.0.0:8765")
    wildcard = Config(state_dir=tmp_path / "a", sync_listen="0.0.0.0:0")
    async with _peer(wildcard) as peer:
        reply = await peer.command("/memory new notes")
        assert reply.ok
        reply = await peer.command("/memory share notes")
        assert (
            not reply.ok
            and "sync_public_url" in reply.text
            and "0.0.0.0" not in reply.text.split("set")[-1]
        )
    public = wildcard.model_copy(
        update={"state_dir": tmp_path / "b", "sync_public_url": "http://bank.example.org:9999"}
    )
    async with _peer(public) as peer:
        await peer.command("/memory new notes")
        reply = await peer.command("/memory share notes")
        assert reply.ok and "pr=http:bank.example.org:9999" in reply.text, reply.text


class _peer:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.peer: Peer | None = None

    async def __aenter__(self) -> Peer:
        self.peer = await Peer.open(self.config)
        await self.peer.sync.start()
        return self.peer

    async def __aexit__(self, *_: object) -> None:
        assert self.peer is not None
        await self.peer.sync.stop()
        await self.peer.close()


async def test_a_flood_of_refusals_logs_a_bounded_number_of_lines(
    owner: Owner, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chazbot.sync")
    path = owner.path("heads")
    async with attacker("127.0.0.2") as session:
        statuses = [await post(session, owner.server.address, path, b"{}", {}) for _ in range(100)]
    # and garbage that is not HTTP at all
    for _ in range(30):
        await raw_request(
            "127.0.0.1", owner.server.port, "\x00\x01 nonsense\r\n\r\n", [], 0, "127.0.0.3"
        )
    assert set(statuses) == {401} and owner.server.counters.requests_refused == 100
    lines = [r for r in caplog.records if r.name.startswith("chazbot.sync")]
    assert 0 < len(lines) <= 20, len(lines)
    assert not [r for r in lines if r.exc_info or "\n" in r.getMessage()]


async def test_import_with_sync_off_leaves_no_listener(tmp_path: Path) -> None:
    db = "sha256:" + secrets.token_hex(32)
    cfg = Config(
        state_dir=tmp_path / "p", sync_listen="", http_listen="", sync_allow_private_peers=True
    )
    peer = await Peer.open(cfg)
    try:
        listeners = len(peer.ledger._listeners)
        async with FakePeer() as fake:  # grants access, then answers 500 to everything
            for _ in range(3):
                reply = await peer.command(f"/memory import {fake.ticket(db)}")
                assert not reply.ok and "\n" not in reply.text.strip()
        assert fake.asked[:2] == ["access", "heads"], fake.asked
        assert len(peer.ledger._listeners) == listeners
        assert await peer.ledger.local("SELECT * FROM sync_remotes") == []
    finally:
        await peer.close()


async def test_large_bodies_share_a_budget_small_ones_never_wait_on_it(owner: Owner) -> None:
    key = KeyPair.generate()
    await owner.ledger.set_auth(owner.db, owner.admin, key.public, READ)
    server = owner.server
    server.admission.max_reading_bytes, server.admission.read_timeout = 2 << 20, 3.0
    path = owner.path("push")
    announced = head(
        path, 1 << 20, signed(key, path, b"?", owner.server.address)
    )  # 1 MiB, trickled
    slow = [
        asyncio.create_task(
            raw_request("127.0.0.1", server.port, announced, [b"a"] * 25, 0.1, f"127.0.0.{2 + n}")
        )
        for n in range(3)
    ]
    await wait_until(
        lambda: server.admission._reading_bytes >= 2 << 20,
        10,
        "the slow uploads holding the budget",
    )
    heads = owner.path("heads")
    status, _, _ = await raw_call(server.address, heads, b"{}", key)
    assert status == 200  # a small request is read while the budget is spent
    big = b'{"entries": [], "pad": "' + b"p" * (200 * 1024) + b'"}'
    status, answer, _ = await raw_call(server.address, path, big, key)
    assert status == 503 and "busy" in answer["error"]
    firsts = [a.split(b"\r\n")[0] for a in await asyncio.gather(*slow)]
    assert sum(b" 503 " in f for f in firsts) == 1 and sum(b" 408 " in f for f in firsts) == 2
    status, _, _ = await raw_call(server.address, path, big, key)
    assert status == 200  # the budget is free again


OTHER = "sha256:" + "ef" * 32


class _Garbled(FakePeer):
    """Answers each endpoint with a body that does not fit its model (built unchecked)."""

    async def heads(self, ask: wire.HeadsRequest) -> wire.WireModel:
        return wire.HeadsAnswer(db=OTHER, tips=[], count=0, max_seq=0, log="x", permission="r")

    async def entries(self, ask: wire.EntriesRequest) -> wire.WireModel:
        return wire.EntriesAnswer.model_construct(
            entries=[(ask.after, b"x")], next=0, more=False, log="x"
        )

    async def have(self, ask: wire.HaveRequest) -> wire.WireModel:
        return wire.HaveAnswer.model_construct(missing=["sha256:nope"])

    async def push(self, ask: wire.PushRequest) -> wire.WireModel:
        return wire.PushAnswer.model_construct(accepted=-1)

    async def access(self, ask: wire.AccessRequest) -> wire.WireModel:
        return wire.AccessAnswer.model_construct(status="maybe")


async def test_a_peer_answering_badly_gets_one_line() -> None:
    db = "sha256:" + secrets.token_hex(32)
    async with _Garbled() as fake:
        client = SyncClient(KeyPair.generate(), allow_private_peers=True)
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "heads are of another database": lambda: client.heads(fake.address, db),
            "not increasing past the cursor": lambda: client.entries(fake.address, db, 5),
            "missing must be a list of at most 1000": lambda: client.missing(
                fake.address, db, [OTHER]
            ),
            "accepted must be a count": lambda: client.push(fake.address, db, [b"{}"]),
            "status must be granted, pending": lambda: client.access(fake.address, db, "read"),
        }
        try:
            for says, call in calls.items():
                with pytest.raises(BackendError) as caught:
                    await call()
                message = str(caught.value)
                assert message.startswith(f"peer {fake.address} answered badly: "), message
                assert says in message and "\n" not in message, message
        finally:
            await client.close()
    assert fake.asked == ["heads", "entries", "have", "push", "access"]
