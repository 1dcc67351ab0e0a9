"""``/healthz`` is unauthenticated, so it must be cheap: cached, no write to the state file per
call, and the LLM probe cached too. A real HttpServer on loopback, a real peer, and an
OpenAI-compatible stand-in that counts the probes it gets."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from chazbot.config import Config, LLMConfig
from chazbot.peer import Peer
from chazbot.transports import http as health
from chazbot.transports.http import HttpServer


async def test_healthz_is_cached_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
                # after the cache time, one more check (the LLM probe stays cached longer)
                monkeypatch.setattr(health, "HEALTH_CACHE_S", 0.0)
                assert await one() == 200 and probes == 1
            after = db.execute("SELECT count(*) FROM local_kv WHERE key = 'healthz'").fetchone()
            assert before == after == (0,)
            # no other connection wrote to the file meanwhile
            assert db.execute("PRAGMA data_version").fetchone()[0] == version
    finally:
        await server.stop()
        await peer.close()
        await runner.cleanup()
