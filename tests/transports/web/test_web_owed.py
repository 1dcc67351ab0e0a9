"""The bank's page says how many vectors its rows still owe (issue 35): the numbers
``/memory stats`` reads, while a web import's rows wait for their vectors in the background.

A real peer on real SQLite with the web UI on a loopback port; the embedder is the loopback
stand-in, told to hold the imported rows' texts (a slow embedder).
"""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from tests.support.standin_embeddings import StandinEmbeddings
from tests.support.waits import wait_until
from tests.support.web import ADMIN, browser_session, csrf_of, link, serving, sign_in


async def test_the_bank_page_says_how_many_vectors_are_still_owed(
    tmp_path: Path, standin_embeddings: StandinEmbeddings
) -> None:
    standin_embeddings.hold_matching("otters")
    async with serving(tmp_path, standin_embeddings.config()) as (peer, base):
        assert (await peer.command("/memory new team")).ok
        page = f"{base}/ui/admin/banks/team"
        lines = "\n".join(
            json.dumps({"key": f"k{i}", "value": f"otters number {i}"}) for i in range(100)
        )
        async with browser_session() as client:
            await sign_in(client, await link(peer, ADMIN, admin=True))
            async with client.get(page) as answer:
                html = await answer.text()
            assert 'id="vectors-owed"' not in html  # nothing owed yet
            posted = aiohttp.FormData()
            posted.add_field("csrf", csrf_of(html))
            posted.add_field("file", lines.encode(), filename="rows.jsonl")
            async with client.post(f"{page}/import", data=posted, allow_redirects=False) as answer:
                assert answer.status == 303, await answer.text()
            await wait_until(lambda: standin_embeddings.held >= 1, what="the background batch")
            async with client.get(page) as answer:
                html = await answer.text()
            stats = (await peer.command("/memory stats team")).text
            team = await peer.registry.get("bank", "team")
            assert team is not None
            found = peer.memory.vectors_owed(team.db)
            assert found is not None and found.count, found
            assert f"{found.count} vectors owed" in stats, stats  # the same numbers
            assert f'<p id="vectors-owed">{found.count} vectors owed' in html, html

            standin_embeddings.let_go()
            assert await peer.memory.wait_vectors(30)
            async with client.get(page) as answer:
                assert 'id="vectors-owed"' not in await answer.text()
