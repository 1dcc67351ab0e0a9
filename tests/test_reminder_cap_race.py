"""The non-admin cap on active reminders holds when two rooms set one at the same moment
(#37): counting and writing are one step per person (real SQLite, a real peer)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import chazbot
from chazbot.config import AgentConfig, Config
from chazbot.errors import InputError
from chazbot.reminders.setting import set_reminder
from chazbot.reminders.store import MAX_ACTIVE_PER_PERSON
from chazbot.reminders.when import understand, zone

BERLIN = zone("Europe/Berlin")
NOW = datetime(2026, 12, 4, 15, 0, tzinfo=BERLIN)
ALICE, BOB = "@alice:example.org", "@bob:example.org"
ROOMS = [f"matrix:!room{i}:example.org" for i in range(6)]


async def test_sets_at_the_cap_from_many_rooms_at_once_go_no_more_than_the_cap(
    tmp_path: Path,
) -> None:
    cfg = Config(state_dir=tmp_path, agents=[AgentConfig(name="chaz", capture="off")])
    async with chazbot.open(tmp_path, cfg) as peer:
        chaz = peer.agent("chaz")
        store = peer.reminders.of(chaz.db, chaz.key)
        for i in range(MAX_ACTIVE_PER_PERSON - 1):
            when = understand(f"remind me in {i + 2} days at 9 to t{i}", NOW, BERLIN)
            await store.add(when, ROOMS[0], ALICE, MAX_ACTIVE_PER_PERSON)

        async def one(room: str, who: str, n: int) -> str | None:
            # each its own store, as each turn and each command makes one
            mine = peer.reminders.of(chaz.db, chaz.key)
            try:
                return await set_reminder(
                    mine, f"remind me tomorrow at {n + 8} to x{n}", room, who, "UTC", False, NOW
                )
            except InputError as exc:
                assert "cancel one first" in str(exc), exc
                return None

        said = await asyncio.gather(*(one(room, ALICE, n) for n, room in enumerate(ROOMS)))
        assert sum(s is not None for s in said) == 1, said
        active = [r for r in await store.all() if r.by == ALICE and r.active]
        assert len(active) == MAX_ACTIVE_PER_PERSON
        # another person is not held up by Alice's lock, nor counted against her cap
        bob = await asyncio.gather(*(one(room, BOB, n) for n, room in enumerate(ROOMS)))
        assert all(s is not None for s in bob), bob
