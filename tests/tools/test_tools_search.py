"""#46: ``web_search`` against a stand-in SearXNG on loopback (the JSON API), off when
``tools.searxng_url`` is unset, and one line when SearXNG fails."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiohttp import web

from chazbot.errors import BackendError, InputError
from chazbot.tools.builtins import BUILTINS, Builtins


@pytest_asyncio.fixture
async def searxng() -> AsyncIterator[tuple[str, list[str]]]:
    asked: list[str] = []

    async def search(request: web.Request) -> web.Response:
        asked.append(request.query.get("q", ""))
        if request.query.get("format") != "json":
            return web.Response(status=403)
        if request.query["q"] == "broken":
            return web.Response(status=500)
        results = [
            {"title": f"Result {n}", "url": f"https://example.org/{n}", "content": "snippet " * 3}
            for n in range(12)
        ]
        return web.json_response({"query": request.query["q"], "results": results})

    app = web.Application()
    app.router.add_get("/search", search)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}", asked
    await runner.cleanup()


async def test_web_search_reads_searxng(searxng: tuple[str, list[str]]) -> None:
    url, asked = searxng
    said = await BUILTINS["web_search"].run(Builtins(searxng_url=url), {"query": "bin  day"})
    assert asked == ["bin day"]
    assert said.startswith("Results for 'bin day':\n1. Result 0\n   https://example.org/0")
    assert "8. Result 7" in said and "9. Result 8" not in said
    with pytest.raises(BackendError, match="SearXNG answered 500"):
        await BUILTINS["web_search"].run(Builtins(searxng_url=url), {"query": "broken"})


async def test_web_search_is_off_without_searxng() -> None:
    with pytest.raises(InputError, match=r"tools\.searxng_url"):
        await BUILTINS["web_search"].run(Builtins(), {"query": "x"})
    with pytest.raises(BackendError, match="cannot be reached"):
        await BUILTINS["web_search"].run(Builtins(searxng_url="http://127.0.0.1:9"), {"query": "x"})
