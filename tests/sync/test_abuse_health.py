"""``/healthz`` is unauthenticated, so it must be cheap: cached, no write to the state file per
call, and the LLM probe cached too. A real HttpServer on loopback, a real peer, and an
OpenAI-compatible stand-in that counts the probes it gets."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import aiohttp
from aiohttp import web

from chazbot.config import Config, LLMConfig
from chazbot.peer import Peer
from chazbot.sync.guard import GuardSettings, descriptor_budget
from chazbot.transports import http as health
from chazbot.transports.http import HttpServer


async def test_healthz_is_cached_and_writes_nothing(tmp_path: Path) -> None:
    probes = 0

    async def models(request: web.Request) -> web.Response:
        nonlocal probes
        probes += 1
        return web.json_response({"data": []})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = next(a[1] for a in runner.addresses if isinstance(a, tuple))
    llm = LLMConfig(api_base=f"http://127.0.0.1:{port}/v1", api_key="sk-test", model="m")
    peer = await Peer.open(
        Config(state_dir=tmp_path / "state", sync_listen="", http_listen="", llm=llm)
    )
    server = HttpServer(peer, "127.0.0.1:0")
    await server.start()
    state = tmp_path / "state" / "chazbot.sqlite3"

    try:
        assert server.port != 0
        url = f"http://127.0.0.1:{server.port}/healthz"
        with sqlite3.connect(f"file:{state}?mode=ro", uri=True) as db:
            before = db.execute("SELECT count(*) FROM local_kv WHERE key = 'healthz'").fetchone()
            version = db.execute("PRAGMA data_version").fetchone()[0]
            async with aiohttp.ClientSession() as session:

                async def one() -> int:
                    async with session.get(url) as resp:
                        body = await resp.json()
                        assert body["checks"]["llm"]["ok"] and body["checks"]["db"]["ok"]
                        return resp.status

                statuses = await asyncio.gather(*(one() for _ in range(50)))
                statuses += [await one() for _ in range(50)]
                assert set(statuses) == {200}
                assert probes == 1  # 100 calls, one probe
                # after the cache time, one more check (the LLM probe stays cached longer):
                # this server's own timing, as passed in (``HttpServer(timing=)``)
                server.timing = replace(server.timing, cache_s=0.0)
                assert await one() == 200 and probes == 1
            after = db.execute("SELECT count(*) FROM local_kv WHERE key = 'healthz'").fetchone()
            assert before == after == (0,)
            # no other connection wrote to the file meanwhile
            assert db.execute("PRAGMA data_version").fetchone()[0] == version
    finally:
        await server.stop()
        await peer.close()
        await runner.cleanup()


async def test_http_listener_and_control_socket_drop_slow_and_idle_connections(
    tmp_path: Path,
) -> None:
    """Issue #22 (1): /healthz's listener had no header deadline or per-address cap, and
    the control socket kept idle connections for ever."""
    from chazbot.transports.control import ControlServer
    from tests.support.waits import wait_until
    from tests.sync.test_sync_limits import trickle

    peer = await Peer.open(Config(state_dir=tmp_path / "state", sync_listen="", http_listen=""))
    server = HttpServer(
        peer,
        "127.0.0.1:0",
        guard=GuardSettings(descriptor_budget(0.1), health.MAX_PER_ADDRESS, header_timeout=1.0),
    )
    await server.start()
    control = ControlServer(peer)
    control.read_timeout = 1.0
    control.max_connections = 5
    await control.start()
    try:
        flood = await trickle(server.port, ["127.0.0.3"] * 80)
        await wait_until(
            lambda: sum(t.closed.is_set() for t in flood) >= 16, timeout=5, what="the cap"
        )
        assert server.guard.total <= 64
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/healthz") as resp,
        ):
            assert resp.status == 200
        await wait_until(
            lambda: all(t.closed.is_set() for t in flood), timeout=10, what="the deadline"
        )
        # idle control connections: five are held, then closed on time; more are refused
        idle = [await asyncio.open_unix_connection(str(control.path)) for _ in range(8)]
        await wait_until(lambda: control.open == 5, timeout=5, what="five idle connections")
        await wait_until(lambda: control.refused == 3, timeout=5, what="three refused")
        for reader, _ in idle:
            assert await asyncio.wait_for(reader.read(), 10) == b""
        assert control.timed_out == 5 and control.open == 0
        for _, writer in idle:
            writer.close()
    finally:
        await control.stop()
        await server.stop()
        await peer.close()


async def test_a_failing_answer_is_cached_only_briefly(tmp_path: Path) -> None:
    """A 503 (here: Matrix not synced yet, as at every start) was cached for ``cache_s``
    (5 s), so a service that became healthy right after was reported sick for 5 s more: every
    start waited that long for its /healthz 200. A healthy answer is still cached."""
    from types import SimpleNamespace

    from tests.support.waits import wait_until

    peer = await Peer.open(Config(state_dir=tmp_path / "state", sync_listen="", http_listen=""))
    matrix = SimpleNamespace(last_sync_ok=None, healthy=True)
    server = HttpServer(peer, "127.0.0.1:0", service=SimpleNamespace(matrix=matrix))
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/healthz"
        async with aiohttp.ClientSession() as session:

            async def status() -> int:
                async with session.get(url) as resp:
                    return resp.status

            assert await status() == 503
            matrix.last_sync_ok = time.time()  # the first sync is done
            began = time.monotonic()
            await wait_until(lambda: status_ok(status), 10, "/healthz 200", interval=0.05)
            assert time.monotonic() - began < server.timing.cache_s / 2
            matrix.last_sync_ok = None  # within the cache time, the healthy answer stands
            assert await status() == 200
    finally:
        await server.stop()
        await peer.close()


async def status_ok(status: Callable[[], Awaitable[int]]) -> bool:
    return await status() == 200
