"""The seed's walkthrough step 4 through commands: share, import with approval, grant on the
importing peer, writes replicating both ways. Two real peers syncing over loopback HTTP."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.peer import Peer


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def cfg(path: Path, agent: str) -> Config:
    return Config(state_dir=path, sync_listen="127.0.0.1:0", agents=[AgentConfig(name=agent)])


async def keys(peer: Peer, agent: str, bank: str) -> list[str]:
    return sorted(h.key for h in await peer.agent(agent).recall("", bank=bank, limit=50))


async def test_walkthrough_share_import_grant_replicate(tmp_path: Path) -> None:
    async with (
        chazbot.open(tmp_path / "a", cfg(tmp_path / "a", "alpha")) as a,
        chazbot.open(tmp_path / "b", cfg(tmp_path / "b", "gamma")) as b,
    ):
        await a.start_sync()
        await b.start_sync()
        assert (await a.command('/memory new project-notes "Shared notes"')).ok
        assert (await a.command("/memory grant project-notes alpha write")).ok
        await a.agent("alpha").remember(
            "architecture.sessions", "one DB per conversation", bank="project-notes"
        )
        shared = await a.command("/memory share project-notes")
        assert shared.ok
        ticket = re.search(r"eidetica:\S+", shared.text)
        assert ticket is not None

        first = await b.command(f"/memory import {ticket.group(0)} admin")
        assert first.ok and "request" in first.text, first.text
        pending = await a.command("/sharing requests")
        request_id = re.search(r"request (\d+)", pending.text)
        assert request_id is not None, pending.text
        not_admin = await a.command(f"/sharing approve {request_id.group(1)}", is_admin=False)
        assert not not_admin.ok
        assert (await a.command(f"/sharing approve {request_id.group(1)}")).ok
        done = await b.command(f"/memory import {ticket.group(0)} admin")
        assert done.ok and "Imported bank project-notes" in done.text, done.text

        assert (await b.command("/memory grant project-notes gamma write")).ok
        assert await keys(b, "gamma", "project-notes") == ["architecture.sessions"]
        await b.agent("gamma").remember("from.b", "gamma wrote this", bank="project-notes")
        await a.agent("alpha").remember("from.a", "alpha wrote this", bank="project-notes")
        expected = ["architecture.sessions", "from.a", "from.b"]

        async def both() -> bool:
            return (
                await keys(a, "alpha", "project-notes") == expected
                and await keys(b, "gamma", "project-notes") == expected
            )

        await until(both)
        again = await b.command(f"/memory import {ticket.group(0)}")
        assert not again.ok and "here already" in again.text


async def test_import_with_write_cannot_grant_and_says_why(tmp_path: Path) -> None:
    async with (
        chazbot.open(tmp_path / "a", cfg(tmp_path / "a", "alpha")) as a,
        chazbot.open(tmp_path / "b", cfg(tmp_path / "b", "gamma")) as b,
    ):
        await a.start_sync()
        await a.command("/memory new notes")
        ticket = (await a.command("/memory share notes")).text.split()[-1]
        await b.command(f"/memory import {ticket}")
        request_id = re.search(r"request (\d+)", (await a.command("/sharing requests")).text)
        assert request_id is not None
        await a.command(f"/sharing approve {request_id.group(1)}")
        assert (await b.command(f"/memory import {ticket}")).ok
        r = await b.command("/memory grant notes gamma write")
        assert not r.ok and "import it with admin" in r.text


async def test_bad_tickets_and_unshare(tmp_path: Path) -> None:
    async with chazbot.open(tmp_path / "a", cfg(tmp_path / "a", "alpha")) as a:
        for bad in ("eidetica:?db=nope", "http://x", "eidetica:?db=sha256:" + "0" * 64):
            r = await a.command(f"/memory import {bad}")
            assert not r.ok and "\n" not in r.text, (bad, r.text)
        await a.command("/memory new notes")
        r = await a.command("/memory unshare notes")
        assert not r.ok and "not shared" in r.text
        await a.start_sync()
        assert (await a.command("/memory share notes")).ok
        assert (await a.command("/memory unshare notes")).ok
