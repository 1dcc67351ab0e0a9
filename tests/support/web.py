"""What the memory page's tests share: a real peer (real SQLite) serving ``/ui/`` on a real
loopback listener, and rows said by people in rooms, as the Matrix transport writes them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp

from chazbot.commands.web_cmds import issue_link
from chazbot.config import Config, EmbeddingConfig, parse_config
from chazbot.memory.audience import room_audience
from chazbot.peer import Peer
from chazbot.transports.http import HttpServer
from chazbot.transports.web import WebUI
from chazbot.transports.web.pages import Rooms

ALICE, BOB, ADMIN = "@alice:example.org", "@bob:example.org", "@admin:example.org"


def web_config(state_dir: Path, **web: Any) -> Config:
    return parse_config(
        {
            "state_dir": str(state_dir),
            "sync_listen": "",
            "http_listen": "127.0.0.1:0",
            "embedding": None,
            "matrix": {
                "homeserver_url": "http://127.0.0.1:9",
                "user_id": "@chazbot:example.org",
                "allow_list": [ALICE, BOB],
                "admins": [ADMIN],
            },
            "agents": [{"name": "chaz"}, {"name": "helper"}],
            "web": {"enabled": True, **web},
        }
    )


@asynccontextmanager
async def serving(
    state_dir: Path,
    embedding: EmbeddingConfig | None = None,
    rooms: Rooms | None = None,
    **web: Any,
) -> AsyncIterator[tuple[Peer, str]]:
    """A peer with the memory page on a loopback port: ``(peer, "http://127.0.0.1:port")``;
    ``embedding``: an embedder (a stand-in's) instead of none; ``rooms``: what the chat
    transport would say of its rooms (the service's part)."""
    cfg = web_config(state_dir, **web)
    if embedding is not None:
        cfg = cfg.model_copy(update={"embedding": embedding})
    peer = await Peer.open(cfg)
    server = HttpServer(peer, "127.0.0.1:0", None, WebUI(peer, rooms).mount)
    await server.start()
    base = f"http://127.0.0.1:{server.port}"
    if not web.get("public_url"):
        peer.hosting.config = cfg.model_copy(
            update={"web": cfg.web.model_copy(update={"public_url": base})}
        )
    try:
        yield peer, base
    finally:
        await server.stop()
        await peer.close()


async def said(
    peer: Peer,
    person: str,
    key: str,
    value: str,
    room: str = "matrix:!room:example.org",
    agent: str = "chaz",
    present: tuple[str, ...] = (),
) -> None:
    """``person`` said ``key = value`` to ``agent`` in ``room`` with ``present`` there too."""
    who = peer.agent(agent)
    audience = room_audience(room, {person, *present}, lambda u: u == ADMIN)
    memory = who.memory.within(peer.hearing(who, person, audience))
    await memory.remember(key, value)


async def mine(peer: Peer, person: str) -> str:
    """What ``/memory mine`` answers ``person`` in a DM of theirs (what the bot keeps they said)."""
    dm = f"dm-{person}"
    reply = await peer.command(
        "/memory mine",
        session=dm,
        sender=person,
        audience=room_audience(dm, {person}, lambda u: False),
    )
    return reply.text


async def link(peer: Peer, person: str, admin: bool = False) -> str:
    return await issue_link(peer.ledger, peer.config, person, admin)


def browser_session() -> aiohttp.ClientSession:
    """A client that keeps cookies for 127.0.0.1 (aiohttp's jar skips IP hosts by default)
    and does not follow redirects on its own."""
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def sign_in(client: aiohttp.ClientSession, url: str) -> aiohttp.ClientResponse:
    """Open a sign-in link and press its button, as a person does."""
    async with client.get(url) as page:
        assert page.status == 200, await page.text()
        html = await page.text()
    token = re.search(r'name="t" value="([^"]+)"', html)
    assert token is not None, html
    base = url.split("/ui/")[0]
    return await client.post(f"{base}/ui/login", data={"t": token.group(1)}, allow_redirects=False)


async def my_page_csrf(client: aiohttp.ClientSession, peer: Peer, base: str, person: str) -> str:
    """Sign ``person`` in on ``client``, open their page and return its CSRF token."""
    await sign_in(client, await link(peer, person))
    async with client.get(f"{base}/ui/me") as page:
        assert page.status == 200, page.status
        return csrf_of(await page.text())


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html[:2000]
    return found.group(1)
